// openai.h — OpenAI-compatible request parsing into typed structs, and the canonical JSON of a request.
//
// This is the edge: JSON is parsed here, once, into openai_request; the engine only ever sees gen_request.
// The canonical JSON (openai_request_json) is what prefill embeds in a blob, so a decode node can rebuild
// exactly the same request. Every field it writes is explicit, so defaults can never drift between nodes.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "baton/engine.h"
#include "baton/sampling.h"
#include "baton/status.h"
#include "baton/text.h"

namespace baton {

class loaded_model;

enum class openai_endpoint : uint8_t { completions, chat };
const char * openai_endpoint_name(openai_endpoint e);  // "completions" | "chat"

struct openai_request {
    openai_endpoint endpoint = openai_endpoint::completions;
    std::string model;                     // echoed back; not used to pick a model
    std::string prompt;                    // completions: prompt text (when prompt_tokens is empty)
    std::vector<token_id> prompt_tokens;   // completions: prompt given as token ids
    std::vector<chat_message> messages;    // chat
    int32_t max_tokens = -1;               // -1: until end-of-generation or the context is full
    sampling_params sampling;
    std::vector<std::string> stop;
    bool stream = false;
    bool include_usage = false;            // stream_options.include_usage
    bool ignore_eos = false;
};

// openai_parse parses a request body. endpoint decides which shape is expected. For /v1/prefill the body
// may carry "endpoint": "completions"|"chat", which overrides it (allow_endpoint_field). Errors are
// invalid_argument naming the field ("temperature: must be a number").
Result<openai_request> openai_parse(std::string_view body, openai_endpoint endpoint, bool allow_endpoint_field = false);

// openai_request_json renders the canonical JSON of a request (every field explicit, "endpoint" included).
std::string openai_request_json(const openai_request & r);

// openai_to_gen tokenizes the prompt (or applies the chat template) and builds the engine request.
Result<gen_request> openai_to_gen(const openai_request & r, const loaded_model & model);

}  // namespace baton
