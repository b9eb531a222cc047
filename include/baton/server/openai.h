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
#include <variant>
#include <vector>

#include "baton/engine.h"
#include "baton/sampling.h"
#include "baton/status.h"
#include "baton/text.h"

namespace baton {

class loaded_model;

enum class openai_endpoint : uint8_t { completions, chat };
const char * openai_endpoint_name(openai_endpoint e);  // "completions" | "chat"

// What the model is asked to continue: one of three shapes, decided by the endpoint and the body.
struct openai_prompt_text {  // completions: "prompt" as a string (or a one-string array)
    std::string text;
    bool operator==(const openai_prompt_text &) const = default;
};
struct openai_prompt_tokens {  // completions: "prompt" as token ids (non-empty)
    std::vector<token_id> tokens;
    bool operator==(const openai_prompt_tokens &) const = default;
};
struct openai_chat {  // chat: "messages" (non-empty), rendered by the chat template
    std::vector<chat_message> messages;
    bool operator==(const openai_chat &) const = default;
};
using openai_input = std::variant<openai_prompt_text, openai_prompt_tokens, openai_chat>;

struct openai_request {
    openai_input input;
    std::string model;        // echoed back; not used to pick a model
    int32_t max_tokens = -1;  // -1: until end-of-generation or the context is full
    sampling_params sampling;
    std::vector<std::string> stop;
    bool stream = false;
    bool include_usage = false;  // stream_options.include_usage
    bool ignore_eos = false;
};

// openai_parse parses a request body. endpoint decides which shape is expected. For /v1/prefill the body
// may carry "endpoint": "completions"|"chat", which overrides it (allow_endpoint_field). Errors are
// invalid_argument naming the field ("temperature: must be a number").
// openai_request_endpoint: chat for chat input, else completions.
openai_endpoint openai_request_endpoint(const openai_request & r);

Result<openai_request> openai_parse(std::string_view body, openai_endpoint endpoint, bool allow_endpoint_field = false);

// openai_request_json renders the canonical JSON of a request (every field explicit, "endpoint" included).
std::string openai_request_json(const openai_request & r);

// openai_to_gen tokenizes the prompt (or applies the chat template) and builds the engine request.
Result<gen_request> openai_to_gen(const openai_request & r, const loaded_model & model);

}  // namespace baton
