// router_metrics.h — what the router counts beyond the HTTP edge's request counter, rendered as
// Prometheus text for GET /metrics with the edge's helpers (http/metrics_text.h). Node labels are the
// configured node URLs (never client input) and are escaped like every label.
// Thread-safety: every method is safe from any thread (one mutex).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "baton/base/thread_annotations.h"
#include "baton/http/metrics_text.h"

namespace baton {

class router_metrics {
  public:
    void mode(const std::string & how);                                // "pd" | "direct"
    void fallback(const std::string & reason);                         // prefill_failed | blob_rejected
    void node_outcome(const std::string & node, const std::string & outcome);
    void blob(uint64_t bytes, double transfer_seconds);  // a blob relayed through the router (--pd-transfer relay)
    void direct_state(uint64_t bytes);                   // a state fetched node to node (--pd-transfer direct)
    void state_release(bool released);                   // the router's DELETE of a held state: released, or not
    // migration: a generation a decode node paused to move: resumed on another node (outcome "resumed") or
    // not ("failed": no node took it; the client got an explicit error)
    void migration(bool resumed);
    // kv_route: a routing decision with prompt tokens to hash (known) or not; held: the prompt tokens the best
    // decode node already held; tier: those the shared tier held; local_followup: PD skipped because a decode
    // node held (or could fetch from the tier) all but a few.
    void kv_route(bool known, uint32_t held, uint32_t tier, bool local_followup);
    void delta(uint32_t base_tokens);  // a PD request whose state was asked for as a delta over base_tokens
    void ttft(double seconds);                                         // time to the first relayed byte
    // render appends the router's metrics; waiting: requests queued for node capacity now.
    void render(std::string & out, size_t waiting) const;

    // Test and CLI access to single counters.
    uint64_t fallbacks(const std::string & reason) const;

  private:
    mutable mutex mu_;
    std::map<std::string, uint64_t> modes_ BATON_GUARDED_BY(mu_);
    std::map<std::string, uint64_t> fallbacks_ BATON_GUARDED_BY(mu_);
    std::map<std::pair<std::string, std::string>, uint64_t> nodes_ BATON_GUARDED_BY(mu_);
    uint64_t blob_bytes_ BATON_GUARDED_BY(mu_) = 0;
    uint64_t blobs_ BATON_GUARDED_BY(mu_) = 0;
    double transfer_seconds_ BATON_GUARDED_BY(mu_) = 0;
    uint64_t direct_bytes_ BATON_GUARDED_BY(mu_) = 0;
    uint64_t direct_states_ BATON_GUARDED_BY(mu_) = 0;
    uint64_t migrations_ok_ BATON_GUARDED_BY(mu_) = 0, migrations_failed_ BATON_GUARDED_BY(mu_) = 0;
    uint64_t releases_ok_ BATON_GUARDED_BY(mu_) = 0;
    uint64_t releases_failed_ BATON_GUARDED_BY(mu_) = 0;
    uint64_t kv_hits_ BATON_GUARDED_BY(mu_) = 0, kv_misses_ BATON_GUARDED_BY(mu_) = 0;
    uint64_t kv_unknown_ BATON_GUARDED_BY(mu_) = 0, kv_held_tokens_ BATON_GUARDED_BY(mu_) = 0;
    uint64_t local_followups_ BATON_GUARDED_BY(mu_) = 0;
    uint64_t kv_tier_routes_ BATON_GUARDED_BY(mu_) = 0, kv_tier_tokens_ BATON_GUARDED_BY(mu_) = 0;
    uint64_t deltas_ BATON_GUARDED_BY(mu_) = 0, delta_base_tokens_ BATON_GUARDED_BY(mu_) = 0;
    latency_histogram ttft_ BATON_GUARDED_BY(mu_);
};

}  // namespace baton
