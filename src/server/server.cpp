// server.cpp — the node's lifecycle, routes, authentication, body caps and shared request helpers.
#include "server.h"

#include <algorithm>
#include <cstdio>

#include "baton/buffer_pool.h"
#include "blob/blob_format.h"
#include "event_wait.h"
#include "http_errors.h"
#include "listen_backlog.h"
#include "server_impl.h"

namespace baton {

const char * node_role_name(node_role r) {
    switch (r) {
        case node_role::both: return "both";
        case node_role::prefill: return "prefill";
        case node_role::decode: return "decode";
    }
    return "both";
}

Result<node_role> node_role_parse(std::string_view s) {
    if (s == "both") return node_role::both;
    if (s == "prefill") return node_role::prefill;
    if (s == "decode") return node_role::decode;
    return Status(status_code::invalid_argument, "role: \"" + std::string(s) + "\" is not both, prefill or decode");
}

void server_corrupt_state_for_test(std::vector<uint8_t> & blob) {
    const blob_layout l = blob_walk(blob);
    for (const auto & s : l.sections) {
        if (s.name != "state" || !s.complete || s.length == 0) continue;
        const uint64_t at = s.offset + blob_format::k_frame_head_bytes + s.length / 2;
        if (at < blob.size()) blob[size_t(at)] ^= 0x5a;
        return;
    }
}

namespace {

// Timing-safe comparison: the time taken does not depend on where the strings differ.
bool equal_constant_time(const std::string & a, const std::string & b) {
    unsigned char diff = a.size() == b.size() ? 0 : 1;
    const size_t n = std::max(a.size(), b.size());
    for (size_t i = 0; i < n; ++i) {
        const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
        const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
        diff |= static_cast<unsigned char>(x ^ y);
    }
    return diff == 0;
}

// read_body reads the request body into out, keeping at most cap bytes (the rest is drained so the
// connection stays usable). too_large when the body is over cap.
template <typename Buffer>
Status read_body(const httplib::Request & req, const httplib::ContentReader & reader, uint64_t cap, Buffer & out) {
    const uint64_t declared = req.get_header_value_u64("Content-Length", 0);
    if (declared <= cap) out.reserve(size_t(declared));
    uint64_t seen = 0;
    const bool ok = reader([&](const char * data, size_t n) {
        seen += n;
        if (seen <= cap) out.insert(out.end(), data, data + n);
        return true;
    });
    if (seen > cap || declared > cap)
        return {status_code::too_large, "body: " + std::to_string(std::max(seen, declared)) + " bytes exceed the limit of " +
                                            std::to_string(cap) + " bytes for " + req.path};
    if (!ok) return {status_code::invalid_argument, "body: could not be read"};
    return {};
}

}  // namespace

// ---- request helpers ----

Status server_impl::check_auth(const httplib::Request & req) const {
    if (cfg.api_key.empty()) return {};
    const std::string h = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    if (h.empty()) return {status_code::unauthenticated, "Authorization: missing (this node requires \"Bearer KEY\")"};
    if (h.compare(0, prefix.size(), prefix) != 0 || !equal_constant_time(h.substr(prefix.size()), cfg.api_key))
        return {status_code::unauthenticated, "Authorization: wrong API key"};
    return {};
}

Status server_impl::check_serving() const {
    if (stopping.load()) return {status_code::unavailable, "the node is shutting down"};
    if (!ready.load(std::memory_order_acquire)) return {status_code::unavailable, "the model is still loading"};
    return {};
}

Status server_impl::check_role(bool allowed, const char * endpoint) const {
    if (allowed) return {};
    return {status_code::busy, std::string(endpoint) + " is not served by a node with role " + node_role_name(cfg.role)};
}

Result<admission_ptr> server_impl::admit() {
    const uint32_t cap = cfg.engine.ctx.n_seq_max + cfg.queue_max;
    if (n_admitted.fetch_add(1) >= cap) {
        n_admitted.fetch_sub(1);
        metrics.count_admission_reject();
        return Status(status_code::unavailable, "no free slot: " + std::to_string(cfg.engine.ctx.n_seq_max) + " slots busy and " +
                                                    std::to_string(cfg.queue_max) + " requests queued");
    }
    return std::make_shared<admission_ticket>(n_admitted);
}

steady_clock::time_point server_impl::deadline_from_now() const {
    if (cfg.timeout_s <= 0) return steady_clock::time_point::max();
    return steady_clock::now() + std::chrono::duration_cast<steady_clock::duration>(std::chrono::duration<double>(cfg.timeout_s));
}

Status server_impl::wait_event(const request_ptr & h, engine_event & ev, steady_clock::time_point deadline,
                               const httplib::Request & req) const {
    event_wait_limits lim;
    lim.deadline = deadline;
    lim.timeout_s = cfg.timeout_s;
    lim.client_gone = [&req] { return req.is_connection_closed(); };
    return event_wait(*h, ev, lim);
}

Result<engine_event> server_impl::run_to_done(engine_task task, const httplib::Request & req) {
    const auto deadline = deadline_from_now();
    auto h = eng->submit(std::move(task));
    if (!h.ok()) return h.status();
    for (;;) {
        engine_event ev;
        BATON_RETURN_IF_ERROR(wait_event(h.value(), ev, deadline, req));
        if (ev.type == engine_event::kind::error) return ev.error;
        if (ev.type == engine_event::kind::done) return ev;
    }
}

Result<blob_ptr> server_impl::blob_parse_edge(std::vector<uint8_t> bytes) {
    auto b = validated_blob::parse(std::move(bytes), cfg.engine.limits);
    if (!b.ok()) metrics.count_blob_reject(b.status().code());
    return b;
}

void server_impl::send_blob(httplib::Response & res, std::vector<uint8_t> blob) const {
    if (cfg.test_corrupt_state) server_corrupt_state_for_test(blob);
    // The buffer goes back to the pool once the response is written (or abandoned).
    std::shared_ptr<std::vector<uint8_t>> bytes(new std::vector<uint8_t>(std::move(blob)), [](std::vector<uint8_t> * b) {
        buffer_pool::shared().give(std::move(*b));
        delete b;
    });
    const size_t cut = cfg.test_truncate_blob ? bytes->size() / 2 : bytes->size();
    res.set_content_provider(bytes->size(), "application/octet-stream",
                             [bytes, cut](size_t offset, size_t length, httplib::DataSink & sink) {
                                 if (offset >= cut) return false;  // --test-truncate-blob: the connection drops
                                 length = std::min(length, cut - offset);
                                 return sink.write(reinterpret_cast<const char *>(bytes->data()) + offset, length);
                             });
}

// ---- routes ----

void server_impl::install_routes() {
    using httplib::ContentReader;
    using httplib::Request;
    using httplib::Response;
    // Every route but /health needs the key; every route but /health and /metrics needs the model.
    auto guarded = [this](bool needs_engine, void (server_impl::*fn)(const Request &, Response &)) {
        return [this, needs_engine, fn](const Request & req, Response & res) {
            Status st = check_auth(req);
            if (st.ok() && needs_engine) st = check_serving();
            if (!st.ok()) return http_send_error(res, st);
            (this->*fn)(req, res);
        };
    };
    // Body routes read the (capped) body first, so an early error never leaves unread bytes on the connection.
    auto json_route = [this](void (server_impl::*fn)(const Request &, Response &, std::string)) {
        return [this, fn](const Request & req, Response & res, const ContentReader & reader) {
            std::string body;
            Status st = read_body(req, reader, cfg.max_json_bytes, body);
            if (st.ok()) st = check_auth(req);
            if (st.ok()) st = check_serving();
            if (!st.ok()) return http_send_error(res, st);
            (this->*fn)(req, res, std::move(body));
        };
    };
    auto blob_route = [this](void (server_impl::*fn)(const Request &, Response &, std::vector<uint8_t>)) {
        return [this, fn](const Request & req, Response & res, const ContentReader & reader) {
            const uint64_t declared = req.get_header_value_u64("Content-Length", 0);
            std::vector<uint8_t> body = buffer_pool::shared().take(declared <= cfg.max_blob_bytes ? size_t(declared) : 0);
            Status st = read_body(req, reader, cfg.max_blob_bytes, body);
            if (!st.ok() && st.code() == status_code::too_large) metrics.count_blob_reject(st.code());
            if (st.ok()) st = check_auth(req);
            if (st.ok()) st = check_serving();
            if (!st.ok()) return http_send_error(res, st);
            (this->*fn)(req, res, std::move(body));
        };
    };

    http.Get("/health", [this](const Request & req, Response & res) { on_health(req, res); });
    http.Get("/metrics", guarded(false, &server_impl::on_metrics));
    http.Get("/v1/models", guarded(true, &server_impl::on_models));
    http.Get("/v1/slots", guarded(true, &server_impl::on_slots));
    http.Get("/v1/slots/:id/state", guarded(true, &server_impl::on_state_get));
    http.Delete("/v1/slots/:id/state", guarded(true, &server_impl::on_state_delete));
    http.Put("/v1/slots/:id/state", blob_route(&server_impl::on_state_put));
    http.Post("/v1/decode", blob_route(&server_impl::on_decode));
    http.Post("/v1/prefill", json_route(&server_impl::on_prefill));
    http.Post("/v1/completions", json_route(&server_impl::on_completions));
    http.Post("/v1/chat/completions", json_route(&server_impl::on_chat));

    // Requests that reach no handler (unknown route, malformed HTTP, body over the global cap) get the same
    // JSON errors as everything else.
    http.set_error_handler([](const Request & req, Response & res) {
        if (!res.body.empty()) return;
        status_code code = status_code::internal;
        std::string msg = "HTTP status " + std::to_string(res.status);
        if (res.status == 404) code = status_code::not_found, msg = "no route for " + req.method + " " + req.path;
        else if (res.status == 405) code = status_code::not_found, msg = "method " + req.method + " is not allowed on " + req.path;
        else if (res.status == 413) code = status_code::too_large, msg = "body: over the node's size limit";
        else if (res.status == 414 || res.status == 431) code = status_code::too_large, msg = "request line or headers too large";
        else if (res.status >= 400 && res.status < 500) code = status_code::invalid_argument, msg = "malformed HTTP request";
        const int keep = res.status;
        http_send_error(res, Status(code, msg));
        if (code == status_code::invalid_argument || code == status_code::internal) res.status = keep;
    });
    http.set_exception_handler([](const Request &, Response & res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
            if (ep) std::rethrow_exception(ep);
        } catch (const std::exception & e) {
            what = e.what();
        } catch (...) {
        }
        http_send_error(res, Status(status_code::internal, "handler failed: " + what));
    });
    http.set_logger([this](const Request & req, const Response & res) {
        metrics.count_request(req.matched_route.empty() ? "unmatched" : req.method + " " + req.matched_route, res.status);
    });
}

void server_impl::on_completions(const httplib::Request & req, httplib::Response & res, std::string body) {
    on_openai(req, res, std::move(body), openai_endpoint::completions);
}

void server_impl::on_chat(const httplib::Request & req, httplib::Response & res, std::string body) {
    on_openai(req, res, std::move(body), openai_endpoint::chat);
}

// ---- lifecycle ----

server::server(server_config cfg) : impl_(std::make_unique<server_impl>(std::move(cfg))) {
    server_impl & s = *impl_;
    // The engine queue never refuses a task the admission gate let through (slot operations have room too).
    s.cfg.engine.queue_max = std::max<uint32_t>(256, s.cfg.engine.ctx.n_seq_max + s.cfg.queue_max + 64);
    s.cfg.engine.limits.max_bytes = s.cfg.max_blob_bytes;
    s.http.set_payload_max_length(size_t(std::max(s.cfg.max_blob_bytes, s.cfg.max_json_bytes)));
    const auto io = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::duration<double>(s.cfg.io_timeout_s));
    s.http.set_read_timeout(io);
    s.http.set_write_timeout(io);
    s.http.set_keep_alive_timeout(5);
    // Small writes (SSE events, headers before a body) must not wait for a delayed ACK (Nagle: ~40 ms).
    s.http.set_tcp_nodelay(true);
    const size_t n_threads = std::max<uint32_t>(s.cfg.http_threads, 4);
    s.http.new_task_queue = [n_threads] { return new httplib::ThreadPool(std::min<size_t>(8, n_threads), n_threads); };
    s.install_routes();
}

server::~server() { shutdown(); }

Result<int> server::bind() {
    server_impl & s = *impl_;
    int port = s.cfg.port;
    if (port == 0) {
        port = s.http.bind_to_any_port(s.cfg.host);
        if (port <= 0) return Status(status_code::io_error, "cannot bind " + s.cfg.host + " to a free port");
    } else if (!s.http.bind_to_port(s.cfg.host, port)) {
        return Status(status_code::io_error, "cannot bind " + s.cfg.host + ":" + std::to_string(port) + " (in use or not allowed)");
    }
    s.cfg.port = port;
    // httplib's accept backlog is 5; many clients connecting at once would be reset (listen_backlog.h).
    if (Status st = http_raise_backlog(port); !st.ok()) std::fprintf(stderr, "baton: serve: %s\n", st.message().c_str());
    return port;
}

void server::start() {
    server_impl & s = *impl_;
    s.listening = true;
    s.listener = std::thread([&s] {
        s.http.listen_after_bind();
        s.listening = false;
    });
}

bool server::running() const { return impl_->listening.load(); }

Status server::load() {
    server_impl & s = *impl_;
    auto m = loaded_model::load(s.cfg.model_path);
    if (!m.ok()) return m.status();
    s.model = std::shared_ptr<const loaded_model>(std::move(m.value()));
    const std::string & p = s.cfg.model_path;
    s.model_name = p.substr(p.find_last_of('/') == std::string::npos ? 0 : p.find_last_of('/') + 1);
    auto e = engine::create(s.model, s.cfg.engine);
    if (!e.ok()) return e.status();
    s.eng = std::move(e.value());
    s.ready.store(true, std::memory_order_release);
    return {};
}

void server::shutdown() {
    server_impl & s = *impl_;
    if (s.stopping.exchange(true)) return;
    // Finish what is in flight for up to drain_s, then cancel the rest: every handle gets a terminal event,
    // so streams end with an error event and [DONE] and the HTTP threads can be joined.
    const auto drain_until = steady_clock::now() + std::chrono::duration_cast<steady_clock::duration>(std::chrono::duration<double>(s.cfg.drain_s));
    while (s.n_admitted.load() > 0 && steady_clock::now() < drain_until)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (s.eng) s.eng->stop();
    s.http.stop();
    if (s.listener.joinable()) s.listener.join();
}

}  // namespace baton
