// http_server.h — Baton's one HTTP edge (node and router): an event-driven HTTP/1.1 server on
// Boost.Beast/Asio with per-phase deadlines, limits, authentication, routing and request metrics.
//
// Connections are coroutines on strands of one io_context served by a few threads; no connection, stream
// or waiting request holds a thread. Per connection the edge runs, in order:
//   wait for a request's first byte (--idle-timeout between keep-alive requests, --header-timeout for a
//   new connection) -> read the request line and headers under ONE total deadline (--header-timeout; a
//   client trickling bytes does not extend it) within --max-header-bytes and --max-headers, refusing
//   obs-fold and a missing or repeated Host (RFC 9112) -> check the API key (constant time; before
//   routing, so unknown paths need it too; routes marked open skip it) -> match a route template (404 /
//   405) -> refuse a browser's cross-site request to a same-origin-only route (403) -> check the announced
//   length against the route's cap and --max-body-memory (413, before any `100 Continue`) -> read the body
//   under --body-timeout (Content-Length or chunked; its own timer, so a late body is answered 408), its
//   buffer growing with the bytes that arrive, every growth committed to the server's body budget (over
//   --max-body-memory: 503) -> call the handler -> write the response, every write under --write-timeout
//   (a client that stops reading is dropped and the handler sees the write fail).
// Any error before the handler (400 malformed, 401, 403, 404, 405, 408, 413, 431, 503) is answered with
// the JSON error shape and, unless the request was read completely, `Connection: close` and a real close —
// bytes after a refused request are never read as a new request (a header timeout only closes). Pipelined
// requests are answered in order; `Connection: close` (or HTTP/1.0 without keep-alive) closes after the
// response. Connections over --max-connections get an immediate 503 and are closed.
// CORS (llama-server's flags, tightened): a response to a request whose Origin the configuration allows
// carries Access-Control-Allow-Origin — a literal `*` for `*` (never with credentials), the origin itself
// for listed and localhost origins (with Access-Control-Allow-Credentials when credentials are on); the
// `null` origin is never allowed. An OPTIONS preflight is answered 200 with the allowed methods and headers
// before authentication and routing (a browser's preflight carries no credentials). Routes marked
// same_origin_only (state changes: /admin/drain, slot actions and state, /v1/prefill, /v1/decode) are
// outside CORS: no Access-Control-* header on their responses or preflights.
// Thread-safety: route() before bind(); bind/start/stop from one thread; handlers run on the connection's
// strand; request_counter() is safe from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "baton/base/status.h"
#include "baton/base/thread_annotations.h"
#include "baton/http/async_notify.h"
#include "baton/http/http_body_budget.h"
#include "baton/http/http_errors.h"
#include "baton/http/http_message.h"
#include "baton/http/metrics_text.h"
#include "baton/http/net.h"

namespace baton {

struct http_limits {
    size_t max_header_bytes = 16384;  // request line + headers
    uint32_t max_headers = 100;       // header fields
    double header_timeout_s = 10;     // total time for a request's headers (and a new connection's first byte)
    double idle_timeout_s = 5;        // keep-alive: idle time allowed between requests
    double body_timeout_s = 60;       // total time for a request's body
    double write_timeout_s = 30;      // each write of a response (of a large body: each 256-KiB slice); a client
                                      // that stops reading is dropped
    uint32_t max_connections = 4096;  // open connections; beyond: 503 and close
    // Memory committed to incoming bodies across all connections (bytes; --max-body-memory, in MiB). A
    // body announced larger gets 413; a growth that would pass it gets 503 + Retry-After.
    uint64_t max_body_memory = uint64_t(1024) << 20;
};

// http_limits_check: invalid_argument naming the flag when a limit is out of range.
Status http_limits_check(const http_limits & l);

// Cross-origin requests from browsers (--cors-origins, --cors-methods, --cors-headers, --cors-credentials).
struct http_cors {
    // "*": any origin (answered `*`); "localhost": origins on localhost; else a list of origins
    std::vector<std::string> origins{"*"};
    std::string methods = "GET, POST, DELETE, OPTIONS";
    std::string headers = "*";
    bool credentials = true;  // Access-Control-Allow-Credentials for listed and localhost origins (never for `*`)
};

// http_cors_parse_origins splits a comma-separated --cors-origins value (blanks around items dropped);
// invalid_argument when it names no origin, or names `null` (never allowed: sandboxed frames, file: pages
// and redirects send it, so allowing it would allow any page).
Result<std::vector<std::string>> http_cors_parse_origins(std::string_view csv);
// http_cors_allow returns the value of Access-Control-Allow-Origin for a request's Origin header, or ""
// when the configuration does not allow it (or there is no Origin, or it is `null`): "*" for the `*`
// entry, the origin itself for a listed or localhost origin (the first entry that matches decides).
std::string http_cors_allow(const http_cors & c, std::string_view origin);
// http_cors_credentials: whether a response whose Access-Control-Allow-Origin is allow_origin may carry
// Access-Control-Allow-Credentials: only for an explicit origin, never for "*" or "".
bool http_cors_credentials(const http_cors & c, std::string_view allow_origin);

// http_cross_site_check is the CSRF rule of same_origin_only routes: invalid_argument (answered 403)
// when the request carries an Origin header (any value, `null` and empty included: browsers send it on
// every cross-origin POST and on many others; the router, curl and SDKs never do) or Sec-Fetch-Site
// `cross-site`/`same-site` (what browsers send on every request, GETs included); ok otherwise.
Status http_cross_site_check(const http_headers & headers);

struct http_server_config {
    std::string host = "127.0.0.1";
    int port = 0;  // 0: any free port
    http_limits limits;
    uint32_t threads = 2;           // event-loop threads
    std::string api_key;            // empty: no authentication
    std::string log_name = "http";  // prefix of log lines ("serve", "route")
    http_cors cors;
    // Static files (http_static.h): GET/HEAD paths no route takes are served from this directory without the
    // API key, as llama-server serves its web UI (--path). Empty, or not a readable directory: none.
    std::string static_dir;
};

struct http_route_options {
    uint64_t max_body_bytes = 0;  // 0: the route takes no body
    bool open = false;            // served without the API key (/health)
    bool pooled_body = false;     // body buffer from buffer_pool (blob routes)
    // Excluded from CORS and closed to browsers: no Access-Control-* headers on its responses or
    // preflights, and a request with an Origin or a cross-site Sec-Fetch-Site gets 403 before its body is
    // read (http_cross_site_check). For routes that change state: no web page may drain a node.
    bool same_origin_only = false;
};

class http_session;

// One request being answered. Handlers get it by reference; it lives until the handler's coroutine ends.
class http_exchange {
  public:
    const http_request & request() const { return req_; }
    http_request & request() { return req_; }
    net::any_io_executor executor() const;
    const http_limits & limits() const;

    // respond writes a whole response; false when the client is gone (or a response was already begun).
    net::awaitable<bool> respond(http_response r);
    net::awaitable<bool> respond_error(const Status & st) { co_return co_await respond(http_error_response(st)); }

    // begin starts a streamed response: chunked when length is empty, else exactly *length body bytes.
    net::awaitable<bool> begin(int status, std::string content_type, http_headers headers,
                               std::optional<uint64_t> length);
    // write sends body bytes (one chunk when chunked); false when the client is gone or stopped reading
    // for --write-timeout.
    net::awaitable<bool> write(const void * data, size_t n);
    net::awaitable<bool> write(std::string_view s) { co_return co_await write(s.data(), s.size()); }
    // end finishes a begun response (the last chunk; a fixed-length one must have all its bytes).
    net::awaitable<bool> end();
    // abort drops the connection: the response stays incomplete (the client sees a cut-off body).
    void abort();

    bool begun() const { return begun_; }
    bool finished() const { return finished_; }
    int status() const { return status_; }

    // wait returns when n is notified (true), or false when `until` passed or the client hung up
    // (client_gone() tells which). The socket is watched while waiting, so a client that closes its
    // connection during a long non-streamed request is noticed.
    net::awaitable<bool> wait(async_notify & n, std::chrono::steady_clock::time_point until);
    bool client_gone() const { return gone_; }

  private:
    friend class http_session;
    explicit http_exchange(http_session & s) : s_(s) {}
    http_session & s_;
    http_request req_;
    http_body_hold body_hold_;  // the body's share of --max-body-memory, released with the exchange
    bool head_ = false;  // HEAD: headers only
    bool keep_alive_ = true;
    bool chunked_ = false;
    bool begun_ = false, finished_ = false, gone_ = false;
    std::optional<uint64_t> length_;
    uint64_t written_ = 0;
    int status_ = 0;
    std::string cors_origin_;  // Access-Control-Allow-Origin of the response, or ""
    void add_response_headers(http_headers & h) const;  // X-Request-Id, and CORS when allowed
};

using http_handler = std::function<net::awaitable<void>(http_exchange &)>;

class http_server {
  public:
    explicit http_server(http_server_config cfg);
    ~http_server();  // stop()

    // route adds a handler for METHOD and a path template whose segments may be {name} parameters.
    // GET routes also answer HEAD.
    void route(std::string method, std::string pattern, http_route_options opts, http_handler h);
    // bind opens the listening socket; returns the port (the free one picked when port is 0).
    Result<int> bind();
    // start accepts connections on the event-loop threads. REQUIRES: bind() succeeded.
    void start();
    // stop closes the listener and every connection and joins the threads. Idempotent.
    void stop();
    bool running() const { return running_.load(); }

    net::io_context & context() { return ioc_; }
    const http_server_config & config() const { return cfg_; }
    http_request_counter & request_counter() { return requests_; }
    // render_metrics appends the edge's own metrics (requests by route, open and refused connections,
    // body bytes committed and body commits refused over --max-body-memory).
    void render_metrics(std::string & out) const;
    const http_body_budget & body_budget() const { return body_budget_; }

    // offload runs fn on the bridge pool (CPU-heavy work: blob verification, tokenization) and resumes
    // the calling coroutine on its own strand, so the event loop never waits for it.
    template <typename F>
    net::awaitable<std::invoke_result_t<F>> offload(F fn) {
        using R = std::invoke_result_t<F>;
        struct job {
            F fn;
            std::optional<R> out;
            notify_ptr done;
        };
        auto j = std::make_shared<job>(
            job{std::move(fn), std::nullopt, async_notify::make(co_await net::this_coro::executor)});
        net::post(bridge_, [j] {  // shared: the job outlives a connection torn down at shutdown
            j->out.emplace(j->fn());
            j->done->notify();
        });
        while (!co_await j->done->wait_until(std::chrono::steady_clock::time_point::max())) {}
        co_return std::move(*j->out);
    }

  private:
    friend class http_session;
    friend class http_exchange;
    struct route_entry {
        std::string method;
        std::vector<std::string> segments;  // "{x}" marks a parameter
        std::string pattern;
        http_route_options opts;
        http_handler handler;
    };
    // match finds the route for method+path; *path_known tells 405 from 404 when none matches.
    const route_entry * match(std::string_view method, std::string_view path,
                              std::map<std::string, std::string> & params, bool & path_known) const;
    // preflight_closed: whether a preflight for path (asking for method, "" when it names none) concerns
    // a same_origin_only route — that route, or with no such method any route of the path.
    bool preflight_closed(std::string_view path, std::string_view method) const;
    net::awaitable<void> accept_loop();
    // admit takes one accepted connection: refused with a canned 503 over --max-connections, else a
    // session. On the accept strand.
    void admit(tcp::socket sock);
    void connection_closed();

    http_server_config cfg_;
    std::string static_root_;       // cfg_.static_dir's real path ("" when none)
    http_body_budget body_budget_;  // before ioc_: sessions destroyed with the context still release into it
    net::io_context ioc_;
    std::optional<net::executor_work_guard<net::io_context::executor_type>> work_;
    net::strand<net::io_context::executor_type> accept_strand_;  // the acceptor is used only on it
    tcp::acceptor acceptor_;
    net::thread_pool bridge_{2};
    std::vector<route_entry> routes_;
    std::vector<std::thread> threads_;
    http_request_counter requests_;
    std::atomic<bool> running_{false}, stopped_{false};
    std::atomic<uint32_t> n_open_{0};
    std::atomic<uint64_t> n_refused_{0}, n_accepted_{0};
    mutex sessions_mu_;
    std::vector<std::weak_ptr<http_session>> sessions_ BATON_GUARDED_BY(sessions_mu_);  // for stop()
};

// http_key_equal compares an API key in time that does not depend on where the strings differ.
bool http_key_equal(std::string_view a, std::string_view b);

}  // namespace baton
