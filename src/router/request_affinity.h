// request_affinity.h — the key a request's conversation is routed by (prefix affinity, node_pool.h).
//
// Requests that continue the same conversation share a prefix, so the key hashes the start of what the
// model will see: the prompt text, the chat messages (role and content), or the prompt's token ids.
// Thread-safety: a pure function.
#pragma once

#include <cstdint>

#include "baton/openai/openai.h"

namespace baton {

uint64_t request_affinity_key(const openai_request & r);

}  // namespace baton
