// metrics.h — the node's Prometheus metrics: HTTP-level counters and latency histograms kept by the
// server, rendered together with the engine's counters (engine_metrics) as Prometheus text.
//
// Thread-safety: every member function is safe from any thread (one mutex; the hot path takes it once
// per token for the inter-token histogram, which is cheap next to a decode step).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "baton/engine.h"

namespace baton {

// A fixed-bucket latency histogram (seconds).
struct latency_histogram {
    static constexpr std::array<double, 12> k_bounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                        0.1,   0.25,   0.5,   1.0,  2.5,   10.0};
    std::array<uint64_t, k_bounds.size() + 1> counts{};  // last: +Inf
    double sum = 0;
    uint64_t n = 0;
    void observe(double seconds);
};

// render_histogram appends h as a Prometheus histogram (HELP, TYPE, cumulative buckets, sum, count). The
// node and the router both render their latency histograms with it.
void render_histogram(std::string & out, const char * name, const char * help, const latency_histogram & h);

class server_metrics {
  public:
    // count_request records one finished HTTP request (endpoint: the route pattern).
    void count_request(const std::string & endpoint, int http_status);
    void observe_ttft(double seconds);
    void observe_itl(double seconds);
    // count_blob_reject records a blob refused before it reached a slot (parse/size), by reason.
    void count_blob_reject(status_code reason);
    void count_admission_reject();

    // render returns the Prometheus exposition text; engine is empty while the model loads.
    std::string render(const std::optional<engine_metrics> & engine, uint32_t requests_in_flight) const;

  private:
    mutable std::mutex mu_;
    std::map<std::pair<std::string, int>, uint64_t> requests_;  // GUARDED_BY(mu_)
    latency_histogram ttft_, itl_;                              // GUARDED_BY(mu_)
    std::map<std::string, uint64_t> blob_rejects_;              // GUARDED_BY(mu_) by status_code_name
    uint64_t admission_rejects_ = 0;                            // GUARDED_BY(mu_)
};

}  // namespace baton
