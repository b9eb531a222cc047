// http_request_head.h — the edge's request parser configuration and the step from a parsed request head
// to an http_request, shared by the server's sessions and the fuzz target (fuzz/http_fuzz.cpp), so what
// is fuzzed is exactly what serves.
//
// The parser is Beast's strict HTTP/1.1 request parser with the header limit set to --max-header-bytes
// and no body limit (each route's cap is enforced while the body is read). http_request_head_take copies
// method, target, path, query and headers, counts the fields against --max-headers and says whether a
// body follows.
// Thread-safety: pure functions over their arguments.
#pragma once

#include <cstdint>

#include "baton/http/http_message.h"
#include "baton/http/http_server.h"
#include "baton/http/net.h"
#include "baton/status.h"

namespace baton {

using http_request_parser = beast::http::request_parser<beast::http::buffer_body>;

// http_request_parser_configure applies the edge's limits to a fresh parser.
void http_request_parser_configure(http_request_parser & p, const http_limits & limits);

// http_parse_error_response: the answer to a request head the parser refused (431 over the header limit,
// 400 otherwise).
http_response http_parse_error_response(const error_code & ec, const http_limits & limits);

struct http_head_info {
    bool keep_alive = true;
    bool head = false;          // HEAD: answer without a body
    bool body_pending = false;  // Content-Length > 0 or chunked
    Status error;               // too_large when over --max-headers (answered with 431)
};

// http_request_head_take fills out from a parser whose header is done. REQUIRES: p.is_header_done().
http_head_info http_request_head_take(const http_request_parser & p, const http_limits & limits, http_request & out);

}  // namespace baton
