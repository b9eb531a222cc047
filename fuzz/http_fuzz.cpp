// http_fuzz.cpp — libFuzzer target for the HTTP edge's request parsing as Baton configures it
// (src/http/http_request_head.h): Beast's request parser with the edge's limits, fed in pieces the way a
// socket delivers them through http_request_head_put (its obs-fold scan included), then the step to
// http_request (the Host rules), the announced body against the caps, and the body decoding of the edge.
//
// Input: byte 0 picks the piece size (1..64 bytes, so trickled and whole deliveries are both covered);
// the rest is what a client sends on one connection. Properties (violations trap):
//   - nothing crashes, hangs or overflows (ASan/UBSan);
//   - a finished head has path == target up to '?', query the rest, and at most --max-headers headers;
//   - the parser never consumes more bytes than it was given, so what follows a request is exactly the
//     unconsumed rest (the no-desync property the session relies on for pipelining);
//   - obs-fold is found however the head is split: refused in pieces means refused whole, accepted in
//     pieces means no obs-fold whole, and an accepted head has no header line starting with SP/HTAB;
//   - an accepted HTTP/1.1 head has exactly one Host; an admitted Content-Length is within both caps;
//   - a decoded body is never larger than the bytes that carried it;
//   - the same bytes as a node's error body (http_error_status, what the router reads from a prefill node):
//     a Status read from them renders to a body that reads back as the same code, message and detail;
//   - the same bytes as an image URL a client names (http_fetch.h's fetch_url_parse): an accepted URL has a
//     host, a port, a target starting with '/' and no byte <= 0x20, and its text reads back as the same URL.
#include <cstddef>
#include <cstdint>
#include <string>

#include "baton/http/http_errors.h"
#include "baton/http/http_fetch.h"
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

    if (const baton::Status said = baton::http_error_status(std::string_view(in, n)); !said.ok()) {
        const baton::Status back = baton::http_error_status(baton::http_error_json(said));
        check(back.code() == said.code() && back.message() == said.message() && back.detail() == said.detail());
    }

    if (auto u = baton::fetch_url_parse(std::string_view(in, n)); u.ok()) {
        check(!u->origin.host.empty() && u->origin.port != 0 && !u->target.empty() && u->target[0] == '/');
        for (char c : u->target) check(uint8_t(c) > 0x20 && c != 0x7f);
        auto back = baton::fetch_url_parse(baton::fetch_url_text(*u));
        check(back.ok() && baton::fetch_url_text(*back) == baton::fetch_url_text(*u) &&
              back->origin.tls == u->origin.tls && back->origin.host == u->origin.host);
    }

    baton::http_limits lim;
    lim.max_header_bytes = 4096;
    lim.max_headers = 16;
    baton::http_request_parser p;
    baton::http_request_parser_configure(p, lim);

    // Header: offer the bytes seen so far, as the session's read_head does with its buffer.
    size_t seen = 0, used = 0;
    boost::system::error_code ec;
    baton::http_head_scan scan;
    while (!p.is_header_done() && seen < n) {
        seen = std::min(n, seen + piece);
        const size_t k = baton::http_request_head_put(p, boost::asio::buffer(in + used, seen - used), scan, ec);
        check(k <= seen - used);
        used += k;
        if (ec == http::error::need_more) ec = {};
        if (ec) break;
    }
    // The same bytes whole: obs-fold is found however they were split.
    {
        baton::http_request_parser whole;
        baton::http_request_parser_configure(whole, lim);
        baton::http_head_scan ws;
        boost::system::error_code wec;
        (void)baton::http_request_head_put(whole, boost::asio::buffer(in, seen), ws, wec);
        if (ec == baton::http_error_obs_fold()) check(wec == baton::http_error_obs_fold());
        if (!ec && p.is_header_done()) check(wec != baton::http_error_obs_fold());
    }
    if (ec || !p.is_header_done()) {
        if (ec) (void) baton::http_parse_error_response(ec, lim);
        return 0;
    }
    for (size_t i = 1; i < used; ++i)  // no folded line got through: a line start in the head is never SP/HTAB
        check(!(in[i - 1] == '\n' && (in[i] == ' ' || in[i] == '\t')));
    baton::http_request req;
    const baton::http_head_info info = baton::http_request_head_take(p, lim, req);
    check(info.error.ok() == (info.error_status == 0));
    if (info.error.ok() && p.get().version() >= 11) {
        size_t hosts = 0;
        for (const auto & f : p.get()) hosts += f.name() == http::field::host;
        check(hosts == 1);
    }
    const baton::Status admit = baton::http_request_body_admit(p, 1000, lim, req.route);
    if (admit.ok() && p.content_length())
        check(*p.content_length() <= 1000 && *p.content_length() <= lim.max_body_memory);
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
