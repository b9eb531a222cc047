// router_metrics.cpp — router counters and their Prometheus rendering.
#include "router_metrics.h"

namespace baton {

void router_metrics::mode(const std::string & how) {
    lock_guard lk(mu_);
    ++modes_[how];
}
void router_metrics::fallback(const std::string & reason) {
    lock_guard lk(mu_);
    ++fallbacks_[reason];
}
void router_metrics::node_outcome(const std::string & node, const std::string & outcome) {
    lock_guard lk(mu_);
    ++nodes_[{node, outcome}];
}
void router_metrics::blob(uint64_t bytes, double transfer_seconds) {
    lock_guard lk(mu_);
    blob_bytes_ += bytes;
    ++blobs_;
    transfer_seconds_ += transfer_seconds;
}
void router_metrics::direct_state(uint64_t bytes) {
    lock_guard lk(mu_);
    direct_bytes_ += bytes;
    ++direct_states_;
}
void router_metrics::state_release(bool released) {
    lock_guard lk(mu_);
    ++(released ? releases_ok_ : releases_failed_);
}
void router_metrics::migration(bool resumed) {
    lock_guard lk(mu_);
    ++(resumed ? migrations_ok_ : migrations_failed_);
}
void router_metrics::kv_route(bool known, uint32_t held, uint32_t tier, bool local_followup) {
    lock_guard lk(mu_);
    if (!known) ++kv_unknown_;
    else if (tier > held) {
        ++kv_tier_routes_;
        kv_tier_tokens_ += tier;
    } else if (held > 0) ++kv_hits_;
    else ++kv_misses_;
    if (tier <= held) kv_held_tokens_ += held;
    if (local_followup) ++local_followups_;
}
void router_metrics::delta(uint32_t base_tokens) {
    lock_guard lk(mu_);
    ++deltas_;
    delta_base_tokens_ += base_tokens;
}
void router_metrics::ttft(double seconds) {
    lock_guard lk(mu_);
    ttft_.observe(seconds);
}
uint64_t router_metrics::fallbacks(const std::string & reason) const {
    lock_guard lk(mu_);
    auto it = fallbacks_.find(reason);
    return it == fallbacks_.end() ? 0 : it->second;
}

void router_metrics::render(std::string & o, size_t waiting) const {
    lock_guard lk(mu_);
    auto count = [](const std::map<std::string, uint64_t> & m, const char * k) {
        auto it = m.find(k);
        return it == m.end() ? uint64_t(0) : it->second;
    };
    metric_head(o, "baton_router_mode_total", "counter", "Requests served prefill->decode (pd) or by a decode node alone (direct)");
    for (const char * m : {"pd", "direct"})
        o += std::string("baton_router_mode_total{mode=\"") + m + "\"} " + std::to_string(count(modes_, m)) + "\n";
    metric_head(o, "baton_router_fallbacks_total", "counter", "Fallbacks by reason");
    for (const char * r : {"prefill_failed", "blob_rejected"})
        o += std::string("baton_router_fallbacks_total{reason=\"") + r + "\"} " + std::to_string(count(fallbacks_, r)) + "\n";
    metric_head(o, "baton_router_node_outcomes_total", "counter", "Outcomes of requests sent to each node");
    for (const auto & [k, v] : nodes_)
        o += "baton_router_node_outcomes_total{node=\"" + metric_label_escape(k.first) + "\",outcome=\"" + metric_label_escape(k.second) +
             "\"} " + std::to_string(v) + "\n";
    metric_scalar(o, "baton_router_blob_bytes_total", "counter",
                  "Blob bytes relayed through the router from prefill to decode nodes (--pd-transfer relay)",
                  double(blob_bytes_));
    metric_scalar(o, "baton_router_blobs_total", "counter", "Blobs relayed through the router", double(blobs_));
    metric_scalar(o, "baton_router_direct_state_bytes_total", "counter",
                  "State bytes decode nodes fetched straight from prefill nodes (--pd-transfer direct; as the prefill "
                  "nodes reported their size)",
                  double(direct_bytes_));
    metric_scalar(o, "baton_router_direct_states_total", "counter", "States handed node to node (--pd-transfer direct)",
                  double(direct_states_));
    metric_head(o, "baton_router_state_releases_total", "counter",
                "The router's releases of held states once a request no longer needs them");
    o += "baton_router_state_releases_total{outcome=\"released\"} " + std::to_string(releases_ok_) + "\n";
    o += "baton_router_state_releases_total{outcome=\"failed\"} " + std::to_string(releases_failed_) + "\n";
    metric_head(o, "baton_router_migrations_total", "counter",
                "Generations a decode node paused to move (live migration): resumed on another node, or failed");
    o += "baton_router_migrations_total{outcome=\"resumed\"} " + std::to_string(migrations_ok_) + "\n";
    o += "baton_router_migrations_total{outcome=\"failed\"} " + std::to_string(migrations_failed_) + "\n";
    metric_scalar(o, "baton_router_blob_transfer_seconds_total", "counter", "Time receiving blob bodies from prefill nodes", transfer_seconds_);
    metric_head(o, "baton_router_kv_routes_total", "counter",
                "Routing decisions by what the prefix index knew: a decode node held part of the prompt (hit), the "
                "shared tier held more of it than any node (tier), neither did (miss), no tokens to look up (unknown: "
                "no -m)");
    o += "baton_router_kv_routes_total{result=\"hit\"} " + std::to_string(kv_hits_) + "\n";
    o += "baton_router_kv_routes_total{result=\"tier\"} " + std::to_string(kv_tier_routes_) + "\n";
    o += "baton_router_kv_routes_total{result=\"miss\"} " + std::to_string(kv_misses_) + "\n";
    o += "baton_router_kv_routes_total{result=\"unknown\"} " + std::to_string(kv_unknown_) + "\n";
    metric_scalar(o, "baton_router_kv_held_tokens_total", "counter",
                  "Prompt tokens the chosen decode node's cache already held (not prefilled again)",
                  double(kv_held_tokens_));
    metric_scalar(o, "baton_router_kv_tier_tokens_total", "counter",
                  "Prompt tokens the shared tier held for requests routed on it (fetched by the node, not prefilled)",
                  double(kv_tier_tokens_));
    metric_scalar(o, "baton_router_local_followups_total", "counter",
                  "Requests of --pd-min-tokens or more sent without a prefill hop because the decode node held all but "
                  "a few of their tokens",
                  double(local_followups_));
    metric_scalar(o, "baton_router_deltas_total", "counter",
                  "PD requests whose state was asked for as a delta over what the decode node held", double(deltas_));
    metric_scalar(o, "baton_router_delta_base_tokens_total", "counter",
                  "Prompt tokens whose cells deltas did not move (the decode node held them)",
                  double(delta_base_tokens_));
    metric_scalar(o, "baton_router_queue_waiting", "gauge", "Requests waiting at the router for node capacity", double(waiting));
    render_histogram(o, "baton_router_ttft_seconds", "Time from request arrival to the first byte relayed to the client", ttft_);
}

}  // namespace baton
