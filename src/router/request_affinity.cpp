// request_affinity.cpp — see request_affinity.h.
#include "request_affinity.h"

#include <xxhash.h>

#include <algorithm>

#include "node_pool.h"

namespace baton {

uint64_t request_affinity_key(const openai_request & r) {
    std::string prefix;
    if (const auto * text = std::get_if<openai_prompt_text>(&r.input)) prefix = text->text;
    if (const auto * pm = std::get_if<openai_prompt_media>(&r.input)) prefix = pm->text;
    if (const auto * chat = std::get_if<openai_chat>(&r.input))
        for (const auto & m : chat->messages) prefix += m.role + ":" + m.content + "\n";
    if (const auto * m = std::get_if<openai_prompt_mixed>(&r.input))
        for (const auto & part : m->parts) {
            if (const auto * id = std::get_if<token_id>(&part))
                prefix.append(reinterpret_cast<const char *>(id), sizeof *id);
            else prefix += std::get<std::string>(part);
        }
    if (const auto * in = std::get_if<openai_infill>(&r.input)) {  // the other files lead its prompt, then the prefix
        for (const auto & c : in->extra) prefix += c.filename + "\n" + c.text;
        prefix += "\x01" + in->prefix;
    }
    if (const auto * ids = std::get_if<openai_prompt_tokens>(&r.input))  // the ids' bytes: 4 per token
        prefix.assign(reinterpret_cast<const char *>(ids->tokens.data()), ids->tokens.size() * sizeof(token_id));
    return affinity_key(prefix);
}

uint64_t frontier_affinity_key(std::span<const token_id> tokens, uint32_t held, uint32_t block_tokens) {
    const size_t end = std::min(tokens.size(), size_t(held) + size_t(frontier_blocks) * block_tokens);
    return XXH3_64bits(tokens.data(), end * sizeof(token_id));
}

}  // namespace baton
