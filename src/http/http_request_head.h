// http_request_head.h — the edge's request parser configuration and the step from a parsed request head
// to an http_request, shared by the server's sessions and the fuzz target (fuzz/http_fuzz.cpp), so what
// is fuzzed is exactly what serves.
//
// The parser is Beast's strict HTTP/1.1 request parser with the header limit set to --max-header-bytes
// and no body limit (each route's cap is enforced while the body is read). Bytes reach it through
// http_request_head_put, which refuses what Beast accepts but RFC 9112 does not: obs-fold (a header line
// that starts with SP or HTAB, section 5.2; Beast would join it to the previous field). Then
// http_request_head_take copies method, target, path, query and headers, counts the fields against
// --max-headers, refuses an HTTP/1.1 request without Host and any request with two (section 3.2), and
// says whether a body follows; http_request_body_admit checks the announced length against the route's
// cap and --max-body-memory before a byte of the body is read (or a `100 Continue` sent).
// Thread-safety: pure functions over their arguments.
#pragma once

#include <cstdint>
#include <string_view>

#include "baton/base/status.h"
#include "baton/http/http_message.h"
#include "baton/http/http_server.h"
#include "baton/http/net.h"

namespace baton {

using http_request_parser = beast::http::request_parser<beast::http::buffer_body>;

// http_request_parser_configure applies the edge's limits to a fresh parser.
void http_request_parser_configure(http_request_parser & p, const http_limits & limits);

// http_error_obs_fold: the error http_request_head_put reports for obs-fold (answered 400).
error_code http_error_obs_fold();

// http_parse_error_response: the answer to a request head the parser refused (431 over the header limit,
// 400 otherwise).
http_response http_parse_error_response(const error_code & ec, const http_limits & limits);

// What http_request_head_put has seen of one request's head, beyond what the parser consumed.
struct http_head_scan {
    size_t scanned = 0;       // bytes of the unconsumed input already looked at
    bool line_start = false;  // the byte at `scanned` starts a header line
    bool head_end = false;    // the empty line that ends the head was seen: nothing more to look at
};

// http_request_head_put feeds a request head to p as p.put does (returns the bytes consumed; ec is
// need_more while the head is incomplete), after looking at the bytes for obs-fold: then it consumes
// nothing and ec is http_error_obs_fold(). REQUIRES: in starts at the first byte p has not consumed (the
// same bytes again, plus any that arrived since), and s was fresh when this request's head began. Each
// byte is looked at once however the head arrives.
size_t http_request_head_put(http_request_parser & p, net::const_buffer in, http_head_scan & s, error_code & ec);

struct http_head_info {
    bool keep_alive = true;
    bool head = false;          // HEAD: answer without a body
    bool body_pending = false;  // Content-Length > 0 or chunked
    Status error;               // a head refused after parsing, answered with error_status
    int error_status = 0;       // 431 over --max-headers; 400 without Host (HTTP/1.1) or with two
};

// http_request_head_take fills out from a parser whose header is done. REQUIRES: p.is_header_done().
http_head_info http_request_head_take(const http_request_parser & p, const http_limits & limits, http_request & out);

// http_request_body_admit: too_large (413) when the head announces a body the route cannot take: a
// Content-Length over route_cap or over --max-body-memory (it could never be held), or any body on a
// route that takes none. REQUIRES: p.is_header_done().
Status http_request_body_admit(const http_request_parser & p, uint64_t route_cap, const http_limits & limits,
                               std::string_view route);

}  // namespace baton
