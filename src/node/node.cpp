// node.cpp — the node's lifecycle (bind, start, load, shutdown), its cluster record and its route table.
// Authentication, body caps, CORS and the error map are the HTTP edge's (http_server); the handlers live in
// generation.cpp, pd_handlers.cpp, slot_state.cpp, status_endpoints.cpp and llama_compat.cpp.
#include "baton/node/node.h"
#include "baton/base/log.h"
#include "baton/pd/pd_protocol.h"

#include <algorithm>
#include <cstdio>
#include <thread>

#include "baton/base/buffer_pool.h"
#include "baton/base/identity.h"
#include "baton/pd/kv_blocks.h"
#include "node_impl.h"
#include "node_test_seam.h"

namespace baton {

node_impl::node_impl(node_config c)
    : cfg(std::move(c)), http(std::make_unique<http_server>(http_server_config{.host = cfg.host,
                                                                               .port = cfg.port,
                                                                               .limits = cfg.limits,
                                                                               .threads = cfg.http_threads,
                                                                               .api_key = cfg.api_key,
                                                                               .log_name = "serve",
                                                                               .cors = cfg.cors,
                                                                               .static_dir = cfg.static_dir})) {
    cfg.engine.limits.max_bytes = cfg.max_blob_bytes;
    state_hold_limits hl;
    hl.max_bytes = cfg.state_hold_bytes;
    hl.ttl = std::chrono::milliseconds(cfg.state_lease_ms);
    held = std::make_unique<state_hold>(hl);
    install_routes();
}

void node_impl::start() {
    http->start();
    net::co_spawn(http->context(), sweep_held(), net::detached);
}

net::awaitable<void> node_impl::on_admin_drain(http_exchange & ex) {
    drain_requested_.store(true);  // the serve loop runs shutdown(), as on SIGTERM
    co_await ex.respond(http_response::json("{\"draining\":true}", 202));
}

net::awaitable<void> node_impl::on_admin_migrate(http_exchange & ex) {
    size_t count = 0;
    const std::string_view body = ex.request().body_text();
    if (!body.empty()) {
        const auto j = nlohmann::json::parse(body, nullptr, false);
        const auto bad = Status(status_code::invalid_argument,
                                "body: expected {\"count\": N} (N >= 0; 0 or no body: every generation that can move)");
        if (j.is_discarded() || !j.is_object()) co_return (void) co_await ex.respond_error(bad);
        for (const auto & [k, v] : j.items())
            if (k != "count") co_return (void) co_await ex.respond_error(bad);
        if (j.contains("count")) {
            if (!j["count"].is_number_unsigned()) co_return (void) co_await ex.respond_error(bad);
            count = j["count"].get<size_t>();
        }
    }
    const size_t asked = migrations.migrate(count);
    co_await ex.respond(json_response({{"migrating", asked}}, 202));
}

void node_impl::note_unfetched(std::string_view id, bool add) {
    lock_guard lk(unfetched_mu);
    if (add) unfetched.emplace(id);
    else if (auto it = unfetched.find(id); it != unfetched.end()) unfetched.erase(it);
}

size_t node_impl::n_unfetched() const {
    lock_guard lk(unfetched_mu);
    return unfetched.size();
}

node_record node_impl::record() const {
    node_record r;
    r.role = cfg.role;
    r.url = cfg.cluster ? cfg.cluster->advertise : std::string();
    r.model_id = model_file;
    r.model_alias = cfg.alias;
    r.fingerprint = model->identity().fingerprint;
    r.kv = eng->layout();
    r.slots = r.kv.n_seq_max;
    const engine_metrics m = eng->metrics();
    r.busy = m.slots_busy;
    const uint32_t admitted = n_admitted.load();
    r.waiting = admitted > r.busy ? admitted - r.busy : 0;
    r.draining = stopping.load();
    r.vision = media != nullptr && media->vision();
    r.audio = media != nullptr && media->audio();
    return r;
}

// ---- routes ----

void node_impl::install_routes() {
    using handler = net::awaitable<void> (node_impl::*)(http_exchange &);
    // Every route but /health needs the key (the edge checks it); every route but /health and /metrics
    // needs the model.
    auto add = [this](const char * method, const char * path, http_route_options o, bool needs_engine, handler fn) {
        http->route(method, path, o, [this, needs_engine, fn](http_exchange & ex) -> net::awaitable<void> {
            if (needs_engine) {
                if (Status st = check_serving(); !st.ok()) {
                    co_await respond_not_serving(ex, st);
                    co_return;
                }
            }
            co_await (this->*fn)(ex);
        });
    };
    http_route_options none, open, json_body, blob_body;
    open.open = true;
    json_body.max_body_bytes = cfg.max_json_bytes;
    blob_body.max_body_bytes = cfg.max_blob_bytes;
    blob_body.pooled_body = true;
    add("GET", "/health", open, false, &node_impl::on_health);
    add("GET", "/v1/health", open, false, &node_impl::on_health);
    add("GET", "/metrics", none, false, &node_impl::on_metrics);
    add("GET", "/v1/models", none, true, &node_impl::on_models);
    add("GET", "/models", none, true, &node_impl::on_models);
    add("POST", "/tokenize", json_body, true, &node_impl::on_tokenize);
    for (const char * path : {"/embedding", "/embeddings", "/v1/embeddings"}) {
        const bool oai = std::string_view(path) == "/v1/embeddings";
        http->route("POST", path, json_body, [this, oai](http_exchange & ex) -> net::awaitable<void> {
            if (Status st = check_serving(); !st.ok()) co_return (void) co_await respond_not_serving(ex, st);
            co_await on_embeddings(ex, oai);
        });
    }
    for (const char * path : {"/rerank", "/reranking", "/v1/rerank", "/v1/reranking"})
        add("POST", path, json_body, true, &node_impl::on_rerank);
    add("POST", "/detokenize", json_body, true, &node_impl::on_detokenize);
    add("POST", "/apply-template", json_body, true, &node_impl::on_apply_template);
    add("GET", "/props", none, true, &node_impl::on_props);
    add("POST", "/props", json_body, true, &node_impl::on_props);
    add("GET", "/slots", none, true, &node_impl::on_llama_slots);
    // The live view: the page, its chart library, and the state it polls (answers while the model loads).
    live_view_routes(*http, [this] { return view_state(); });
    // State changes and state (issue 22): outside CORS, and refused to browser pages (CSRF), so no web page
    // can drain a node, save/restore/erase a slot, read or replace its state, or feed it a blob.
    auto closed = [](http_route_options o) {
        o.same_origin_only = true;
        return o;
    };
    add("POST", "/slots/{id}", closed(json_body), true, &node_impl::on_slot_action);
    add("GET", "/v1/slots", none, true, &node_impl::on_slots);
    add("GET", pd_path_slot_state.data(), closed(none), true, &node_impl::on_state_get);
    add("DELETE", pd_path_slot_state.data(), closed(none), true, &node_impl::on_state_delete);
    add("PUT", pd_path_slot_state.data(), closed(blob_body), true, &node_impl::on_state_put);
    add("POST", pd_path_decode.data(), closed(blob_body), true, &node_impl::on_decode);
    add("POST", pd_path_prefill.data(), closed(json_body), true, &node_impl::on_prefill);
    // (Held states are served while the node drains: a paused generation's state, or a direct transfer's, goes
    // on elsewhere.)
    add("GET", pd_path_held_state.data(), closed(none), false, &node_impl::on_held_get);
    add("DELETE", pd_path_held_state.data(), closed(none), false, &node_impl::on_held_delete);
    add("GET", pd_path_kv_events.data(), none, true, &node_impl::on_kv_events);
    add("GET", pd_path_kv_snapshot.data(), none, true, &node_impl::on_kv_snapshot);
    add("POST", "/admin/drain", closed(none), false, &node_impl::on_admin_drain);
    add("POST", "/admin/migrate", closed(json_body), true, &node_impl::on_admin_migrate);
    // The OpenAI routes, and llama-server's unprefixed aliases of them — except /completions, which is
    // llama-server's native /completion there (only /v1/completions is OpenAI's).
    http->route("POST", "/v1/completions", json_body, [this](http_exchange & ex) -> net::awaitable<void> {
        if (Status st = check_serving(); !st.ok()) co_return (void) co_await respond_not_serving(ex, st);
        co_await on_openai(ex, openai_endpoint::completions);
    });
    http->route("POST", "/infill", json_body, [this](http_exchange & ex) -> net::awaitable<void> {
        if (Status st = check_serving(); !st.ok()) co_return (void) co_await respond_not_serving(ex, st);
        co_await on_openai(ex, openai_endpoint::infill);
    });
    for (const char * path : {"/completion", "/completions"}) {
        http->route("POST", path, json_body, [this](http_exchange & ex) -> net::awaitable<void> {
            if (Status st = check_serving(); !st.ok()) co_return (void) co_await respond_not_serving(ex, st);
            co_await on_openai(ex, openai_endpoint::completion);
        });
    }
    for (const char * path : {"/v1/chat/completions", "/chat/completions"}) {
        http->route("POST", path, json_body, [this](http_exchange & ex) -> net::awaitable<void> {
            if (Status st = check_serving(); !st.ok()) co_return (void) co_await respond_not_serving(ex, st);
            co_await on_openai(ex, openai_endpoint::chat);
        });
    }
    // Anthropic's Messages API (its "anthropic-version" header is accepted and ignored; x-api-key is a key).
    http->route("POST", "/v1/messages", json_body, [this](http_exchange & ex) -> net::awaitable<void> {
        if (Status st = check_serving(); !st.ok()) co_return (void) co_await respond_not_serving(ex, st);
        co_await on_openai(ex, openai_endpoint::messages);
    });
    add("POST", "/v1/messages/count_tokens", json_body, true, &node_impl::on_count_tokens);
}

// ---- lifecycle ----

Result<int> node_impl::bind() {
    auto port = http->bind();
    if (port.ok()) cfg.port = port.value();
    return port;
}

Status node_impl::load() {
    model_load_params lp;
    lp.offload = cfg.offload;
    std::string found;
    for (const auto & d : devices_available())
        found += (found.empty() ? "" : ", ") + d.name + " (" + d.description + ")";
    log_info("serve: devices: {}", found);
    auto m = loaded_model::load(cfg.model_path, lp);
    if (!m.ok()) return m.status();
    log_info("serve: {}: {}", cfg.model_path, offload_placement_text(m.value()->placement()));
    model = std::shared_ptr<const loaded_model>(std::move(m.value()));
    const std::string & p = cfg.model_path;
    model_file = p.substr(p.find_last_of('/') == std::string::npos ? 0 : p.find_last_of('/') + 1);
    model_name = cfg.alias.empty() ? model_file : cfg.alias;
    eog = text_eog_tokens(*model);
    auto formatter = chat_formatter::create(model->info(), cfg.chat);
    if (!formatter.ok()) return formatter.status();
    chat = std::move(formatter.value());
    if (Status u = chat->usable(); !u.ok()) log_warn("serve: chat is off: {}", u.message());
    if (cfg.engine.ctx.n_ctx == 0) {  // -c 0: the context the model was trained with (as llama-server)
        const uint32_t train = model->info().n_ctx_train;
        cfg.engine.ctx.n_ctx = std::clamp<uint32_t>(train, 16, 1 << 24);
    }
    if (cfg.tier) {
        // The tier hands states to the engine through its host prompt cache.
        if (cfg.engine.cache_ram_mib == 0)
            return Status(status_code::invalid_argument,
                          "--tier-valkey needs the host prompt cache (--cache-ram is 0)");
        cfg.engine.keep_finished = true;
        cfg.engine.state_kept = [this](const blob_ptr & b, size_t key_tokens) {
            if (tier_link * t = tier_ptr.load(std::memory_order_acquire)) t->offer(b, key_tokens);
        };
    }
    auto e = engine::create(model, cfg.engine);
    if (!e.ok()) return e.status();
    eng = std::move(e.value());
    if (cfg.embedding) {
        cfg.embedding->n_threads = cfg.engine.ctx.n_threads;
        auto em = embedder::create(*model, *cfg.embedding);
        if (!em.ok()) return em.status();
        emb = std::move(em.value());
        log_info("serve: embeddings on (pooling {}, {} dimensions, batches of {} tokens)",
                 pooling_kind_name(emb->pooling()), emb->n_embd(), emb->config().n_batch);
        if (emb->pooling() == pooling_kind::rank) {
            rerank = rerank_layout_of(*model);
            log_info("serve: rerank on ({})",
                     rerank.prompt_template ? "the model's rerank template" : "[BOS] query [EOS] [SEP] document [EOS]");
        }
    }
    if (cfg.media) {
        cfg.media->marker = openai_media_marker();
        cfg.media->n_threads = int32_t(cfg.engine.ctx.n_threads);
        cfg.media->flash_attn = cfg.engine.ctx.flash_attn_auto ? -1 : cfg.engine.ctx.flash_attn ? 1 : 0;  // (-fa)
        auto me = media_encoder::create(*model, *cfg.media);
        if (!me.ok()) return me.status();
        media = std::move(me.value());
        log_info("serve: {}{}{} on ({}, projector {})", media->vision() ? "images" : "",
                 media->vision() && media->audio() ? " and " : "", media->audio() ? "audio" : "", cfg.media->path,
                 media->fingerprint().substr(0, 16));
    }
    if (cfg.image_urls) {
        if (!media) return Status(status_code::invalid_argument, "--image-urls: needs --mmproj");
        auto tls = tls_client_context({cfg.image_urls->ca_file, "", ""});
        if (!tls.ok()) return Status(status_code::invalid_argument, "--image-url-ca: " + tls.status().message());
        image_tls = std::move(tls.value());
        log_warn("serve: --image-urls: this node fetches the http(s) images clients name (timeout {} ms, {} bytes "
                 "per image): any address it can reach, its own network included",
                 cfg.image_urls->timeout.count(), cfg.media->max_image_bytes);
    }
    if (Status v = eng->state_validation(); !v.ok())
        log_warn("serve: state validation is unavailable, so this node restores no states: {}", v.message());
    if (const auto & key = cfg.engine.limits.key)
        log_info("serve: states are authenticated (HMAC-SHA256, state secret {}{})", blob_key_id_hex(key->signing_id()),
                 key->size() > 1 ? " signs; " + std::to_string(key->size() - 1) + " more verify" : std::string());
    else
        log_warn("serve: states are not authenticated (no --state-secret-file): whoever reaches /v1/decode or the slot "
                 "state endpoints can hand this node a state; expose them to the router network only (docs/deploy.md)");
    {
        // KV events: the chain key names the model and the KV layout, so only nodes whose caches could serve
        // the same prefix share hashes.
        const kv_layout & l = eng->layout();
        const std::string layout = identity_kv_type_name(l.type_k) + "/" + identity_kv_type_name(l.type_v) +
                                   (l.flash_attn ? "/fa" : "/nofa") + (l.kv_unified ? "/unified" : "/streams");
        kv_publisher_config kc;
        kc.node = cfg.alias.empty() ? model_file : cfg.alias;
        kc.epoch = state_hold::random_id().substr(0, 16);
        kc.block_tokens = pd_kv_block_tokens;
        kc.seed = kv_block_seed(identity_fingerprint_hex(model->identity().fingerprint), layout, kc.block_tokens);
        kv = std::make_unique<kv_publisher>(kc);
        if (cfg.tier) {
            tier_link_config tc;
            tc.store.valkey = cfg.tier->valkey;
            tc.fingerprint = identity_fingerprint_hex(model->identity().fingerprint);
            tc.layout = identity_kv_type_name(l.type_k) + "." + identity_kv_type_name(l.type_v) +
                        (l.flash_attn ? ".fa" : ".nofa") +
                        (l.kv_unified ? ".unified" : ".streams" + std::to_string(l.n_seq_max));
            tc.block_seed = kc.seed;
            tc.block_tokens = kc.block_tokens;
            tc.ttl_ms = uint64_t(cfg.tier->ttl_s) * 1000;
            tc.key = cfg.engine.limits.key;
            tc.on_written = [pub = kv.get()](uint64_t block, uint64_t ttl_ms) { pub->tier_stored(block, ttl_ms); };
            if (cfg.tier->deltas)
                tc.make_delta = [e = eng.get(), key = cfg.engine.limits.key](const blob_view & full, uint32_t n_base) {
                    return e->delta_of(full, n_base, key.get());
                };
            auto t = tier_link::create(std::move(tc));
            if (!t.ok()) return Status(t.status().code(), "--tier-valkey: " + t.status().message());
            tier = std::move(t.value());
            tier_ptr.store(tier.get(), std::memory_order_release);
            log_info("serve: shared prefix-cache tier at {}:{} (entries live {} s)", cfg.tier->valkey.host,
                     cfg.tier->valkey.port, cfg.tier->ttl_s);
        }
    }
    ready.store(true, std::memory_order_release);
    if (cfg.cluster) {
        const node_cluster_config & c = *cfg.cluster;
        auto url = http_url_parse(c.advertise);
        if (!url.ok()) return Status(status_code::invalid_argument, "--advertise: " + url.status().message());
        registrar_config rc;
        rc.etcd = c.etcd;
        rc.key = cluster_node_key(c.cluster, record().role, url->host + ":" + std::to_string(url->port));
        rc.lease_ttl_s = c.lease_ttl_s;
        rc.load_interval_s = c.load_interval_s;
        registrar = std::make_unique<node_registrar>(rc, [this] { return record(); });
        registrar->start(http->context().get_executor());
    }
    return {};
}

void node_impl::shutdown() {
    if (stopping.load()) return;
    // Leave the cluster first, so routers stop sending work here before it is refused.
    if (registrar) {
        if (Status st = registrar->deregister(std::chrono::seconds(3)); !st.ok())
            log_warn("serve: deregistering: {} (the lease expires by itself)", st.message());
    }
    if (stopping.exchange(true)) return;
    // Generations a router can move go on on other decode nodes (live migration): each pauses before its next
    // token and its state waits here until a node fetched it. The rest finish here for up to drain_s, then are
    // cancelled: every handle gets a terminal event, so streams end with an error event and [DONE]; then the
    // edge closes what is left.
    const size_t moving = migrations.migrate(0);
    if (moving > 0) log_info("serve: draining: {} generation(s) move to other decode nodes", moving);
    const auto drain_until = steady_clock::now() + std::chrono::duration_cast<steady_clock::duration>(
                                                       std::chrono::duration<double>(cfg.drain_s));
    while ((n_admitted.load() > 0 || n_unfetched() > 0) && steady_clock::now() < drain_until)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (eng) eng->stop();
    // Streams that were cancelled write their error event and [DONE] before the connections close.
    const auto flush_until = steady_clock::now() + std::chrono::seconds(2);
    while (n_admitted.load() > 0 && steady_clock::now() < flush_until)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    http->stop();
}

// ---- node: the public face forwards to node_impl ----

node::node(node_config cfg) : impl_(std::make_unique<node_impl>(std::move(cfg))) {}
node::~node() { shutdown(); }
Result<int> node::bind() { return impl_->bind(); }
void node::start() { impl_->start(); }
Status node::load() { return impl_->load(); }
bool node::running() const { return impl_->running(); }
void node::shutdown() { impl_->shutdown(); }
bool node::drain_requested() const { return impl_->drain_requested(); }

}  // namespace baton
