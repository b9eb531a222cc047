// router.cpp — request flow: parse at the edge, choose PD or direct, prefill hop, decode relay, fallbacks.
#include "router.h"

#include <httplib.h>

#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include "baton/model.h"
#include "node_pool.h"
#include "router_metrics.h"
#include "server/http_errors.h"
#include "server/listen_backlog.h"
#include "server/openai.h"
#include "upstream.h"

namespace baton {

using steady = std::chrono::steady_clock;

namespace {

double seconds_between(steady::time_point a, steady::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// What one client request carries through the flow.
struct route_ctx {
    openai_request req;
    std::string body;              // the client's body, forwarded as is on direct/fallback paths
    std::string path;              // /v1/completions | /v1/chat/completions
    steady::time_point t_arrival, deadline;
    uint64_t affinity = 0;
    std::string route = "direct";  // for response headers: pd | direct | fallback:<reason>
};

enum class relay_outcome : uint8_t { done, blob_rejected, blob_failed, failed };

// A prefill node's blob on its way: its call (the producer, kept alive until the blob is in) and the
// relay the decode hop reads from while the bytes arrive.
struct prefill_stream {
    std::unique_ptr<upstream_call> call;
    std::shared_ptr<body_relay> blob;
    size_t node = 0;
    steady::time_point t_headers;
};

struct relay_result {
    relay_outcome outcome = relay_outcome::done;
    Status error;  // when failed
};

}  // namespace

class router_impl {
  public:
    router_config cfg;
    node_pool prefill, decode;
    std::unique_ptr<loaded_model> vocab;
    router_metrics metrics;
    httplib::Server http;
    std::thread http_thread, health_thread;
    std::mutex mu;
    std::condition_variable cv;
    bool stopping = false;  // GUARDED_BY(mu)

    explicit router_impl(const router_config & c)
        : cfg(c), prefill(c.prefill_urls, c.load_cap), decode(c.decode_urls, c.load_cap) {}

    void routes();
    void health_loop();
    bool authorized(const httplib::Request & req, httplib::Response & res);
    void handle_generation(const httplib::Request & req, httplib::Response & res, openai_endpoint ep);
    uint32_t count_tokens(const openai_request & r) const;
    Result<prefill_stream> prefill_hop(route_ctx & ctx);
    void prefill_done(route_ctx & ctx, prefill_stream & p);
    relay_result relay(route_ctx & ctx, const std::string & path, const std::string & body, const std::string & ctype,
                       httplib::Response & res, std::shared_ptr<body_relay> stream_body = nullptr);
    void stream_to_client(route_ctx & ctx, std::shared_ptr<upstream_call> call, size_t node, httplib::Response & res);
    void reply_error(httplib::Response & res, const Status & st);
};

// ---- admission ----

bool router_impl::authorized(const httplib::Request & req, httplib::Response & res) {
    if (cfg.api_key.empty() || req.get_header_value("Authorization") == "Bearer " + cfg.api_key) return true;
    reply_error(res, Status(status_code::unauthenticated, "missing or wrong API key (Authorization: Bearer KEY)"));
    return false;
}

void router_impl::reply_error(httplib::Response & res, const Status & st) { http_send_error(res, st); }

uint32_t router_impl::count_tokens(const openai_request & r) const {
    if (!r.prompt_tokens.empty()) return uint32_t(r.prompt_tokens.size());
    if (vocab) {
        auto g = openai_to_gen(r, *vocab);
        if (g.ok()) return uint32_t(g->prompt.size());
    }
    // Without a vocabulary: about 4 bytes per token (documented; pass -m for exact counts).
    size_t bytes = r.prompt.size();
    for (const auto & m : r.messages) bytes += m.content.size() + m.role.size() + 8;
    return uint32_t(bytes / 4);
}

void router_impl::handle_generation(const httplib::Request & req, httplib::Response & res, openai_endpoint ep) {
    route_ctx ctx;
    ctx.t_arrival = steady::now();
    ctx.deadline = ctx.t_arrival + std::chrono::milliseconds(int64_t(cfg.timeout_s * 1000));
    ctx.path = ep == openai_endpoint::chat ? "/v1/chat/completions" : "/v1/completions";
    auto parsed = openai_parse(req.body, ep);
    if (!parsed.ok()) return reply_error(res, parsed.status());
    ctx.req = std::move(parsed.value());
    ctx.body = req.body;
    std::string prefix = ctx.req.prompt;
    for (const auto & m : ctx.req.messages) prefix += m.role + ":" + m.content + "\n";
    ctx.affinity = affinity_key(prefix);

    const bool pd = prefill.size() > 0 && count_tokens(ctx.req) >= cfg.pd_min_tokens;
    metrics.mode(pd ? "pd" : "direct");
    std::string reason;
    if (pd) {
        ctx.route = "pd";
        auto blob = prefill_hop(ctx);
        if (blob.ok()) {
            // The decode hop starts while the blob is still arriving: the two transfers overlap.
            relay_result r = relay(ctx, "/v1/decode", "", "application/octet-stream", res, blob->blob);
            prefill_done(ctx, blob.value());
            if (r.outcome == relay_outcome::done) return;
            if (r.outcome == relay_outcome::failed) return reply_error(res, r.error);
            reason = r.outcome == relay_outcome::blob_failed ? "prefill_failed" : "blob_rejected";
            if (r.outcome == relay_outcome::blob_failed) blob = r.error;
        } else {
            reason = "prefill_failed";
            if (blob.status().code() == status_code::invalid_argument) return reply_error(res, blob.status());
        }
        metrics.fallback(reason);
        if (cfg.fallback == fallback_policy::fail)
            return reply_error(res, Status(status_code::upstream_error, reason == "prefill_failed"
                                                                            ? "prefill failed and --fallback is fail: " + blob.status().message()
                                                                            : "the decode node rejected the blob and --fallback is fail"));
        ctx.route = "fallback:" + reason;
    }
    relay_result r = relay(ctx, ctx.path, ctx.body, "application/json", res);
    if (r.outcome != relay_outcome::done) reply_error(res, r.outcome == relay_outcome::failed ? r.error
                                                                                              : Status(status_code::upstream_error, "the decode node rejected the request"));
}

// ---- the prefill hop: every healthy prefill node once, least loaded first ----

// On success the node stays acquired and its blob keeps arriving; prefill_done ends the hop.
Result<prefill_stream> router_impl::prefill_hop(route_ctx & ctx) {
    std::string body = openai_request_json(ctx.req);  // canonical, with "endpoint" set
    std::vector<size_t> tried;
    Status last(status_code::upstream_error, "no healthy prefill node");
    while (auto node = prefill.pick_least_loaded(tried)) {
        tried.push_back(node->index);
        if (steady::now() >= ctx.deadline) return Status(status_code::deadline_exceeded, "request deadline passed during prefill");
        prefill.acquire(node->index);
        upstream_request up{node->url, "/v1/prefill", body, "application/json", cfg.node_key, ctx.deadline, nullptr, false};
        up.relay_response = true;
        up.relay_max_bytes = cfg.max_blob_bytes;
        auto call = upstream_call::start(std::move(up));
        auto status = call->wait_headers();
        if (status.ok() && status.value() == 200 && call->relay()) {
            prefill_stream p;
            p.blob = call->relay();
            p.call = std::move(call);
            p.node = node->index;
            p.t_headers = steady::now();
            return p;
        }
        if (status.ok() && status.value() == 200) {  // a blob without a length, or over --max-blob-mb: not relayed
            call.reset();
            prefill.release(node->index);
            metrics.node_outcome(node->url, "blob_too_large");
            last = Status(status_code::upstream_error, node->url + "/v1/prefill answered a blob without a Content-Length or over " +
                                                           std::to_string(cfg.max_blob_bytes >> 20) + " MiB (--max-blob-mb)");
            continue;
        }
        Result<std::string> blob = status.ok() ? call->read_all() : Result<std::string>(status.status());
        prefill.release(node->index);
        if (!status.ok()) {
            if (status.status().code() == status_code::upstream_error) prefill.mark_failure(node->index);
            metrics.node_outcome(node->url, status.status().code() == status_code::deadline_exceeded ? "timeout" : "unreachable");
            last = status.status();
            continue;
        }
        if (status.value() == 400) {  // the client's fault: no other node will accept it either
            metrics.node_outcome(node->url, "bad_request");
            return Status(status_code::invalid_argument, "prefill node rejected the request: " + (blob.ok() ? blob.value() : ""));
        }
        metrics.node_outcome(node->url, "http_" + std::to_string(status.value()));
        last = Status(status_code::upstream_error, node->url + "/v1/prefill answered " + std::to_string(status.value()));
    }
    return last;
}

// prefill_done waits for the blob's last byte (normally already in), records the hop and frees the node.
void router_impl::prefill_done(route_ctx & ctx, prefill_stream & p) {
    const Status st = p.blob->wait_end(ctx.deadline);
    const std::string & url = prefill.url(p.node);
    if (st.ok()) {
        metrics.node_outcome(url, "ok");
        metrics.blob(p.blob->length(), seconds_between(p.t_headers, p.blob->ended_at()));
    } else {
        if (st.code() == status_code::upstream_error) prefill.mark_failure(p.node);
        metrics.node_outcome(url, st.code() == status_code::deadline_exceeded ? "timeout" : "unreachable");
    }
    p.call.reset();  // cancels a transfer still running (the relay failed or the deadline passed)
    prefill.release(p.node);
}

// ---- relaying to a decode node (blob or direct), with node retry before the first byte ----

relay_result router_impl::relay(route_ctx & ctx, const std::string & path, const std::string & body,
                                const std::string & ctype, httplib::Response & res, std::shared_ptr<body_relay> stream_body) {
    std::vector<size_t> tried;
    Status last(status_code::unavailable, "no healthy decode node");
    while (auto node = decode.pick_affine(ctx.affinity, tried)) {
        tried.push_back(node->index);
        if (steady::now() >= ctx.deadline) return {relay_outcome::failed, Status(status_code::deadline_exceeded, "request deadline passed")};
        decode.acquire(node->index);
        upstream_request up{node->url, path, body, ctype, cfg.node_key, ctx.deadline, nullptr, false};
        up.body_from = stream_body;
        std::shared_ptr<upstream_call> call = upstream_call::start(std::move(up));
        auto status = call->wait_headers();
        if (!status.ok() && stream_body && stream_body->failed()) {  // the blob never fully arrived: not this node's fault
            decode.release(node->index);
            return {relay_outcome::blob_failed, stream_body->wait_end(ctx.deadline)};
        }
        if (!status.ok()) {  // before the first byte: another node may serve it
            decode.release(node->index);
            if (status.status().code() == status_code::upstream_error) decode.mark_failure(node->index);
            metrics.node_outcome(node->url, status.status().code() == status_code::deadline_exceeded ? "timeout" : "unreachable");
            last = status.status();
            continue;
        }
        const int code = status.value();
        if (code == 422 && path == "/v1/decode") {
            decode.release(node->index);
            metrics.node_outcome(node->url, "blob_rejected");
            return {relay_outcome::blob_rejected, {}};
        }
        if (code == 503) {  // no free slot there: try another node
            decode.release(node->index);
            metrics.node_outcome(node->url, "busy");
            last = Status(status_code::unavailable, "every decode node is busy");
            continue;
        }
        metrics.node_outcome(node->url, code == 200 ? "ok" : "http_" + std::to_string(code));
        res.set_header("X-Baton-Route", ctx.route);
        res.set_header("X-Baton-Decode-Node", node->url);
        if (code == 200 && ctx.req.stream) {
            stream_to_client(ctx, call, node->index, res);
            return {relay_outcome::done, {}};
        }
        auto all = call->read_all();
        decode.release(node->index);
        if (!all.ok()) return {relay_outcome::failed, Status(status_code::upstream_error, "decode node failed mid-response: " + all.status().message())};
        res.status = code;
        res.set_content(all.value(), call->content_type().empty() ? "application/json" : call->content_type());
        if (code == 200) metrics.ttft(seconds_between(ctx.t_arrival, steady::now()));
        return {relay_outcome::done, {}};
    }
    return {relay_outcome::failed, last};
}

void router_impl::stream_to_client(route_ctx & ctx, std::shared_ptr<upstream_call> call, size_t node, httplib::Response & res) {
    res.status = 200;
    auto first = std::make_shared<bool>(true);
    const auto t_arrival = ctx.t_arrival;
    res.set_chunked_content_provider(
        call->content_type().empty() ? "text/event-stream" : call->content_type(),
        [this, call, first, t_arrival](size_t, httplib::DataSink & sink) {
            std::string chunk;
            if (call->next_chunk(chunk)) {
                if (*first) {
                    *first = false;
                    metrics.ttft(seconds_between(t_arrival, steady::now()));
                }
                if (!sink.write(chunk.data(), chunk.size())) {
                    std::fprintf(stderr, "baton: route: client went away mid-stream; cancelling the upstream request\n");
                    call->cancel();
                }
                return true;
            }
            Status st = call->end_status();
            if (!st.ok()) {  // after the first byte: an explicit error event, then the stream closes
                std::fprintf(stderr, "baton: route: stream from the decode node ended with an error: %s\n", st.message().c_str());
                const status_code code = st.code() == status_code::deadline_exceeded ? st.code() : status_code::upstream_error;
                const std::string ev = "data: " + http_error_json(Status(code, "decode node failed mid-stream: " + st.message())) +
                                       "\n\ndata: [DONE]\n\n";
                sink.write(ev.data(), ev.size());
            }
            sink.done();
            return true;
        },
        [this, call, node](bool) {
            call->cancel();
            decode.release(node);
        });
}

// ---- health ----

void router_impl::health_loop() {
    auto check = [&](node_pool & pool) {
        for (size_t i = 0; i < pool.size(); ++i) {
            httplib::Client c(pool.url(i));
            c.set_connection_timeout(std::chrono::milliseconds(500));
            c.set_read_timeout(std::chrono::milliseconds(1000));
            auto r = c.Get("/health");
            if (r && r->status == 200) pool.mark_healthy(i);
            else pool.mark_failure(i);
        }
    };
    std::unique_lock<std::mutex> lk(mu);
    while (!stopping) {
        lk.unlock();
        check(prefill);
        check(decode);
        lk.lock();
        cv.wait_for(lk, std::chrono::milliseconds(int64_t(cfg.health_interval_s * 1000)), [&] { return stopping; });
    }
}

void router_impl::routes() {
    http.set_payload_max_length(cfg.max_body_bytes);
    http.set_tcp_nodelay(true);  // no Nagle delay on relayed SSE events
    http.set_read_timeout(std::chrono::seconds(30));
    http.set_write_timeout(std::chrono::seconds(30));
    http.Get("/health", [this](const httplib::Request &, httplib::Response & res) {
        if (decode.n_healthy() > 0) return res.set_content("{\"status\":\"ok\"}", "application/json");
        reply_error(res, Status(status_code::unavailable, "no healthy decode node"));
    });
    http.Get("/metrics", [this](const httplib::Request & req, httplib::Response & res) {
        if (authorized(req, res)) res.set_content(metrics.render(), "text/plain; version=0.0.4");
    });
    http.Get("/v1/models", [this](const httplib::Request & req, httplib::Response & res) {
        if (!authorized(req, res)) return;
        auto node = decode.pick_least_loaded();
        if (!node) return reply_error(res, Status(status_code::unavailable, "no healthy decode node"));
        httplib::Client c(node->url);
        c.set_read_timeout(std::chrono::seconds(10));
        httplib::Headers h;
        if (!cfg.node_key.empty()) h.emplace("Authorization", "Bearer " + cfg.node_key);
        auto r = c.Get("/v1/models", h);
        if (!r) return reply_error(res, Status(status_code::upstream_error, node->url + "/v1/models: " + httplib::to_string(r.error())));
        res.status = r->status;
        res.set_content(r->body, "application/json");
    });
    auto gen = [this](openai_endpoint ep) {
        return [this, ep](const httplib::Request & req, httplib::Response & res) {
            if (authorized(req, res)) handle_generation(req, res, ep);
        };
    };
    http.Post("/v1/completions", gen(openai_endpoint::completions));
    http.Post("/v1/chat/completions", gen(openai_endpoint::chat));
    http.set_error_handler([this](const httplib::Request &, httplib::Response & res) {
        if (res.status == 404) reply_error(res, Status(status_code::not_found, "unknown route"));
        else if (res.status == 413) reply_error(res, Status(status_code::too_large, "request body over the limit"));
    });
    http.set_logger([this](const httplib::Request & req, const httplib::Response & res) {
        metrics.request(req.path, res.status);
        if (res.status >= 400) std::fprintf(stderr, "baton: route: %s %s -> %d\n", req.method.c_str(), req.path.c_str(), res.status);
    });
    http.set_exception_handler([](const httplib::Request & req, httplib::Response & res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
            std::rethrow_exception(ep);
        } catch (const std::exception & e) {
            what = e.what();
        } catch (...) {
        }
        std::fprintf(stderr, "baton: route: %s %s: internal error: %s\n", req.method.c_str(), req.path.c_str(), what.c_str());
        http_send_error(res, Status(status_code::internal, "router internal error: " + what));
    });
}

// ---- lifecycle ----

router::router(std::unique_ptr<router_impl> impl) : impl_(std::move(impl)) {}
router::~router() { stop(); }

Result<std::unique_ptr<router>> router::create(const router_config & cfg) {
    if (cfg.decode_urls.empty()) return Status(status_code::invalid_argument, "--decode: at least one decode node URL is required");
    for (const auto * list : {&cfg.prefill_urls, &cfg.decode_urls})
        for (const auto & u : *list)
            if (u.rfind("http://", 0) != 0 || u.size() <= 7)
                return Status(status_code::invalid_argument, "node URL '" + u + "' must look like http://HOST:PORT");
    if (cfg.port < 0 || cfg.port > 65535) return Status(status_code::invalid_argument, "--port: " + std::to_string(cfg.port) + " is not in 0..65535");
    if (cfg.timeout_s <= 0) return Status(status_code::invalid_argument, "--timeout: must be > 0");
    auto impl = std::make_unique<router_impl>(cfg);
    if (!cfg.model_path.empty()) {
        model_load_params p;
        p.vocab_only = true;
        auto m = loaded_model::load(cfg.model_path, p);
        if (!m.ok()) return m.status();
        impl->vocab = std::move(m.value());
    }
    impl->routes();
    return std::unique_ptr<router>(new router(std::move(impl)));
}

Result<int> router::start() {
    router_impl & r = *impl_;
    int port = r.cfg.port == 0 ? r.http.bind_to_any_port(r.cfg.host) : (r.http.bind_to_port(r.cfg.host, r.cfg.port) ? r.cfg.port : -1);
    if (port <= 0) return Status(status_code::unavailable, "cannot listen on " + r.cfg.host + ":" + std::to_string(r.cfg.port));
    // httplib's backlog is 5: many clients connecting at once would be reset (see listen_backlog.h). The
    // socket listens once listen_after_bind runs, so the backlog is raised right after it is ready.
    r.health_thread = std::thread([&r] { r.health_loop(); });
    r.http_thread = std::thread([&r] { r.http.listen_after_bind(); });
    r.http.wait_until_ready();
    Status st = http_raise_backlog(port);
    if (!st.ok()) std::fprintf(stderr, "baton: route: %s\n", st.message().c_str());
    return port;
}

void router::stop() {
    {
        std::lock_guard<std::mutex> lk(impl_->mu);
        impl_->stopping = true;
    }
    impl_->cv.notify_all();
    impl_->http.stop();
    if (impl_->http_thread.joinable()) impl_->http_thread.join();
    if (impl_->health_thread.joinable()) impl_->health_thread.join();
}

void router::wait() {
    std::unique_lock<std::mutex> lk(impl_->mu);
    impl_->cv.wait(lk, [&] { return impl_->stopping; });
}

}  // namespace baton
