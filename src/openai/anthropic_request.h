// anthropic_request.h — Anthropic's Messages API request (POST /v1/messages and /v1/messages/count_tokens)
// read into the chat request every chat takes (private to the openai module: openai_parse calls it for
// openai_endpoint::messages, so a node, a prefill node and a router parse a Messages body alike).
//
// The mapping is llama-server's (its Anthropic → OpenAI conversion), written as typed reads: "system" (a
// string or text blocks) becomes a leading system message; a message's text blocks its content, its
// "thinking" blocks the assistant turn's reasoning_content, its "tool_use" blocks the turn's tool calls, and
// its "tool_result" blocks tool messages after it; "tools" [{name, description, input_schema}] become
// functions, "tool_choice" {type: auto|any|tool|none} the choice; "stop_sequences" the stop strings;
// "max_tokens" (4096 when absent, as llama-server) the limit; temperature, top_p, top_k, stream and
// chat_template_kwargs as on /v1/chat/completions. Every block or field Baton cannot honour is refused with
// invalid_argument naming it (images, documents, server tools, MCP servers, structured outputs); fields
// that do not change the answer are ignored (metadata, cache_control, a tool result's is_error,
// redacted_thinking, service_tier; thinking.budget_tokens: no budget is enforced). docs/api.md, "Messages".
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>

#include "baton/base/status.h"
#include "baton/openai/openai.h"

namespace baton {

// max_tokens of a Messages request that gives none (llama-server's default for this API).
inline constexpr int32_t anthropic_max_tokens_default = 4096;

// anthropic_parse_fields reads the Messages body j into r (endpoint messages, input an openai_chat). ordered:
// the body's "tools" in the client's key order (request_fields.h, ordered_parts). d: the node's defaults
// (sampling, limits). Errors: invalid_argument naming the field ("messages[2].content[0].type: ..."), or
// too_large over --max-messages / --max-prompt-mb.
Status anthropic_parse_fields(const nlohmann::json & j, const nlohmann::ordered_json & ordered,
                              const openai_defaults & d, openai_request & r);

}  // namespace baton
