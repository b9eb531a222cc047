// status_endpoints.cpp — what a node says about itself: /health (and /v1/health), /v1/models (and /models),
// /metrics (Prometheus text: the edge's request counts, the node's latencies and the engine's counters) and
// Baton's /v1/slots. /health and /metrics answer while the model loads; the others need it.
#include <nlohmann/json.hpp>

#include <optional>

#include "baton/http/metrics_text.h"
#include "baton/model.h"
#include "node_impl.h"

namespace baton {

using json = nlohmann::json;

net::awaitable<void> node_impl::on_health(http_exchange & ex) {
    // state_auth: whether states this node accepts must be authenticated (--state-secret-file), so operators and
    // routers can see a cluster whose nodes disagree.
    if (ready.load(std::memory_order_acquire) && !stopping.load()) {
        json h = {{"status", "ok"}, {"state_auth", cfg.engine.limits.key ? "hmac-sha256" : "none"}};
        // The shared tier (docs/tier.md): its last call's outcome. A failing tier leaves the node healthy (it
        // computes what it misses), so this never changes the status code.
        if (const tier_link * t = tier_ptr.load(std::memory_order_acquire)) {
            const tier_link_counters c = t->counters();
            h["tier"] = {{"status", c.last_ok ? "ok" : "failing"}, {"last_error", c.last_error}};
        }
        co_return (void) co_await ex.respond(json_response(h));
    }
    http_response r = json_response({{"status", stopping.load() ? "draining" : "loading"}}, 503);
    r.headers.emplace_back("Retry-After", "1");
    co_await ex.respond(std::move(r));
}

net::awaitable<void> node_impl::on_models(http_exchange & ex) {
    const model_identity & id = model->identity();
    const kv_layout c = eng->layout();
    json meta = {{"arch", id.arch},
                 {"fingerprint", identity_fingerprint_hex(id.fingerprint)},
                 {"llama_version", id.llama_version},
                 {"n_vocab", id.n_vocab},
                 {"n_ctx", c.n_ctx},
                 {"n_slots", c.n_seq_max},
                 {"kv_unified", c.kv_unified},
                 {"role", node_role_name(cfg.role)},
                 {"tags", cfg.tags}};
    json m = {{"id", model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "baton"}, {"meta", meta}};
    co_await ex.respond(json_response({{"object", "list"}, {"data", json::array({m})}}));
}

net::awaitable<void> node_impl::on_metrics(http_exchange & ex) {
    std::optional<engine_metrics> em;
    if (ready.load(std::memory_order_acquire)) em = eng->metrics();
    http_response r;
    r.content_type = "text/plain; version=0.0.4";
    http->render_metrics(r.body);
    r.body += metrics.render(em, n_admitted.load(), held->stats());
    if (const tier_link * t = tier_ptr.load(std::memory_order_acquire)) {
        // The shared prefix-cache tier (docs/tier.md): what this node wrote and fetched, and the store's view.
        const tier_link_counters c = t->counters();
        auto counter = [&](const char * name, const char * help, uint64_t v) {
            metric_scalar(r.body, name, "counter", help, double(v));
        };
        counter("baton_tier_states_offered_total", "States the engine offered the tier", c.offered);
        counter("baton_tier_states_written_total", "States written to the tier", c.written);
        counter("baton_tier_write_errors_total", "States the tier refused or could not be reached for", c.write_errors);
        counter("baton_tier_states_dropped_total", "States dropped: the writer's queue was full", c.dropped);
        counter("baton_tier_states_skipped_total", "States not written: the same blocks written less than ttl/2 ago",
                c.skipped);
        counter("baton_tier_deltas_written_total", "States written as deltas over an entry this node wrote before",
                c.deltas_written);
        counter("baton_tier_delta_bytes_saved_total", "Bytes the deltas written did not carry", c.delta_bytes_saved);
        counter("baton_tier_fetches_total", "Prompts that asked the tier for a prefix", c.fetches);
        counter("baton_tier_fetch_hits_total", "Prompts the tier gave a prefix state", c.fetch_hits);
        counter("baton_tier_fetch_errors_total", "Prompts whose fetch failed (computed instead)", c.fetch_errors);
        counter("baton_tier_chain_links_total", "Base entries fetched under a delta", c.chain_links);
        counter("baton_tier_broken_chains_total", "Deltas whose base entry was gone (a shorter prefix was tried)",
                c.broken_chains);
        counter("baton_tier_corrupt_total", "Tier entries that did not check out (a miss)", c.store.corrupt);
        counter("baton_tier_timeouts_total", "Tier calls that timed out", c.store.timeouts);
        counter("baton_tier_breaker_opens_total", "Times the tier's circuit breaker opened", c.store.breaker_opens);
        counter("baton_tier_bytes_read_total", "Entry bytes read from the tier", c.store.bytes_read);
        counter("baton_tier_bytes_written_total", "Entry bytes written to the tier", c.store.bytes_written);
    }
    co_await ex.respond(std::move(r));
}

net::awaitable<void> node_impl::on_slots(http_exchange & ex) {
    json arr = json::array();
    for (const slot_info & s : eng->slots())
        arr.push_back({{"id", s.id},
                       {"busy", s.busy},
                       {"n_tokens", s.n_tokens},
                       {"parked", s.parked},
                       {"n_checkpoints", s.n_checkpoints},
                       {"pos_min", s.pos_min},
                       {"pos_max", s.pos_max}});
    co_await ex.respond(json_response(arr));
}

nlohmann::json node_impl::view_state() {
    const int64_t now = live_log::now_unix_ms();
    const bool is_ready = ready.load(std::memory_order_acquire);
    json slots = json::array();
    uint32_t busy = 0;
    if (is_ready)
        for (const slot_info & s : eng->slots()) {
            busy += s.busy ? 1 : 0;
            slots.push_back({{"id", s.id}, {"busy", s.busy}, {"n_tokens", s.n_tokens}, {"parked", s.parked}});
        }
    const uint32_t admitted = n_admitted.load();
    live.gauge(now, double(admitted > busy ? admitted - busy : 0), double(busy));
    json j = live.json(now);
    j["kind"] = "node";
    const std::string name = is_ready ? model_name : std::string();
    j["title"] = std::string("node (") + node_role_name(cfg.role) + ")" + (name.empty() ? "" : " serving " + name);
    j["now_ms"] = now;
    const std::string url = cfg.cluster ? cfg.cluster->advertise : std::string();
    const char * health = stopping.load() || drain_requested_.load() ? "draining" : is_ready ? "up" : "loading";
    j["nodes"] = json::array({{{"pool", node_role_name(cfg.role)},
                               {"url", url.empty() ? std::string("this node") : url},
                               {"health", health},
                               {"model", name},
                               {"outstanding", admitted},
                               {"capacity", is_ready ? json(slots.size()) : json(nullptr)}}});
    j["slots"] = std::move(slots);
    json summary = {{"role", node_role_name(cfg.role)}, {"slots busy", busy}, {"requests admitted", admitted}};
    if (is_ready) {
        const engine_metrics m = eng->metrics();
        summary["prompt tokens"] = m.prompt_tokens;
        summary["cached tokens"] = m.cached_tokens;
        summary["generated tokens"] = m.generated_tokens;
    }
    j["summary"] = std::move(summary);
    j["caches"] = view_caches(is_ready);
    return j;
}

// view_caches: the node's state stores beside its slots — the host prompt cache (--cache-ram), parked slots,
// the states held for decode nodes to fetch (direct transfer), and its link to the shared tier — as the live
// view's cache table rows.
nlohmann::json node_impl::view_caches(bool is_ready) const {
    json rows = json::array();
    if (!is_ready) return rows;
    const engine_metrics m = eng->metrics();
    const int64_t ram = cfg.engine.cache_ram_mib;
    rows.push_back(
        {{"cache", "host prompt cache"},
         {"where", "this node"},
         {"entries", m.cache_ram_entries},
         {"tokens", nullptr},
         {"bytes", m.cache_ram_bytes},
         {"note", ram == 0 ? std::string("off (--cache-ram 0)")
                           : std::to_string(m.cache_ram_hits) + " hits (" + std::to_string(m.cache_ram_hit_tokens) +
                                 " tokens), " + std::to_string(m.cache_ram_evictions) + " evicted" +
                                 (ram < 0 ? ", no limit" : ", limit " + std::to_string(ram) + " MiB")}});
    if (m.parked_bytes > 0 || cfg.engine.park_idle) {
        uint32_t parked = 0, tokens = 0;
        for (const slot_info & s : eng->slots())
            if (s.parked) ++parked, tokens += s.n_tokens;
        rows.push_back({{"cache", "parked slots"},
                        {"where", "this node"},
                        {"entries", parked},
                        {"tokens", tokens},
                        {"bytes", m.parked_bytes},
                        {"note", "idle slots' states moved out of the KV cache"}});
    }
    if (held) {
        const state_hold_stats h = held->stats();
        rows.push_back({{"cache", "held states"},
                        {"where", "this node"},
                        {"entries", h.held},
                        {"tokens", nullptr},
                        {"bytes", h.held_bytes},
                        {"note", std::to_string(h.fetched) + " fetched, " + std::to_string(h.expired) + " expired, " +
                                     std::to_string(h.refused) + " refused for room"}});
    }
    if (const tier_link * t = tier_ptr.load()) {
        const tier_link_counters c = t->counters();
        rows.push_back({{"cache", "shared tier"},
                        {"where", "Valkey"},
                        {"entries", nullptr},  // (what Valkey holds now is Valkey's: its TTLs and evictions)
                        {"tokens", nullptr},
                        {"bytes", nullptr},
                        {"note", std::string(c.last_ok ? "reachable" : "failing: " + c.last_error) + "; written " +
                                     std::to_string(c.written) + " (" + std::to_string(c.deltas_written) +
                                     " as deltas), fetched " + std::to_string(c.fetch_hits) + " of " +
                                     std::to_string(c.fetches) + " lookups"}});
    }
    return rows;
}

}  // namespace baton
