// live_view_test.cpp — the live view's request log and series (http/live_view.h); the page itself is tested in
// a real browser (tests/e2e/live_view_browser_test.py).
#include "baton/http/live_view.h"

#include <gtest/gtest.h>

#include <string>

namespace baton {
namespace {

live_request request_at(int64_t unix_ms, double total_s, int status, double ttft_s = -1, double tpot_s = -1) {
    live_request r;
    r.id = "r" + std::to_string(unix_ms);
    r.path = "/v1/chat/completions";
    r.route = "pd";
    r.unix_ms = unix_ms;
    r.total_s = total_s;
    r.status = status;
    r.ttft_s = ttft_s;
    r.tpot_s = tpot_s;
    r.steps.push_back(live_step{"prefill", "http://p", 0.001, 0.010, 0});
    r.steps.push_back(live_step{"transfer", "http://p", 0.010, 0.012, 4096});
    return r;
}

TEST(LiveLog, KeepsTheLastRequestsNewestFirst) {
    live_log log(3, 60, 5);
    for (int i = 0; i < 5; ++i) log.record(request_at(1'000'000 + i * 100, 0.05, 200));
    const auto j = log.json(1'001'000);
    ASSERT_EQ(j["requests"].size(), 3u);
    EXPECT_EQ(j["requests"][0]["id"], "r1000400");
    EXPECT_EQ(j["requests"][2]["id"], "r1000200");
}

TEST(LiveLog, RequestJsonCarriesStepsInMillisecondsAndNullsForUnknownLatencies) {
    const auto j = live_request_json(request_at(5'000, 0.25, 200));
    EXPECT_DOUBLE_EQ(j["total_ms"].get<double>(), 250);
    EXPECT_TRUE(j["ttft_ms"].is_null());
    EXPECT_TRUE(j["tpot_ms"].is_null());
    ASSERT_EQ(j["steps"].size(), 2u);
    EXPECT_EQ(j["steps"][1]["name"], "transfer");
    EXPECT_EQ(j["steps"][1]["node"], "http://p");
    EXPECT_EQ(j["steps"][1]["bytes"], 4096);
    EXPECT_DOUBLE_EQ(j["steps"][0]["end_ms"].get<double>(), 10);
    EXPECT_FALSE(j.contains("prompt_tokens"));  // unknown: left out, not 0
}

TEST(LiveLog, SeriesBucketsByStepAndCountsErrors) {
    live_log log(10, 60, 5);
    const int64_t t0 = 1'700'000'000'000;  // a second boundary, and a step boundary (divisible by 5 s)
    log.record(request_at(t0, 0.5, 200, 0.100, 0.010));
    log.record(request_at(t0 + 1000, 0.5, 200, 0.300, 0.030));
    log.record(request_at(t0 + 2000, 0.5, 503));
    log.record(request_at(t0 + 2500, 0.5, 0));  // the client left: no status, an error
    log.gauge(t0 + 3000, 4, 2);
    log.gauge(t0 + 3500, 1, 7);
    const auto s = log.json(t0 + 59'000)["series"];
    ASSERT_EQ(s["t"].size(), 12u);
    EXPECT_EQ(s["step_s"], 5);
    EXPECT_EQ(s["t"][0].get<int64_t>(), t0);
    EXPECT_EQ(s["requests"][0], 4);
    EXPECT_EQ(s["errors"][0], 2);
    EXPECT_NEAR(s["ttft_avg_ms"][0].get<double>(), 200, 1e-9);
    EXPECT_NEAR(s["ttft_max_ms"][0].get<double>(), 300, 1e-9);
    EXPECT_NEAR(s["tpot_avg_ms"][0].get<double>(), 20, 1e-9);
    EXPECT_EQ(s["queue_max"][0], 4);
    EXPECT_EQ(s["busy_max"][0], 7);
    for (size_t p = 1; p < 12; ++p) {
        EXPECT_EQ(s["requests"][p], 0) << p;
        EXPECT_TRUE(s["ttft_avg_ms"][p].is_null()) << p;
        EXPECT_TRUE(s["queue_max"][p].is_null()) << p;
    }
}

TEST(LiveLog, SecondsOutsideTheWindowAreForgotten) {
    live_log log(10, 60, 5);
    const int64_t t0 = 1'700'000'000'000;
    log.record(request_at(t0, 0.1, 200, 0.05));
    // 60 s later the same ring slot holds a new second: the old one is not counted into it.
    log.record(request_at(t0 + 60'000, 0.1, 200, 0.07));
    const auto s = log.json(t0 + 60'000)["series"];
    int total = 0;
    for (const auto & n : s["requests"]) total += n.get<int>();
    EXPECT_EQ(total, 1);
    EXPECT_NEAR(s["ttft_avg_ms"].back().get<double>(), 70, 1e-9);
}

TEST(LiveView, PageLoadsItsChartsAndStateRelatively) {
    const std::string page(live_view_page());
    // Relative paths, so the page works behind a proxy prefix; no remote resource of any kind.
    EXPECT_NE(page.find("src=\"view/chart.js\""), std::string::npos);
    EXPECT_NE(page.find("fetch(\"view/state\""), std::string::npos);
    EXPECT_EQ(page.find("http://"), std::string::npos);
    EXPECT_EQ(page.find("https://"), std::string::npos);
}

}  // namespace
}  // namespace baton
