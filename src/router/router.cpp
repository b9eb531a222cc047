// router.cpp — the router's lifecycle (create, start, stop, wait), its routes table, and the headers it
// sends to nodes. The request flow lives in the files router_impl.h lists, one concern each.
#include "baton/router/router.h"

#include <chrono>
#include <string>
#include <thread>
#include <utility>

#include "baton/http/http_errors.h"
#include "router_impl.h"

namespace baton {

http_headers router_impl::node_headers(std::string_view request_id) const {
    http_headers h;
    if (!cfg.node_key.empty()) h.emplace_back("Authorization", "Bearer " + cfg.node_key);
    if (!request_id.empty()) h.emplace_back(std::string(http_header_request_id), std::string(request_id));
    return h;
}

void router_impl::routes() {
    http_route_options none, open, json_body;
    open.open = true;
    json_body.max_body_bytes = cfg.max_body_bytes;
    http->route("GET", "/health", open, [this](http_exchange & ex) -> net::awaitable<void> {
        // With etcd, the body says whether the router follows it (it serves its last membership when not).
        const std::string etcd = !watch               ? ""
                                 : watch->connected() ? ",\"etcd\":\"connected\""
                                                      : ",\"etcd\":\"disconnected\"";
        if (decode.n_healthy() > 0)
            co_return (void) co_await ex.respond(http_response::json("{\"status\":\"ok\"" + etcd + "}"));
        http_response r = http_error_response(Status(status_code::unavailable, "no healthy decode node"));
        if (watch) r.body.insert(r.body.size() - 1, etcd);  // {"error":{...},"etcd":...}
        co_await ex.respond(std::move(r));
    });
    http->route("GET", "/metrics", none, [this](http_exchange & ex) -> net::awaitable<void> {
        http_response r;
        r.content_type = "text/plain; version=0.0.4";
        http->render_metrics(r.body);
        metrics.render(r.body, prefill_gate.waiting() + decode_gate.waiting());
        render_cluster_metrics(r.body);
        co_await ex.respond(std::move(r));
    });
    // The OpenAI routes and llama-server's unprefixed aliases (/completions: its native shape); tokenizing goes to a node (its vocabulary).
    for (const char * path : {"/v1/models", "/models"})
        http->route("GET", path, none, [this](http_exchange & ex) { return on_models(ex); });
    http->route("POST", "/v1/completions", json_body,
                [this](http_exchange & ex) { return on_generation(ex, openai_endpoint::completions); });
    for (const char * path : {"/v1/chat/completions", "/chat/completions"})
        http->route("POST", path, json_body,
                    [this](http_exchange & ex) { return on_generation(ex, openai_endpoint::chat); });
    http->route("POST", "/infill", json_body,
                [this](http_exchange & ex) { return on_generation(ex, openai_endpoint::infill); });
    // Anthropic's Messages API: a chat like the others (PD included); its token count is a node's (its template).
    http->route("POST", "/v1/messages", json_body,
                [this](http_exchange & ex) { return on_generation(ex, openai_endpoint::messages); });
    for (const char * path : {"/completion", "/completions"})  // llama-server's native shape (as a node's)
        http->route("POST", path, json_body,
                    [this](http_exchange & ex) { return on_generation(ex, openai_endpoint::completion); });
    // (A coroutine lambda: forward_to_node keeps a reference to its path, which must outlive the call.)
    http->route("GET", "/props", none, [this](http_exchange & ex) -> net::awaitable<void> {
        co_await forward_to_node(ex, "GET", "/props", "");
    });
    http->route("GET", "/v1/health", open, [this](http_exchange & ex) -> net::awaitable<void> {
        if (decode.n_healthy() > 0) co_return (void) co_await ex.respond(http_response::json("{\"status\":\"ok\"}"));
        co_await ex.respond_error(Status(status_code::unavailable, "no healthy decode node"));
    });
    // The live view: the page, its chart library, and the state it polls (the pools, the last requests).
    live_view_routes(*http, [this] { return view_state(); });
    // Token calls, embeddings, rerank and Messages' token counts: answered by a node of the model the body names
    // (no PD: no generation).
    for (const char * path : {"/tokenize", "/detokenize", "/apply-template", "/embedding", "/embeddings",
                              "/v1/embeddings", "/rerank", "/reranking", "/v1/rerank", "/v1/reranking",
                              "/v1/messages/count_tokens"})
        http->route("POST", path, json_body, [this, p = std::string(path)](http_exchange & ex) -> net::awaitable<void> {
            co_await forward_to_node(ex, "POST", p, ex.request().body_text());
        });
}

// ---- lifecycle ----

router::router(std::unique_ptr<router_impl> impl) : impl_(std::move(impl)) {}
router::~router() { stop(); }

Result<std::unique_ptr<router>> router::create(const router_config & cfg) {
    if (cfg.decode_urls.empty() && !cfg.etcd)
        return Status(status_code::invalid_argument, "--decode: at least one decode node URL is required (or --etcd)");
    if (cfg.etcd) BATON_RETURN_IF_ERROR(cluster_name_check(cfg.cluster));
    if (cfg.port < 0 || cfg.port > 65535) return Status(status_code::invalid_argument, "--port: " + std::to_string(cfg.port) + " is not in 0..65535");
    if (cfg.timeout_s <= 0) return Status(status_code::invalid_argument, "--timeout: must be > 0");
    if (!(cfg.health_interval_s > 0)) return Status(status_code::invalid_argument, "--health-interval: must be > 0");
    if (!(cfg.health_timeout_s > 0)) return Status(status_code::invalid_argument, "--health-timeout: must be > 0");
    if (cfg.queue_max < 1) return Status(status_code::invalid_argument, "--queue-max: must be >= 1");
    if (cfg.node_queue < -1) return Status(status_code::invalid_argument, "--node-queue: must be >= 0 (or -1: as many as the node's slots)");
    if (cfg.http_threads < 1 || cfg.http_threads > 256) return Status(status_code::invalid_argument, "--http-threads: must be in 1..256");
    if (Status st = http_limits_check(cfg.limits); !st.ok()) return st;
    std::vector<http_url> pre, dec;
    for (auto [list, out] : {std::pair{&cfg.prefill_urls, &pre}, std::pair{&cfg.decode_urls, &dec}})
        for (const auto & u : *list) {
            auto p = http_url_parse(u);
            if (!p.ok()) return p.status();
            out->push_back(p.value());
        }
    auto impl = std::make_unique<router_impl>(cfg, pre, dec);
    if (!cfg.model_path.empty()) {
        model_load_params p;
        p.vocab_only = true;
        auto m = loaded_model::load(cfg.model_path, p);
        if (!m.ok()) return m.status();
        impl->vocab = std::move(m.value());
        chat_format_config chat_cfg;
        chat_cfg.max_prompt_bytes = cfg.prompt.max_prompt_bytes;
        auto chat = chat_formatter::create(impl->vocab->info(), chat_cfg);
        if (chat.ok()) impl->chat = std::move(chat.value());
    }
    impl->http = std::make_unique<http_server>(http_server_config{.host = cfg.host,
                                                                  .port = cfg.port,
                                                                  .limits = cfg.limits,
                                                                  .threads = cfg.http_threads,
                                                                  .api_key = cfg.api_key,
                                                                  .log_name = "route",
                                                                  .cors = cfg.cors,
                                                                  .static_dir = cfg.static_dir});
    impl->routes();
    return std::unique_ptr<router>(new router(std::move(impl)));
}

Result<int> router::start() {
    router_impl & r = *impl_;
    auto port = r.http->bind();
    if (!port.ok()) return Status(status_code::unavailable, port.status().message());
    r.http->start();
    if (r.cfg.etcd) {
        // Watch rounds of 1 s: etcd's graceful stop waits for open watch streams (measured: 7 s with one
        // open), refusing keepalives meanwhile, so a long round would let every node's lease expire.
        r.watch = std::make_unique<cluster_watch>(
            *r.cfg.etcd, cluster_prefix(r.cfg.cluster), [&r](const cluster_members & m) { r.on_members(m); }, 1.0);
        r.watch->start(r.http->context().get_executor());
        // The first listing comes before the router reports that it listens (bounded: etcd may be down).
        const auto until = steady::now() + std::chrono::seconds(5);
        while (!r.watch->listed() && steady::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    // The first health round runs before the router reports that it listens, so node capacities are known
    // when the first client arrives; later rounds run every --health-interval.
    auto ex = net::make_strand(r.http->context());
    r.health_stop = async_notify::make(ex);
    r.health_done = net::co_spawn(
        ex,
        [&r]() -> net::awaitable<void> {
            for (;;) {
                co_await r.health_round();
                const auto next = steady::now() + std::chrono::milliseconds(int64_t(r.cfg.health_interval_s * 1000));
                if (co_await r.health_stop->wait_until(next)) co_return;
            }
        },
        net::use_future);
    const auto until = steady::now() + std::chrono::seconds(5);
    auto capacities_known = [&r] {
        for (size_t i = 0; i < r.decode.size(); ++i)
            if (r.decode.healthy(i) && r.decode.capacity(i) == UINT32_MAX) return false;
        return true;
    };
    while (!capacities_known() && steady::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return port.value();
}

void router::stop() {
    {
        lock_guard lk(impl_->mu);
        if (impl_->stopping && !impl_->http->running()) return;
        impl_->stopping = true;
    }
    impl_->cv.notify_all();
    if (impl_->watch) impl_->watch->stop();
    if (impl_->health_stop) impl_->health_stop->notify();
    if (impl_->health_done.valid()) impl_->health_done.wait_for(std::chrono::seconds(3));
    impl_->http->stop();
}

void router::wait() {
    lock_guard lk(impl_->mu);
    impl_->cv.wait(impl_->mu, [&]() BATON_REQUIRES(impl_->mu) { return impl_->stopping; });
}

}  // namespace baton
