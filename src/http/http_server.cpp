// http_server.cpp — the event-driven HTTP edge (see http_server.h for the phases and their limits).
#include "baton/http/http_server.h"

#include <strings.h>
#include <sys/socket.h>

#include <algorithm>

#include "baton/base/buffer_pool.h"
#include "baton/base/log.h"
#include "baton/http/http_static.h"
#include "http_request_head.h"

namespace baton {

namespace http = beast::http;
using steady = std::chrono::steady_clock;

namespace {

std::chrono::steady_clock::duration secs(double s) {
    return std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(s));
}

std::vector<std::string> split_path(std::string_view path) {
    std::vector<std::string> out;
    size_t i = 0;
    while (i < path.size()) {
        if (path[i] == '/') {
            ++i;
            continue;
        }
        const size_t j = std::min(path.find('/', i), path.size());
        out.emplace_back(path.substr(i, j - i));
        i = j;
    }
    return out;
}

constexpr size_t k_read_chunk = 64 * 1024;
constexpr size_t k_first_read = 4096;
// Connections taken from the listen backlog per trip through the event loop (see accept_loop).
constexpr int k_accept_batch = 64;
// A Content-Length body is read in pieces of at most this many bytes: its buffer holds what arrived plus
// at most one piece (the part being read), and only that much is committed to --max-body-memory.
constexpr size_t k_body_piece = size_t(1) << 20;

// segments_match: whether a route's template segments match a path's; params gets the {name} values.
bool segments_match(const std::vector<std::string> & tmpl, const std::vector<std::string> & segs,
                    std::map<std::string, std::string> * params) {
    if (tmpl.size() != segs.size()) return false;
    for (size_t i = 0; i < segs.size(); ++i) {
        const std::string & t = tmpl[i];
        if (t.size() > 2 && t.front() == '{' && t.back() == '}') {
            if (params) (*params)[t.substr(1, t.size() - 2)] = segs[i];
        } else if (t != segs[i]) {
            return false;
        }
    }
    return true;
}

// body_make_room makes body's capacity at least need bytes (REQUIRES: need <= limit), growing it
// geometrically — at least doubling — but never past limit (the announced length, or the route's cap for
// chunked bodies). A pooled body moves to a buffer_pool buffer (the smallest pooled one large enough,
// whose pages are already mapped) and gives its old buffer back. std::bad_alloc escapes.
void body_make_room(std::vector<uint8_t> & body, size_t need, size_t limit, bool pooled) {
    if (body.capacity() >= need) return;
    const size_t target = std::min(limit, std::max(need, 2 * body.capacity()));
    if (!pooled) {
        body.reserve(target);
        return;
    }
    std::vector<uint8_t> bigger = buffer_pool::shared().take(target);
    bigger.assign(body.begin(), body.end());
    std::swap(body, bigger);
    if (bigger.capacity() > 0) buffer_pool::shared().give(std::move(bigger));
}

}  // namespace

bool http_key_equal(std::string_view a, std::string_view b) {
    unsigned char diff = a.size() == b.size() ? 0 : 1;
    const size_t n = std::max(a.size(), b.size());
    for (size_t i = 0; i < n; ++i) {
        const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
        const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
        diff |= static_cast<unsigned char>(x ^ y);
    }
    return diff == 0;
}

Status http_limits_check(const http_limits & l) {
    if (l.max_header_bytes < 1024 || l.max_header_bytes > (size_t(1) << 20))
        return {status_code::invalid_argument, "--max-header-bytes: must be in 1024..1048576"};
    if (l.max_headers < 8 || l.max_headers > 10000) return {status_code::invalid_argument, "--max-headers: must be in 8..10000"};
    if (!(l.header_timeout_s > 0) || !(l.idle_timeout_s > 0) || !(l.body_timeout_s > 0) || !(l.write_timeout_s > 0))
        return {status_code::invalid_argument, "--header-timeout/--idle-timeout/--body-timeout/--write-timeout: must be > 0"};
    if (l.max_connections < 1) return {status_code::invalid_argument, "--max-connections: must be >= 1"};
    if (l.max_body_memory < k_body_piece || l.max_body_memory > (uint64_t(1) << 40))
        return {status_code::invalid_argument, "--max-body-memory: must be in 1..1048576 MiB"};
    return {};
}

// ---- one connection ----

class http_session : public std::enable_shared_from_this<http_session> {
  public:
    http_session(http_server & srv, tcp::socket sock) : srv_(srv), stream_(std::move(sock)), buf_(srv.cfg_.limits.max_header_bytes + k_read_chunk) {}
    ~http_session() { srv_.connection_closed(); }

    net::awaitable<void> run();
    void close() {
        error_code ec;
        stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
        stream_.socket().close(ec);
    }

    http_server & srv_;
    beast::tcp_stream stream_;
    beast::flat_buffer buf_;
    bool watching_ = false;          // a readability watch is armed (http_exchange::wait)
    bool watch_over_ = false;        // the watch saw pipelined bytes: stop watching this request
    async_notify * waiter_ = nullptr;
    bool peer_closed_ = false;

    net::awaitable<bool> write_raw(const std::vector<net::const_buffer> & bufs);
    net::awaitable<bool> send_refusal(http_exchange & ex, int status, const Status & st, bool close);
    net::awaitable<error_code> read_head(http_request_parser & p);
    net::awaitable<Status> read_body(http_request_parser & p, http_exchange & ex, const http_route_options & opts,
                                     int & refuse_status);
    net::awaitable<Status> read_fixed_body(http_request_parser & p, http_exchange & ex, const http_route_options & opts,
                                           int & refuse_status);
    net::awaitable<Status> read_chunked_body(http_request_parser & p, http_exchange & ex,
                                             const http_route_options & opts, int & refuse_status);
    void arm_watch();
};

namespace {

// body_deadline: --body-timeout on a timer of its own. The stream's expiry would close the socket, so
// nothing could be written; this timer only cancels the pending read, and the body's reader answers 408
// on the still open connection (then closes it). Lives on the session's strand, for one read_body.
class body_deadline {
  public:
    body_deadline(const std::shared_ptr<http_session> & s, steady::duration d)
        : timer_(s->stream_.get_executor()), fired_(std::make_shared<bool>(false)) {
        timer_.expires_after(d);
        timer_.async_wait([s, fired = fired_](error_code ec) {
            if (ec) return;  // cancelled: the body arrived in time (or the read failed first)
            *fired = true;
            error_code ignored;
            s->stream_.socket().cancel(ignored);
        });
    }
    ~body_deadline() { timer_.cancel(); }
    body_deadline(const body_deadline &) = delete;
    body_deadline & operator=(const body_deadline &) = delete;
    bool fired() const { return *fired_; }

  private:
    net::steady_timer timer_;
    std::shared_ptr<bool> fired_;  // shared with the handler, which may run after this object is gone
};

// body_read_failure: the status and answer for a body read that ended with ec.
Status body_read_failure(const error_code & ec, bool timed_out, const char * what, int & refuse_status) {
    if (timed_out || ec == beast::error::timeout) {
        refuse_status = 408;
        return Status(status_code::deadline_exceeded, "body: not received within --body-timeout");
    }
    refuse_status = 400;
    return Status(status_code::invalid_argument, std::string("body: ") + what);
}

Status body_memory_refusal(const http_body_budget & b, int & refuse_status) {
    refuse_status = 503;
    return Status(status_code::unavailable, "body: --max-body-memory (" + std::to_string(b.cap()) +
                                                " bytes) is committed to other requests' bodies; retry later");
}

}  // namespace

void http_session::arm_watch() {
    if (watching_ || watch_over_ || peer_closed_) return;
    watching_ = true;
    stream_.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this()](error_code ec) {
        self->watching_ = false;
        if (ec) return;  // cancelled at the end of the exchange, or the socket closed
        char c;
        const ssize_t n = ::recv(self->stream_.socket().native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) self->peer_closed_ = true;
        else self->watch_over_ = true;  // the next pipelined request is there: the client is alive
        if (self->waiter_) self->waiter_->notify();
    });
}

net::awaitable<bool> http_session::write_raw(const std::vector<net::const_buffer> & bufs) {
    stream_.expires_after(secs(srv_.cfg_.limits.write_timeout_s));
    error_code ec;
    co_await net::async_write(stream_, bufs, net::redirect_error(net::use_awaitable, ec));
    co_return !ec;
}

net::awaitable<bool> http_session::send_refusal(http_exchange & ex, int status, const Status & st, bool close) {
    if (close) ex.keep_alive_ = false;
    co_return co_await ex.respond(http_error_response_status(status, st));
}

// read_head reads the request line and headers into p (under the stream's expiry, set by the caller)
// through http_request_head_put, as async_read_header would: the buffered bytes first, then reads of at
// most 64 KiB within the buffer's limit.
net::awaitable<error_code> http_session::read_head(http_request_parser & p) {
    http_head_scan scan;
    for (;;) {
        error_code ec;
        if (buf_.size() > 0) {
            const size_t used = http_request_head_put(p, buf_.data(), scan, ec);
            buf_.consume(used);
            if (!ec && p.is_header_done()) co_return ec;
            if (ec != http::error::need_more) co_return ec;
        }
        const size_t room = std::min<size_t>(buf_.max_size() - buf_.size(), 65536);
        if (room == 0) co_return error_code(http::error::buffer_overflow);
        const size_t n =
            co_await stream_.async_read_some(buf_.prepare(room), net::redirect_error(net::use_awaitable, ec));
        buf_.commit(n);
        if (ec == net::error::eof)
            co_return error_code(p.got_some() || buf_.size() > 0 ? http::error::partial_message
                                                                 : http::error::end_of_stream);
        if (ec) co_return ec;
    }
}

// read_body reads the request body into ex.req_.body within the route's cap, committing its buffer to the
// server's body budget as it grows. REQUIRES: http_request_body_admit accepted the head. On failure
// refuse_status is the HTTP status to answer (the connection is then closed: the rest of the body is never
// read).
net::awaitable<Status> http_session::read_body(http_request_parser & p, http_exchange & ex,
                                               const http_route_options & opts, int & refuse_status) {
    refuse_status = 413;
    ex.body_hold_ = http_body_hold(srv_.body_budget_);
    if (auto cl = p.content_length()) {
        if (*cl == 0) co_return Status();
        co_return co_await read_fixed_body(p, ex, opts, refuse_status);
    }
    if (!p.chunked()) co_return Status();
    co_return co_await read_chunked_body(p, ex, opts, refuse_status);
}

// read_fixed_body: a Content-Length body, in pieces of at most k_body_piece straight into the body
// buffer, which grows (body_make_room) only as pieces are read — never sized from the announcement.
net::awaitable<Status> http_session::read_fixed_body(http_request_parser & p, http_exchange & ex,
                                                     const http_route_options & opts, int & refuse_status) {
    const size_t len = size_t(*p.content_length());
    auto & body = ex.req_.body;
    std::optional<body_deadline> deadline;
    while (body.size() < len) {
        const size_t have = body.size();
        const size_t piece = std::min(k_body_piece, len - have);
        if (!ex.body_hold_.grow(piece)) co_return body_memory_refusal(srv_.body_budget_, refuse_status);
        try {
            body_make_room(body, have + piece, len, opts.pooled_body);
            body.resize(have + piece);
        } catch (const std::bad_alloc &) {
            co_return body_memory_refusal(srv_.body_budget_, refuse_status);
        }
        // Bytes that came with the headers first, then straight from the socket.
        const size_t buffered = std::min(buf_.size(), piece);
        net::buffer_copy(net::buffer(body.data() + have, buffered), buf_.data());
        buf_.consume(buffered);
        if (buffered == piece) continue;
        if (!deadline) {
            stream_.expires_never();  // the body's own deadline instead (see body_deadline)
            deadline.emplace(shared_from_this(), secs(srv_.cfg_.limits.body_timeout_s));
        }
        error_code ec;
        co_await net::async_read(stream_, net::buffer(body.data() + have + buffered, piece - buffered), large_transfer,
                                 net::redirect_error(net::use_awaitable, ec));
        if (ec) co_return body_read_failure(ec, deadline->fired(), "cut off", refuse_status);
    }
    co_return Status();
}

// read_chunked_body: a chunked body through the parser, 64 KiB at a time, within the route's cap.
net::awaitable<Status> http_session::read_chunked_body(http_request_parser & p, http_exchange & ex,
                                                       const http_route_options & opts, int & refuse_status) {
    const uint64_t cap = opts.max_body_bytes;
    auto & body = ex.req_.body;
    if (!ex.body_hold_.grow(k_read_chunk)) co_return body_memory_refusal(srv_.body_budget_, refuse_status);  // `chunk`
    buf_.reserve(k_read_chunk);  // chunked bodies go through the parser: read in large pieces
    stream_.expires_never();
    body_deadline deadline(shared_from_this(), secs(srv_.cfg_.limits.body_timeout_s));
    std::vector<char> chunk(k_read_chunk);
    while (!p.is_done()) {
        p.get().body().data = chunk.data();
        p.get().body().size = chunk.size();
        error_code ec;
        co_await http::async_read_some(stream_, buf_, p, net::redirect_error(net::use_awaitable, ec));
        if (ec && ec != http::error::need_buffer)
            co_return body_read_failure(ec, deadline.fired(), "malformed chunked encoding", refuse_status);
        const size_t n = chunk.size() - p.get().body().size;
        if (body.size() + n > cap)
            co_return Status(status_code::too_large, "body: over the limit of " + std::to_string(cap) + " bytes for " + ex.req_.route);
        if (n == 0) continue;
        if (!ex.body_hold_.grow(n)) co_return body_memory_refusal(srv_.body_budget_, refuse_status);
        try {
            body_make_room(body, body.size() + n, size_t(cap), opts.pooled_body);
        } catch (const std::bad_alloc &) {
            co_return body_memory_refusal(srv_.body_budget_, refuse_status);
        }
        body.insert(body.end(), chunk.data(), chunk.data() + n);
    }
    co_return Status();
}

net::awaitable<void> http_session::run() {
    auto self = shared_from_this();
    const http_limits & lim = srv_.cfg_.limits;
    bool first = true;
    for (;;) {
        // 1. The first byte of the next request (idle keep-alive between requests). A new connection's
        // header deadline starts at accept: its first byte counts against it.
        auto header_deadline = steady::now() + secs(lim.header_timeout_s);
        if (buf_.size() == 0) {
            stream_.expires_after(secs(first ? lim.header_timeout_s : lim.idle_timeout_s));
            error_code ec;
            // A small first read: an idle connection holds little memory (bodies are read straight into
            // their own buffers, see read_body).
            const size_t n = co_await stream_.async_read_some(buf_.prepare(k_first_read), net::redirect_error(net::use_awaitable, ec));
            if (ec) break;  // idle timeout, EOF or reset: nothing was asked, nothing to answer
            buf_.commit(n);
            if (!first) header_deadline = steady::now() + secs(lim.header_timeout_s);
        }
        first = false;
        http_exchange ex(*this);
        // 2. Request line and headers under one total deadline.
        http_request_parser p;
        http_request_parser_configure(p, lim);
        stream_.expires_at(header_deadline);
        const error_code ec = co_await read_head(p);
        if (ec) {
            if (ec == http::error::end_of_stream || ec == net::error::eof || ec == net::error::connection_reset) break;
            if (ec == beast::error::timeout) {
                // The stream closed itself on the timeout: nothing can be written any more.
                srv_.requests_.count("", "", 408);
                break;
            }
            ex.keep_alive_ = false;
            co_await ex.respond(http_parse_error_response(ec, lim));
            srv_.requests_.count("", "", ex.status_);
            break;
        }
        http_request & rq = ex.req_;
        const http_head_info head = http_request_head_take(p, lim, rq);
        const steady::time_point t_start = steady::now();
        if (const std::string_view id = rq.header(http_header_request_id); request_id_valid(id)) rq.id = id;
        else rq.id = request_id_new();
        ex.keep_alive_ = head.keep_alive;
        ex.head_ = head.head;
        const bool body_pending = head.body_pending;

        // 3. Limits, authentication (before routing), route.
        bool path_known = false;
        const http_server::route_entry * r = nullptr;
        bool refused = false;
        ex.cors_origin_ = http_cors_allow(srv_.cfg_.cors, rq.header("Origin"));
        if (!head.error.ok()) {
            co_await send_refusal(ex, head.error_status, head.error, true);
            refused = true;
        } else if (rq.method == "OPTIONS") {
            // A CORS preflight (or a plain OPTIONS): answered here, without the API key, for every path;
            // a same_origin_only route's path gets no CORS header at all, so no browser sends the request.
            http_response pre;
            pre.content_type = "text/plain";
            if (srv_.preflight_closed(rq.path, rq.header("Access-Control-Request-Method"))) ex.cors_origin_.clear();
            if (!ex.cors_origin_.empty()) {
                pre.headers.emplace_back("Access-Control-Allow-Methods", srv_.cfg_.cors.methods);
                pre.headers.emplace_back("Access-Control-Allow-Headers", srv_.cfg_.cors.headers);
                pre.headers.emplace_back("Access-Control-Max-Age", "600");
            }
            rq.route = "OPTIONS";
            if (body_pending) ex.keep_alive_ = false;
            co_await ex.respond(std::move(pre));
            refused = true;
        } else {
            r = srv_.match(ex.head_ ? "GET" : rq.method, rq.path, rq.params, path_known);
            if (r) rq.route = r->pattern;
            if (!r && !srv_.static_root_.empty() && (ex.head_ || rq.method == "GET")) {
                // A static file (the web UI): open to all, as llama-server's pages are.
                if (auto file = http_static_file(srv_.static_root_, rq.path)) {
                    rq.route = "static";
                    if (body_pending) ex.keep_alive_ = false;
                    co_await ex.respond(std::move(*file));
                    refused = true;
                }
            }
            if (r && r->opts.same_origin_only) ex.cors_origin_.clear();  // outside CORS, errors included
            const bool open = r && r->opts.open;
            if (!refused && !open && !srv_.cfg_.api_key.empty()) {
                // "Authorization: Bearer KEY", or Anthropic's "x-api-key: KEY" (llama-server takes both).
                const std::string_view h = rq.header("Authorization"), x = rq.header("X-Api-Key");
                const std::string_view prefix = "Bearer ";
                const bool bearer_ok = h.substr(0, prefix.size()) == prefix &&
                                       http_key_equal(h.substr(std::min(h.size(), prefix.size())), srv_.cfg_.api_key);
                const bool x_ok = !x.empty() && http_key_equal(x, srv_.cfg_.api_key);
                Status st;
                if (h.empty() && x.empty())
                    st = Status(status_code::unauthenticated,
                                "Authorization: missing (this server requires \"Bearer KEY\" or an x-api-key header)");
                else if (!bearer_ok && !x_ok) st = Status(status_code::unauthenticated, "Authorization: wrong API key");
                if (!st.ok()) {
                    co_await send_refusal(ex, 401, st, body_pending);
                    refused = true;
                }
            }
            if (!refused && !r) {
                const std::string msg = path_known ? "method " + std::string(http_method_label(rq.method)) + " is not allowed on this route"
                                                   : "no such route";
                co_await send_refusal(ex, path_known ? 405 : 404, Status(status_code::not_found, msg), body_pending);
                refused = true;
            }
            if (!refused && r->opts.same_origin_only) {
                // CSRF: before the body is read, so a refused page's body is never even received.
                if (Status st = http_cross_site_check(rq.headers); !st.ok()) {
                    co_await send_refusal(ex, http_status_for(st.code()), st, body_pending);
                    refused = true;
                }
            }
            if (!refused) {
                // The announced length against the caps: before `100 Continue`, so the client sends nothing.
                if (Status st = http_request_body_admit(p, r->opts.max_body_bytes, lim, rq.route); !st.ok()) {
                    co_await send_refusal(ex, 413, st, true);
                    refused = true;
                }
            }
        }
        if (!refused) {
            // 4. The body, within the route's cap and the body budget.
            if (body_pending && strcasecmp(std::string(rq.header("Expect")).c_str(), "100-continue") == 0) {
                static const std::string k_continue = "HTTP/1.1 100 Continue\r\n\r\n";
                if (!co_await write_raw({net::buffer(k_continue)})) break;
            }
            int refuse_status = 0;
            Status st = co_await read_body(p, ex, r->opts, refuse_status);
            if (!st.ok()) {
                co_await send_refusal(ex, refuse_status, st, true);
            } else {
                // 5. The handler. (co_await may not appear inside a catch block: the failure is kept first.)
                std::string failure;
                try {
                    co_await r->handler(ex);
                } catch (const std::exception & e) {
                    failure = e.what();
                    log_error(log_request{rq.id}, "{}: {}: handler failed: {}", srv_.cfg_.log_name, rq.route, e.what());
                }
                if (!ex.begun_)
                    co_await ex.respond_error(Status(status_code::internal, failure.empty() ? "the handler produced no response" : "handler failed: " + failure));
                else if (!ex.finished_) ex.abort();
            }
        }
        if (watching_) {
            error_code ignored;
            stream_.socket().cancel(ignored);
        }
        waiter_ = nullptr;
        watch_over_ = false;
        const int status = ex.status_ ? ex.status_ : 499;
        srv_.requests_.count(rq.route, rq.method, status);
        // The access line (as llama-server logs each request); health and metrics probes only at debug.
        const bool probe = rq.route == "/health" || rq.route == "/metrics";
        if (const log_level level = probe ? log_level::debug : log_level::info; log_enabled(level)) {
            const double ms = std::chrono::duration<double, std::milli>(steady::now() - t_start).count();
            const char * method = http_method_label(rq.method);
            const char * cut = ex.finished_ ? "" : " (incomplete)";
            // The route's template ("/v1/slots/{id}/state"), never the client's path: what a client writes in
            // a path does not reach the log (nor grow it: a 404 is "-").
            const std::string_view route = rq.route.empty() ? std::string_view("-") : std::string_view(rq.route);
            log_write(level, rq.id, "{}: {} {} {} {:.1f} ms{}",
                      fmt::make_format_args(srv_.cfg_.log_name, method, route, status, ms, cut));
        }
        if (!ex.finished_ || !ex.keep_alive_ || ex.gone_ || srv_.stopped_.load()) break;
    }
    close();
}

// ---- CORS ----

Result<std::vector<std::string>> http_cors_parse_origins(std::string_view csv) {
    std::vector<std::string> out;
    size_t i = 0;
    while (i <= csv.size()) {
        size_t j = csv.find(',', i);
        if (j == std::string_view::npos) j = csv.size();
        std::string_view item = csv.substr(i, j - i);
        while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
        while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
        if (item.size() == 4 && strncasecmp(item.data(), "null", 4) == 0)
            return Status(
                status_code::invalid_argument,
                "--cors-origins: \"null\" is never allowed (sandboxed frames, file: pages and redirects send it)");
        if (!item.empty()) out.emplace_back(item);
        i = j + 1;
    }
    if (out.empty()) return Status(status_code::invalid_argument, "--cors-origins: names no origin");
    return out;
}

namespace {

// origin_is_localhost: "http://localhost[:port]", "https://127.0.0.1[:port]", "http://[::1][:port]".
bool origin_is_localhost(std::string_view o) {
    for (std::string_view scheme : {"http://", "https://"}) {
        if (o.substr(0, scheme.size()) != scheme) continue;
        std::string_view host = o.substr(scheme.size());
        for (std::string_view h : {"localhost", "127.0.0.1", "[::1]"}) {
            if (host.substr(0, h.size()) != h) continue;
            std::string_view rest = host.substr(h.size());
            if (rest.empty()) return true;
            if (rest[0] != ':' || rest.size() == 1) return false;
            return rest.find_first_not_of("0123456789", 1) == std::string_view::npos;
        }
    }
    return false;
}

bool header_is(std::string_view a, std::string_view b) {
    return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace

std::string http_cors_allow(const http_cors & c, std::string_view origin) {
    // `null` is what a sandboxed frame, a file: page or a cross-origin redirect sends: any page can make it.
    if (origin.empty() || header_is(origin, "null")) return {};
    for (const std::string & allowed : c.origins) {
        if (allowed == "*") return "*";  // never the reflected origin: with credentials that is no policy at all
        if (allowed == "localhost" && origin_is_localhost(origin)) return std::string(origin);
        if (allowed == origin) return std::string(origin);
    }
    return {};
}

bool http_cors_credentials(const http_cors & c, std::string_view allow_origin) {
    return c.credentials && !allow_origin.empty() && allow_origin != "*";
}

Status http_cross_site_check(const http_headers & headers) {
    for (const auto & [k, v] : headers) {
        if (header_is(k, "Origin"))
            return Status(
                status_code::permission_denied,
                "Origin: this route does not take requests from web pages (same-origin-only: state changes are refused "
                "with any Origin header; clients that are not browsers send none)");
        if (header_is(k, "Sec-Fetch-Site")) {
            std::string_view site = v;
            while (!site.empty() && (site.front() == ' ' || site.front() == '\t')) site.remove_prefix(1);
            while (!site.empty() && (site.back() == ' ' || site.back() == '\t')) site.remove_suffix(1);
            for (std::string_view bad : {"cross-site", "same-site"})
                if (header_is(site, bad))
                    return Status(status_code::permission_denied,
                                  "Sec-Fetch-Site: " + std::string(bad) +
                                      ": this route does not take requests from other sites (same-origin-only)");
        }
    }
    return Status();
}

// ---- http_exchange ----

void http_exchange::add_response_headers(http_headers & h) const {
    if (!req_.id.empty() && http_header_find(h, http_header_request_id).empty())
        h.emplace_back(std::string(http_header_request_id), req_.id);
    if (cors_origin_.empty()) return;
    h.emplace_back("Access-Control-Allow-Origin", cors_origin_);
    if (http_cors_credentials(s_.srv_.cfg_.cors, cors_origin_))
        h.emplace_back("Access-Control-Allow-Credentials", "true");
    h.emplace_back("Vary", "Origin");
}

net::any_io_executor http_exchange::executor() const { return s_.stream_.get_executor(); }
const http_limits & http_exchange::limits() const { return s_.srv_.cfg_.limits; }

net::awaitable<bool> http_exchange::respond(http_response r) {
    if (begun_) co_return false;
    status_ = r.status;
    begun_ = true;
    http::response<http::string_body> m{http::int_to_status(unsigned(r.status)), 11};
    m.set(http::field::content_type, r.content_type);
    add_response_headers(r.headers);
    for (auto & [k, v] : r.headers) m.insert(k, v);
    m.keep_alive(keep_alive_);
    m.body() = std::move(r.body);
    m.prepare_payload();
    s_.stream_.expires_after(secs(limits().write_timeout_s));
    error_code ec;
    if (head_) {
        http::response_serializer<http::string_body> sr(m);
        co_await http::async_write_header(s_.stream_, sr, net::redirect_error(net::use_awaitable, ec));
    } else {
        co_await http::async_write(s_.stream_, m, net::redirect_error(net::use_awaitable, ec));
    }
    if (ec) {
        gone_ = true;
        co_return false;
    }
    finished_ = true;
    co_return true;
}

net::awaitable<bool> http_exchange::begin(int status, std::string content_type, http_headers headers, std::optional<uint64_t> length) {
    if (begun_) co_return false;
    status_ = status;
    begun_ = true;
    http::response<http::empty_body> m{http::int_to_status(unsigned(status)), 11};
    m.set(http::field::content_type, content_type);
    add_response_headers(headers);
    for (auto & [k, v] : headers) m.insert(k, v);
    m.keep_alive(keep_alive_);
    if (length) m.content_length(*length);
    else m.chunked(true);
    chunked_ = !length;
    length_ = length;
    http::response_serializer<http::empty_body> sr(m);
    s_.stream_.expires_after(secs(limits().write_timeout_s));
    error_code ec;
    co_await http::async_write_header(s_.stream_, sr, net::redirect_error(net::use_awaitable, ec));
    if (ec) gone_ = true;
    if (!ec && head_) finished_ = true;
    co_return !ec;
}

// k_write_slice: a body write goes out in slices of at most this many bytes, each under its own
// --write-timeout, so the timeout bounds a reader that stopped reading (no slice moves), not how long a large
// body takes to cross a slow link (regression: held states of tens of MB cut off at 30 s on slow links).
constexpr size_t k_write_slice = size_t(256) << 10;

net::awaitable<bool> http_exchange::write(const void * data, size_t n) {
    if (!begun_ || finished_ || gone_) co_return false;
    if (n == 0) co_return true;
    if (length_ && written_ + n > *length_) co_return false;
    written_ += n;
    error_code ec;
    const auto under_timeout = [&] { s_.stream_.expires_after(secs(limits().write_timeout_s)); };
    if (n <= k_write_slice) {  // (an event, a token's chunk: one write, one system call)
        under_timeout();
        if (chunked_)
            co_await net::async_write(s_.stream_, http::make_chunk(net::const_buffer(data, n)),
                                      net::redirect_error(net::use_awaitable, ec));
        else
            co_await net::async_write(s_.stream_, net::const_buffer(data, n), large_transfer,
                                      net::redirect_error(net::use_awaitable, ec));
    } else {  // one chunk (when chunked), its data in slices
        if (chunked_) {
            under_timeout();
            co_await net::async_write(s_.stream_, http::chunk_header(n), net::redirect_error(net::use_awaitable, ec));
        }
        const auto * p = static_cast<const uint8_t *>(data);
        for (size_t at = 0; !ec && at < n; at += k_write_slice) {
            under_timeout();
            co_await net::async_write(s_.stream_, net::const_buffer(p + at, std::min(k_write_slice, n - at)),
                                      large_transfer, net::redirect_error(net::use_awaitable, ec));
        }
        if (chunked_ && !ec) {
            under_timeout();
            co_await net::async_write(s_.stream_, http::chunk_crlf(), net::redirect_error(net::use_awaitable, ec));
        }
    }
    if (ec) gone_ = true;
    co_return !ec;
}

net::awaitable<bool> http_exchange::end() {
    if (!begun_ || gone_) co_return false;
    if (finished_) co_return true;
    if (length_ && written_ != *length_) {
        abort();
        co_return false;
    }
    if (chunked_) {
        s_.stream_.expires_after(secs(limits().write_timeout_s));
        error_code ec;
        co_await net::async_write(s_.stream_, http::make_chunk_last(), net::redirect_error(net::use_awaitable, ec));
        if (ec) {
            gone_ = true;
            co_return false;
        }
    }
    finished_ = true;
    co_return true;
}

void http_exchange::abort() {
    gone_ = true;
    keep_alive_ = false;
    s_.close();
}

net::awaitable<bool> http_exchange::wait(async_notify & n, std::chrono::steady_clock::time_point until) {
    if (s_.peer_closed_) {
        gone_ = true;
        co_return false;
    }
    s_.waiter_ = &n;
    s_.arm_watch();
    const bool notified = co_await n.wait_until(until);
    s_.waiter_ = nullptr;
    if (s_.peer_closed_) {
        gone_ = true;
        co_return false;
    }
    co_return notified;
}

// ---- http_server ----

http_server::http_server(http_server_config cfg)
    : cfg_(std::move(cfg)), static_root_(http_static_root(cfg_.static_dir)), body_budget_(cfg_.limits.max_body_memory),
      accept_strand_(net::make_strand(ioc_)), acceptor_(accept_strand_) {}

http_server::~http_server() { stop(); }

void http_server::route(std::string method, std::string pattern, http_route_options opts, http_handler h) {
    route_entry e;
    e.method = std::move(method);
    e.segments = split_path(pattern);
    e.pattern = std::move(pattern);
    e.opts = opts;
    e.handler = std::move(h);
    routes_.push_back(std::move(e));
}

const http_server::route_entry * http_server::match(std::string_view method, std::string_view path,
                                                    std::map<std::string, std::string> & params, bool & path_known) const {
    const auto segs = split_path(path);
    path_known = false;
    for (const auto & r : routes_) {
        std::map<std::string, std::string> p;
        if (!segments_match(r.segments, segs, &p)) continue;
        path_known = true;
        if (r.method != method) continue;
        params = std::move(p);
        return &r;
    }
    return nullptr;
}

bool http_server::preflight_closed(std::string_view path, std::string_view method) const {
    const auto segs = split_path(path);
    if (method == "HEAD") method = "GET";
    bool any_closed = false, method_found = false, method_closed = false;
    for (const auto & r : routes_) {
        if (!segments_match(r.segments, segs, nullptr)) continue;
        any_closed = any_closed || r.opts.same_origin_only;
        if (!method_found && r.method == method) {
            method_found = true;
            method_closed = r.opts.same_origin_only;
        }
    }
    return method_found ? method_closed : any_closed;
}

Result<int> http_server::bind() {
    error_code ec;
    const auto addr = net::ip::make_address(cfg_.host, ec);
    if (ec) return Status(status_code::invalid_argument, "--host: \"" + cfg_.host + "\" is not an IP address");
    if (cfg_.port < 0 || cfg_.port > 65535) return Status(status_code::invalid_argument, "--port: not in 0..65535");
    const tcp::endpoint ep(addr, uint16_t(cfg_.port));
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(4096, ec);
    if (ec) return Status(status_code::io_error, "cannot listen on " + cfg_.host + ":" + std::to_string(cfg_.port) + ": " + ec.message());
    cfg_.port = acceptor_.local_endpoint().port();
    return cfg_.port;
}

void http_server::start() {
    running_ = true;
    work_.emplace(ioc_.get_executor());
    net::co_spawn(accept_strand_, accept_loop(), net::detached);
    for (uint32_t i = 0; i < std::max<uint32_t>(1, cfg_.threads); ++i)
        threads_.emplace_back([this] {
            for (;;) {
                try {
                    ioc_.run();
                    return;
                } catch (const std::exception & e) {
                    log_error("{}: event loop: {}", cfg_.log_name, e.what());
                }
            }
        });
}

net::awaitable<void> http_server::accept_loop() {
    for (;;) {
        error_code ec;
        tcp::socket sock = co_await acceptor_.async_accept(net::make_strand(ioc_), net::redirect_error(net::use_awaitable, ec));
        if (ec) {
            if (!acceptor_.is_open() || stopped_) break;
            continue;  // EMFILE and friends: the next accept may work
        }
        admit(std::move(sock));
        // Drain what else waits in the backlog before going back to the event loop: one accept per trip
        // through a busy io_context's queue let a flood of connections starve a later one (a /health probe
        // behind 2000 clients waited for every handler ahead of each accept; regression
        // EdgeE2E.RouterHolds2000ConnectionsAllCompleteNoErrors under ASan). Bounded so the loop yields.
        acceptor_.non_blocking(true, ec);
        for (int i = 0; i < k_accept_batch && !ec && !stopped_; ++i) {
            tcp::socket more = acceptor_.accept(net::make_strand(ioc_), ec);
            if (ec) break;  // would_block: the backlog is empty
            admit(std::move(more));
        }
    }
}

void http_server::admit(tcp::socket sock) {
    error_code ec;
    sock.set_option(tcp::no_delay(true), ec);  // SSE events and small responses go out at once
    if (n_open_.load() >= cfg_.limits.max_connections) {
        ++n_refused_;
        // Refused quickly, never queued: one short write of a canned 503, then close.
        static const std::string k_busy = [] {
            const std::string body =
                http_error_json(Status(status_code::unavailable, "too many connections (--max-connections)"), 503);
            return "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: "
                   "1\r\nConnection: close\r\nContent-Length: " +
                   std::to_string(body.size()) + "\r\n\r\n" + body;
        }();
        sock.non_blocking(true, ec);
        (void)::send(sock.native_handle(), k_busy.data(), k_busy.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        sock.shutdown(tcp::socket::shutdown_both, ec);
        sock.close(ec);
        return;
    }
    ++n_open_;
    ++n_accepted_;
    auto s = std::make_shared<http_session>(*this, std::move(sock));
    {
        lock_guard lk(sessions_mu_);
        if (sessions_.size() > 64 && sessions_.size() > 2 * size_t(n_open_.load()))
            std::erase_if(sessions_, [](const std::weak_ptr<http_session> & w) { return w.expired(); });
        sessions_.push_back(s);
    }
    auto ex = s->stream_.get_executor();
    net::co_spawn(
        ex, [s]() -> net::awaitable<void> { co_await s->run(); },
        [this](std::exception_ptr e) {
            if (!e) return;
            try {
                std::rethrow_exception(e);
            } catch (const std::exception & x) {
                log_error("{}: connection ended by an exception: {}", cfg_.log_name, x.what());
            } catch (...) {}
        });
}

void http_server::connection_closed() { n_open_.fetch_sub(1); }

void http_server::render_metrics(std::string & out) const {
    requests_.render(out);
    metric_scalar(out, "baton_http_connections_open", "gauge", "Open client connections", double(n_open_.load()));
    metric_scalar(out, "baton_http_connections_refused_total", "counter", "Connections refused with 503 over --max-connections",
                  double(n_refused_.load()));
    metric_scalar(out, "baton_http_body_bytes_committed", "gauge",
                  "Bytes committed to incoming request bodies (--max-body-memory)", double(body_budget_.committed()));
    metric_scalar(out, "baton_http_body_memory_refusals_total", "counter",
                  "Request bodies refused with 503 because --max-body-memory was committed",
                  double(body_budget_.refusals()));
}

void http_server::stop() {
    if (stopped_.exchange(true)) return;
    if (running_) {
        // On the acceptor's strand: the accept loop reads it there (regression: TSan saw stop() close it
        // from another thread while the loop checked is_open()).
        net::post(accept_strand_, [this] {
            error_code ec;
            acceptor_.close(ec);
        });
        std::vector<std::shared_ptr<http_session>> live;
        {
            lock_guard lk(sessions_mu_);
            for (auto & w : sessions_)
                if (auto s = w.lock()) live.push_back(std::move(s));
            sessions_.clear();
        }
        for (auto & s : live) net::post(s->stream_.get_executor(), [s] { s->close(); });
        live.clear();
        work_.reset();
        // Let the sessions see their sockets close and end; what is left after that is torn down.
        const auto until = steady::now() + std::chrono::seconds(2);
        while (n_open_.load() > 0 && steady::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        ioc_.stop();
    }
    for (auto & t : threads_)
        if (t.joinable()) t.join();
    bridge_.join();
    running_ = false;
}

}  // namespace baton
