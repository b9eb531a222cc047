// cluster_view.cpp — the router's view of the cluster: the membership etcd reports applied to the pools
// (on_members), the models the cluster serves (GET /v1/models, and the node_filter of a request naming a
// model), and the cluster's metrics.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <map>
#include <set>
#include <string>

#include "baton/base/identity.h"
#include "baton/base/log.h"
#include "baton/cluster/node_record.h"
#include "baton/http/metrics_text.h"
#include "baton/pd/pd_protocol.h"
#include "router_impl.h"

namespace baton {

void router_impl::on_members(const cluster_members & members) {
    {
        lock_guard lk(members_mu);
        members_seen = members;
    }
    std::set<std::string> pre_urls, dec_urls;
    uint64_t joined = 0;
    for (const auto & [key, r] : members) {
        auto url = http_url_parse(r.url);
        if (!url.ok()) continue;   // (node_record_parse does not check the URL's form)
        if (r.draining) continue;  // a draining node takes no new work: it leaves the pools
        const uint32_t cap = r.slots + (cfg.node_queue < 0 ? r.slots : uint32_t(cfg.node_queue));
        const node_meta meta{node_record_group(r), r.model_id, r.model_alias, cap, r.vision, r.audio};
        if (r.role != node_role::decode) {
            pre_urls.insert(url->text);
            if (prefill.upsert(url.value(), meta).second) ++joined;
        }
        if (r.role != node_role::prefill) {
            dec_urls.insert(url->text);
            if (decode.upsert(url.value(), meta).second) ++joined;
        }
    }
    const size_t left = prefill.retire_others(pre_urls) + decode.retire_others(dec_urls);
    joins.fetch_add(joined);
    leaves.fetch_add(left);
    if (joined || left)
        log_info("route: cluster: {} prefill and {} decode members ({} joined, {} left)", prefill.n_members(),
                 decode.n_members(), joined, left);
    // Capacity may have appeared: waiting requests look again.
    prefill_gate.wake_all();
    decode_gate.wake_all();
}

std::string router_impl::cluster_models_json() const {
    // One entry per model id: its aliases, fingerprint and how many nodes of each role serve it.
    struct model_info {
        std::set<std::string> aliases;
        std::string fingerprint;
        uint32_t prefill = 0, decode = 0;
    };
    std::map<std::string, model_info> models;
    {
        lock_guard lk(members_mu);
        for (const auto & [key, r] : members_seen) {
            if (r.draining) continue;
            model_info & m = models[r.model_id];
            if (!r.model_alias.empty()) m.aliases.insert(r.model_alias);
            m.fingerprint = identity_fingerprint_hex(r.fingerprint);
            if (r.role != node_role::decode) ++m.prefill;
            if (r.role != node_role::prefill) ++m.decode;
        }
    }
    nlohmann::json data = nlohmann::json::array();
    for (const auto & [id, m] : models)
        data.push_back({{"id", id},
                        {"object", "model"},
                        {"created", 0},
                        {"owned_by", "baton"},
                        {"meta",
                         {{"aliases", m.aliases},
                          {"fingerprint", m.fingerprint},
                          {"prefill_nodes", m.prefill},
                          {"decode_nodes", m.decode}}}});
    return nlohmann::json{{"object", "list"}, {"data", data}}.dump();
}

Result<node_filter> router_impl::model_filter(const std::string & model) const {
    node_filter f;
    if (model.empty() || !watch) return f;
    if (decode.serves(model) || prefill.serves(model)) {
        f.model = model;
        return f;
    }
    std::set<std::string> models = decode.models();
    if (models.size() <= 1) return f;  // one model: a name it does not answer to still means it
    std::set<std::string> names;       // "id" or "id (alias)", as clients may name them
    {
        lock_guard lk(members_mu);
        for (const auto & [key, r] : members_seen)
            if (r.role != node_role::prefill)
                names.insert(r.model_alias.empty() ? r.model_id : r.model_id + " (" + r.model_alias + ")");
    }
    std::string list;
    for (const auto & m : names) list += (list.empty() ? "" : ", ") + m;
    return Status(status_code::not_found,
                  "model: \"" + model + "\" is not served by this cluster (it serves " + list + ")");
}

void router_impl::render_cluster_metrics(std::string & out) const {
    // Usable members (static nodes too): a node ejected by its health check leaves this count until it
    // answers again.
    metric_head(out, "baton_router_nodes", "gauge", "Usable members of each pool");
    out += "baton_router_nodes{role=\"prefill\"} " + metric_num(double(prefill.n_healthy())) + "\n";
    out += "baton_router_nodes{role=\"decode\"} " + metric_num(double(decode.n_healthy())) + "\n";
    const kv_view_stats k = kv.stats();
    metric_scalar(out, "baton_router_kv_index_blocks", "gauge", "Block hashes in the prefix index (all models)",
                  double(k.blocks));
    metric_scalar(out, "baton_router_kv_tier_entries", "gauge",
                  "Shared-tier entries the nodes reported writing, not yet past their TTL (at most --kv-index-blocks "
                  "per model; expired ones leave at the next report)",
                  double(k.tier_entries));
    metric_scalar(out, "baton_router_kv_index_nodes", "gauge", "Nodes whose KV events the index follows in sync",
                  double(k.nodes));
    metric_scalar(out, "baton_router_kv_index_evictions_total", "counter",
                  "Blocks dropped to keep the index within --kv-index-blocks", double(k.evictions));
    metric_scalar(out, "baton_router_kv_event_batches_total", "counter", "KV-event batches applied", double(k.batches));
    metric_scalar(out, "baton_router_kv_resyncs_total", "counter",
                  "Snapshots applied (a node new to the router, restarted, or a lost batch)", double(k.resyncs));
    metric_scalar(out, "baton_router_kv_rejected_total", "counter", "KV-event answers or batches that did not parse",
                  double(k.rejected));
    if (!watch) return;
    metric_scalar(out, "baton_router_etcd_connected", "gauge",
                  "1 while the router follows etcd, 0 while it cannot reach it", watch->connected() ? 1 : 0);
    metric_scalar(out, "baton_router_etcd_resyncs_total", "counter",
                  "Full listings of the cluster after the first (reconnects, compaction)", double(watch->resyncs()));
    metric_scalar(out, "baton_router_etcd_bad_records_total", "counter", "Node records in etcd that did not parse",
                  double(watch->bad_records()));
    metric_head(out, "baton_router_membership_changes_total", "counter", "Nodes that joined or left the pools");
    out += "baton_router_membership_changes_total{change=\"join\"} " + metric_num(double(joins.load())) + "\n";
    out += "baton_router_membership_changes_total{change=\"leave\"} " + metric_num(double(leaves.load())) + "\n";
}

net::awaitable<void> router_impl::on_models(http_exchange & ex) {
    if (watch) {
        // The cluster's models, from the records (no node is asked).
        co_await ex.respond(http_response::json(cluster_models_json()));
        co_return;
    }
    co_await forward_to_node(ex, "GET", "/v1/models", "");
}

// ---- the live view (live_view.h) ----

void router_impl::record_trace(route_ctx & ctx, const http_exchange & ex) {
    ctx.trace.id = ctx.request_id;
    ctx.trace.route = ctx.route;
    ctx.trace.status = ex.status();
    ctx.trace.stream = ctx.req.stream;
    ctx.trace.total_s = ctx.since_arrival(steady::now());
    live.record(std::move(ctx.trace));
    live.gauge(live_log::now_unix_ms(), double(prefill_gate.waiting() + decode_gate.waiting()), 0);
}

// view_caches: what the prefix index holds of each node and what the nodes reported writing to the shared tier,
// per chain key (a model and KV layout), as the live view's cache table rows.
nlohmann::json router_impl::view_caches() const {
    nlohmann::json rows = nlohmann::json::array();
    char key[17];
    for (const kv_view_key & k : kv.keys()) {
        std::snprintf(key, sizeof key, "%016llx", static_cast<unsigned long long>(k.seed));
        for (const prefix_index_node & n : k.nodes)
            rows.push_back({{"cache", "prefix index"},
                            {"where", n.node},
                            {"entries", n.blocks},
                            {"tokens", uint64_t(n.blocks) * pd_kv_block_tokens},
                            {"bytes", nullptr},
                            {"note", std::string(n.in_sync ? "in sync" : "resyncing") + ", key " + key}});
        if (k.tier_entries > 0)
            rows.push_back({{"cache", "shared tier"},
                            {"where", std::string("nodes of key ") + key},
                            {"entries", k.tier_entries},
                            {"tokens", nullptr},
                            {"bytes", nullptr},
                            {"note", "blocks whose states the nodes wrote; the soonest expires in " +
                                         std::to_string(int64_t(k.tier_next_expiry_s)) + " s"}});
    }
    if (!vocab)
        rows.push_back({{"cache", "prefix index"},
                        {"where", "router"},
                        {"entries", nullptr},
                        {"tokens", nullptr},
                        {"bytes", nullptr},
                        {"note", "not used for routing: the router has no vocabulary (-m)"}});
    return rows;
}

nlohmann::json router_impl::view_state() {
    const int64_t now = live_log::now_unix_ms();
    nlohmann::json nodes = nlohmann::json::array();
    size_t up = 0, busy = 0;
    for (auto [name, pool] : {std::pair{"prefill", &prefill}, std::pair{"decode", &decode}})
        for (const node_status & n : pool->status()) {
            // A node that left the cluster (its record is gone) is shown as gone while the view remembers it.
            const char * health = !n.member ? "gone" : n.draining ? "draining" : n.healthy ? "up" : "down";
            if (n.member && n.healthy && !n.draining) ++up;
            busy += n.outstanding;
            nlohmann::json j = {{"pool", name},
                                {"url", n.url},
                                {"health", health},
                                {"outstanding", n.outstanding},
                                {"registered", n.registered}};
            j["capacity"] = n.capacity == UINT32_MAX ? nlohmann::json(nullptr) : nlohmann::json(n.capacity);
            j["model"] = n.meta.alias.empty() ? n.meta.model_id : n.meta.alias;
            if (!n.meta.group.empty()) j["group"] = n.meta.group;
            nodes.push_back(std::move(j));
        }
    const size_t waiting = prefill_gate.waiting() + decode_gate.waiting();
    live.gauge(now, double(waiting), double(busy));
    nlohmann::json j = live.json(now);
    j["kind"] = "router";
    j["title"] = watch ? "router of cluster " + cfg.cluster : "router";
    j["now_ms"] = now;
    j["nodes"] = std::move(nodes);
    nlohmann::json summary = {{"nodes up", up},
                              {"prefill nodes", prefill.n_members()},
                              {"decode nodes", decode.n_members()},
                              {"requests in flight", busy},
                              {"queued at the router", waiting},
                              {"joins", joins.load()},
                              {"leaves", leaves.load()}};
    if (watch) summary["etcd"] = watch->connected() ? "connected" : "disconnected";
    j["summary"] = std::move(summary);
    j["caches"] = view_caches();
    return j;
}

}  // namespace baton
