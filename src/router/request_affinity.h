// request_affinity.h — the key a request's conversation is routed by (prefix affinity, node_pool.h).
//
// Requests that continue the same conversation share a prefix, so the key hashes the start of what the
// model will see: the prompt text, the chat messages (role and content), or the prompt's token ids.
// Thread-safety: a pure function.
#pragma once

#include <cstdint>
#include <span>

#include "baton/openai/openai.h"

namespace baton {

uint64_t request_affinity_key(const openai_request & r);

// frontier_affinity_key: with the prompt's tokens known and `held` = the most of them any node's cache holds, the
// key of the prompt through frontier_blocks blocks past that (XXH3-64 of those token ids; all of a shorter
// prompt). Requests that share only a preamble shorter than that (a system prompt's common opening) get keys of
// their own, while two requests of one tenant or conversation, before the nodes' KV events show where it went,
// get the same.
inline constexpr uint32_t frontier_blocks = 4;
uint64_t frontier_affinity_key(std::span<const token_id> tokens, uint32_t held, uint32_t block_tokens);

}  // namespace baton
