// http_errors.h — the one place where a Status becomes an HTTP status and a JSON error body.
//
// Every error a node or the router returns goes through http_error_response, so the mapping from
// status_code to HTTP status is decided here and nowhere else:
//   invalid_argument 400 · unauthenticated 401 · not_found 404 · busy 409 · too_large 413 ·
//   corrupt/incompatible/unsupported 422 · upstream_error 502 · unavailable/cancelled 503 (Retry-After) ·
//   deadline_exceeded 504 · io_error/engine_error/internal 500.
// The body is llama-server's, {"error":{"code":HTTP,"message":"...","type":"<llama-server's type>"}}, plus
// "status": Baton's own status_code_name, and for context_exceeded llama-server's n_prompt_tokens and n_ctx.
// The types (http_error_type): invalid_request_error (invalid_argument, too_large, corrupt, incompatible,
// unsupported) · exceed_context_size_error · authentication_error · permission_error · not_found_error ·
// not_supported_error (not_implemented) · unavailable_error (busy, unavailable, cancelled) · server_error (the
// rest). The HTTP edge's own
// refusals (malformed request 400, method not allowed 405, header timeout 408, headers too large 431)
// use the same body with http_error_response_status.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "baton/base/status.h"
#include "baton/http/http_message.h"

namespace baton {

// http_status_for maps a non-ok code to its HTTP status (see the table above).
int http_status_for(status_code code);

// http_error_type is llama-server's error type name for code (the table above).
const char * http_error_type(status_code code);

// http_error_json is the JSON error object alone ({"error":{...}}), also used as an SSE error event.
std::string http_error_json(const Status & st, int http_status = 0);

// http_error_status reads such a body back (a node's error the router passes on): the Status it was made from,
// detail included, or ok when body is not one of Baton's error bodies.
Status http_error_status(std::string_view body);

// http_error_response renders the error for st. REQUIRES: !st.ok().
http_response http_error_response(const Status & st);

// http_error_response_status: the same body, with an HTTP status the table does not produce.
http_response http_error_response_status(int http_status, const Status & st);

}  // namespace baton
