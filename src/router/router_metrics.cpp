// router_metrics.cpp — router counters and their Prometheus rendering.
#include "router_metrics.h"

#include <cstdio>

namespace baton {

void router_metrics::request(const std::string & route, int http_status) {
    std::lock_guard<std::mutex> lk(mu_);
    ++requests_[{route, http_status}];
}
void router_metrics::mode(const std::string & how) {
    std::lock_guard<std::mutex> lk(mu_);
    ++modes_[how];
}
void router_metrics::fallback(const std::string & reason) {
    std::lock_guard<std::mutex> lk(mu_);
    ++fallbacks_[reason];
}
void router_metrics::node_outcome(const std::string & node, const std::string & outcome) {
    std::lock_guard<std::mutex> lk(mu_);
    ++nodes_[{node, outcome}];
}
void router_metrics::blob(uint64_t bytes, double transfer_seconds) {
    std::lock_guard<std::mutex> lk(mu_);
    blob_bytes_ += bytes;
    ++blobs_;
    transfer_seconds_ += transfer_seconds;
}
void router_metrics::ttft(double seconds) {
    std::lock_guard<std::mutex> lk(mu_);
    ttft_.observe(seconds);
}
uint64_t router_metrics::fallbacks(const std::string & reason) const {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = fallbacks_.find(reason);
    return it == fallbacks_.end() ? 0 : it->second;
}

std::string router_metrics::render() const {
    std::lock_guard<std::mutex> lk(mu_);
    std::string o;
    char buf[512];
    o += "# HELP baton_router_requests_total Client requests by route and HTTP status.\n# TYPE baton_router_requests_total counter\n";
    for (auto & [k, v] : requests_) {
        std::snprintf(buf, sizeof buf, "baton_router_requests_total{route=\"%s\",status=\"%d\"} %llu\n", k.first.c_str(), k.second, (unsigned long long) v);
        o += buf;
    }
    o += "# HELP baton_router_mode_total Requests served prefill->decode (pd) or by a decode node alone (direct).\n# TYPE baton_router_mode_total counter\n";
    for (const char * m : {"pd", "direct"}) {
        auto it = modes_.find(m);
        std::snprintf(buf, sizeof buf, "baton_router_mode_total{mode=\"%s\"} %llu\n", m, (unsigned long long) (it == modes_.end() ? 0 : it->second));
        o += buf;
    }
    o += "# HELP baton_router_fallbacks_total Fallbacks by reason.\n# TYPE baton_router_fallbacks_total counter\n";
    for (const char * r : {"prefill_failed", "blob_rejected"}) {
        auto it = fallbacks_.find(r);
        std::snprintf(buf, sizeof buf, "baton_router_fallbacks_total{reason=\"%s\"} %llu\n", r, (unsigned long long) (it == fallbacks_.end() ? 0 : it->second));
        o += buf;
    }
    o += "# HELP baton_router_node_outcomes_total Outcomes of requests sent to each node.\n# TYPE baton_router_node_outcomes_total counter\n";
    for (auto & [k, v] : nodes_) {
        std::snprintf(buf, sizeof buf, "baton_router_node_outcomes_total{node=\"%s\",outcome=\"%s\"} %llu\n", k.first.c_str(), k.second.c_str(), (unsigned long long) v);
        o += buf;
    }
    std::snprintf(buf, sizeof buf,
                  "# HELP baton_router_blob_bytes_total Blob bytes moved from prefill to decode nodes.\n# TYPE baton_router_blob_bytes_total counter\n"
                  "baton_router_blob_bytes_total %llu\n"
                  "# HELP baton_router_blobs_total Blobs moved.\n# TYPE baton_router_blobs_total counter\nbaton_router_blobs_total %llu\n"
                  "# HELP baton_router_blob_transfer_seconds_total Time receiving blob bodies from prefill nodes.\n# TYPE baton_router_blob_transfer_seconds_total counter\n"
                  "baton_router_blob_transfer_seconds_total %.6f\n",
                  (unsigned long long) blob_bytes_, (unsigned long long) blobs_, transfer_seconds_);
    o += buf;
    render_histogram(o, "baton_router_ttft_seconds", "Time from request arrival to the first byte relayed to the client.", ttft_);
    return o;
}

}  // namespace baton
