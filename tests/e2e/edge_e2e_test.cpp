// edge_e2e_test.cpp — the HTTP edge of `baton serve` and `baton route`, end to end at the byte level.
//
// Real node and router processes on ephemeral ports (node_process), driven through raw TCP sockets
// (support/raw_http.h) so a test controls every byte and sees every close: clients that trickle headers,
// header blocks at and over the limits, pipelined and malformed requests, random paths aimed at the
// metric labels, the API key on every route, readers that stall mid-stream, and connection floods. Each
// test is named after the finding it pins; every socket operation has a deadline, waits poll(2) instead
// of sleeping, and every process is reaped by its guard.
#include <gtest/gtest.h>

#include <poll.h>
#include <sys/resource.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "e2e/serve_test_util.h"
#include "support/node_process.h"
#include "support/raw_http.h"

namespace baton::test {
namespace {

const std::string k_small_completion = R"({"prompt":"Hi","max_tokens":4,"temperature":0})";

// start_or_report starts a node or router; on failure (e.g. an option this binary does not know yet) it
// records the failure with the child's stderr and returns nullptr, for the caller to ASSERT_TRUE on.
std::unique_ptr<node_process> start_or_report(const std::vector<std::string> & args) {
    try {
        return node_process::start(args, 60);
    } catch (const std::exception & e) {
        std::string cmd;
        for (const auto & a : args) cmd += " " + a;
        ADD_FAILURE() << "could not start `baton" << cmd << "`: " << e.what();
        return nullptr;
    }
}

// route_args: `route --decode URL` with a short health interval, plus extra.
std::vector<std::string> route_args(const node_process & node, std::vector<std::string> extra = {}) {
    std::vector<std::string> a = {"route", "--decode", node.url(), "--timeout", "120", "--health-interval", "0.2"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
}

// ensure_nofile raises RLIMIT_NOFILE (soft) to at least need, up to the hard limit; false if it cannot.
// Children started afterwards inherit the raised limit.
bool ensure_nofile(rlim_t need, std::string & why) {
    rlimit rl{};
    if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        why = "getrlimit failed";
        return false;
    }
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur >= need) return true;
    if (rl.rlim_cur == RLIM_INFINITY) return true;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need) {
        why = "RLIMIT_NOFILE hard limit " + std::to_string(rl.rlim_max) + " < " + std::to_string(need) + " needed";
        return false;
    }
    rl.rlim_cur = need;
    if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) {
        why = "setrlimit(RLIMIT_NOFILE, " + std::to_string(need) + ") failed";
        return false;
    }
    return true;
}

std::string close_request(const std::string & method, const std::string & path, std::vector<std::string> headers = {},
                          const std::string & body = "") {
    headers.push_back("Connection: close");
    if (!body.empty()) headers.push_back("Content-Type: application/json");
    return raw_request(method, path, headers, body);
}

// probe_once sends request on a fresh connection; "" when it was answered with want_status within
// limit_s seconds, else what happened.
std::string probe_once(const node_process & srv, const std::string & what, const std::string & request, int want_status,
                       double limit_s = 1.0) {
    const auto t = raw_clock::now();
    std::string err;
    const auto r = raw_exchange(srv.host(), srv.port(), request, limit_s + 2.0, &err);
    const double dt = raw_seconds_since(t);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3f s", dt);
    if (!r) return what + ": no response after " + buf + ": " + err;
    if (r->status != want_status)
        return what + ": status " + std::to_string(r->status) + " after " + buf + ": " + r->body.substr(0, 200);
    if (dt > limit_s) return what + ": answered only after " + buf;
    return "";
}

// expect_error_shape: body is {"error":{"code":want,"type":"...","message":"..."}}.
void expect_error_shape(const raw_response & r, int want, const std::string & ctx) {
    const json j = json::parse(r.body, nullptr, false);
    ASSERT_TRUE(j.is_object() && j.contains("error") && j["error"].is_object()) << ctx << ": body " << r.body;
    const json & e = j["error"];
    EXPECT_TRUE(e.contains("code") && e["code"].is_number_integer() && e["code"].get<int>() == want)
        << ctx << ": " << r.body;
    EXPECT_TRUE(e.contains("type") && e["type"].is_string() && !e["type"].get<std::string>().empty())
        << ctx << ": " << r.body;
    EXPECT_TRUE(e.contains("message") && e["message"].is_string() && !e["message"].get<std::string>().empty())
        << ctx << ": " << r.body;
}

// ---- 1. slow header clients ----

// One client that sends a request header one byte at a time and never finishes it.
struct trickle_client {
    raw_conn conn;
    raw_clock::time_point opened, next_send;
    size_t sent = 0;
    bool closed = false;
    double closed_after_s = 0;  // since opened
    std::string how;            // "EOF", "reset", "HTTP 408", ...
};

// expect_slow_headers_do_not_block opens n_slow connections to srv that trickle a header one byte every
// 200 ms (all driven from this thread with poll), checks that fresh /health and completion requests keep
// answering within 1 s over ~3 s, and that the server closes every trickling connection after about
// header_timeout_s (within 6 s of its start) although bytes keep arriving.
void expect_slow_headers_do_not_block(const node_process & srv, double header_timeout_s, int n_slow) {
    const std::string header =
        "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: trickle\r\nX-Slow: " + std::string(4096, 'a');
    const auto period = std::chrono::milliseconds(200);
    // Warm-up (not timed): the first completions may pay one-off costs (a router's first node connection).
    for (int i = 0; i < 3; ++i)
        probe_once(srv, "warm-up", close_request("POST", "/v1/completions", {}, k_small_completion), 200, 30);
    std::vector<trickle_client> cl(static_cast<size_t>(n_slow));
    const auto connect_deadline = raw_deadline(15);
    for (int i = 0; i < n_slow; ++i) {
        trickle_client & c = cl[size_t(i)];
        const double left = std::max(0.01, std::chrono::duration<double>(connect_deadline - raw_clock::now()).count());
        ASSERT_TRUE(c.conn.connect(srv.host(), srv.port(), left)) << "slow client " << i << ": " << c.conn.error();
        c.opened = raw_clock::now();
        c.next_send = c.opened + period * i / n_slow;  // spread the sends over the period
    }
    const auto last_opened = cl.back().opened;

    // Probes on fresh connections, on their own thread, every ~250 ms for ~3 s.
    std::mutex mu;
    std::condition_variable cv;
    bool stop = false;
    std::vector<std::string> probe_failures;
    int probe_rounds = 0;
    std::thread prober([&] {
        const auto end = raw_deadline(3.0);
        auto next = raw_clock::now();
        while (raw_clock::now() < end) {
            for (const std::string & f :
                 {probe_once(srv, "GET /health", close_request("GET", "/health"), 200),
                  probe_once(srv, "POST /v1/completions",
                             close_request("POST", "/v1/completions", {}, k_small_completion), 200)})
                if (!f.empty()) {
                    std::lock_guard<std::mutex> lk(mu);
                    probe_failures.push_back(f);
                }
            next += std::chrono::milliseconds(250);
            std::unique_lock<std::mutex> lk(mu);
            ++probe_rounds;
            if (cv.wait_until(lk, std::min(next, end), [&] { return stop; })) break;
        }
    });

    // Drive the trickling clients until the server closed them all, or 6 s after the last one opened.
    const auto loop_end = last_opened + std::chrono::seconds(6) + std::chrono::milliseconds(200);
    int open = n_slow;
    auto mark_closed = [&](trickle_client & c, std::string how) {
        c.closed = true;
        c.closed_after_s = raw_seconds_since(c.opened);
        c.how = std::move(how);
        c.conn.close();
        --open;
    };
    std::vector<pollfd> pfd;
    std::vector<size_t> idx;
    while (open > 0 && raw_clock::now() < loop_end) {
        pfd.clear();
        idx.clear();
        auto wake = loop_end;
        for (size_t i = 0; i < cl.size(); ++i) {
            if (cl[i].closed) continue;
            pfd.push_back({cl[i].conn.fd(), POLLIN, 0});
            idx.push_back(i);
            wake = std::min(wake, cl[i].next_send);
        }
        const int rc = ::poll(pfd.data(), nfds_t(pfd.size()), raw_ms_until(wake));
        ASSERT_GE(rc, 0) << "poll: " << std::strerror(errno);
        for (size_t k = 0; k < pfd.size() && rc > 0; ++k) {
            if (pfd[k].revents == 0) continue;
            trickle_client & c = cl[idx[k]];
            const raw_io io = c.conn.read_some(0);
            if (io == raw_io::raw_io_eof)
                mark_closed(c, c.conn.buffer().empty() ? "EOF" : "EOF after: " + c.conn.buffer().substr(0, 40));
            else if (io == raw_io::raw_io_reset || io == raw_io::raw_io_error) mark_closed(c, "reset");
            else if (io == raw_io::raw_io_data && c.conn.buffer().size() >= 12 &&
                     c.conn.buffer().find("\r\n") != std::string::npos)
                mark_closed(c, "HTTP " + c.conn.buffer().substr(9, 3));  // a status line: "HTTP/1.1 408 ..."
        }
        const auto now = raw_clock::now();
        for (auto & c : cl) {
            if (c.closed || c.next_send > now) continue;
            const char byte = header[c.sent % header.size()];
            if (!c.conn.send_all(std::string_view(&byte, 1), 1.0)) {
                mark_closed(c, "send failed: " + c.conn.error());
                continue;
            }
            ++c.sent;
            c.next_send += period;
        }
    }
    {
        std::lock_guard<std::mutex> lk(mu);
        stop = true;
    }
    cv.notify_all();
    prober.join();

    EXPECT_GE(probe_rounds, 3);
    for (const auto & f : probe_failures) ADD_FAILURE() << "while " << n_slow << " clients trickled headers: " << f;
    int still_open = 0, bad_how = 0;
    double first = 1e9, last = 0;
    size_t max_sent = 0;
    for (size_t i = 0; i < cl.size(); ++i) {
        const trickle_client & c = cl[i];
        max_sent = std::max(max_sent, c.sent);
        if (!c.closed) {
            ++still_open;
            continue;
        }
        first = std::min(first, c.closed_after_s);
        last = std::max(last, c.closed_after_s);
        const bool ok_how = c.how == "EOF" || c.how == "reset" || c.how == "HTTP 408" ||
                            c.how.rfind("EOF after: HTTP/1.1 408", 0) == 0 || c.how.rfind("send failed", 0) == 0;
        if (!ok_how && bad_how++ < 5)
            ADD_FAILURE() << "slow client " << i << " ended with " << c.how << " (want EOF or 408)";
    }
    EXPECT_EQ(still_open, 0) << "connections still open 6 s after they started trickling a header (--header-timeout "
                             << header_timeout_s
                             << " must bound the whole header, not each byte); bytes sent each: up to " << max_sent;
    if (still_open < n_slow) {
        EXPECT_LE(last, 6.0) << "latest close after " << last << " s";
        EXPECT_GE(first, 0.75 * header_timeout_s) << "a trickling connection was closed after " << first
                                                  << " s, before --header-timeout " << header_timeout_s;
    }
}

TEST(EdgeE2E, SlowHeaderClientsDoNotBlockOthers) {
    const int n_slow = 500;
    std::string why;
    if (!ensure_nofile(rlim_t(n_slow) * 2 + 256, why)) GTEST_SKIP() << why;
    // One compute thread, not serve_args' two: on a loaded 2-core machine ggml's two-thread barrier turns a
    // 4-token completion into 0.7-1.9 s now and then, which would drown the 1 s bound this test is about.
    auto node = start_or_report(
        {"serve", "-m", test_model_path("llama"), "-c", "2048", "-t", "1", "-np", "2", "--header-timeout", "2"});
    ASSERT_TRUE(node);
    {
        SCOPED_TRACE("node");
        expect_slow_headers_do_not_block(*node, 2, n_slow);
    }
    auto router = start_or_report(route_args(*node, {"--header-timeout", "2"}));
    ASSERT_TRUE(router);
    {
        SCOPED_TRACE("router in front of the node");
        expect_slow_headers_do_not_block(*router, 2, n_slow);
    }
}

// ---- 2. header block sizes ----

// padded_health: a GET /health whose header block (request line through the empty line) is exactly
// total bytes, padded with an X-Pad header. REQUIRES: total >= 64.
std::string padded_health(size_t total) {
    const std::string head = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: ";
    const std::string tail = "\r\n\r\n";
    return head + std::string(total - head.size() - tail.size(), 'p') + tail;
}

// expect_two_health_responses: a padded /health of block bytes and a plain one in one write answer 200, 200.
void expect_two_health_responses(const node_process & srv, size_t block) {
    SCOPED_TRACE("header block of " + std::to_string(block) + " bytes");
    const std::string first = padded_health(block);
    ASSERT_EQ(first.size(), block);
    raw_conn c;
    ASSERT_TRUE(c.connect(srv.host(), srv.port(), 5)) << c.error();
    ASSERT_TRUE(c.send_all(first + raw_request("GET", "/health"), 5)) << c.error();
    for (int i = 0; i < 2; ++i) {
        const auto r = c.read_response(5);
        ASSERT_TRUE(r) << "response " << i << ": " << c.error() << "; buffered: " << c.buffer().substr(0, 200);
        EXPECT_EQ(r->status, 200) << "response " << i << ": " << r->body;
        EXPECT_TRUE(json::parse(r->body, nullptr, false).is_object()) << r->body;
    }
    // Nothing else is owed: a third response would mean the stream was split in the wrong place.
    EXPECT_EQ(c.read_some(0.2), raw_io::raw_io_timeout) << "unexpected bytes: " << c.buffer().substr(0, 200);
}

// expect_one_error_then_close: request (followed by a valid GET /health in the same write) gets exactly
// one response with want status and Connection: close, then the server closes; the trailing request is
// never served.
void expect_one_error_then_close(const node_process & srv, const std::string & request, int want,
                                 const std::string & what) {
    SCOPED_TRACE(what);
    raw_conn c;
    ASSERT_TRUE(c.connect(srv.host(), srv.port(), 5)) << c.error();
    ASSERT_TRUE(c.send_all(request + raw_request("GET", "/health"), 5)) << c.error();
    const auto r = c.read_response(5);
    ASSERT_TRUE(r) << c.error() << "; buffered: " << c.buffer().substr(0, 200);
    EXPECT_EQ(r->status, want) << r->body;
    EXPECT_TRUE(r->header_has_token("Connection", "close")) << "the error response must say Connection: close";
    EXPECT_TRUE(c.wait_closed(5)) << "the server must close the connection after a " << want;
    EXPECT_EQ(c.buffer(), "") << "the bytes after the bad request were served as a request";
}

TEST(EdgeE2E, HeaderBlockOf8192BytesDoesNotDesync) {
    auto node = start_or_report(serve_args("llama"));
    ASSERT_TRUE(node);
    // Blocks at and past common parser defaults (8 KiB) but under the default --max-header-bytes 16384.
    expect_two_health_responses(*node, 8192);
    expect_two_health_responses(*node, 8193);
    expect_two_health_responses(*node, 16000);
    expect_one_error_then_close(*node, padded_health(20000), 431, "20000-byte header block against the default limit");
    expect_one_error_then_close(*node, "GARBAGE\r\n\r\n", 400, "malformed request line");

    auto small = start_or_report(serve_args("llama", {"--max-header-bytes", "4096"}));
    ASSERT_TRUE(small);
    expect_two_health_responses(*small, 4000);
    expect_one_error_then_close(*small, padded_health(5000), 431,
                                "5000-byte header block against --max-header-bytes 4096");
}

// ---- 3. pipelining ----

TEST(EdgeE2E, PipelinedRequestsAnsweredInOrder) {
    auto node = start_or_report(serve_args("llama", {"-np", "2"}));
    ASSERT_TRUE(node);
    [&] {  // a lambda, so a failed ASSERT ends only this part
        SCOPED_TRACE("five pipelined requests in one write");
        raw_conn c;
        ASSERT_TRUE(c.connect(node->host(), node->port(), 5)) << c.error();
        const std::vector<std::pair<std::string, int>> want = {
            {"/health", 200}, {"/v1/models", 200}, {"/nope", 404}, {"/health", 200}, {"/v1/slots", 200}};
        std::string all;
        for (const auto & w : want) all += raw_request("GET", w.first);
        ASSERT_TRUE(c.send_all(all, 5)) << c.error();
        for (size_t i = 0; i < want.size(); ++i) {
            const auto r = c.read_response(10);
            ASSERT_TRUE(r) << "response " << i << " (" << want[i].first << "): " << c.error();
            EXPECT_EQ(r->status, want[i].second) << "response " << i << " (" << want[i].first << "): " << r->body;
            const json j = json::parse(r->body, nullptr, false);
            if (want[i].first == "/health") {
                EXPECT_TRUE(j.is_object() && j.contains("status")) << r->body;
            } else if (want[i].first == "/v1/models") {
                EXPECT_TRUE(j.is_object() && j.contains("data")) << r->body;
            } else if (want[i].first == "/nope") {
                expect_error_shape(*r, 404, "GET /nope");
            } else if (want[i].first == "/v1/slots") {
                EXPECT_TRUE(j.is_array() && j.size() == 2) << r->body;
            }
        }
        ASSERT_TRUE(c.send_all(raw_request("GET", "/health", {"Connection: close"}), 5)) << c.error();
        const auto r = c.read_response(5);
        ASSERT_TRUE(r) << c.error();
        EXPECT_EQ(r->status, 200);
        EXPECT_TRUE(r->header_has_token("Connection", "close"));
        EXPECT_TRUE(c.wait_closed(5)) << "Connection: close must end the connection";
        EXPECT_EQ(c.buffer(), "");
    }();
    [&] {  // a lambda, so a failed ASSERT ends only this part
        SCOPED_TRACE("HEAD /health then GET /health");
        raw_conn c;
        ASSERT_TRUE(c.connect(node->host(), node->port(), 5)) << c.error();
        ASSERT_TRUE(c.send_all(raw_request("HEAD", "/health") + raw_request("GET", "/health"), 5)) << c.error();
        const auto h = c.read_response(5, /*head=*/true);
        ASSERT_TRUE(h) << c.error();
        EXPECT_EQ(h->status, 200);
        // A body after the HEAD response would be read as the start of the next response.
        const auto g = c.read_response(5);
        ASSERT_TRUE(g) << "the response after HEAD: " << c.error() << "; buffered: " << c.buffer().substr(0, 200);
        EXPECT_EQ(g->status, 200);
        EXPECT_TRUE(json::parse(g->body, nullptr, false).is_object()) << g->body;
        if (h->has_header("Content-Length") && h->header("Content-Length") != "0") {
            EXPECT_EQ(h->header("Content-Length"), std::to_string(g->body.size()))
                << "HEAD must announce the GET body's length";
        }
    }();
    [&] {  // a lambda, so a failed ASSERT ends only this part
        SCOPED_TRACE("chunked request body");
        const auto plain = raw_exchange(node->host(), node->port(),
                                        close_request("POST", "/v1/completions", {}, k_small_completion), 30);
        ASSERT_TRUE(plain);
        ASSERT_EQ(plain->status, 200) << plain->body;
        const std::string b = k_small_completion;
        char sz[32];
        std::string chunked;
        for (size_t off = 0; off < b.size(); off += 10) {
            const std::string part = b.substr(off, 10);
            std::snprintf(sz, sizeof sz, "%zx\r\n", part.size());
            chunked += sz + part + "\r\n";
        }
        chunked += "0\r\n\r\n";
        const std::string req = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                                "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" +
                                chunked;
        std::string err;
        const auto r = raw_exchange(node->host(), node->port(), req, 30, &err);
        ASSERT_TRUE(r) << err;
        ASSERT_EQ(r->status, 200) << r->body;
        const json j = json::parse(r->body, nullptr, false), pj = json::parse(plain->body, nullptr, false);
        ASSERT_TRUE(j.is_object() && j.contains("choices")) << r->body;
        EXPECT_EQ(j["choices"][0]["text"], pj["choices"][0]["text"]) << "the chunked body must mean the same request";
    }();
}

// ---- 4. metric labels from client input ----

// The HTTP request counter: baton_http_requests_total (nodes, and the router once it shares the HTTP
// edge) or baton_router_requests_total (the router before that).
const std::vector<std::string> k_request_counters = {"baton_http_requests_total", "baton_router_requests_total"};

// count_series: lines of metrics text that are samples of one of counters.
int count_series(const std::string & text, const std::vector<std::string> & counters) {
    int n = 0;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t eol = text.find('\n', pos);
        if (eol == std::string::npos) eol = text.size();
        const std::string_view line(text.data() + pos, eol - pos);
        for (const auto & counter : counters)
            if (line.rfind(counter, 0) == 0 && line.size() > counter.size() &&
                (line[counter.size()] == '{' || line[counter.size()] == ' '))
                ++n;
        pos = eol + 1;
    }
    return n;
}

std::string fetch_metrics(const node_process & srv, const std::string & key) {
    std::vector<std::string> h;
    if (!key.empty()) h.push_back("Authorization: Bearer " + key);
    std::string err;
    const auto r = raw_exchange(srv.host(), srv.port(), close_request("GET", "/metrics", h), 10, &err);
    if (!r) {
        ADD_FAILURE() << "GET /metrics: " << err;
        return "";
    }
    EXPECT_EQ(r->status, 200) << r->body;
    return r->body;
}

// expect_random_paths_add_no_series sends 1000 requests for distinct random paths (and some random
// methods) without a key over keep-alive connections, then checks that /metrics (read with key, if any)
// grew by at most a few request-counter series and that neither the random parts nor the injected
// "evil_metric" appear in /metrics or in the process's stderr. key set: every such GET/POST is a 401.
void expect_random_paths_add_no_series(const node_process & srv, const std::string & key) {
    // Warm-up: one of each kind, so the series they may legitimately add (unmatched, 404/401, the
    // /metrics scrape itself) exist before the count.
    std::mt19937_64 rng(key.empty() ? 20240611 : 20240612);
    auto hex = [&] {
        char b[17];
        std::snprintf(b, sizeof b, "%016llx", (unsigned long long)rng());
        return std::string(b);
    };
    auto make = [&](int i, std::string & tag) {
        tag = hex();
        switch (i % 6) {
            case 0: return raw_request("GET", "/x/" + tag);
            case 1: return raw_request("GET", "/a%22%7D%0Aevil_metric%201/" + tag);
            case 2: return raw_request("GET", "/v1/" + tag + "?q=%22%0Aevil_metric%7B%7D%201");
            case 3: return raw_request("GET", "/v1/slots/" + tag + "/state");
            case 4:
                return raw_request("POST", "/x/" + tag + "%0Aevil_metric", {"Content-Type: application/json"}, "{}");
            default: return raw_request("X" + tag, "/health");  // a method nobody serves
        }
    };
    std::vector<std::string> tags;
    int answered = 0, not_401 = 0, not_4xx = 0;
    std::string sample_bad;
    raw_conn c;
    auto send_one = [&](const std::string & req, bool counted, bool custom_method) {
        for (int attempt = 0; attempt < 2; ++attempt) {
            if (!c.is_open() || c.peer_closed()) {
                if (!c.connect(srv.host(), srv.port(), 5)) continue;
            }
            if (!c.send_all(req, 5)) {
                c.close();
                continue;
            }
            const auto r = c.read_response(5);
            if (!r) {
                c.close();
                continue;
            }
            if (counted) {
                ++answered;
                // With a key, auth comes before routing; a method nobody serves may be refused earlier.
                if (!key.empty() && !custom_method && r->status != 401 && not_401++ == 0)
                    sample_bad = req.substr(0, req.find('\r')) + " -> " + std::to_string(r->status);
                if ((r->status < 400 || r->status >= 600) && not_4xx++ == 0)
                    sample_bad = req.substr(0, req.find('\r')) + " -> " + std::to_string(r->status);
            }
            if (r->header_has_token("Connection", "close")) c.close();
            return;
        }
    };
    std::string tag;
    for (int i = 0; i < 6; ++i) send_one(make(i, tag), false, i % 6 == 5);
    fetch_metrics(srv, key);
    const std::string before = fetch_metrics(srv, key);
    const int n_before = count_series(before, k_request_counters);
    ASSERT_GT(n_before, 0) << "no request counter series before the test:\n" << before;

    const int n = 1000;
    for (int i = 0; i < n; ++i) {
        const std::string req = make(i, tag);
        tags.push_back(tag);
        send_one(req, true, i % 6 == 5);
    }
    EXPECT_EQ(answered, n) << "every request gets a response (reconnecting after a close)";
    EXPECT_EQ(not_4xx, 0) << "random paths must be errors, e.g. " << sample_bad;
    if (!key.empty()) {
        EXPECT_EQ(not_401, 0) << "without the key every path is a 401 (auth before routing), e.g. " << sample_bad;
    }

    const std::string after = fetch_metrics(srv, key);
    const int n_after = count_series(after, k_request_counters);
    EXPECT_LE(n_after, n_before + 4) << "request counter series grew from " << n_before << " to " << n_after
                                     << " after " << n << " random paths:\n"
                                     << after.substr(0, 4000);
    EXPECT_EQ(after.find("evil_metric"), std::string::npos) << "client input reached /metrics:\n"
                                                            << after.substr(0, 4000);
    const std::string err = srv.stderr_text();
    EXPECT_EQ(err.find("evil_metric"), std::string::npos) << "client input reached stderr:\n" << err.substr(0, 2000);
    int in_metrics = 0, in_stderr = 0;
    std::string first_tag;
    for (const auto & t : tags) {
        if (after.find(t) != std::string::npos && in_metrics++ == 0) first_tag = t;
        if (err.find(t) != std::string::npos) ++in_stderr;
    }
    EXPECT_EQ(in_metrics, 0) << "random path parts in /metrics (first: " << first_tag << ")";
    EXPECT_EQ(in_stderr, 0) << "random path parts in stderr:\n" << err.substr(0, 2000);
}

TEST(EdgeE2E, RandomPathsDoNotAddMetricSeries) {
    auto node = start_or_report(serve_args("llama"));
    ASSERT_TRUE(node);
    {
        SCOPED_TRACE("node, no key");
        expect_random_paths_add_no_series(*node, "");
    }
    auto router = start_or_report(route_args(*node));
    ASSERT_TRUE(router);
    {
        SCOPED_TRACE("router, no key");
        expect_random_paths_add_no_series(*router, "");
    }
    auto keyed = start_or_report(serve_args("llama", {"--api-key", "k"}));
    ASSERT_TRUE(keyed);
    {
        SCOPED_TRACE("node, --api-key k");
        expect_random_paths_add_no_series(*keyed, "k");
    }
    auto keyed_router = start_or_report(route_args(*node, {"--api-key", "k"}));
    ASSERT_TRUE(keyed_router);
    {
        SCOPED_TRACE("router, --api-key k");
        expect_random_paths_add_no_series(*keyed_router, "k");
    }
}

// ---- 5. the API key ----

struct route_case {
    std::string method, path, body, content_type;
};

// expect_auth_on_routes: every route answers 401 (JSON error shape) without the key or with any wrong
// one, and something else with it; /health needs no key.
void expect_auth_on_routes(const node_process & srv, const std::string & key, const std::vector<route_case> & routes) {
    std::string same_len = key;
    same_len.back() = same_len.back() == 'z' ? 'y' : 'z';
    const std::vector<std::pair<std::string, std::string>> bad = {
        {"no Authorization header", ""},
        {"wrong key", "Authorization: Bearer wrong"},
        {"wrong key of the same length", "Authorization: Bearer " + same_len},
        {"a prefix of the key", "Authorization: Bearer " + key.substr(0, key.size() - 1)},
        {"the key plus a byte", "Authorization: Bearer " + key + "x"},
        {"empty Bearer", "Authorization: Bearer "},
        {"the key without Bearer", "Authorization: " + key},
        {"Basic scheme", "Authorization: Basic " + key},
    };
    for (const auto & rc : routes) {
        const std::string what = rc.method + " " + rc.path;
        auto req = [&](const std::string & auth) {
            std::vector<std::string> h = {"Connection: close"};
            if (!auth.empty()) h.push_back(auth);
            if (!rc.content_type.empty()) h.push_back("Content-Type: " + rc.content_type);
            return raw_request(rc.method, rc.path, h, rc.body);
        };
        for (const auto & b : bad) {
            std::string err;
            const auto r = raw_exchange(srv.host(), srv.port(), req(b.second), 30, &err);
            ASSERT_TRUE(r) << what << " with " << b.first << ": " << err;
            EXPECT_EQ(r->status, 401) << what << " with " << b.first << ": " << r->body;
            if (r->status == 401) expect_error_shape(*r, 401, what + " with " + b.first);
        }
        std::string err;
        const auto ok = raw_exchange(srv.host(), srv.port(), req("Authorization: Bearer " + key), 60, &err);
        ASSERT_TRUE(ok) << what << " with the key: " << err;
        EXPECT_NE(ok->status, 401) << what << " with the key: " << ok->body;
    }
    const auto h = raw_exchange(srv.host(), srv.port(), close_request("GET", "/health"), 10);
    ASSERT_TRUE(h);
    EXPECT_EQ(h->status, 200) << "/health needs no key: " << h->body;
}

TEST(EdgeE2E, AuthOnEveryRoute) {
    const std::string node_key = "k-node-0123456789", router_key = "k-router-abcdef";
    auto node = start_or_report(serve_args("llama", {"--api-key", node_key}));
    ASSERT_TRUE(node);
    const std::string completion = k_small_completion;
    const std::string chat = R"({"messages":[{"role":"user","content":"Hi"}],"max_tokens":4,"temperature":0})";
    {
        SCOPED_TRACE("node");
        expect_auth_on_routes(*node, node_key,
                              {{"GET", "/metrics", "", ""},
                               {"GET", "/v1/models", "", ""},
                               {"GET", "/v1/slots", "", ""},
                               {"GET", "/v1/slots/0/state", "", ""},
                               {"PUT", "/v1/slots/0/state", "not a blob", "application/octet-stream"},
                               {"DELETE", "/v1/slots/0/state", "", ""},
                               {"POST", "/v1/completions", completion, "application/json"},
                               {"POST", "/v1/chat/completions", chat, "application/json"},
                               {"POST", "/v1/prefill", completion, "application/json"},
                               {"POST", "/v1/decode", "not a blob", "application/octet-stream"},
                               {"GET", "/no/such/route", "", ""},
                               {"POST", "/no/such/route", "{}", "application/json"}});
    }
    auto router = start_or_report(route_args(*node, {"--api-key", router_key, "--node-key", node_key}));
    ASSERT_TRUE(router);
    {
        SCOPED_TRACE("router");
        expect_auth_on_routes(*router, router_key,
                              {{"GET", "/metrics", "", ""},
                               {"GET", "/v1/models", "", ""},
                               {"POST", "/v1/completions", completion, "application/json"},
                               {"POST", "/v1/chat/completions", chat, "application/json"},
                               {"GET", "/no/such/route", "", ""},
                               {"POST", "/no/such/route", "{}", "application/json"}});
        // With the key the router reaches the node with --node-key: real answers, not just "not 401".
        const auto m = raw_exchange(
            router->host(), router->port(),
            close_request("POST", "/v1/completions", {"Authorization: Bearer " + router_key}, completion), 60);
        ASSERT_TRUE(m);
        EXPECT_EQ(m->status, 200) << m->body;
    }
}

// ---- 6. stalled stream readers ----

// A stream long enough that it cannot finish within the test: 8000 tokens of a 512-wide model (the
// 64-wide test model can be fast enough to finish a 1800-token stream before any timeout; the 512-wide
// one takes ~20 s for 8000 on two cores).
const int k_stall_tokens = 8000;
// On loopback the server's send buffer autotunes up to tcp_wmem[2] (4 MiB by default) whatever the
// client's SO_RCVBUF, and ~200-byte events would take far longer than the test to fill it. Every chunk
// carries the node's model name, so a 16000-byte --alias makes each event ~16 KiB: the buffers fill
// within a few hundred tokens (seconds even on a loaded CI machine) and the server's writes stall, as
// with a slow reader on a real network.
const size_t k_stall_model_bytes = 16000;
std::vector<std::string> stall_node_args(std::vector<std::string> extra) {
    std::vector<std::string> a = {"serve",
                                  "-m",
                                  test_model_path("llama", 1, 512, 4),
                                  "-c",
                                  "8192",
                                  "-np",
                                  "1",
                                  "-t",
                                  "2",
                                  "--alias",
                                  "stall-" + std::string(k_stall_model_bytes, 'm')};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
}

// expect_stalled_reader_cancelled: a client of front that reads the stream's headers and then never reads
// again (4 KiB receive buffer) loses its stream: node's slot 0 frees within 30 s, well before the stream
// could end, and the node serves a new request.
void expect_stalled_reader_cancelled(const node_process & front, const node_process & node) {
    json body = long_stream_body();
    body["max_tokens"] = k_stall_tokens;
    raw_conn c;
    ASSERT_TRUE(c.connect(front.host(), front.port(), 5, /*rcvbuf_bytes=*/4096)) << c.error();
    ASSERT_TRUE(c.send_all(raw_request("POST", "/v1/completions", {"Content-Type: application/json"}, body.dump()), 5))
        << c.error();
    ASSERT_TRUE(c.read_until("\r\n\r\n", 60))
        << "no response headers: " << c.error() << "; got: " << c.buffer().substr(0, 200);
    ASSERT_EQ(c.buffer().rfind("HTTP/1.1 200", 0), 0u) << c.buffer().substr(0, 400);
    const auto stalled_at = raw_clock::now();
    // From here on the client never reads.
    // A router may send the headers before the node has the request: wait until the stream holds the slot.
    bool busy = false;
    json slots;
    for (const auto d = raw_deadline(10); !busy && raw_clock::now() < d;) {
        slots = json::parse(get(node, "/v1/slots", "", 10).body, nullptr, false);
        busy = slots.is_array() && !slots.empty() && slots[0]["busy"].get<bool>();
        if (!busy) std::this_thread::sleep_for(std::chrono::milliseconds(10));  // poll interval, as wait_slot_idle
    }
    ASSERT_TRUE(busy) << "the stream never held the slot: " << slots.dump();
    ASSERT_TRUE(wait_slot_idle(node, 0, 30))
        << "a client that stopped reading still holds the slot " << raw_seconds_since(stalled_at) << " s later";
    const std::string m = get(node, "/metrics", "", 10).body;
    EXPECT_LT(metric_value(m, "baton_generated_tokens_total"), k_stall_tokens)
        << "the stream ran to its end instead of being cancelled";
    const auto r =
        raw_exchange(front.host(), front.port(), close_request("POST", "/v1/completions", {}, k_small_completion), 30);
    ASSERT_TRUE(r) << "a new request after the stalled one";
    EXPECT_EQ(r->status, 200) << r->body;
}

TEST(EdgeE2E, StalledStreamReaderIsCancelled) {
    [&] {  // a lambda, so a failed ASSERT ends only this part
        SCOPED_TRACE("node --write-timeout 2");
        auto node = start_or_report(stall_node_args({"--write-timeout", "2"}));
        ASSERT_TRUE(node);
        expect_stalled_reader_cancelled(*node, *node);
    }();
    [&] {  // a lambda, so a failed ASSERT ends only this part
        SCOPED_TRACE("router --write-timeout 2 in front of a node");
        auto node = start_or_report(stall_node_args({}));
        ASSERT_TRUE(node);
        auto router = start_or_report(route_args(*node, {"--write-timeout", "2"}));
        ASSERT_TRUE(router);
        expect_stalled_reader_cancelled(*router, *node);
    }();
}

// ---- 7. connection limit ----

TEST(EdgeE2E, ExcessConnectionsRefusedQuickly) {
    const int max_conn = 50;
    std::string why;
    if (!ensure_nofile(rlim_t(max_conn) * 2 + 256, why)) GTEST_SKIP() << why;
    // One event-loop thread: connections are accepted in the order they were made, so the 51st is the
    // one over the limit.
    auto node =
        start_or_report(serve_args("llama", {"--max-connections", std::to_string(max_conn), "--http-threads", "1"}));
    ASSERT_TRUE(node);
    std::vector<raw_conn> idle(max_conn);
    for (int i = 0; i < max_conn; ++i)
        ASSERT_TRUE(idle[size_t(i)].connect(node->host(), node->port(), 5)) << i << ": " << idle[size_t(i)].error();

    const auto t = raw_clock::now();
    raw_conn extra;
    ASSERT_TRUE(extra.connect(node->host(), node->port(), 1.0))
        << "the kernel accepts even when the server refuses: " << extra.error();
    extra.send_all(raw_request("GET", "/health"), 1.0);  // may fail once the server has closed: that is a refusal too
    const auto r = extra.read_response(1.0);
    const double dt = raw_seconds_since(t);
    if (r) {
        EXPECT_EQ(r->status, 503) << "connection " << max_conn + 1 << " over --max-connections " << max_conn << ": "
                                  << r->body;
        EXPECT_TRUE(extra.wait_closed(1.0)) << "a refused connection is closed";
    } else {
        EXPECT_TRUE(extra.peer_closed()) << "connection " << max_conn + 1
                                         << " neither refused nor closed within 1 s: " << extra.error();
    }
    EXPECT_LT(dt, 1.0);
    // The first max_conn were accepted: none of them was answered or closed.
    int refused = 0;
    for (auto & c : idle)
        if (c.read_some(0) != raw_io::raw_io_timeout) ++refused;
    EXPECT_EQ(refused, 0) << "of the first " << max_conn << " idle connections some were refused";

    for (auto & c : idle) c.close();
    extra.close();
    // The server notices the closes; /health answers again (each try bounded by 1 s, 5 s in all).
    const auto deadline = raw_deadline(5);
    std::string last;
    while (raw_clock::now() < deadline) {
        last = probe_once(*node, "GET /health", close_request("GET", "/health"), 200);
        if (last.empty()) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // poll interval, as wait_slot_idle
    }
    EXPECT_EQ(last, "") << "after the idle connections closed";
}

// ---- 8. thousands of concurrent clients through the router ----

// One client of the load test: a non-blocking socket that sends one request and reads one response,
// driven by poll(2) from the test's thread together with all the others.
struct load_client {
    enum class phase { connecting, sending, reading, done };
    int fd = -1;
    phase state = phase::connecting;
    bool stream = false;
    std::string request;
    size_t sent = 0;  // bytes of request written
    std::string buf;  // bytes received
    bool eof = false;
    int status = 0;       // 0: no complete response
    std::string failure;  // "" when the response was a 200 with a complete, valid body
};

// load_body_problem: "" when body is a complete completion (stream: SSE ending with [DONE], every event a
// chunk with choices, no error event; else a JSON object with choices), else what is wrong with it.
std::string load_body_problem(const std::string & body, bool stream) {
    if (!stream) {
        const json j = json::parse(body, nullptr, false);
        if (!j.is_object() || !j.contains("choices") || !j["choices"].is_array() || j["choices"].empty())
            return "not a completion: " + body.substr(0, 200);
        return "";
    }
    const auto events = sse_payloads(body);
    if (events.empty() || events.back() != "[DONE]")
        return "stream does not end with data: [DONE]: " + body.substr(body.size() > 300 ? body.size() - 300 : 0);
    for (size_t i = 0; i + 1 < events.size(); ++i) {
        const json j = json::parse(events[i], nullptr, false);
        if (!j.is_object() || j.contains("error") || !j.contains("choices"))
            return "bad stream event " + std::to_string(i) + ": " + events[i].substr(0, 200);
    }
    return "";
}

// for_each_line calls fn with every line of text (without its newline).
template <typename Fn>
void for_each_line(const std::string & text, Fn fn) {
    size_t pos = 0;
    while (pos < text.size()) {
        size_t eol = text.find('\n', pos);
        if (eol == std::string::npos) eol = text.size();
        fn(text.substr(pos, eol - pos));
        pos = eol + 1;
    }
}

// metric_sum: the sum of the samples of name whose label set contains label (e.g. outcome="busy").
double metric_sum(const std::string & text, const std::string & name, const std::string & label) {
    double sum = 0;
    for_each_line(text, [&](const std::string & line) {
        if (line.rfind(name + "{", 0) != 0 || line.find(label) == std::string::npos) return;
        const size_t sp = line.rfind(' ');
        if (sp != std::string::npos) sum += std::strtod(line.c_str() + sp + 1, nullptr);
    });
    return sum;
}

// metric_lines: the lines of text starting with one of prefixes (for failure messages).
std::string metric_lines(const std::string & text, const std::vector<std::string> & prefixes) {
    std::string out;
    for_each_line(text, [&](const std::string & line) {
        for (const auto & p : prefixes)
            if (line.rfind(p, 0) == 0) {
                out += "  " + line + "\n";
                break;
            }
    });
    return out;
}

// The issue's acceptance: 2000 clients at once against a router whose nodes hold 2 (prefill) and 8
// (decode) slots plus as many again each (the default --node-queue). The router keeps what the nodes cannot take yet in its bounded
// queue (--queue-max 4096) and admits it as capacity frees up, so every request completes with 200 and
// nothing is bounced; meanwhile /health answers within 100 ms and the router's RSS stays bounded.
TEST(EdgeE2E, RouterHolds2000ConnectionsAllCompleteNoErrors) {
    const int n_clients = 2000;
    const double load_budget_s = 120;  // the whole flood; the router's --timeout (300) never decides
    // /health must stay answered while 2000 clients are held: an event loop blocked by them answers in
    // seconds or not at all. The bound is not a latency target (edge_bench measures latency). Until the
    // accept loop drained the backlog (http_server::accept_loop) a new connection waited behind the flood:
    // 250-1300 ms here, and over 5 s under ASan in CI; draining it, 5-60 ms (2026-12-05, 2-core machine).
    const double health_limit_s = 0.500;
    const long rss_limit_kb = 400 * 1024;
    std::string why;
    // This process holds every client socket and the router one per client plus its upstream calls; the
    // children inherit the raised limit.
    if (!ensure_nofile(4500, why)) GTEST_SKIP() << why;

    const std::string model = test_model_path("llama");
    auto prefill = start_or_report({"serve", "-m", model, "--role", "prefill", "-np", "2", "-c", "4096", "-t", "1"});
    ASSERT_TRUE(prefill);
    auto decode = start_or_report({"serve", "-m", model, "--role", "decode", "-np", "8", "-c", "4096", "-t", "1"});
    ASSERT_TRUE(decode);
    auto router = start_or_report({"route", "--prefill", prefill->url(), "--decode", decode->url(), "--pd-min-tokens",
                                   "8", "--timeout", "300", "--health-interval", "0.5"});
    ASSERT_TRUE(router);

    // Without -m the router counts ~4 bytes per token: "Hi" (0) goes direct, the long prompts (>= 40
    // bytes) prefill -> decode. One in five is direct; half of all requests stream.
    auto body_of = [](int i) {
        json b = {{"max_tokens", 2 + i % 3}, {"temperature", 0}};
        b["prompt"] = i % 5 == 4 ? std::string("Hi")
                                 : "Tell me a short story about the number " + std::to_string(i) + ", please.";
        if (i % 2 == 1) b["stream"] = true;
        return b.dump();
    };
    // Warm-up (not timed): one of each kind, so a broken path fails here with its own message.
    for (int i : {0, 1, 4, 9}) {
        std::string err;
        const auto r = raw_exchange(router->host(), router->port(),
                                    close_request("POST", "/v1/completions", {}, body_of(i)), 60, &err);
        ASSERT_TRUE(r) << "warm-up request " << i << ": " << err;
        ASSERT_EQ(r->status, 200) << "warm-up request " << i << ": " << r->body;
        ASSERT_EQ(load_body_problem(r->body, i % 2 == 1), "") << "warm-up request " << i;
    }
    const std::string m_before = fetch_metrics(*router, "");
    const long rss_before_kb = router->rss_kb();

    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo * ai = nullptr;
    ASSERT_EQ(::getaddrinfo(router->host().c_str(), std::to_string(router->port()).c_str(), &hints, &ai), 0);
    sockaddr_storage addr{};
    const socklen_t addr_len = ai->ai_addrlen;
    const int family = ai->ai_family;
    std::memcpy(&addr, ai->ai_addr, ai->ai_addrlen);
    ::freeaddrinfo(ai);

    // Monitor, on its own thread every ~200 ms: /health over a fresh connection (timed), the router's RSS,
    // and its queue and connection gauges.
    std::mutex mu;
    std::condition_variable cv;
    bool stop = false;
    double health_max_s = 0;
    int health_probes = 0;
    std::vector<std::string> health_failures;
    long rss_peak_kb = rss_before_kb;
    double waiting_peak = 0, open_peak = 0;
    std::thread monitor([&] {
        auto next = raw_clock::now();
        for (;;) {
            const auto t = raw_clock::now();
            std::string err;
            const auto h = raw_exchange(router->host(), router->port(), close_request("GET", "/health"), 5, &err);
            const double dt = raw_seconds_since(t);
            const long rss = router->rss_kb();
            const auto m = raw_exchange(router->host(), router->port(), close_request("GET", "/metrics"), 5);
            {
                std::lock_guard<std::mutex> lk(mu);
                ++health_probes;
                health_max_s = std::max(health_max_s, dt);
                if (!h) health_failures.push_back("no response: " + err);
                else if (h->status != 200)
                    health_failures.push_back("status " + std::to_string(h->status) + ": " + h->body.substr(0, 200));
                rss_peak_kb = std::max(rss_peak_kb, rss);
                if (m && m->status == 200) {
                    waiting_peak = std::max(waiting_peak, metric_value(m->body, "baton_router_queue_waiting"));
                    open_peak = std::max(open_peak, metric_value(m->body, "baton_http_connections_open"));
                }
            }
            next += std::chrono::milliseconds(200);
            std::unique_lock<std::mutex> lk(mu);
            if (cv.wait_until(lk, next, [&] { return stop; })) break;
        }
    });
    auto stop_monitor = [&] {
        {
            std::lock_guard<std::mutex> lk(mu);
            stop = true;
        }
        cv.notify_all();
        if (monitor.joinable()) monitor.join();
    };

    // Open every connection at once (non-blocking connects), then drive them all from this thread.
    const auto t0 = raw_clock::now();
    const auto loop_end = raw_deadline(load_budget_s);
    std::vector<load_client> cl(static_cast<size_t>(n_clients));
    int open = 0, open_peak_client = 0, done = 0;
    auto finish = [&](load_client & c, std::string failure) {
        c.failure = std::move(failure);
        c.state = load_client::phase::done;
        if (c.fd >= 0) {
            ::close(c.fd);
            c.fd = -1;
            --open;
        }
        ++done;
    };
    for (int i = 0; i < n_clients; ++i) {
        load_client & c = cl[size_t(i)];
        c.stream = i % 2 == 1;
        c.request = close_request("POST", "/v1/completions", {}, body_of(i));
        c.fd = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (c.fd < 0) {
            finish(c, std::string("socket: ") + std::strerror(errno));
            continue;
        }
        ++open;
        const int one = 1;
        ::setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (::connect(c.fd, reinterpret_cast<const sockaddr *>(&addr), addr_len) == 0)
            c.state = load_client::phase::sending;
        else if (errno != EINPROGRESS) finish(c, std::string("connect: ") + std::strerror(errno));
        open_peak_client = std::max(open_peak_client, open);
    }
    const double open_s = raw_seconds_since(t0);

    // step advances one client after poll reported its socket ready.
    auto step = [&](load_client & c) {
        if (c.state == load_client::phase::connecting) {
            int soerr = 0;
            socklen_t len = sizeof soerr;
            ::getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &soerr, &len);
            if (soerr != 0) return finish(c, std::string("connect: ") + std::strerror(soerr));
            c.state = load_client::phase::sending;
        }
        if (c.state == load_client::phase::sending) {
            while (c.sent < c.request.size()) {
                const ssize_t n = ::send(c.fd, c.request.data() + c.sent, c.request.size() - c.sent, MSG_NOSIGNAL);
                if (n > 0) {
                    c.sent += size_t(n);
                    continue;
                }
                if (n < 0 && errno == EINTR) continue;
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
                return finish(c, std::string("send: ") + std::strerror(errno));
            }
            c.state = load_client::phase::reading;
            return;  // the response comes later
        }
        char tmp[16384];
        for (;;) {
            const ssize_t n = ::recv(c.fd, tmp, sizeof tmp, 0);
            if (n > 0) {
                c.buf.append(tmp, size_t(n));
                continue;
            }
            if (n == 0) {
                c.eof = true;
                break;
            }
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            return finish(c, std::string("recv: ") + std::strerror(errno) + " after " + std::to_string(c.buf.size()) +
                                 " bytes: " + c.buf.substr(0, 200));
        }
        raw_response r;
        size_t used = 0;
        std::string perr;
        const raw_parse p = raw_parse_response(c.buf, false, c.eof, r, used, perr);
        if (p == raw_parse::raw_parse_incomplete) {
            if (c.eof) finish(c, "EOF inside the response: " + c.buf.substr(0, 200));
            return;
        }
        if (p == raw_parse::raw_parse_error) return finish(c, "response: " + perr + ": " + c.buf.substr(0, 200));
        c.status = r.status;
        if (r.status != 200) return finish(c, "HTTP " + std::to_string(r.status) + ": " + r.body.substr(0, 300));
        finish(c, load_body_problem(r.body, c.stream));
    };

    std::vector<pollfd> pfd;
    std::vector<size_t> idx;
    while (done < n_clients && raw_clock::now() < loop_end) {
        pfd.clear();
        idx.clear();
        for (size_t i = 0; i < cl.size(); ++i) {
            const load_client & c = cl[i];
            if (c.state == load_client::phase::done) continue;
            const bool out = c.state == load_client::phase::connecting || c.state == load_client::phase::sending;
            pfd.push_back({c.fd, short(out ? POLLOUT : POLLIN), 0});
            idx.push_back(i);
        }
        const int rc = ::poll(pfd.data(), nfds_t(pfd.size()), std::min(1000, raw_ms_until(loop_end)));
        if (rc < 0 && errno == EINTR) continue;
        if (rc < 0) {
            ADD_FAILURE() << "poll: " << std::strerror(errno);
            break;
        }
        for (size_t k = 0; k < pfd.size(); ++k)
            if (pfd[k].revents != 0) step(cl[idx[k]]);
    }
    const double wall_s = raw_seconds_since(t0);
    for (auto & c : cl)
        if (c.state != load_client::phase::done)
            finish(c, "no complete response within " + std::to_string(int(load_budget_s)) + " s (" +
                          std::to_string(c.buf.size()) + " bytes received, request " +
                          (c.sent == c.request.size() ? "sent" : "not sent") + ")");
    stop_monitor();

    // Tally.
    std::map<int, int> by_status;  // 0: no response
    int ok = 0, ok_stream = 0, bad = 0;
    std::string samples;
    for (size_t i = 0; i < cl.size(); ++i) {
        const load_client & c = cl[i];
        ++by_status[c.status];
        if (c.failure.empty()) {
            ++ok;
            ok_stream += c.stream;
        } else if (bad++ < 8) {
            samples += "\n  client " + std::to_string(i) + (c.stream ? " (stream)" : "") + ": " + c.failure;
        }
    }
    std::string statuses;
    for (const auto & [code, n] : by_status) statuses += " " + std::to_string(code) + ":" + std::to_string(n);

    const std::string m_after = fetch_metrics(*router, "");
    const double busy = metric_sum(m_after, "baton_router_node_outcomes_total", "outcome=\"busy\"") -
                        metric_sum(m_before, "baton_router_node_outcomes_total", "outcome=\"busy\"");
    const double pd_n = metric_value(m_after, "baton_router_mode_total{mode=\"pd\"}") -
                        metric_value(m_before, "baton_router_mode_total{mode=\"pd\"}");
    const double direct_n = metric_value(m_after, "baton_router_mode_total{mode=\"direct\"}") -
                            metric_value(m_before, "baton_router_mode_total{mode=\"direct\"}");
    const double fallbacks = metric_sum(m_after, "baton_router_fallbacks_total", "reason=") -
                             metric_sum(m_before, "baton_router_fallbacks_total", "reason=");
    const double node_rejects = metric_value(fetch_metrics(*prefill, ""), "baton_admission_rejects_total") +
                                metric_value(fetch_metrics(*decode, ""), "baton_admission_rejects_total");

    std::printf(
        "[ load     ] %d clients (%d streamed) opened in %.3f s, peak %d open at the client, %.0f at the router\n",
        n_clients, n_clients / 2, open_s, open_peak_client, open_peak);
    std::printf("[ load     ] wall %.2f s, %.1f requests/s; statuses%s; ok %d (%d streamed); pd %.0f, direct %.0f, "
                "fallbacks %.0f\n",
                wall_s, n_clients / wall_s, statuses.c_str(), ok, ok_stream, pd_n, direct_n, fallbacks);
    std::printf("[ load     ] router queue: peak %.0f waiting; node 503s seen by the router %.0f; node admission "
                "rejects %.0f\n",
                waiting_peak, busy, node_rejects);
    std::printf(
        "[ load     ] router RSS %ld KiB before, peak %ld KiB (%.1f KiB per open connection above the baseline)\n",
        rss_before_kb, rss_peak_kb, double(rss_peak_kb - rss_before_kb) / std::max(1, open_peak_client));
    std::printf("[ load     ] /health: %d probes, max %.1f ms\n", health_probes, health_max_s * 1000);
    RecordProperty("wall_ms", int(wall_s * 1000));
    RecordProperty("router_rss_peak_kb", int(rss_peak_kb));
    RecordProperty("health_max_us", int(health_max_s * 1e6));
    RecordProperty("queue_waiting_peak", int(waiting_peak));

    const std::string diag =
        "\nrouter metrics:\n" +
        metric_lines(m_after, {"baton_router_queue_waiting", "baton_router_node_outcomes_total",
                               "baton_router_fallbacks_total", "baton_http_requests_total", "baton_http_connections"}) +
        "router stderr (tail):\n" + [&] {
            const std::string e = router->stderr_text();
            return e.substr(e.size() > 2000 ? e.size() - 2000 : 0);
        }();
    EXPECT_EQ(open_peak_client, n_clients) << "not every connection could be opened at once";
    EXPECT_EQ(ok, n_clients) << "statuses" << statuses << "; first failures:" << samples << diag;
    EXPECT_GT(waiting_peak, 0) << "the router never queued a request: was it holding them at all?" << diag;
    EXPECT_EQ(busy, 0) << "the router sent nodes more than they hold (--node-queue)" << diag;
    EXPECT_EQ(node_rejects, 0) << "a node refused a request the router admitted";
    EXPECT_GE(pd_n, n_clients * 3 / 4) << "most requests go prefill -> decode";
    EXPECT_GE(direct_n, n_clients / 10) << "some go straight to the decode node";
    if (!k_sanitized) {
        EXPECT_LT(rss_peak_kb, rss_limit_kb)
            << "router RSS grew to " << rss_peak_kb << " KiB with " << n_clients << " connections";
    }
    EXPECT_GE(health_probes, 3);
    if (!k_sanitized) {
        EXPECT_LT(health_max_s, health_limit_s) << "/health took " << health_max_s * 1000 << " ms under load";
    }
    for (size_t i = 0; i < health_failures.size() && i < 5; ++i)
        ADD_FAILURE() << "/health under load: " << health_failures[i];
}

// ---- 9. issue 22: bodies, body timeout, RFC 9112 heads, CSRF and CORS ----

// EdgeRegression: one keyless node (default limits) and a router in front of it, shared by the cases
// that do not need limits of their own; the others start their own node.
class EdgeRegression : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        node_ = start_or_report(serve_args("llama", {"-np", "2"})).release();
        if (node_) router_ = start_or_report(route_args(*node_)).release();
    }
    static void TearDownTestSuite() {
        delete router_;
        delete node_;
        router_ = node_ = nullptr;
    }
    static node_process * node_;
    static node_process * router_;
};
node_process * EdgeRegression::node_ = nullptr;
node_process * EdgeRegression::router_ = nullptr;

constexpr double k_mib = 1024.0 * 1024.0;

// committed_body_bytes: the edge's gauge of bytes committed to incoming bodies (-1 if absent).
double committed_body_bytes(const node_process & srv) {
    const auto r = raw_exchange(srv.host(), srv.port(), close_request("GET", "/metrics"), 10);
    return r && r->status == 200 ? metric_value(r->body, "baton_http_body_bytes_committed") : -1;
}

// wait_committed polls the gauge until pred holds (true) or timeout_s passes (false, *last = last value).
template <typename P>
bool wait_committed(const node_process & srv, P pred, double timeout_s, double * last) {
    for (const auto d = raw_deadline(timeout_s); raw_clock::now() < d;) {
        *last = committed_body_bytes(srv);
        if (pred(*last)) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // poll interval
    }
    return false;
}

std::string body_head(const std::string & method, const std::string & path, uint64_t length,
                      std::vector<std::string> extra = {}) {
    std::string h =
        method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " + std::to_string(length) + "\r\n";
    for (const auto & e : extra) h += e + "\r\n";
    return h + "\r\n";
}

// expect_announced_bodies_not_allocated: n_heads connections announce announce_bytes each on path and send
// 64 KiB of it, then stall. Each commits its first piece (1 MiB) and no more; the server's RSS grows by
// less than max_growth_mib (announcing alone would have cost n_heads * announce_bytes), /health answers
// promptly, and closing the connections gives every committed byte back.
void expect_announced_bodies_not_allocated(const node_process & srv, const std::string & path, int n_heads,
                                           uint64_t announce_bytes, double max_growth_mib) {
    double last = 0;
    ASSERT_TRUE(wait_committed(
        srv, [](double v) { return v == 0; }, 20, &last))
        << "committed before the test: " << last;
    const long rss0 = srv.rss_kb();
    std::vector<raw_conn> conns(static_cast<size_t>(n_heads));
    const std::string part(64 * 1024, 'x');
    for (auto & c : conns) {
        ASSERT_TRUE(c.connect(srv.host(), srv.port(), 10)) << c.error();
        ASSERT_TRUE(
            c.send_all(body_head("POST", path, announce_bytes, {"Content-Type: application/octet-stream"}) + part, 10))
            << c.error();
    }
    const double want = double(n_heads) * k_mib;
    ASSERT_TRUE(wait_committed(
        srv, [&](double v) { return v >= want; }, 30, &last))
        << "committed " << last << " bytes, want " << want << " (one piece per connection)";
    EXPECT_EQ(last, want) << "a connection committed more than its first piece";
    const long rss1 = srv.rss_kb();
    const double growth_mib = double(rss1 - rss0) / 1024.0;
    ::testing::Test::RecordProperty("rss_growth_kb", int(rss1 - rss0));
    if (!k_sanitized) {
        EXPECT_LT(growth_mib, max_growth_mib) << n_heads << " heads announcing " << announce_bytes
                                              << " bytes each: RSS " << rss0 << " -> " << rss1 << " KiB";
    }
    EXPECT_EQ(probe_once(srv, "GET /health while bodies wait", close_request("GET", "/health"), 200, 2.0), "");
    for (auto & c : conns) c.close();
    EXPECT_TRUE(wait_committed(
        srv, [](double v) { return v == 0; }, 30, &last))
        << "still committed after every client left: " << last;
}

// Regression (issue 22 finding 3): read_body did body.resize(Content-Length) before a byte arrived: 20
// heads announcing 1 GB each took a keyless node from 86 MB to 4 GB, 50 x 8 MB on JSON routes cost node
// and router ~370 MB.
TEST_F(EdgeRegression, AnnouncedBodySizeIsNotAllocatedUpFront) {
    ASSERT_TRUE(node_ && router_);
    {
        SCOPED_TRACE("node, POST /v1/decode: 16 x 128 MiB announced");
        expect_announced_bodies_not_allocated(*node_, "/v1/decode", 16, uint64_t(128) << 20, 16 + 64);
    }
    {
        SCOPED_TRACE("router, POST /v1/completions: 48 x 8 MiB announced");
        expect_announced_bodies_not_allocated(*router_, "/v1/completions", 48, uint64_t(8) << 20, 48 + 64);
    }
}

// The global cap (--max-body-memory): a body whose growth would pass it is refused with 503 +
// Retry-After, counted, and the memory is not committed; requests without a body go on; when the
// holder leaves, the budget is whole again. A body announced over the cap gets 413 from its head.
TEST_F(EdgeRegression, GlobalBodyMemoryCapRefusesInsteadOfGrowing) {
    auto node = start_or_report(serve_args("llama", {"--max-body-memory", "8"}));
    ASSERT_TRUE(node);
    const uint64_t cap = uint64_t(8) << 20;
    // A holds the whole budget: 8 MiB announced, 7 MiB + 100 bytes sent (its 8th piece is being read).
    raw_conn a;
    ASSERT_TRUE(a.connect(node->host(), node->port(), 10)) << a.error();
    ASSERT_TRUE(a.send_all(body_head("POST", "/v1/decode", cap, {"Content-Type: application/octet-stream"}) +
                               std::string((7u << 20) + 100, 'x'),
                           30))
        << a.error();
    double last = 0;
    ASSERT_TRUE(wait_committed(*node, [&](double v) { return v >= double(cap); }, 30, &last)) << "committed " << last;
    EXPECT_EQ(last, double(cap));

    const auto refused =
        raw_exchange(node->host(), node->port(), close_request("POST", "/v1/completions", {}, k_small_completion), 30);
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->status, 503) << refused->body;
    expect_error_shape(*refused, 503, "a body while the budget is committed");
    EXPECT_NE(refused->body.find("--max-body-memory"), std::string::npos) << refused->body;
    EXPECT_EQ(refused->header("Retry-After"), "1");
    EXPECT_EQ(committed_body_bytes(*node), double(cap)) << "the refused body committed nothing";
    EXPECT_EQ(probe_once(*node, "GET /health (no body)", close_request("GET", "/health"), 200, 2.0), "");
    const auto m = raw_exchange(node->host(), node->port(), close_request("GET", "/metrics"), 10);
    ASSERT_TRUE(m);
    EXPECT_GE(metric_value(m->body, "baton_http_body_memory_refusals_total"), 1) << m->body.substr(0, 2000);

    // Announced over the cap: 413 from the head, whoever holds the budget.
    const auto over =
        raw_exchange(node->host(), node->port(), body_head("POST", "/v1/decode", cap + 1, {"Connection: close"}), 30);
    ASSERT_TRUE(over);
    EXPECT_EQ(over->status, 413) << over->body;
    EXPECT_NE(over->body.find("--max-body-memory"), std::string::npos) << over->body;

    a.close();
    ASSERT_TRUE(wait_committed(
        *node, [](double v) { return v == 0; }, 30, &last))
        << "A's share not released: " << last;
    const auto ok =
        raw_exchange(node->host(), node->port(), close_request("POST", "/v1/completions", {}, k_small_completion), 60);
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->status, 200) << ok->body;
}

// expect_413_without_continue: a head with Expect: 100-continue announcing more than path's cap gets 413
// as its first response (no `100 Continue` before it) and the connection closes; one within the cap gets
// `100 Continue`, then its answer.
void expect_413_without_continue(const node_process & srv, const std::string & path, uint64_t over_cap) {
    raw_conn c;
    ASSERT_TRUE(c.connect(srv.host(), srv.port(), 10)) << c.error();
    ASSERT_TRUE(
        c.send_all(body_head("POST", path, over_cap, {"Content-Type: application/json", "Expect: 100-continue"}), 10))
        << c.error();
    const auto r = c.read_response(30);
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 413) << "the first response to an oversized Expect: 100-continue head: " << r->status << " "
                              << r->body;
    if (r->status == 413) expect_error_shape(*r, 413, path);
    EXPECT_TRUE(c.wait_closed(10)) << "the connection stays open after a refused body";

    raw_conn ok;
    ASSERT_TRUE(ok.connect(srv.host(), srv.port(), 10)) << ok.error();
    ASSERT_TRUE(ok.send_all(body_head("POST", "/v1/completions", k_small_completion.size(),
                                      {"Content-Type: application/json", "Expect: 100-continue", "Connection: close"}),
                            10))
        << ok.error();
    const auto cont = ok.read_response(30);
    ASSERT_TRUE(cont) << ok.error();
    EXPECT_EQ(cont->status, 100);
    ASSERT_TRUE(ok.send_all(k_small_completion, 10)) << ok.error();
    const auto done = ok.read_response(60);
    ASSERT_TRUE(done) << ok.error();
    EXPECT_EQ(done->status, 200) << done->body;
}

// Regression (issue 22 finding 5): a body over the cap got `100 Continue` before its 413.
TEST_F(EdgeRegression, OversizedBodyGets413WithoutContinue) {
    ASSERT_TRUE(node_ && router_);
    {
        SCOPED_TRACE("node, JSON route over --max-json-mb");
        expect_413_without_continue(*node_, "/v1/completions", (uint64_t(8) << 20) + 1);
    }
    {
        SCOPED_TRACE("node, blob route over --max-blob-mb");
        expect_413_without_continue(*node_, "/v1/decode", (uint64_t(1) << 30) + 1);
    }
    {
        SCOPED_TRACE("router, JSON route over its body cap");
        expect_413_without_continue(*router_, "/v1/chat/completions", (uint64_t(8) << 20) + 1);
    }
}

// Regression (issue 22 finding 5): --body-timeout closed the connection without the documented 408 (the
// stream's own expiry closed the socket, so nothing could be written).
TEST_F(EdgeRegression, StalledBodyGets408ThenClose) {
    auto node = start_or_report(serve_args("llama", {"--body-timeout", "1"}));
    ASSERT_TRUE(node);
    struct stall {
        const char * what;
        std::string bytes;
    };
    const std::vector<stall> cases = {
        {"Content-Length body, 10 of 100 bytes sent",
         body_head("POST", "/v1/completions", 100, {"Content-Type: application/json"}) + "{\"prompt\":"},
        {"chunked body, one chunk sent", "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                                         "application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"pro\r\n"},
        {"blob route, head only", body_head("POST", "/v1/decode", 4096, {"Content-Type: application/octet-stream"})},
    };
    for (const stall & c : cases) {
        SCOPED_TRACE(c.what);
        raw_conn conn;
        ASSERT_TRUE(conn.connect(node->host(), node->port(), 10)) << conn.error();
        ASSERT_TRUE(conn.send_all(c.bytes, 10)) << conn.error();
        const auto r = conn.read_response(30);
        ASSERT_TRUE(r) << "no answer to a stalled body: " << conn.error();
        EXPECT_EQ(r->status, 408) << r->body;
        if (r->status == 408) expect_error_shape(*r, 408, c.what);
        EXPECT_NE(r->body.find("--body-timeout"), std::string::npos) << r->body;
        EXPECT_TRUE(conn.wait_closed(10)) << "the connection stays open after 408";
    }
    EXPECT_EQ(probe_once(*node, "POST /v1/completions after the stalls",
                         close_request("POST", "/v1/completions", {}, k_small_completion), 200, 30),
              "");
}

// expect_rfc9112_heads: obs-fold and a missing or repeated Host on HTTP/1.1 get 400 (JSON error) and a
// close; HTTP/1.0 without Host is served.
void expect_rfc9112_heads(const node_process & srv) {
    struct row {
        const char * what;
        std::string bytes;
        int want;
        const char * says;  // in the error message
    };
    const std::vector<row> rows = {
        {"obs-fold", "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: one\r\n two\r\n\r\n", 400, "obs-fold"},
        {"obs-fold with HTAB", "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: one\r\n\ttwo\r\n\r\n", 400, "obs-fold"},
        {"missing Host", "GET /health HTTP/1.1\r\n\r\n", 400, "Host"},
        {"two Hosts", "GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "Host"},
        {"missing Host with a body", "POST /v1/completions HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}", 400, "Host"},
        {"HTTP/1.0 without Host", "GET /health HTTP/1.0\r\n\r\n", 200, ""},
    };
    for (const row & c : rows) {
        SCOPED_TRACE(c.what);
        raw_conn conn;
        ASSERT_TRUE(conn.connect(srv.host(), srv.port(), 10)) << conn.error();
        ASSERT_TRUE(conn.send_all(c.bytes, 10)) << conn.error();
        const auto r = conn.read_response(30);
        ASSERT_TRUE(r) << conn.error();
        EXPECT_EQ(r->status, c.want) << r->body;
        if (c.want == 400) {
            expect_error_shape(*r, 400, c.what);
            EXPECT_NE(r->body.find(c.says), std::string::npos) << r->body;
            EXPECT_TRUE(conn.wait_closed(10)) << "a refused head leaves the connection open";
        }
    }
}

// Regression (issue 22 finding 5): obs-fold and a missing Host were accepted (RFC 9112 says 400).
TEST_F(EdgeRegression, ObsFoldAndMissingHostAre400) {
    ASSERT_TRUE(node_ && router_);
    {
        SCOPED_TRACE("node");
        expect_rfc9112_heads(*node_);
    }
    {
        SCOPED_TRACE("router");
        expect_rfc9112_heads(*router_);
    }
}

// Regression (issue 22 finding 5): a keyless node echoed any Origin with credentials, and a simple
// cross-site POST /admin/drain (no preflight) shut it down. Every state-changing route now refuses a
// request with an Origin (any value) or a cross-site Sec-Fetch-Site with 403 before reading its body,
// and has no CORS; the node keeps serving; the same drain without Origin (the operator's curl) works.
TEST_F(EdgeRegression, CrossOriginDrainIs403AndTheNodeKeepsServing) {
    auto node = start_or_report(serve_args("llama"));
    ASSERT_TRUE(node);
    struct row {
        std::string method, path, body, ctype;
    };
    const std::vector<row> closed = {
        {"POST", "/admin/drain", "", "text/plain"},
        {"POST", "/admin/drain", "x=1", "application/x-www-form-urlencoded"},
        {"POST", "/slots/0?action=erase", "{}", "text/plain"},
        {"GET", "/v1/slots/0/state", "", ""},
        {"PUT", "/v1/slots/0/state", "not a blob", "application/octet-stream"},
        {"DELETE", "/v1/slots/0/state", "", ""},
        {"POST", "/v1/decode", "not a blob", "text/plain"},
        {"POST", "/v1/prefill", k_small_completion, "text/plain"},
    };
    const std::vector<std::string> cross = {"Origin: http://evil.example", "Origin: null", "Origin: http://127.0.0.1:1",
                                            "Sec-Fetch-Site: cross-site", "Sec-Fetch-Site: same-site"};
    for (const row & rc : closed) {
        for (const std::string & h : cross) {
            const std::string what = rc.method + " " + rc.path + " with " + h;
            std::vector<std::string> hs = {h, "Connection: close"};
            if (!rc.ctype.empty()) hs.push_back("Content-Type: " + rc.ctype);
            const auto r = raw_exchange(node->host(), node->port(), raw_request(rc.method, rc.path, hs, rc.body), 30);
            ASSERT_TRUE(r) << what;
            EXPECT_EQ(r->status, 403) << what << ": " << r->body;
            if (r->status == 403) expect_error_shape(*r, 403, what);
            EXPECT_NE(r->body.find("same-origin-only"), std::string::npos) << what << ": " << r->body;
            EXPECT_FALSE(r->has_header("Access-Control-Allow-Origin")) << what;
            EXPECT_FALSE(r->has_header("Access-Control-Allow-Credentials")) << what;
        }
        // A browser's preflight for the route gets no CORS header at all, so the browser never sends it.
        const auto pre = raw_exchange(node->host(), node->port(),
                                      raw_request("OPTIONS", rc.path,
                                                  {"Origin: http://evil.example",
                                                   "Access-Control-Request-Method: " + rc.method, "Connection: close"}),
                                      30);
        ASSERT_TRUE(pre);
        EXPECT_EQ(pre->status, 200);
        for (const char * h : {"Access-Control-Allow-Origin", "Access-Control-Allow-Methods",
                               "Access-Control-Allow-Headers", "Access-Control-Allow-Credentials"})
            EXPECT_FALSE(pre->has_header(h)) << "preflight of " << rc.method << " " << rc.path << " carries " << h;
    }
    // Refused before the body is read: an oversized blob with Expect gets 403, never `100 Continue`.
    {
        raw_conn c;
        ASSERT_TRUE(c.connect(node->host(), node->port(), 10)) << c.error();
        ASSERT_TRUE(c.send_all(body_head("POST", "/v1/decode", uint64_t(64) << 20,
                                         {"Origin: http://evil.example", "Expect: 100-continue"}),
                               10));
        const auto r = c.read_response(30);
        ASSERT_TRUE(r) << c.error();
        EXPECT_EQ(r->status, 403) << r->body;
    }
    // The node still serves, and OpenAI routes keep CORS for browser UIs.
    const auto h = raw_exchange(node->host(), node->port(), close_request("GET", "/health"), 10);
    ASSERT_TRUE(h);
    EXPECT_EQ(h->status, 200) << "the node drained: " << h->body;
    const auto gen =
        raw_exchange(node->host(), node->port(),
                     close_request("POST", "/v1/completions", {"Origin: http://ui.example"}, k_small_completion), 60);
    ASSERT_TRUE(gen);
    EXPECT_EQ(gen->status, 200) << gen->body;
    EXPECT_EQ(gen->header("Access-Control-Allow-Origin"), "*");
    // The positive control: without Origin (curl, the router) the drain is accepted and the node exits.
    const auto drain = raw_exchange(node->host(), node->port(), close_request("POST", "/admin/drain"), 30);
    ASSERT_TRUE(drain);
    EXPECT_EQ(drain->status / 100, 2) << drain->body;
    EXPECT_EQ(node->wait_exit(60), 0) << "a drain without Origin did not end the node";
}

// expect_null_origin_no_cors: `Origin: null` gets no CORS header (request or preflight); another origin
// under the default `*` gets a literal `*` and never Access-Control-Allow-Credentials.
void expect_null_origin_no_cors(const node_process & srv) {
    const auto null_get =
        raw_exchange(srv.host(), srv.port(), close_request("GET", "/v1/models", {"Origin: null"}), 30);
    ASSERT_TRUE(null_get);
    EXPECT_EQ(null_get->status, 200) << null_get->body;
    EXPECT_FALSE(null_get->has_header("Access-Control-Allow-Origin"))
        << null_get->header("Access-Control-Allow-Origin");
    EXPECT_FALSE(null_get->has_header("Access-Control-Allow-Credentials"));
    const auto null_pre =
        raw_exchange(srv.host(), srv.port(),
                     raw_request("OPTIONS", "/v1/chat/completions",
                                 {"Origin: null", "Access-Control-Request-Method: POST", "Connection: close"}),
                     30);
    ASSERT_TRUE(null_pre);
    EXPECT_FALSE(null_pre->has_header("Access-Control-Allow-Origin"));
    EXPECT_FALSE(null_pre->has_header("Access-Control-Allow-Methods"));
    const auto other =
        raw_exchange(srv.host(), srv.port(), close_request("GET", "/v1/models", {"Origin: http://ui.example"}), 30);
    ASSERT_TRUE(other);
    EXPECT_EQ(other->header("Access-Control-Allow-Origin"), "*")
        << "the default `*` answers a literal *, not the origin";
    EXPECT_FALSE(other->has_header("Access-Control-Allow-Credentials")) << "never credentials with *";
}

// Regression (issue 22 finding 5): a keyless node echoed any Origin, even `null`, with credentials.
TEST_F(EdgeRegression, NullOriginGetsNoCorsHeaders) {
    ASSERT_TRUE(node_ && router_);
    {
        SCOPED_TRACE("node");
        expect_null_origin_no_cors(*node_);
    }
    {
        SCOPED_TRACE("router");
        expect_null_origin_no_cors(*router_);
    }
    // Listed origins keep llama-server's reflected origin with credentials.
    auto listed = start_or_report(serve_args("llama", {"--cors-origins", "http://a.example"}));
    ASSERT_TRUE(listed);
    const auto a = raw_exchange(listed->host(), listed->port(),
                                close_request("GET", "/v1/models", {"Origin: http://a.example"}), 30);
    ASSERT_TRUE(a);
    EXPECT_EQ(a->header("Access-Control-Allow-Origin"), "http://a.example");
    EXPECT_EQ(a->header("Access-Control-Allow-Credentials"), "true");
}

// Regression (issue 22 finding 5): nothing told an operator that a node without --api-key is open.
TEST_F(EdgeRegression, KeylessNodeAndRouterSaySoAtStartup) {
    ASSERT_TRUE(node_ && router_);
    EXPECT_NE(
        node_->stderr_text().find(" warn serve: no --api-key: every route is open to anyone who can reach 127.0.0.1:" +
                                  std::to_string(node_->port())),
        std::string::npos)
        << node_->stderr_text();
    EXPECT_NE(router_->stderr_text().find(
                  " warn route: no --api-key: every route is open to anyone who can reach 127.0.0.1:" +
                  std::to_string(router_->port())),
              std::string::npos)
        << router_->stderr_text();
    auto keyed = start_or_report(serve_args("llama", {"--api-key", "k"}));
    ASSERT_TRUE(keyed);
    EXPECT_EQ(keyed->stderr_text().find("no --api-key"), std::string::npos) << keyed->stderr_text();
}

}  // namespace
}  // namespace baton::test
