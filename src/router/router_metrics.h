// router_metrics.h — what the router counts, rendered as Prometheus text for GET /metrics.
// Thread-safety: every method is safe from any thread (one mutex).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "server/metrics.h"

namespace baton {

class router_metrics {
  public:
    void request(const std::string & route, int http_status);          // by route and status
    void mode(const std::string & how);                                // "pd" | "direct"
    void fallback(const std::string & reason);                         // prefill_failed | blob_rejected | ...
    void node_outcome(const std::string & node, const std::string & outcome);
    void blob(uint64_t bytes, double transfer_seconds);
    void ttft(double seconds);                                         // time to the first relayed byte
    std::string render() const;

    // Test and CLI access to single counters.
    uint64_t fallbacks(const std::string & reason) const;

  private:
    mutable std::mutex mu_;
    std::map<std::pair<std::string, int>, uint64_t> requests_;
    std::map<std::string, uint64_t> modes_, fallbacks_;
    std::map<std::pair<std::string, std::string>, uint64_t> nodes_;
    uint64_t blob_bytes_ = 0, blobs_ = 0;
    double transfer_seconds_ = 0;
    latency_histogram ttft_;
};

}  // namespace baton
