// router_impl.h — the router's state and the coroutines of its request flow, private to src/router.
//
// One class, one file per concern:
//   router.cpp        lifecycle (create, start, stop, wait), the routes table and the headers sent to nodes;
//   pd_flow.cpp       on_generation: parse at the edge, choose PD or direct, execute the fallback decisions;
//   admission.cpp     count_tokens and acquire_node (a node with room, or a wait in the router's queue);
//   prefill_hop.cpp   prefill_hop, pump_blob, prefill_done: a prefill node's blob, relayed while it arrives;
//   decode_relay.cpp  relay, send_relayed, stream_to_client: a decode node's answer to the client;
//   health.cpp        the health checker, and note_call_failure (what a failed call says about its node);
//   cluster_view.cpp  the cluster's membership, models, model filter and metrics; /v1/models;
//   node_forward.cpp  forward_to_node: small calls (tokenize, props, ...) to one decode node.
// The decisions those coroutines execute are pure functions of their own files: failure_policy.h (a call
// that failed at the transport level) and pd_fallback_policy.h (a node's answer, and the end of a hop).
//
// Every client request is a coroutine on its connection's strand; its upstream calls (http_upstream), the
// prefill blob's producer and the decode upload run on the same strand, so the relay needs no locks and a
// slow client slows only its own stream (the next upstream read waits for the client write). Every call
// to a node is registered in its pool's call_registry while it runs, so a node the health checker finds
// dead or stalled has its calls cancelled at once.
// Thread-safety: the pools, gates, registries and metrics are safe from any thread; members_seen is
// guarded by members_mu, stopping by mu; a route_ctx belongs to its request's strand.
#pragma once

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "baton/base/thread_annotations.h"
#include "baton/cluster/cluster_watch.h"
#include "baton/http/http_client.h"
#include "baton/http/http_server.h"
#include "baton/http/live_view.h"
#include "baton/model.h"
#include "baton/openai/chat_format.h"
#include "baton/openai/openai.h"
#include "baton/router/router.h"
#include "body_relay.h"
#include "call_registry.h"
#include "capacity_gate.h"
#include "failure_policy.h"
#include "kv_view.h"
#include "node_pool.h"
#include "pd_fallback_policy.h"
#include "router_metrics.h"

namespace baton {

using steady = std::chrono::steady_clock;

inline double seconds_between(steady::time_point a, steady::time_point b) {
    return std::chrono::duration<double>(b - a).count();
}

// What one client request carries through the flow.
struct route_ctx {
    std::string request_id;  // X-Request-Id (http_request::id), carried to every node the request reaches
    openai_request req;
    std::string path;  // /v1/completions | /v1/chat/completions
    steady::time_point t_arrival, deadline;
    uint64_t affinity = 0;
    std::string route = "direct";  // for response headers: pd | direct | fallback:<reason>
    bool router_full = false;      // the router's queue was full: answered 503 at once, never a fallback
    node_filter filter;            // the model the request names; after a prefill hop also the blob's group
    std::vector<token_id> tokens;  // the prompt's tokens (with -m): hashed against the nodes' KV events
    std::vector<uint32_t> cached_prefill, cached_decode;  // by node index: prompt tokens each node holds
    std::vector<uint32_t> tier_prefill, tier_decode;      // by node index: prompt tokens it can fetch from the tier
    uint32_t delta_base = 0;  // PD: the prefill node ships only the cells past this many tokens (0: the whole state)
    live_request trace;       // the live view's timeline of this request (steps in seconds since t_arrival)

    double since_arrival(steady::time_point t) const { return seconds_between(t_arrival, t); }
    void step(std::string name, std::string node, steady::time_point from, steady::time_point to, uint64_t bytes = 0) {
        trace.steps.push_back(
            live_step{std::move(name), std::move(node), since_arrival(from), since_arrival(to), bytes});
    }
};

// How relay ended (relay_outcome: pd_fallback_policy.h, whose pd_fallback_decide takes it).
struct relay_result {
    relay_outcome outcome = relay_outcome::done;
    Status error;  // when failed
};

// A generation a decode node paused to move (live migration): its state, held there, and the response's id and
// created time (pd_protocol.h, pd_sse_migrated).
struct moved_generation {
    size_t node = 0;    // the decode node that paused it
    http_url origin;    // its address: where the state is
    std::string state;  // the held state's id
    std::string id;     // the response's id and created time, kept by the node that resumes it
    int64_t created = 0;
};

// How a relayed stream ended: the client has its answer (or an explicit error), a failure before any byte reached
// the client (the caller tries another node), or the generation paused to move.
struct stream_outcome {
    std::optional<Status> early;
    std::optional<moved_generation> moved;
};

// A state a prefill node holds for the decode node to fetch (--pd-transfer direct).
struct held_state {
    http_url origin;  // the prefill node
    std::string id;   // 32 hex digits (state_hold.h)
    uint64_t bytes = 0;   // 0 for a stream (its size is known only at its end)
    bool stream = false;  // streamed transfer: the prefill node still computes; the decode node reads the parts
};

// What the prefill hop produced: with relay, a blob on its way (the call, read by the producer coroutine, and
// the relay the decode hop reads from while the bytes arrive); with direct, the held state's place only.
struct prefill_stream {
    std::shared_ptr<http_upstream> call;
    std::shared_ptr<body_relay> blob;
    std::optional<held_state> held;  // direct transfer: call and blob are null
    bool packed = false;             // relay: the prefill node packed the blob (Content-Encoding: baton-zstd)
    size_t node = 0;
    steady::time_point t_send, t_headers;
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
    kv_view kv;  // the nodes' KV caches, from their events (polled with the health checks)
    live_log live;  // the live view's last requests and series (GET /view/state)
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
          decode_gate(c.queue_max), kv(c.kv_index_blocks) {}

    // ---- router.cpp ----
    void routes();
    // node_headers: what every call to a node carries (the node key; the client request's id, so the nodes'
    // log lines name it too).
    http_headers node_headers(std::string_view request_id = {}) const;

    // ---- cluster_view.cpp ----
    // on_members applies the cluster's membership to the pools (on the watch's strand).
    void on_members(const cluster_members & members);
    // model_filter: the node_filter for a request naming model, or not_found when the cluster serves
    // several models and none by that name.
    Result<node_filter> model_filter(const std::string & model) const;
    void render_cluster_metrics(std::string & out) const;
    std::string cluster_models_json() const;
    net::awaitable<void> on_models(http_exchange & ex);
    // view_state: the live view's state (live_view.h): the pools' nodes, the queue, the last requests, series.
    nlohmann::json view_state();
    nlohmann::json view_caches() const;  // (the state's "caches": the prefix index's and the tier's contents)
    // record_trace: a generation request ended (any way): its timeline goes to the live view.
    void record_trace(route_ctx & ctx, const http_exchange & ex);
    mutable mutex members_mu;
    cluster_members members_seen BATON_GUARDED_BY(members_mu);  // the last membership (for /v1/models)

    // ---- health.cpp ----
    net::awaitable<void> health_round();
    // health_check_one runs health_check and counts the round's checks down (*left) on the health strand.
    net::awaitable<void> health_check_one(node_pool & pool, call_registry & calls, size_t i, capacity_gate & gate,
                                          size_t & left, notify_ptr done);
    net::awaitable<void> health_check(node_pool & pool, call_registry & calls, const http_url & url, size_t i,
                                      capacity_gate & gate);
    // kv_poll reads a node's KV events since the last poll (and its snapshot when it must resync) into kv.
    net::awaitable<void> kv_poll(const http_url & url, steady::time_point deadline);
    // note_call_failure classifies a call's failure (raw: its operation's status; g: its registration),
    // ejects the node when the transport failed, and counts the outcome.
    call_fault note_call_failure(node_pool & pool, size_t i, const std::string & url, const Status & raw,
                                 const call_guard & g);

    // ---- admission.cpp ----
    // count_tokens: the prompt's tokens (exact with -m, which also fills *tokens; else about 4 bytes each).
    uint32_t count_tokens(const openai_request & r, std::vector<token_id> * tokens = nullptr) const;
    // kv_cached: the prompt tokens each node of pool holds, by node index (empty without tokens or events).
    std::vector<uint32_t> kv_cached(node_pool & pool, const route_ctx & ctx);
    // kv_tier: the prompt tokens each node of pool can fetch from the shared tier (kv_view::tier_tokens).
    std::vector<uint32_t> kv_tier(node_pool & pool, const route_ctx & ctx);
    // acquire_node waits (bounded queue, deadline, client watched) until a node of pool has room.
    net::awaitable<std::optional<node_hold>> acquire_node(http_exchange & ex, node_pool & pool, capacity_gate & gate,
                                                          route_ctx & ctx, const std::vector<size_t> & tried,
                                                          bool affine, Status & why);

    // ---- pd_flow.cpp ----
    net::awaitable<void> on_generation(http_exchange & ex, openai_endpoint ep);

    // ---- node_forward.cpp ----
    // forward_to_node relays one call (tokenize, detokenize, apply-template, props, embeddings, rerank) to the
    // least-loaded decode node of the model the call names ("model" in the body or ?model=), or of any model.
    // Small calls get 10 s and a 16 MiB answer; embeddings and rerank (work that grows with the inputs) the router's
    // --timeout and answers up to node_answer_bytes_max.
    net::awaitable<void> forward_to_node(http_exchange & ex, const char * method, const std::string & path,
                                         std::string_view body);

    // ---- prefill_hop.cpp ----
    net::awaitable<Result<prefill_stream>> prefill_hop(http_exchange & ex, route_ctx & ctx);
    // pump_blob reads a prefill node's body straight into the relay (the producer side). It holds the prefill
    // node and the call's registration until the blob's last byte is in, so the node takes its next prompt
    // while the decode still runs; a failure is counted here.
    net::awaitable<void> pump_blob(std::shared_ptr<http_upstream> call, std::shared_ptr<body_relay> blob,
                                   node_hold node, call_guard guard);
    net::awaitable<void> prefill_done(route_ctx & ctx, prefill_stream & p);
    // take_held reads a prefill node's answer to a held prefill (JSON {"state", "bytes"}).
    net::awaitable<Result<held_state>> take_held(http_upstream & call, const http_url & url);
    // release_held ends the lease on a held state (DELETE on its prefill node), in the background: the state is
    // no longer needed once the decode hop ended (answered, fell back, or failed).
    void release_held(const held_state & s, const std::string & request_id);

    // ---- decode_relay.cpp ----
    // extra: headers the call carries besides node_headers (a held state's place).
    net::awaitable<relay_result> relay(http_exchange & ex, route_ctx & ctx, const std::string & path,
                                       std::string_view body, const std::string & ctype,
                                       std::shared_ptr<body_relay> stream_body, const http_headers & extra = {});
    net::awaitable<Status> send_relayed(http_upstream & up, body_relay & blob, const route_ctx & ctx,
                                        const http_headers & headers);
    // stream_to_client relays a 200 stream; nullopt when the client has its answer (or an explicit error
    // event), else the failure that came before any byte reached the client (the caller retries).
    // With watch_moves (the call said the generation may move), the node's events are relayed whole and the one
    // that says it paused (pd_sse_migrated) is not: it is the outcome.
    net::awaitable<stream_outcome> stream_to_client(http_exchange & ex, route_ctx & ctx, http_upstream & up,
                                                    const http_response_head & head, size_t node,
                                                    const std::string & url, const call_guard & guard,
                                                    bool watch_moves);
};

}  // namespace baton
