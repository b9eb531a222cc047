// http_unit_test.cpp — the HTTP edge's pure pieces: URL parsing, key comparison, label escaping and the
// request counter's bounded labels, the parser's head step (obs-fold, Host, the announced body against the
// caps), the body budget, the CORS and CSRF rules, and async_notify's no-lost-wakeup rule.
#include <gtest/gtest.h>

#include <thread>

#include "baton/http/async_notify.h"
#include "baton/http/http_body_budget.h"
#include "baton/http/http_client.h"
#include "baton/http/metrics_text.h"
#include "http_request_head.h"

namespace baton {
namespace {

TEST(HttpUrl, ParsesHostAndPortAndRefusesEverythingElse) {
    auto u = http_url_parse("http://127.0.0.1:8081/");
    ASSERT_TRUE(u.ok());
    EXPECT_EQ(u->host, "127.0.0.1");
    EXPECT_EQ(u->port, 8081);
    EXPECT_EQ(u->text, "http://127.0.0.1:8081");
    for (const char * bad : {"127.0.0.1:80", "https://h:1", "http://h", "http://h:0", "http://h:65536", "http://h:8x", "http://:80",
                             "http://h:80/path"})
        EXPECT_EQ(http_url_parse(bad).status().code(), status_code::invalid_argument) << bad;
}

TEST(HttpKey, EqualOnlyWhenIdentical) {
    EXPECT_TRUE(http_key_equal("secret", "secret"));
    EXPECT_FALSE(http_key_equal("secret", "secreT"));
    EXPECT_FALSE(http_key_equal("secret", "secre"));    // a prefix
    EXPECT_FALSE(http_key_equal("secret", "secrets"));  // one byte more
    EXPECT_FALSE(http_key_equal("", "x"));
}

TEST(MetricsText, LabelsAreEscaped) {
    EXPECT_EQ(metric_label_escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

// Regression (router_metrics formatted the raw path into route="%s"): only templates and known methods
// become labels, so no client input can add series or lines.
TEST(MetricsText, RequestCounterLabelsAreBounded) {
    http_request_counter c;
    c.count("", "GET", 404);
    c.count("", "X\"}\nevil 1", 404);
    c.count("/v1/slots/{id}/state", "PUT", 200);
    std::string out;
    c.render(out);
    EXPECT_EQ(out.find("evil"), std::string::npos) << out;
    EXPECT_NE(out.find("route=\"unmatched\",method=\"GET\",status=\"404\"} 1"), std::string::npos) << out;
    EXPECT_NE(out.find("route=\"unmatched\",method=\"other\",status=\"404\"} 1"), std::string::npos) << out;
    EXPECT_NE(out.find("route=\"/v1/slots/{id}/state\",method=\"PUT\""), std::string::npos) << out;
}

// parse_head feeds bytes to a fresh parser through http_request_head_put, `piece` bytes more at a time
// (0: all at once), offering the unconsumed rest each time as the session does with its buffer.
http_head_info parse_head(const std::string & bytes, http_request & out, boost::system::error_code & ec,
                          http_limits lim = {}, size_t piece = 0) {
    http_request_parser p;
    http_request_parser_configure(p, lim);
    http_head_scan scan;
    size_t seen = 0, used = 0;
    ec = {};
    while (!p.is_header_done() && seen < bytes.size()) {
        seen = piece == 0 ? bytes.size() : std::min(bytes.size(), seen + piece);
        used += http_request_head_put(p, net::buffer(bytes.data() + used, seen - used), scan, ec);
        if (ec == beast::http::error::need_more) ec = {};
        if (ec) return {};
    }
    if (!p.is_header_done()) return {};
    return http_request_head_take(p, lim, out);
}

TEST(HttpRequestHead, SplitsTargetAndCountsHeaders) {
    http_request r;
    boost::system::error_code ec;
    const auto info = parse_head("POST /v1/x?a=1&b HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc", r, ec);
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_EQ(r.method, "POST");
    EXPECT_EQ(r.path, "/v1/x");
    EXPECT_EQ(r.query, "a=1&b");
    EXPECT_EQ(r.header("content-length"), "3");
    EXPECT_TRUE(info.body_pending);
    EXPECT_TRUE(info.keep_alive);
    EXPECT_TRUE(info.error.ok());

    http_limits few;
    few.max_headers = 8;
    std::string many = "GET / HTTP/1.1\r\n";
    for (int i = 0; i < 9; ++i) many += "X-" + std::to_string(i) + ": v\r\n";
    http_request r2;
    const auto over = parse_head(many + "\r\n", r2, ec, few);
    EXPECT_EQ(over.error.code(), status_code::too_large);
}

TEST(HttpRequestHead, OversizedHeadIs431MalformedIs400) {
    http_limits lim;
    lim.max_header_bytes = 1024;
    http_request r;
    boost::system::error_code ec;
    parse_head("GET / HTTP/1.1\r\nX-Pad: " + std::string(2000, 'a') + "\r\n\r\n", r, ec, lim);
    ASSERT_TRUE(ec);
    EXPECT_EQ(http_parse_error_response(ec, lim).status, 431);
    parse_head("GARBAGE\r\n\r\n", r, ec, lim);
    ASSERT_TRUE(ec);
    EXPECT_EQ(http_parse_error_response(ec, lim).status, 400);
}

// Regression (issue 22): obs-fold was accepted (Beast joins a folded line to the previous field); RFC 9112
// section 5.2 lets a server refuse it, and the edge does, with 400, however the bytes arrive.
TEST(HttpRequestHead, ObsFoldIsRefusedWith400) {
    for (const std::string folded : {"GET / HTTP/1.1\r\nHost: h\r\nX-A: one\r\n two\r\n\r\n",
                                     "GET / HTTP/1.1\r\nHost: h\r\nX-A: one\r\n\ttwo\r\n\r\n",
                                     "GET / HTTP/1.1\r\n Host: h\r\n\r\n",  // whitespace before the first field
                                     "GET / HTTP/1.1\r\nX-A:\r\n two\r\nHost: h\r\n\r\n"}) {
        for (size_t piece : {size_t(0), size_t(1), size_t(3), size_t(7)}) {
            http_request r;
            boost::system::error_code ec;
            parse_head(folded, r, ec, {}, piece);
            EXPECT_EQ(ec, http_error_obs_fold()) << "piece " << piece << ": " << folded;
            const http_response resp = http_parse_error_response(ec, {});
            EXPECT_EQ(resp.status, 400);
            EXPECT_NE(resp.body.find("obs-fold"), std::string::npos) << resp.body;
        }
    }
    // Spaces inside values, and a body that starts with a space after the head, are not folds.
    for (size_t piece : {size_t(0), size_t(1), size_t(5)}) {
        http_request r;
        boost::system::error_code ec;
        const auto info =
            parse_head("POST / HTTP/1.1\r\nHost: h\r\nX-A: a b\tc\r\nContent-Length: 3\r\n\r\n  x", r, ec, {}, piece);
        EXPECT_FALSE(ec) << "piece " << piece << ": " << ec.message();
        EXPECT_TRUE(info.error.ok()) << info.error.message();
        EXPECT_EQ(r.header("X-A"), "a b\tc");
    }
}

// Regression (issue 22): a missing Host was accepted. RFC 9112 section 3.2: an HTTP/1.1 request without
// Host, and any request with two, get 400; HTTP/1.0 without Host stays accepted.
TEST(HttpRequestHead, MissingHostOnHttp11Is400Http10Accepted) {
    struct row {
        const char * head;
        int want;  // 0: accepted
    };
    for (const row & c : {row{"GET / HTTP/1.1\r\n\r\n", 400}, row{"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},
                          row{"GET / HTTP/1.0\r\nHost: a\r\nhost: a\r\n\r\n", 400}, row{"GET / HTTP/1.0\r\n\r\n", 0},
                          row{"GET / HTTP/1.1\r\nhOsT: a\r\n\r\n", 0}, row{"GET / HTTP/1.1\r\nHost:\r\n\r\n", 0}}) {
        http_request r;
        boost::system::error_code ec;
        const auto info = parse_head(c.head, r, ec);
        ASSERT_FALSE(ec) << c.head << ": " << ec.message();
        EXPECT_EQ(info.error_status, c.want) << c.head << ": " << info.error.message();
        EXPECT_EQ(info.error.ok(), c.want == 0) << c.head;
        if (c.want) {
            EXPECT_NE(info.error.message().find("Host"), std::string::npos) << info.error.message();
        }
    }
}

// http_request_body_admit is what lets the edge answer 413 before `100 Continue` (issue 22: the
// continue went out first): the announced length alone decides, against the route and the body budget.
TEST(HttpRequestHead, AnnouncedBodyOverTheCapsIsRefusedFromTheHead) {
    http_limits lim;
    lim.max_body_memory = 4 << 20;
    auto admit = [&](const std::string & head, uint64_t cap) {
        http_request r;
        boost::system::error_code ec;
        http_request_parser p;
        http_request_parser_configure(p, lim);
        http_head_scan scan;
        http_request_head_put(p, net::buffer(head), scan, ec);
        EXPECT_TRUE(p.is_header_done()) << head << ": " << ec.message();
        return http_request_body_admit(p, cap, lim, "/x");
    };
    const std::string h = "POST /x HTTP/1.1\r\nHost: h\r\n";
    EXPECT_TRUE(admit(h + "Content-Length: 100\r\n\r\n", 100).ok());
    const Status over = admit(h + "Content-Length: 101\r\n\r\n", 100);
    EXPECT_EQ(over.code(), status_code::too_large);
    EXPECT_NE(over.message().find("101 bytes exceed the limit of 100 bytes for /x"), std::string::npos)
        << over.message();
    const Status budget = admit(h + "Content-Length: " + std::to_string((4 << 20) + 1) + "\r\n\r\n", uint64_t(1) << 30);
    EXPECT_EQ(budget.code(), status_code::too_large);
    EXPECT_NE(budget.message().find("--max-body-memory"), std::string::npos) << budget.message();
    EXPECT_EQ(admit(h + "Transfer-Encoding: chunked\r\n\r\n", 0).code(), status_code::too_large);
    EXPECT_TRUE(admit(h + "Transfer-Encoding: chunked\r\n\r\n", 10).ok()) << "chunked: checked while it is read";
    EXPECT_TRUE(admit(h + "Content-Length: 0\r\n\r\n", 0).ok());
    EXPECT_TRUE(admit("GET /x HTTP/1.1\r\nHost: h\r\n\r\n", 0).ok());
}

// The body budget (--max-body-memory): commits past the cap are refused and counted; a hold gives back
// what it committed when it ends, so refused and finished requests leave nothing behind.
TEST(HttpBodyBudget, RefusesPastTheCapAndHoldsReleaseOnDestruction) {
    http_body_budget b(100);
    {
        http_body_hold a(b);
        EXPECT_TRUE(a.grow(60));
        http_body_hold c(b);
        EXPECT_FALSE(c.grow(41));
        EXPECT_EQ(c.bytes(), 0u);
        EXPECT_TRUE(c.grow(40));
        EXPECT_EQ(b.committed(), 100u);
        EXPECT_FALSE(a.grow(1));
        EXPECT_FALSE(c.grow(UINT64_MAX)) << "no overflow past the cap";
        EXPECT_EQ(b.refusals(), 3u);
        http_body_hold moved = std::move(a);
        EXPECT_EQ(moved.bytes(), 60u);
        EXPECT_EQ(a.bytes(), 0u);
        moved = http_body_hold(b);  // assigning releases what it held
        EXPECT_EQ(b.committed(), 40u);
    }
    EXPECT_EQ(b.committed(), 0u);
    http_body_hold unbound;
    EXPECT_TRUE(unbound.grow(1000));
}

// Regression (issue 22): a keyless node echoed any Origin, `null` included, with credentials allowed.
TEST(HttpCors, NullOriginIsNeverAllowed) {
    http_cors c;  // the default: *
    EXPECT_EQ(http_cors_allow(c, "null"), "");
    EXPECT_EQ(http_cors_allow(c, "NULL"), "");
    c.origins = {"localhost", "*"};
    EXPECT_EQ(http_cors_allow(c, "null"), "");
    EXPECT_EQ(http_cors_parse_origins("http://a.example, null").status().code(), status_code::invalid_argument);
    EXPECT_NE(http_cors_parse_origins("null").status().message().find("null"), std::string::npos);
    EXPECT_EQ(http_cors_allow(c, ""), "") << "no Origin, no CORS";
}

TEST(HttpCors, StarAnswersAStarAndNeverCredentials) {
    http_cors c;
    ASSERT_TRUE(c.credentials);
    EXPECT_EQ(http_cors_allow(c, "http://ui.example"), "*");
    EXPECT_FALSE(http_cors_credentials(c, "*"));
    EXPECT_FALSE(http_cors_credentials(c, ""));
}

TEST(HttpCors, ListedAndLocalhostOriginsAreReflectedWithCredentials) {
    http_cors c;
    auto o = http_cors_parse_origins(" http://a.example ,localhost,,");
    ASSERT_TRUE(o.ok()) << o.status().message();
    c.origins = o.value();
    EXPECT_EQ(c.origins, (std::vector<std::string>{"http://a.example", "localhost"}));
    EXPECT_EQ(http_cors_allow(c, "http://a.example"), "http://a.example");
    EXPECT_EQ(http_cors_allow(c, "http://localhost:5173"), "http://localhost:5173");
    EXPECT_EQ(http_cors_allow(c, "https://[::1]"), "https://[::1]");
    EXPECT_EQ(http_cors_allow(c, "http://localhost.evil.example"), "");
    EXPECT_EQ(http_cors_allow(c, "http://b.example"), "");
    EXPECT_TRUE(http_cors_credentials(c, "http://a.example"));
    c.credentials = false;
    EXPECT_FALSE(http_cors_credentials(c, "http://a.example"));
    c.origins = {"http://a.example", "*"};
    EXPECT_EQ(http_cors_allow(c, "http://a.example"), "http://a.example") << "the first matching entry decides";
    EXPECT_EQ(http_cors_allow(c, "http://b.example"), "*");
}

// The CSRF rule of same_origin_only routes (issue 22: a cross-site POST /admin/drain shut a node down).
TEST(HttpCors, CrossSiteCheckRefusesAnyOriginAndCrossSiteFetches) {
    struct row {
        http_headers h;
        bool refused;
    };
    const std::vector<row> rows = {
        {{}, false},
        {{{"Host", "h"}, {"Content-Type", "application/json"}}, false},
        {{{"Origin", "http://evil.example"}}, true},
        {{{"origin", "null"}}, true},
        {{{"Origin", ""}}, true},
        {{{"Origin", "http://127.0.0.1:8080"}}, true},
        {{{"Sec-Fetch-Site", "cross-site"}}, true},
        {{{"sec-fetch-site", " Same-Site "}}, true},
        {{{"Sec-Fetch-Site", "same-origin"}}, false},
        {{{"Sec-Fetch-Site", "none"}}, false},
    };
    for (const row & r : rows) {
        const Status st = http_cross_site_check(r.h);
        std::string what;
        for (const auto & [k, v] : r.h) what += k + ": " + v + "; ";
        EXPECT_EQ(!st.ok(), r.refused) << what;
        if (r.refused) {
            EXPECT_NE(st.message().find("same-origin-only"), std::string::npos) << st.message();
        }
    }
}

// A notify that comes before the wait is remembered; notifications from another thread wake the waiter.
TEST(AsyncNotify, NoLostWakeupAndCrossThreadWake) {
    net::io_context ioc;
    auto n = async_notify::make(ioc.get_executor());
    n->notify();  // before anyone waits
    bool first = false, second = false, timed_out_result = true;
    std::thread other;
    net::co_spawn(ioc, [&]() -> net::awaitable<void> {
        first = co_await n->wait_until(std::chrono::steady_clock::now() + std::chrono::seconds(30));
        timed_out_result = co_await n->wait_until(std::chrono::steady_clock::now() + std::chrono::milliseconds(20));
        other = std::thread([&] { n->notify(); });
        second = co_await n->wait_until(std::chrono::steady_clock::now() + std::chrono::seconds(30));
    }, net::detached);
    ioc.run();
    other.join();
    EXPECT_TRUE(first);
    EXPECT_FALSE(timed_out_result);
    EXPECT_TRUE(second);
}

TEST(HttpQuery, ValueOfAKeyAsSentLastOneWins) {
    EXPECT_EQ(http_query_value("a=1&action=save", "action"), "save");
    EXPECT_EQ(http_query_value("action=save&a=1", "action"), "save");
    EXPECT_EQ(http_query_value("actions=x&xaction=y", "action"), "") << "a key is matched whole";
    EXPECT_EQ(http_query_value("action", "action"), "") << "no '=': no value";
    EXPECT_EQ(http_query_value("action=a&action=b", "action"), "b");
    EXPECT_EQ(http_query_value("model=m%201", "model"), "m%201") << "not decoded";
    EXPECT_EQ(http_query_value("", "model"), "");
}

}  // namespace
}  // namespace baton
