// http_errors.h — the one place where a Status becomes an HTTP status and a JSON error body.
//
// Every error a node or the router returns goes through http_error_for / http_send_error, so the mapping
// from status_code to HTTP status is decided here and nowhere else:
//   invalid_argument 400 · unauthenticated 401 · not_found 404 · busy 409 · too_large 413 ·
//   corrupt/incompatible/unsupported 422 · upstream_error 502 · unavailable/cancelled 503 (Retry-After) ·
//   deadline_exceeded 504 · io_error/engine_error/internal 500.
// The body is {"error":{"code":HTTP,"type":"<status_code_name>","message":"..."}}.
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "baton/status.h"

namespace httplib {
struct Response;
}

namespace baton {

struct http_error {
    int status = 500;          // HTTP status
    std::string body;          // JSON error object
    int retry_after_s = 0;     // > 0: send Retry-After (seconds)
};

// http_status_for maps a non-ok code to its HTTP status (see the table above).
int http_status_for(status_code code);

// http_error_for renders the error for st. REQUIRES: !st.ok().
http_error http_error_for(const Status & st);

// http_error_json is the JSON error object alone ({"error":{...}}), also used as an SSE error event.
std::string http_error_json(const Status & st);

// http_send_error writes the error (status, JSON body, Retry-After) into res.
void http_send_error(httplib::Response & res, const Status & st);

}  // namespace baton
