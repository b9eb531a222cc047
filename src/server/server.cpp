// server.cpp — the node's lifecycle, routes and shared request helpers (auth and body caps are the edge's).
#include "baton/server/server.h"
#include "baton/base/log.h"
#include "baton/pd/pd_protocol.h"

#include <algorithm>
#include <cstdio>
#include <thread>

#include "baton/base/buffer_pool.h"
#include "server_impl.h"
#include "server_test_seam.h"

namespace baton {

// ---- request helpers ----

server_impl::server_impl(server_config c)
    : cfg(std::move(c)), http(std::make_unique<http_server>(http_server_config{.host = cfg.host,
                                                                               .port = cfg.port,
                                                                               .limits = cfg.limits,
                                                                               .threads = cfg.http_threads,
                                                                               .api_key = cfg.api_key,
                                                                               .log_name = "serve",
                                                                               .cors = cfg.cors})) {}

Status server_impl::check_serving() const {
    if (stopping.load()) return {status_code::unavailable, "the node is draining: send the request to another node"};
    if (!ready.load(std::memory_order_acquire)) return {status_code::unavailable, "the model is still loading"};
    return {};
}

Status server_impl::check_role(bool allowed, const char * endpoint) const {
    if (allowed) return {};
    return {status_code::busy, std::string(endpoint) + " is not served by a node with role " + node_role_name(cfg.role)};
}

Result<admission_ptr> server_impl::admit() {
    const uint32_t cap = cfg.engine.ctx.n_seq_max + cfg.engine.queue_max;
    if (n_admitted.fetch_add(1) >= cap) {
        n_admitted.fetch_sub(1);
        metrics.count_admission_reject();
        return Status(status_code::unavailable, "no free slot: " + std::to_string(cfg.engine.ctx.n_seq_max) +
                                                    " slots busy and " + std::to_string(cfg.engine.queue_max) +
                                                    " requests queued");
    }
    return std::make_unique<admission_ticket>(n_admitted);
}

steady_clock::time_point server_impl::deadline_from_now() const {
    if (cfg.timeout_s <= 0) return steady_clock::time_point::max();
    return steady_clock::now() + std::chrono::duration_cast<steady_clock::duration>(std::chrono::duration<double>(cfg.timeout_s));
}

event_wait_limits server_impl::wait_limits(steady_clock::time_point deadline) const {
    event_wait_limits lim;
    lim.deadline = deadline;
    lim.timeout_s = cfg.timeout_s;
    return lim;
}

net::awaitable<Result<event_done>> server_impl::run_to_done(http_exchange & ex, engine_task task) {
    const auto lim = wait_limits(deadline_from_now());
    auto h = eng->submit(std::move(task));
    if (!h.ok()) co_return h.status();
    event_watch w(h.value(), ex.executor());
    for (;;) {
        engine_event ev;
        Status st = co_await event_wait(w, ev, lim, &ex);
        if (!st.ok()) co_return st;
        if (auto * e = std::get_if<event_error>(&ev)) co_return std::move(e->error);
        if (auto * d = std::get_if<event_done>(&ev)) co_return std::move(*d);
    }
}

net::awaitable<Result<blob_ptr>> server_impl::blob_parse_edge(std::vector<uint8_t> bytes) {
    const blob_limits lim = cfg.engine.limits;
    auto b = co_await http->offload([bytes = std::move(bytes), lim]() mutable { return validated_blob::parse(std::move(bytes), lim); });
    if (!b.ok()) metrics.count_blob_reject(b.status().code());
    co_return b;
}

net::awaitable<void> server_impl::send_blob(http_exchange & ex, std::vector<uint8_t> blob, http_headers headers) {
    size_t cut = blob.size();
    if (seam && seam->on_blob_out) cut = std::min(cut, seam->on_blob_out(blob));
    bool ok = co_await ex.begin(200, "application/octet-stream", std::move(headers), uint64_t(blob.size()));
    if (ok) ok = co_await ex.write(blob.data(), cut);
    if (ok && cut < blob.size()) ex.abort();  // the test seam cut the blob: the connection drops mid-body
    else if (ok) co_await ex.end();
    buffer_pool::shared().give(std::move(blob));
}

net::awaitable<void> server_impl::respond_not_serving(http_exchange & ex, const Status & st) {
    http_response r = http_error_response(st);
    if (stopping.load()) r.headers.emplace_back(std::string(pd_header_draining), "1");
    co_await ex.respond(std::move(r));
}

net::awaitable<void> server_impl::on_admin_drain(http_exchange & ex) {
    drain_requested.store(true);  // the serve loop runs shutdown(), as on SIGTERM
    co_await ex.respond(http_response::json("{\"draining\":true}", 202));
}

node_record server_impl::record() const {
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
    return r;
}

// ---- routes ----

void server_impl::install_routes() {
    using handler = net::awaitable<void> (server_impl::*)(http_exchange &);
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
    add("GET", "/health", open, false, &server_impl::on_health);
    add("GET", "/v1/health", open, false, &server_impl::on_health);
    add("GET", "/metrics", none, false, &server_impl::on_metrics);
    add("GET", "/v1/models", none, true, &server_impl::on_models);
    add("GET", "/models", none, true, &server_impl::on_models);
    add("POST", "/tokenize", json_body, true, &server_impl::on_tokenize);
    add("POST", "/detokenize", json_body, true, &server_impl::on_detokenize);
    add("POST", "/apply-template", json_body, true, &server_impl::on_apply_template);
    add("GET", "/props", none, true, &server_impl::on_props);
    add("POST", "/props", json_body, true, &server_impl::on_props);
    add("GET", "/slots", none, true, &server_impl::on_llama_slots);
    // State changes and state (issue 22): outside CORS, and refused to browser pages (CSRF), so no web page
    // can drain a node, save/restore/erase a slot, read or replace its state, or feed it a blob.
    auto closed = [](http_route_options o) {
        o.same_origin_only = true;
        return o;
    };
    add("POST", "/slots/{id}", closed(json_body), true, &server_impl::on_slot_action);
    add("GET", "/v1/slots", none, true, &server_impl::on_slots);
    add("GET", pd_path_slot_state.data(), closed(none), true, &server_impl::on_state_get);
    add("DELETE", pd_path_slot_state.data(), closed(none), true, &server_impl::on_state_delete);
    add("PUT", pd_path_slot_state.data(), closed(blob_body), true, &server_impl::on_state_put);
    add("POST", pd_path_decode.data(), closed(blob_body), true, &server_impl::on_decode);
    add("POST", pd_path_prefill.data(), closed(json_body), true, &server_impl::on_prefill);
    add("POST", "/admin/drain", closed(none), false, &server_impl::on_admin_drain);
    // The OpenAI routes, and llama-server's unprefixed aliases of them.
    for (const char * path : {"/v1/completions", "/completions"}) {
        http->route("POST", path, json_body, [this](http_exchange & ex) -> net::awaitable<void> {
            if (Status st = check_serving(); !st.ok()) co_return (void) co_await respond_not_serving(ex, st);
            co_await on_openai(ex, openai_endpoint::completions);
        });
    }
    http->route("POST", "/completion", json_body, [this](http_exchange & ex) -> net::awaitable<void> {
        if (Status st = check_serving(); !st.ok()) co_return (void) co_await respond_not_serving(ex, st);
        co_await on_openai(ex, openai_endpoint::completion);
    });
    for (const char * path : {"/v1/chat/completions", "/chat/completions"}) {
        http->route("POST", path, json_body, [this](http_exchange & ex) -> net::awaitable<void> {
            if (Status st = check_serving(); !st.ok()) co_return (void) co_await respond_not_serving(ex, st);
            co_await on_openai(ex, openai_endpoint::chat);
        });
    }
}

// ---- lifecycle ----

server::server(server_config cfg) : impl_(std::make_unique<server_impl>(std::move(cfg))) {
    server_impl & s = *impl_;
    s.cfg.engine.limits.max_bytes = s.cfg.max_blob_bytes;
    s.install_routes();
}

server::~server() { shutdown(); }

bool server::drain_requested() const { return impl_->drain_requested.load(); }

Result<int> server::bind() {
    server_impl & s = *impl_;
    auto port = s.http->bind();
    if (port.ok()) s.cfg.port = port.value();
    return port;
}

void server::start() { impl_->http->start(); }

bool server::running() const { return impl_->http->running(); }

Status server::load() {
    server_impl & s = *impl_;
    model_load_params lp;
    lp.offload = s.cfg.offload;
    std::string found;
    for (const auto & d : devices_available())
        found += (found.empty() ? "" : ", ") + d.name + " (" + d.description + ")";
    log_info("serve: devices: {}", found);
    auto m = loaded_model::load(s.cfg.model_path, lp);
    if (!m.ok()) return m.status();
    log_info("serve: {}: {}", s.cfg.model_path, offload_placement_text(m.value()->placement()));
    s.model = std::shared_ptr<const loaded_model>(std::move(m.value()));
    const std::string & p = s.cfg.model_path;
    s.model_file = p.substr(p.find_last_of('/') == std::string::npos ? 0 : p.find_last_of('/') + 1);
    s.model_name = s.cfg.alias.empty() ? s.model_file : s.cfg.alias;
    auto chat = chat_formatter::create(s.model->info(), s.cfg.chat);
    if (!chat.ok()) return chat.status();
    s.chat = std::move(chat.value());
    if (Status u = s.chat->usable(); !u.ok()) log_warn("serve: chat is off: {}", u.message());
    if (s.cfg.engine.ctx.n_ctx == 0) {  // -c 0: the context the model was trained with (as llama-server)
        const uint32_t train = s.model->info().n_ctx_train;
        s.cfg.engine.ctx.n_ctx = std::clamp<uint32_t>(train, 16, 1 << 24);
    }
    auto e = engine::create(s.model, s.cfg.engine);
    if (!e.ok()) return e.status();
    s.eng = std::move(e.value());
    if (Status v = s.eng->state_validation(); !v.ok())
        log_warn("serve: state validation is unavailable, so this node restores no states: {}", v.message());
    if (const auto & key = s.cfg.engine.limits.key)
        log_info("serve: states are authenticated (HMAC-SHA256, state secret {}{})", blob_key_id_hex(key->signing_id()),
                 key->size() > 1 ? " signs; " + std::to_string(key->size() - 1) + " more verify" : std::string());
    else
        log_warn("serve: states are not authenticated (no --state-secret-file): whoever reaches /v1/decode or the slot "
                 "state endpoints can hand this node a state; expose them to the router network only (docs/deploy.md)");
    s.ready.store(true, std::memory_order_release);
    if (s.cfg.cluster) {
        const node_cluster_config & c = *s.cfg.cluster;
        auto url = http_url_parse(c.advertise);
        if (!url.ok()) return Status(status_code::invalid_argument, "--advertise: " + url.status().message());
        registrar_config rc;
        rc.etcd = c.etcd;
        rc.key = cluster_node_key(c.cluster, s.record().role, url->host + ":" + std::to_string(url->port));
        rc.lease_ttl_s = c.lease_ttl_s;
        rc.load_interval_s = c.load_interval_s;
        s.registrar = std::make_unique<node_registrar>(rc, [&s] { return s.record(); });
        s.registrar->start(s.http->context().get_executor());
    }
    return {};
}

void server::shutdown() {
    server_impl & s = *impl_;
    if (s.stopping.load()) return;
    // Leave the cluster first, so routers stop sending work here before it is refused.
    if (s.registrar) {
        if (Status st = s.registrar->deregister(std::chrono::seconds(3)); !st.ok())
            log_warn("serve: deregistering: {} (the lease expires by itself)", st.message());
    }
    if (s.stopping.exchange(true)) return;
    // Finish what is in flight for up to drain_s, then cancel the rest: every handle gets a terminal event,
    // so streams end with an error event and [DONE]; then the edge closes what is left.
    const auto drain_until = steady_clock::now() + std::chrono::duration_cast<steady_clock::duration>(std::chrono::duration<double>(s.cfg.drain_s));
    while (s.n_admitted.load() > 0 && steady_clock::now() < drain_until)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (s.eng) s.eng->stop();
    // Streams that were cancelled write their error event and [DONE] before the connections close.
    const auto flush_until = steady_clock::now() + std::chrono::seconds(2);
    while (s.n_admitted.load() > 0 && steady_clock::now() < flush_until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    s.http->stop();
}

}  // namespace baton
