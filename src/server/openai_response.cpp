// openai_response.cpp — OpenAI response JSON and SSE chunks (see openai_response.h).
#include "openai_response.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <ctime>

namespace baton {

using json = nlohmann::json;

namespace {

std::string dump(const json & j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json usage_json(const usage_counts & u) {
    return {{"prompt_tokens", u.prompt_tokens},
            {"completion_tokens", u.generated_tokens},
            {"total_tokens", u.prompt_tokens + u.generated_tokens}};
}

bool is_chat(const openai_response_meta & m) { return m.endpoint == openai_endpoint::chat; }

json head(const openai_response_meta & m, bool chunk) {
    const char * object = is_chat(m) ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
    return {{"id", m.id},
            {"object", object},
            {"created", m.created},
            {"model", m.model},
            {"system_fingerprint", m.system_fingerprint}};
}

// choice renders one choice of a chunk; finish is null while the stream goes on.
json chunk_choice(const openai_response_meta & m, const json & delta_or_text, const json & finish) {
    if (is_chat(m)) return {{"index", 0}, {"delta", delta_or_text}, {"logprobs", nullptr}, {"finish_reason", finish}};
    return {{"index", 0}, {"text", delta_or_text}, {"logprobs", nullptr}, {"finish_reason", finish}};
}

std::string chunk(const openai_response_meta & m, json choice) {
    json j = head(m, true);
    j["choices"] = json::array({std::move(choice)});
    return dump(j);
}

}  // namespace

openai_response_meta openai_response_meta_make(openai_endpoint endpoint, const std::string & model,
                                               const std::string & system_fingerprint) {
    static std::atomic<uint64_t> counter{0};
    openai_response_meta m;
    m.endpoint = endpoint;
    m.created = int64_t(std::time(nullptr));
    m.id = std::string(endpoint == openai_endpoint::chat ? "chatcmpl-" : "cmpl-") + std::to_string(m.created) + "-" +
           std::to_string(counter.fetch_add(1) + 1);
    m.model = model;
    m.system_fingerprint = system_fingerprint;
    return m;
}

const char * openai_finish_name(finish_reason r) { return r == finish_reason::length ? "length" : "stop"; }

std::string openai_response_json(const openai_response_meta & m, const std::string & text, finish_reason finish,
                                 const usage_counts & usage) {
    json j = head(m, false);
    json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", openai_finish_name(finish)}};
    if (is_chat(m)) choice["message"] = {{"role", "assistant"}, {"content", text}};
    else choice["text"] = text;
    j["choices"] = json::array({std::move(choice)});
    j["usage"] = usage_json(usage);
    return dump(j);
}

std::string openai_chunk_role_json(const openai_response_meta & m) {
    return chunk(m, chunk_choice(m, {{"role", "assistant"}, {"content", nullptr}}, nullptr));
}

std::string openai_chunk_text_json(const openai_response_meta & m, const std::string & text) {
    return chunk(m, chunk_choice(m, is_chat(m) ? json{{"content", text}} : json(text), nullptr));
}

std::string openai_chunk_finish_json(const openai_response_meta & m, finish_reason finish) {
    return chunk(m, chunk_choice(m, is_chat(m) ? json::object() : json(""), openai_finish_name(finish)));
}

std::string openai_chunk_usage_json(const openai_response_meta & m, const usage_counts & usage) {
    json j = head(m, true);
    j["choices"] = json::array();
    j["usage"] = usage_json(usage);
    return dump(j);
}


}  // namespace baton
