// sse.h — server-sent event framing, the one SSE writer of node and router.
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "baton/base/status.h"

namespace baton {

// sse_event frames one event: "data: PAYLOAD\n\n". sse_done is "data: [DONE]\n\n".
std::string sse_event(const std::string & payload);
const std::string & sse_done();
// sse_error_and_done: the error event (the JSON error object of http_errors.h) followed by [DONE]; how
// every OpenAI-shaped stream that fails after its first byte ends.
std::string sse_error_and_done(const Status & st);
// sse_named_event frames an event with a name: "event: NAME\ndata: PAYLOAD\n\n" (Anthropic's streams).
std::string sse_named_event(const std::string & name, const std::string & payload);
// sse_named_error: how an Anthropic (Messages) stream that fails after its first byte ends: "event: error"
// with the JSON error object of http_errors.h and "type": "error" ({"type":"error","error":{...}}, the shape
// Anthropic's clients read).
std::string sse_named_error(const Status & st);

}  // namespace baton
