// http_fuzz.cpp — libFuzzer target for the HTTP edge's request parsing as Baton configures it
// (src/http/http_request_head.h): Beast's request parser with the edge's limits, fed in pieces the way a
// socket delivers them, then the step to http_request and the body decoding of the edge.
//
// Input: byte 0 picks the piece size (1..64 bytes, so trickled and whole deliveries are both covered);
// the rest is what a client sends on one connection. Properties (violations trap):
//   - nothing crashes, hangs or overflows (ASan/UBSan);
//   - a finished head has path == target up to '?', query the rest, and at most --max-headers headers;
//   - the parser never consumes more bytes than it was given, so what follows a request is exactly the
//     unconsumed rest (the no-desync property the session relies on for pipelining);
//   - a decoded body is never larger than the bytes that carried it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "http_request_head.h"

namespace {

namespace http = boost::beast::http;

void check(bool ok) {
    if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    if (size < 1) return 0;
    const size_t piece = size_t(data[0] % 64) + 1;
    const char * in = reinterpret_cast<const char *>(data + 1);
    const size_t n = size - 1;

    baton::http_limits lim;
    lim.max_header_bytes = 4096;
    lim.max_headers = 16;
    baton::http_request_parser p;
    baton::http_request_parser_configure(p, lim);

    // Header: offer the bytes seen so far, as async_read_header does with its buffer.
    size_t seen = 0, used = 0;
    boost::system::error_code ec;
    while (!p.is_header_done() && seen < n) {
        seen = std::min(n, seen + piece);
        const size_t k = p.put(boost::asio::buffer(in + used, seen - used), ec);
        check(k <= seen - used);
        used += k;
        if (ec == http::error::need_more) ec = {};
        if (ec) break;
    }
    if (ec || !p.is_header_done()) {
        if (ec) (void) baton::http_parse_error_response(ec, lim);
        return 0;
    }
    baton::http_request req;
    const baton::http_head_info info = baton::http_request_head_take(p, lim, req);
    check(req.headers.size() <= lim.max_headers);
    check(req.target.compare(0, req.path.size(), req.path) == 0);
    check(req.path.size() == req.target.size() || req.target[req.path.size()] == '?');
    check(req.query.empty() || req.path.size() + 1 + req.query.size() == req.target.size());
    if (!info.body_pending || p.content_length()) return 0;  // Content-Length bodies are raw bytes: nothing to parse

    // Chunked body through the parser, into a bounded buffer, as read_body does.
    char chunk[256];
    std::string body;
    const size_t body_start = used;
    while (!p.is_done() && used < n) {
        p.get().body().data = chunk;
        p.get().body().size = sizeof chunk;
        const size_t k = p.put(boost::asio::buffer(in + used, std::min(n - used, piece)), ec);
        check(k <= n - used);
        used += k;
        body.append(chunk, sizeof chunk - p.get().body().size);
        if (ec == http::error::need_buffer || ec == http::error::need_more) ec = {};
        if (ec || (k == 0 && p.get().body().size == sizeof chunk && !p.is_done())) break;
    }
    check(body.size() <= used - body_start);
    return 0;
}
