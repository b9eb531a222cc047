// router.cpp — request flow: parse at the edge, choose PD or direct, prefill hop, decode relay, fallbacks.
//
// Every client request is a coroutine on its connection's strand; its upstream calls (http_upstream), the
// prefill blob's producer and the decode upload run on the same strand, so the relay needs no locks and a
// slow client slows only its own stream (the next upstream read waits for the client write). Every call
// to a node is registered in its pool's call_registry while it runs, so a node the health checker finds
// dead or stalled has its calls cancelled at once; failure_policy decides what each failed call does next.
#include "baton/router/router.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>

#include "baton/base/thread_annotations.h"
#include "baton/blob.h"
#include "baton/cluster/cluster_watch.h"
#include "baton/http/http_client.h"
#include "baton/http/metrics_text.h"
#include "baton/http/sse.h"
#include "baton/model.h"
#include "baton/openai/chat_format.h"
#include "baton/openai/openai.h"
#include "baton/pd/pd_protocol.h"
#include "body_relay.h"
#include "call_registry.h"
#include "capacity_gate.h"
#include "failure_policy.h"
#include "node_pool.h"
#include "request_affinity.h"
#include "router_metrics.h"

namespace baton {

using steady = std::chrono::steady_clock;

namespace {

double seconds_between(steady::time_point a, steady::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// What one client request carries through the flow.
struct route_ctx {
    openai_request req;
    std::string path;              // /v1/completions | /v1/chat/completions
    steady::time_point t_arrival, deadline;
    uint64_t affinity = 0;
    std::string route = "direct";  // for response headers: pd | direct | fallback:<reason>
    bool router_full = false;      // the router's queue was full: answered 503 at once, never a fallback
    node_filter filter;            // the model the request names; after a prefill hop also the blob's group
};

enum class relay_outcome : uint8_t { done, blob_rejected, blob_failed, failed };

struct relay_result {
    relay_outcome outcome = relay_outcome::done;
    Status error;  // when failed
};

// A prefill node's blob on its way: the call (read by the producer coroutine) and the relay the decode hop
// reads from while the bytes arrive.
struct prefill_stream {
    std::shared_ptr<http_upstream> call;
    std::shared_ptr<body_relay> blob;
    size_t node = 0;
    steady::time_point t_headers;
};

// One node held by a request: released (and the next waiter woken) when it goes out of scope.
class node_hold {
  public:
    node_hold() = default;
    node_hold(node_pool * pool, capacity_gate * gate, size_t i) : pool_(pool), gate_(gate), i_(i) {}
    node_hold(node_hold && o) noexcept : pool_(std::exchange(o.pool_, nullptr)), gate_(o.gate_), i_(o.i_) {}
    node_hold & operator=(node_hold && o) noexcept {
        release();
        pool_ = std::exchange(o.pool_, nullptr);
        gate_ = o.gate_;
        i_ = o.i_;
        return *this;
    }
    ~node_hold() { release(); }
    void release() {
        if (!pool_) return;
        pool_->release(i_);
        gate_->wake_one();
        pool_ = nullptr;
    }
    size_t index() const { return i_; }

  private:
    node_pool * pool_ = nullptr;
    capacity_gate * gate_ = nullptr;
    size_t i_ = 0;
};

}  // namespace

class router_impl {
  public:
    router_config cfg;
    node_pool prefill, decode;
    capacity_gate prefill_gate, decode_gate;
    call_registry prefill_calls, decode_calls;  // the calls in flight to each node (before http: guards outlive it)
    std::atomic<uint64_t> joins{0}, leaves{0};
    std::unique_ptr<loaded_model> vocab;
    std::optional<chat_formatter> chat;  // with -m: renders chats to count their tokens (the model's template)
    router_metrics metrics;
    std::unique_ptr<http_server> http;
    // After http: destroyed before the io_context its timers live on.
    std::unique_ptr<cluster_watch> watch;  // with --etcd: keeps the pools' registered members current
    notify_ptr health_stop;
    std::future<void> health_done;
    mutex mu;
    condition_variable cv;
    bool stopping BATON_GUARDED_BY(mu) = false;

    router_impl(const router_config & c, const std::vector<http_url> & pre, const std::vector<http_url> & dec)
        : cfg(c), prefill(pre, c.load_cap), decode(dec, c.load_cap), prefill_gate(c.queue_max),
          decode_gate(c.queue_max) {}

    // on_members applies the cluster's membership to the pools (on the watch's strand).
    void on_members(const cluster_members & members);
    // model_filter: the node_filter for a request naming model, or not_found when the cluster serves
    // several models and none by that name.
    Result<node_filter> model_filter(const std::string & model) const;
    void render_cluster_metrics(std::string & out) const;
    std::string cluster_models_json() const;
    mutable mutex members_mu;
    cluster_members members_seen BATON_GUARDED_BY(members_mu);  // the last membership (for /v1/models)

    void routes();
    net::awaitable<void> health_round();
    // health_check_one runs health_check and counts the round's checks down (*left) on the health strand.
    net::awaitable<void> health_check_one(node_pool & pool, call_registry & calls, size_t i, capacity_gate & gate,
                                          size_t & left, notify_ptr done);
    net::awaitable<void> health_check(node_pool & pool, call_registry & calls, const http_url & url, size_t i,
                                      capacity_gate & gate);
    // note_call_failure classifies a call's failure (raw: its operation's status; g: its registration),
    // ejects the node when the transport failed, and counts the outcome.
    call_fault note_call_failure(node_pool & pool, size_t i, const std::string & url, const Status & raw,
                                 const call_guard & g);
    uint32_t count_tokens(const openai_request & r) const;
    http_headers node_headers() const;
    // acquire_node waits (bounded queue, deadline, client watched) until a node of pool has room.
    net::awaitable<std::optional<node_hold>> acquire_node(http_exchange & ex, node_pool & pool, capacity_gate & gate, route_ctx & ctx,
                                                          const std::vector<size_t> & tried, bool affine, Status & why);
    net::awaitable<void> on_generation(http_exchange & ex, openai_endpoint ep);
    net::awaitable<void> on_models(http_exchange & ex);
    // forward_to_node relays one small call (tokenize, detokenize, apply-template, props) to the least-loaded
    // decode node of the model the call names ("model" in the body or ?model=), or of any model.
    net::awaitable<void> forward_to_node(http_exchange & ex, const char * method, const std::string & path,
                                         std::string_view body);
    net::awaitable<Result<prefill_stream>> prefill_hop(http_exchange & ex, route_ctx & ctx);
    // pump_blob reads a prefill node's body straight into the relay (the producer side). It holds the prefill
    // node and the call's registration until the blob's last byte is in, so the node takes its next prompt
    // while the decode still runs; a failure is counted here.
    net::awaitable<void> pump_blob(std::shared_ptr<http_upstream> call, std::shared_ptr<body_relay> blob,
                                   node_hold node, call_guard guard);
    net::awaitable<void> prefill_done(route_ctx & ctx, prefill_stream & p);
    net::awaitable<relay_result> relay(http_exchange & ex, route_ctx & ctx, const std::string & path, std::string_view body,
                                       const std::string & ctype, std::shared_ptr<body_relay> stream_body);
    net::awaitable<Status> send_relayed(http_upstream & up, body_relay & blob, const route_ctx & ctx);
    // stream_to_client relays a 200 stream; nullopt when the client has its answer (or an explicit error
    // event), else the failure that came before any byte reached the client (the caller retries).
    net::awaitable<std::optional<Status>> stream_to_client(http_exchange & ex, route_ctx & ctx, http_upstream & up,
                                                           const http_response_head & head, size_t node,
                                                           const std::string & url, const call_guard & guard);
};

// ---- admission ----

uint32_t router_impl::count_tokens(const openai_request & r) const {
    if (const auto * ids = std::get_if<openai_prompt_tokens>(&r.input)) return uint32_t(ids->tokens.size());
    if (vocab && chat) {
        auto rendered = chat->render_request(r, *vocab);
        if (rendered.ok()) {
            auto g = openai_to_gen(rendered.value(), *vocab);
            if (g.ok()) return uint32_t(g->prompt.size());
        }
    }
    // Without a vocabulary: about 4 bytes per token (documented; pass -m for exact counts).
    size_t bytes = 0;
    if (const auto * text = std::get_if<openai_prompt_text>(&r.input)) bytes = text->text.size();
    if (const auto * chat = std::get_if<openai_chat>(&r.input))
        for (const auto & m : chat->messages) bytes += m.content.size() + m.role.size() + 8;
    return uint32_t(bytes / 4);
}

http_headers router_impl::node_headers() const {
    if (cfg.node_key.empty()) return {};
    return {{"Authorization", "Bearer " + cfg.node_key}};
}

net::awaitable<std::optional<node_hold>> router_impl::acquire_node(http_exchange & ex, node_pool & pool, capacity_gate & gate,
                                                                   route_ctx & ctx, const std::vector<size_t> & tried,
                                                                   bool affine, Status & why) {
    bool & router_full = ctx.router_full;
    auto pick = [&]() -> std::optional<node_hold> {
        auto n = affine ? pool.acquire_affine(ctx.affinity, tried, ctx.filter)
                        : pool.acquire_least_loaded(tried, ctx.filter);
        if (!n) return std::nullopt;
        return node_hold(&pool, &gate, n->index);
    };
    if (auto n = pick()) co_return n;
    notify_ptr w;
    for (;;) {
        if (!pool.has_candidates(tried, ctx.filter)) {
            why = Status(status_code::unavailable,
                         std::string("no healthy ") + (&pool == &prefill ? "prefill" : "decode") + " node" +
                             (ctx.filter.model.empty() ? "" : " for model " + ctx.filter.model) +
                             (ctx.filter.group.empty() ? "" : " that can restore the blob"));
            break;
        }
        if (!w) {
            w = gate.enter(ex.executor());
            if (!w) {
                why = Status(status_code::unavailable, "the router's queue is full (--queue-max " + std::to_string(cfg.queue_max) + ")");
                router_full = true;
                co_return std::nullopt;
            }
            if (auto n = pick()) {  // room freed up while entering the queue
                gate.leave(w, true);
                co_return n;
            }
        }
        const bool woken = co_await ex.wait(*w, ctx.deadline);
        if (ex.client_gone()) {
            why = Status(status_code::cancelled, "the client went away while waiting for a node");
            break;
        }
        if (auto n = pick()) {
            gate.leave(w, false);
            co_return n;
        }
        if (!woken && steady::now() >= ctx.deadline) {
            why = Status(status_code::deadline_exceeded, "request deadline passed while waiting for a node with room");
            break;
        }
        if (woken) gate.requeue(w);  // someone else took the room: keep this place in line
    }
    if (w) gate.leave(w, true);
    co_return std::nullopt;
}

net::awaitable<void> router_impl::on_generation(http_exchange & ex, openai_endpoint ep) {
    route_ctx ctx;
    ctx.t_arrival = steady::now();
    ctx.deadline = ctx.t_arrival + std::chrono::milliseconds(int64_t(cfg.timeout_s * 1000));
    ctx.path = ep == openai_endpoint::chat         ? "/v1/chat/completions"
               : ep == openai_endpoint::completion ? "/completion"
                                                   : "/v1/completions";
    const std::string_view body = ex.request().body_text();
    // Parsed for routing (model, affinity, token count); the nodes apply their own limits (n: --n-max).
    openai_defaults route_defaults;
    route_defaults.n_max = 64;
    route_defaults.prompt = cfg.prompt;
    // Grammars: the router refuses only what no node may take (the flags' caps, still far inside libllama's
    // stack); each node enforces its own --grammar-max-*.
    route_defaults.sampling.grammar_bounds = grammar_limits_cap;
    auto parsed = openai_parse(body, ep, route_defaults);
    if (!parsed.ok()) co_return (void) co_await ex.respond_error(parsed.status());
    ctx.req = std::move(parsed.value());
    ctx.affinity = request_affinity_key(ctx.req);
    auto filter = model_filter(ctx.req.model);
    if (!filter.ok()) co_return (void) co_await ex.respond_error(filter.status());
    ctx.filter = filter.value();

    // Counting tokens may run the tokenizer and chat template: on the bridge pool, not the event loop.
    uint32_t n_tokens = 0;
    const bool have_prefill = prefill.n_members() > 0;
    if (have_prefill) n_tokens = co_await http->offload([&] { return count_tokens(ctx.req); });
    const bool pd = have_prefill && n_tokens >= cfg.pd_min_tokens;
    metrics.mode(pd ? "pd" : "direct");
    std::string reason;
    if (pd) {
        ctx.route = "pd";
        auto blob = co_await prefill_hop(ex, ctx);
        if (blob.ok()) {
            // The decode hop starts while the blob is still arriving: the two transfers overlap. The blob goes
            // only to a node of the prefill node's group (one that can restore it).
            const node_filter model_only = ctx.filter;
            ctx.filter.group = prefill.group(blob->node);
            relay_result r =
                co_await relay(ex, ctx, std::string(pd_path_decode), "", "application/octet-stream", blob->blob);
            ctx.filter = model_only;
            co_await prefill_done(ctx, blob.value());
            if (r.outcome == relay_outcome::done) co_return;
            if (r.outcome == relay_outcome::failed) co_return (void) co_await ex.respond_error(r.error);
            reason = r.outcome == relay_outcome::blob_failed ? "prefill_failed" : "blob_rejected";
            if (r.outcome == relay_outcome::blob_failed) blob = r.error;
        } else {
            reason = "prefill_failed";
            // The client's fault, the client gone, the deadline passed, or the router full: answered as is.
            // Only a failed or missing prefill node falls back.
            const status_code c = blob.status().code();
            if (c == status_code::invalid_argument || c == status_code::cancelled || c == status_code::deadline_exceeded || ctx.router_full)
                co_return (void) co_await ex.respond_error(blob.status());
        }
        metrics.fallback(reason);
        if (cfg.fallback == fallback_policy::fail)
            co_return (void) co_await ex.respond_error(Status(status_code::upstream_error, reason == "prefill_failed"
                                                                                               ? "prefill failed and --fallback is fail: " + blob.status().message()
                                                                                               : "the decode node rejected the blob and --fallback is fail"));
        ctx.route = "fallback:" + reason;
    }
    relay_result r = co_await relay(ex, ctx, ctx.path, body, "application/json", nullptr);
    if (r.outcome != relay_outcome::done && !ex.begun())
        co_await ex.respond_error(r.outcome == relay_outcome::failed ? r.error : Status(status_code::upstream_error, "the decode node rejected the request"));
}

// ---- the prefill hop: every healthy prefill node once, least loaded first ----

net::awaitable<void> router_impl::pump_blob(std::shared_ptr<http_upstream> call, std::shared_ptr<body_relay> blob,
                                            node_hold node, call_guard guard) {
    Status st;
    while (blob->room() > 0) {
        auto n = co_await call->read_some(blob->tail(), size_t(std::min<uint64_t>(blob->room(), 4u << 20)));
        if (!n.ok()) {
            st = n.status();
            break;
        }
        if (n.value() == 0) break;
        blob->commit(n.value());
    }
    blob->finish(st.ok() ? st : guard.failure(st));
    if (blob->failed())
        note_call_failure(prefill, node.index(), call->url().text, st.ok() ? blob->status() : st, guard);
}

// On success the blob keeps arriving (the producer holds the node until it is in); prefill_done ends the hop.
net::awaitable<Result<prefill_stream>> router_impl::prefill_hop(http_exchange & ex, route_ctx & ctx) {
    // The client's body as the client wrote it (the order of a schema's properties and of the tools' keys is
    // the client's, and the grammar and the template follow it), its endpoint in a header of the protocol.
    const std::string_view body = ex.request().body_text();
    http_headers headers = node_headers();
    headers.emplace_back(std::string(pd_header_endpoint), openai_endpoint_name(ctx.req.endpoint));
    std::vector<size_t> tried;
    Status last(status_code::upstream_error, "no healthy prefill node");
    for (;;) {
        Status why;
        auto node = co_await acquire_node(ex, prefill, prefill_gate, ctx, tried, false, why);
        if (!node) {
            if (why.code() == status_code::cancelled || why.code() == status_code::deadline_exceeded) co_return why;
            if (tried.empty()) last = why;
            co_return last;
        }
        const size_t i = node->index();
        tried.push_back(i);
        const http_url url = prefill.address(i);
        auto conn = co_await http_upstream::connect(url, ctx.deadline);
        std::shared_ptr<http_upstream> call;
        call_guard guard;  // an ejection closes the call's socket: the pending send, read or blob read fails at once
        if (conn.ok()) {
            call = std::move(conn.value());
            guard = prefill_calls.enter(i, ex.executor(), [w = std::weak_ptr<http_upstream>(call)] {
                if (auto c = w.lock()) c->close();
            });
        }
        // (No co_await inside ?: — GCC miscompiles it.)
        Status st = conn.status();
        if (st.ok()) st = co_await call->send("POST", pd_path_prefill, headers, "application/json", body);
        Result<http_response_head> head(st);
        if (st.ok()) head = co_await call->read_head();
        if (!head.ok()) {
            const call_fault fault = note_call_failure(prefill, i, url.text, head.status(), guard);
            last = guard.failure(head.status());
            // (Never begun: the decode hop answers the client.) Next node, or the deadline's error as is.
            if (router_call_action({fault, false, ctx.req.stream}) == call_action::next_node) continue;
            co_return last;
        }
        const pd_answer answer = pd_classify_node_answer(pd_hop::prefill, head->status,
                                                         !http_header_find(head->headers, pd_header_draining).empty());
        if (answer == pd_answer::ok) {
            if (!head->content_length || *head->content_length > cfg.max_blob_bytes) {
                // A blob without a length, or over --max-blob-mb: refused at its headers, nothing buffered.
                metrics.node_outcome(url.text, "blob_too_large");
                last = Status(status_code::upstream_error, url.text + std::string(pd_path_prefill) +
                                                               " answered a blob without a Content-Length or over " +
                                                               std::to_string(cfg.max_blob_bytes >> 20) +
                                                               " MiB (--max-blob-mb)");
                continue;
            }
            prefill_stream p;
            try {
                p.blob = std::make_shared<body_relay>(*head->content_length);
            } catch (const std::bad_alloc &) {
                metrics.node_outcome(url.text, "blob_too_large");
                last = Status(status_code::upstream_error, url.text + ": no memory for a blob of " + std::to_string(*head->content_length) + " bytes");
                continue;
            }
            p.call = call;
            p.node = i;
            p.t_headers = steady::now();
            net::co_spawn(ex.executor(), pump_blob(call, p.blob, std::move(*node), std::move(guard)), net::detached);
            co_return p;
        }
        auto err = co_await call->read_all(1 << 20);
        if (answer == pd_answer::draining) {
            prefill.mark_draining(i);  // it leaves the cluster: not selected again until it rejoins
            metrics.node_outcome(url.text, "draining");
            last = Status(status_code::unavailable, url.text + " is draining");
            continue;
        }
        if (answer == pd_answer::client_error) {  // no other node will accept it either
            metrics.node_outcome(url.text, "bad_request");
            co_return Status(status_code::invalid_argument, "prefill node rejected the request: " + (err.ok() ? err.value() : ""));
        }
        metrics.node_outcome(url.text, "http_" + std::to_string(head->status));
        last = Status(status_code::upstream_error,
                      url.text + std::string(pd_path_prefill) + " answered " + std::to_string(head->status));
    }
}

// prefill_done waits for the blob's last byte (normally already in), records the hop and frees the node.
net::awaitable<void> router_impl::prefill_done(route_ctx & ctx, prefill_stream & p) {
    auto n = async_notify::make(co_await net::this_coro::executor);
    p.blob->set_reader(n);
    // (co_await is kept out of && and ?: : GCC miscompiles short-circuit operands that suspend.)
    while (!p.blob->ended()) {
        if (!co_await n->wait_until(ctx.deadline)) break;
    }
    p.blob->set_reader(nullptr);
    if (p.blob->ended() && p.blob->status().ok()) {
        metrics.node_outcome(prefill.url(p.node), "ok");
        metrics.blob(p.blob->length(), seconds_between(p.t_headers, p.blob->ended_at()));
    }
    // (A failed transfer is counted by its pump.) Ends a transfer still running: the deadline passed, and
    // the pump, its read cut off, counts a timeout.
    p.call->close();
}

// ---- relaying to a decode node (blob or direct), with node retry before the first byte ----

// send_relayed sends the blob as the request body, each byte as soon as it has arrived.
net::awaitable<Status> router_impl::send_relayed(http_upstream & up, body_relay & blob, const route_ctx & ctx) {
    Status st =
        co_await up.send_head("POST", pd_path_decode, node_headers(), "application/octet-stream", blob.length());
    if (!st.ok()) co_return st;
    auto n = async_notify::make(co_await net::this_coro::executor);
    blob.set_reader(n);
    uint64_t sent = 0;
    while (sent < blob.length()) {
        if (blob.size() > sent) {
            const uint64_t end = blob.size();
            st = co_await up.send_body(blob.data() + sent, size_t(end - sent));
            if (!st.ok()) break;
            sent = end;
            continue;
        }
        if (blob.failed()) break;
        if (!co_await n->wait_until(ctx.deadline)) {
            st = Status(status_code::deadline_exceeded, "request deadline passed while relaying the blob");
            break;
        }
    }
    blob.set_reader(nullptr);
    co_return st;
}

net::awaitable<relay_result> router_impl::relay(http_exchange & ex, route_ctx & ctx, const std::string & path, std::string_view body,
                                                const std::string & ctype, std::shared_ptr<body_relay> stream_body) {
    std::vector<size_t> tried;
    Status last(status_code::unavailable, "no healthy decode node");
    for (;;) {
        Status why;
        auto node = co_await acquire_node(ex, decode, decode_gate, ctx, tried, true, why);
        if (!node) {
            if (tried.empty() || why.code() == status_code::cancelled || why.code() == status_code::deadline_exceeded) last = why;
            co_return relay_result{relay_outcome::failed, last};
        }
        const size_t i = node->index();
        tried.push_back(i);
        const http_url url = decode.address(i);
        auto conn = co_await http_upstream::connect(url, ctx.deadline);
        call_guard guard;  // (after conn: destroyed before the upstream its cancellation closes)
        if (conn.ok()) guard = decode_calls.enter(i, ex.executor(), [u = conn.value().get()] { u->close(); });
        Status st = conn.status();
        if (conn.ok() && stream_body) st = co_await send_relayed(*conn.value(), *stream_body, ctx);
        else if (conn.ok()) st = co_await conn.value()->send("POST", path, node_headers(), ctype, body);
        if (stream_body && stream_body->failed()) {  // the blob never fully arrived: not this node's fault
            co_return relay_result{relay_outcome::blob_failed, stream_body->status()};
        }
        // A node that refuses early may close before reading the whole body: its answer is still read.
        Result<http_response_head> head(st);
        if (conn.ok()) head = co_await conn.value()->read_head();
        if (!head.ok()) {  // before the first byte: another node may serve it
            const call_fault fault = note_call_failure(decode, i, url.text, head.status(), guard);
            last = guard.failure(head.status());
            if (router_call_action({fault, false, ctx.req.stream}) == call_action::next_node) continue;
            co_return relay_result{relay_outcome::failed, last};
        }
        http_upstream & up = *conn.value();
        const int code = head->status;
        // A forwarded request (path != /v1/decode) carries no blob, so a 422 there is the node's answer.
        pd_answer answer =
            pd_classify_node_answer(pd_hop::decode, code, !http_header_find(head->headers, pd_header_draining).empty());
        if (answer == pd_answer::blob_rejected && path != pd_path_decode) answer = pd_answer::node_error;
        if (answer == pd_answer::blob_rejected) {
            metrics.node_outcome(url.text, "blob_rejected");
            co_return relay_result{relay_outcome::blob_rejected, {}};
        }
        if (answer == pd_answer::draining) {
            decode.mark_draining(i);  // it leaves the cluster: not selected again until it rejoins
            metrics.node_outcome(url.text, "draining");
            last = Status(status_code::unavailable, "every decode node is busy or draining");
            continue;
        }
        if (answer == pd_answer::busy) {  // no free slot there: try another node
            metrics.node_outcome(url.text, "busy");
            last = Status(status_code::unavailable, "every decode node is busy");
            continue;
        }
        metrics.node_outcome(url.text, code == 200 ? "ok" : "http_" + std::to_string(code));
        if (code == 200 && ctx.req.stream) {
            std::optional<Status> early = co_await stream_to_client(ex, ctx, up, head.value(), i, url.text, guard);
            if (!early) co_return relay_result{relay_outcome::done, {}};
            last = *early;  // nothing reached the client: the policy said another node
            continue;
        }
        auto all = co_await up.read_all();
        node->release();
        if (!all.ok()) {  // nothing reached the client yet (the body is relayed whole)
            const call_fault fault = note_call_failure(decode, i, url.text, all.status(), guard);
            last = Status(status_code::upstream_error,
                          "decode node failed mid-response: " + guard.failure(all.status()).message());
            if (fault == call_fault::deadline) last = all.status();
            if (router_call_action({fault, false, false}) == call_action::next_node) continue;
            co_return relay_result{relay_outcome::failed, last};
        }
        if (code == 200) metrics.ttft(seconds_between(ctx.t_arrival, steady::now()));
        http_response res;
        res.status = code;
        res.content_type = head->content_type.empty() ? "application/json" : head->content_type;
        res.body = std::move(all.value());
        res.headers = {{std::string(pd_header_route), ctx.route}, {std::string(pd_header_decode_node), url.text}};
        co_await ex.respond(std::move(res));
        co_return relay_result{relay_outcome::done, {}};
    }
}

// stream_to_client relays the decode node's stream piece by piece: the next piece is read only after the
// last one was written to the client, so a slow client slows only its own stream (and a client that
// stops reading for --write-timeout is dropped, which closes the upstream and cancels the node's task).
// The client's response begins with the first piece, so a node that fails before it (ejected, cut off)
// leaves the client untouched and the request free to go to another node.
net::awaitable<std::optional<Status>> router_impl::stream_to_client(http_exchange & ex, route_ctx & ctx,
                                                                    http_upstream & up, const http_response_head & head,
                                                                    size_t node, const std::string & url,
                                                                    const call_guard & guard) {
    std::vector<char> buf(16384);
    bool begun = false;
    for (;;) {
        auto n = co_await up.read_some(buf.data(), buf.size());
        if (!n.ok()) {
            const call_fault fault = note_call_failure(decode, node, url, n.status(), guard);
            const Status st = guard.failure(n.status());
            const status_code code =
                fault == call_fault::deadline ? status_code::deadline_exceeded : status_code::upstream_error;
            const Status err(code, "decode node failed mid-stream: " + st.message());
            const call_action action = router_call_action({fault, begun, true});
            if (action == call_action::next_node) co_return err;
            if (action == call_action::respond_error) {
                co_await ex.respond_error(err);
            } else if (action == call_action::error_event) {  // after the first byte: an error event, then the end
                std::fprintf(stderr, "baton: route: stream from the decode node ended with an error: %s\n",
                             st.message().c_str());
                if (co_await ex.write(sse_error_and_done(err))) co_await ex.end();
            } else {
                ex.abort();
            }
            co_return std::nullopt;
        }
        if (!begun) {
            begun = true;
            if (!co_await ex.begin(200, head.content_type.empty() ? "text/event-stream" : head.content_type,
                                   {{std::string(pd_header_route), ctx.route},
                                    {std::string(pd_header_decode_node), url},
                                    {"Cache-Control", "no-cache"}},
                                   std::nullopt)) {
                up.close();
                co_return std::nullopt;
            }
            metrics.ttft(seconds_between(ctx.t_arrival, steady::now()));
        }
        if (n.value() == 0) {
            co_await ex.end();
            co_return std::nullopt;
        }
        if (!co_await ex.write(buf.data(), n.value())) {
            std::fprintf(stderr, "baton: route: client went away mid-stream; cancelling the upstream request\n");
            up.close();
            co_return std::nullopt;
        }
    }
}

call_fault router_impl::note_call_failure(node_pool & pool, size_t i, const std::string & url, const Status & raw,
                                          const call_guard & g) {
    const call_fault fault = router_call_fault(raw, g.cancelled());
    if (fault == call_fault::transport) pool.mark_failure(i);  // (an ejected node is marked by its health check)
    metrics.node_outcome(url, fault == call_fault::ejected     ? "ejected"
                              : fault == call_fault::deadline  ? "timeout"
                              : fault == call_fault::transport ? "unreachable"
                                                               : "failed");
    return fault;
}

// ---- health ----

// A node that answers /health with an error (503 while it loads or drains) is skipped for new requests; one
// that gives no answer at all within --health-timeout (dead, or stalled: SIGSTOP, a hung host) is ejected
// and every call in flight to it is cancelled, so no request waits for its --timeout on a node known dead.
net::awaitable<void> router_impl::health_check(node_pool & pool, call_registry & calls, const http_url & url, size_t i,
                                               capacity_gate & gate) {
    const auto deadline = steady::now() + std::chrono::milliseconds(int64_t(cfg.health_timeout_s * 1000));
    Status no_answer;  // a transport failure: nothing answered
    int status = 0;
    auto conn = co_await http_upstream::connect(url, deadline);
    no_answer = conn.status();
    if (no_answer.ok()) no_answer = co_await conn.value()->send("GET", "/health", {}, "", "");
    if (no_answer.ok()) {
        auto head = co_await conn.value()->read_head();
        if (head.ok()) status = head->status;
        else no_answer = head.status();
    }
    const bool was = pool.healthy(i);
    if (!no_answer.ok()) {
        pool.mark_failure(i);
        const std::string why =
            no_answer.code() == status_code::deadline_exceeded
                ? "no answer to GET /health within " + metric_num(cfg.health_timeout_s) + " s (--health-timeout)"
                : no_answer.message();
        const size_t n = calls.cancel_node(
            i, Status(status_code::upstream_error, url.text + " was ejected by the router's health check: " + why));
        if (n > 0)
            std::fprintf(stderr, "baton: route: %s ejected (%s): cancelled %zu call(s) in flight\n", url.text.c_str(),
                         why.c_str(), n);
        co_return;
    }
    if (status != 200) {
        pool.mark_failure(i);
        co_return;
    }
    // The node's slot count decides how many requests it may hold (its slots plus --node-queue).
    auto mconn = co_await http_upstream::connect(url, deadline);
    if (mconn.ok() && (co_await mconn.value()->send("GET", "/v1/models", node_headers(), "", "")).ok()) {
        auto head = co_await mconn.value()->read_head();
        if (head.ok() && head->status == 200) {
            auto body = co_await mconn.value()->read_all(1 << 20);
            if (body.ok()) {
                const auto j = nlohmann::json::parse(body.value(), nullptr, false);
                if (j.is_object() && j.contains("data") && j["data"].is_array() && !j["data"].empty()) {
                    const auto & meta = j["data"][0].value("meta", nlohmann::json::object());
                    const uint32_t slots = meta.is_object() ? meta.value("n_slots", 0u) : 0u;
                    const uint32_t cap = slots + (cfg.node_queue < 0 ? slots : uint32_t(cfg.node_queue));
                    if (slots > 0 && pool.capacity(i) != cap) {
                        pool.set_capacity(i, cap);
                        gate.wake_all();
                    }
                }
            }
        }
    }
    pool.mark_healthy(i);
    if (!was) gate.wake_all();
}

net::awaitable<void> router_impl::health_check_one(node_pool & pool, call_registry & calls, size_t i,
                                                   capacity_gate & gate, size_t & left, notify_ptr done) {
    co_await health_check(pool, calls, pool.address(i), i, gate);
    if (--left == 0) done->notify();
}

// Every member is checked at once: a stalled node costs the round one --health-timeout, and delays no
// other node's check. The checks run on the round's strand (left needs no lock); the round ends when all did.
net::awaitable<void> router_impl::health_round() {
    auto ex = co_await net::this_coro::executor;
    auto done = async_notify::make(ex);
    size_t left = 1;  // the round's own hold, dropped below once every check is spawned
    for (auto [pool, calls, gate] :
         {std::tuple{&prefill, &prefill_calls, &prefill_gate}, std::tuple{&decode, &decode_calls, &decode_gate}})
        for (size_t i = 0; i < pool->size(); ++i) {
            if (!pool->member(i)) continue;
            ++left;
            net::co_spawn(ex, health_check_one(*pool, *calls, i, *gate, left, done), net::detached);
        }
    if (--left == 0) co_return;
    while (left > 0) co_await done->wait_until(steady::time_point::max());
}

// ---- the cluster ----

void router_impl::on_members(const cluster_members & members) {
    {
        lock_guard lk(members_mu);
        members_seen = members;
    }
    std::set<std::string> pre_urls, dec_urls;
    uint64_t joined = 0;
    for (const auto & [key, r] : members) {
        auto url = http_url_parse(r.url);
        if (!url.ok()) continue;  // (node_record_parse does not check the URL's form)
        if (r.draining) continue;  // a draining node takes no new work: it leaves the pools
        const uint32_t cap = r.slots + (cfg.node_queue < 0 ? r.slots : uint32_t(cfg.node_queue));
        const node_meta meta{node_record_group(r), r.model_id, r.model_alias, cap};
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
        std::fprintf(stderr, "baton: route: cluster: %zu prefill and %zu decode members (%llu joined, %zu left)\n",
                     prefill.n_members(), decode.n_members(), (unsigned long long)joined, left);
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

// ---- routes ----

net::awaitable<void> router_impl::on_models(http_exchange & ex) {
    if (watch) {
        // The cluster's models, from the records (no node is asked).
        co_await ex.respond(http_response::json(cluster_models_json()));
        co_return;
    }
    co_await forward_to_node(ex, "GET", "/v1/models", "");
}

net::awaitable<void> router_impl::forward_to_node(http_exchange & ex, const char * method, const std::string & path,
                                                  std::string_view body) {
    // The model the call is about: the body's "model" or ?model= (in a cluster of several models); else any.
    std::string model;
    if (const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
        j.is_object() && j.contains("model") && j["model"].is_string())
        model = j["model"].get<std::string>();
    if (const std::string_view q = ex.request().query_value("model"); !q.empty()) model = std::string(q);
    auto filter = model_filter(model);
    if (!filter.ok()) co_return (void) co_await ex.respond_error(filter.status());
    auto node = decode.pick_least_loaded({}, filter.value());
    if (!node) co_return (void) co_await ex.respond_error(Status(status_code::unavailable, "no healthy decode node"));
    const http_url url = decode.address(node->index);
    const auto deadline = steady::now() + std::chrono::seconds(10);
    auto conn = co_await http_upstream::connect(url, deadline);
    call_guard guard;  // (after conn: destroyed before the upstream its cancellation closes)
    if (conn.ok()) guard = decode_calls.enter(node->index, ex.executor(), [u = conn.value().get()] { u->close(); });
    Status st = conn.status();
    if (st.ok())
        st = co_await conn.value()->send(method, path, node_headers(), body.empty() ? "" : "application/json", body);
    Result<http_response_head> head(st);
    if (st.ok()) head = co_await conn.value()->read_head();
    Result<std::string> answer(head.status());
    if (head.ok()) answer = co_await conn.value()->read_all(size_t(16) << 20);
    if (!answer.ok())
        co_return (void) co_await ex.respond_error(
            Status(status_code::upstream_error, url.text + path + ": " + guard.failure(answer.status()).message()));
    if (path == "/props" && head->status == 200) {
        // The router's view: a decode node's properties (model, template, defaults), and the router's pools.
        nlohmann::json j = nlohmann::json::parse(answer.value(), nullptr, false);
        if (j.is_object()) {
            j["router"] = {{"prefill_nodes", prefill.n_members()},
                           {"decode_nodes", decode.n_members()},
                           {"healthy_decode_nodes", decode.n_healthy()},
                           {"answered_by", url.text}};
            answer = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        }
    }
    co_await ex.respond(http_response::json(std::move(answer.value()), head->status));
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
    // The OpenAI routes and llama-server's unprefixed aliases; tokenizing goes to a node (its vocabulary).
    for (const char * path : {"/v1/models", "/models"})
        http->route("GET", path, none, [this](http_exchange & ex) { return on_models(ex); });
    for (const char * path : {"/v1/completions", "/completions"})
        http->route("POST", path, json_body,
                    [this](http_exchange & ex) { return on_generation(ex, openai_endpoint::completions); });
    for (const char * path : {"/v1/chat/completions", "/chat/completions"})
        http->route("POST", path, json_body,
                    [this](http_exchange & ex) { return on_generation(ex, openai_endpoint::chat); });
    http->route("POST", "/completion", json_body,
                [this](http_exchange & ex) { return on_generation(ex, openai_endpoint::completion); });
    // (A coroutine lambda: forward_to_node keeps a reference to its path, which must outlive the call.)
    http->route("GET", "/props", none, [this](http_exchange & ex) -> net::awaitable<void> {
        co_await forward_to_node(ex, "GET", "/props", "");
    });
    http->route("GET", "/v1/health", open, [this](http_exchange & ex) -> net::awaitable<void> {
        if (decode.n_healthy() > 0) co_return (void) co_await ex.respond(http_response::json("{\"status\":\"ok\"}"));
        co_await ex.respond_error(Status(status_code::unavailable, "no healthy decode node"));
    });
    for (const char * path : {"/tokenize", "/detokenize", "/apply-template"})
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
                                                                  .cors = cfg.cors});
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
