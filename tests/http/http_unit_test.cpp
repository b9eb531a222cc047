// http_unit_test.cpp — the HTTP edge's pure pieces: URL parsing, key comparison, label escaping and the
// request counter's bounded labels, the parser's head step, and async_notify's no-lost-wakeup rule.
#include <gtest/gtest.h>

#include <thread>

#include "baton/http/async_notify.h"
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

http_head_info parse_head(const std::string & bytes, http_request & out, boost::system::error_code & ec, http_limits lim = {}) {
    http_request_parser p;
    http_request_parser_configure(p, lim);
    p.put(net::buffer(bytes), ec);
    if (ec || !p.is_header_done()) return {};
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
