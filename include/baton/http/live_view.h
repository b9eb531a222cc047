// live_view.h — the live view the node and the router both serve: a page anyone can open in a browser
// (GET /view: one HTML file with its script, no build step), the chart library it draws with (GET
// /view/chart.js: Chart.js as Debian's libjs-chart.js installs it, read from the system path — never copied
// into Baton), and the JSON the page polls every second (GET /view/state, behind the API key like /metrics).
//
// This file holds what the two share: live_log, the last requests as timelines (each step timed: on the
// router prefill -> transfer -> decode, on a node its prompt and its generation) and per-second series over
// the last minutes (requests, errors, TTFT, TPOT, queue, busy), which the page charts. What the state says
// about nodes, pools and slots is the node's and the router's own (node/status_endpoints.cpp,
// router/cluster_view.cpp); the page draws whatever the state holds.
// Thread-safety: live_log's methods are safe from any thread (one mutex; record is called once per request).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "baton/base/thread_annotations.h"

namespace baton {

class http_server;

// One timed step of a request (seconds since its arrival).
struct live_step {
    std::string name;  // router: route | prefill | transfer | decode; node: prompt | generate
    std::string node;  // the node that ran it ("" for the router's own steps)
    double start_s = 0, end_s = 0;
    uint64_t bytes = 0;  // transfer: the state's bytes
};

// One finished request.
struct live_request {
    std::string id;       // X-Request-Id
    std::string path;     // the route it came in on
    std::string route;    // router: pd | direct | fallback:<reason>; node: local | decode
    int64_t unix_ms = 0;  // arrival (wall clock)
    int status = 0;       // the HTTP status answered (0: none, the client left first)
    bool stream = false;
    uint32_t prompt_tokens = 0, generated_tokens = 0;  // 0 where unknown (the router does not count answers)
    double ttft_s = -1, tpot_s = -1;                   // -1: no first token / fewer than two tokens
    double total_s = 0;
    std::vector<live_step> steps;
};

class live_log {
  public:
    // keep: requests kept for the timelines; window_s: seconds of series kept (step_s each point).
    explicit live_log(size_t keep = 40, uint32_t window_s = 300, uint32_t step_s = 5);

    // record: a request ended (its series bucket is its arrival's second plus its total).
    void record(live_request r);
    // gauge: a sample of the queue (requests waiting for capacity) and of the busy slots/requests at now_ms;
    // each second keeps its largest sample.
    void gauge(int64_t now_ms, double queued, double busy);
    // json: {"requests": [newest first], "series": {"step_s", "t": [unix ms of each point's start], "requests",
    // "errors", "ttft_avg_ms", "ttft_max_ms", "tpot_avg_ms", "queue_max", "busy_max"}} for the window ending at
    // now_ms (a point with no sample is null in the averages and maxima, 0 in the counts).
    nlohmann::json json(int64_t now_ms) const;

    static int64_t now_unix_ms();

  private:
    struct bucket {
        int64_t sec = -1;
        uint32_t n = 0, errors = 0;
        double ttft_sum = 0, ttft_max = -1, tpot_sum = 0;
        uint32_t ttft_n = 0, tpot_n = 0;
        double queue_max = -1, busy_max = -1;
    };
    bucket & at(int64_t sec) BATON_REQUIRES(mu_);

    const size_t keep_;
    const uint32_t window_s_, step_s_;
    mutable mutex mu_;
    std::deque<live_request> recent_ BATON_GUARDED_BY(mu_);
    std::vector<bucket> buckets_ BATON_GUARDED_BY(mu_);  // by second modulo window_s_
};

nlohmann::json live_request_json(const live_request & r);

// The Debian path of Chart.js (libjs-chart.js); without it the page shows its tables and timelines only.
inline constexpr std::string_view live_view_chart_js = "/usr/share/javascript/chart.js/chart.min.js";

// live_view_page: the page's HTML (with its script).
std::string_view live_view_page();

// live_view_routes adds GET /view and /view/chart.js (open: a static page and a static library, as
// llama-server serves its web UI without the key) and GET /view/state (behind the API key) to server; state
// renders the JSON on the request's strand (keep it cheap: counters and small lists).
void live_view_routes(http_server & server, std::function<nlohmann::json()> state);

}  // namespace baton
