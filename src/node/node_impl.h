// node_impl.h — the node's private state and its handlers, one source file per concern (named below).
//
// Handlers are coroutines on the HTTP edge (http_server); authentication, body caps and the error map are
// the edge's.
// Thread-safety: cfg, model, eng and model_name are written before `ready` is set (release) and only read
// after it was seen (acquire); metrics and the atomics are safe from any thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "baton/cluster/node_registrar.h"
#include "baton/engine.h"
#include "baton/http/http_client.h"
#include "baton/http/http_server.h"
#include "baton/http/live_view.h"
#include "baton/model.h"
#include "baton/node/node.h"
#include "baton/openai/chat_format.h"
#include "baton/openai/openai.h"
#include "baton/openai/openai_response.h"
#include "baton/rerank_prompt.h"
#include "event_wait.h"
#include "kv_publisher.h"
#include "migration_registry.h"
#include "node_metrics.h"
#include "state_hold.h"
#include "tier_link.h"

namespace baton {

using steady_clock = std::chrono::steady_clock;

// json_response: a JSON answer of the node's own endpoints; invalid UTF-8 in a string (model text) is
// replaced, never a throw.
inline http_response json_response(const nlohmann::json & j, int status = 200) {
    return http_response::json(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), status);
}

// A place among the requests that hold or wait for a slot; released on destruction.
class admission_ticket {
  public:
    explicit admission_ticket(std::atomic<uint32_t> & counter) : counter_(counter) {}
    ~admission_ticket() { counter_.fetch_sub(1); }
    admission_ticket(const admission_ticket &) = delete;
    admission_ticket & operator=(const admission_ticket &) = delete;

  private:
    std::atomic<uint32_t> & counter_;
};
using admission_ptr = std::unique_ptr<admission_ticket>;

struct node_test_seam;

// A generation that moved here (live migration): the response's id and created time it keeps (the router
// names them, pd_header_resume_id/_created). Empty: a response of its own.
struct generation_resume {
    std::string id;
    int64_t created = 0;
};

// node_impl: everything a node is. Its state is private; the handlers (members, one file per concern) and
// the lifecycle are its only users, and the public `node` forwards to the lifecycle.
class node_impl {
  public:
    explicit node_impl(node_config c);  // installs the route table
    // Stops the tier's writer first: it may be cutting a delta with the engine (engine::delta_of), and the
    // engine goes before the link does (see tier below).
    ~node_impl() {
        if (tier) tier->stop();
    }

    // ---- lifecycle (node.cpp) ----
    Result<int> bind();
    void start();
    Status load();
    bool running() const { return http->running(); }
    void shutdown();
    bool drain_requested() const { return drain_requested_.load(); }

  private:
    friend struct node_test_access;  // sets seam before bind() (node_test_seam.h)

    // ---- state ----
    std::shared_ptr<const node_test_seam> seam;  // the test node's hooks; null in production
    node_config cfg;
    // Declared before the engine: the engine (and its handles' notify callbacks) goes first.
    std::unique_ptr<http_server> http;
    std::atomic<bool> ready{false};
    std::atomic<bool> stopping{false};
    std::shared_ptr<const loaded_model> model;
    // The shared prefix-cache tier (cfg.tier), from load() on; the engine's state_kept reads tier_ptr (set once
    // the link exists, after the engine: its layout names the keys). Declared before eng, so the engine (whose
    // scheduler thread calls state_kept) is gone before they are.
    std::unique_ptr<tier_link> tier;
    std::atomic<tier_link *> tier_ptr{nullptr};
    std::unique_ptr<engine> eng;
    std::unique_ptr<embedder> emb;       // with --embedding, from load() on
    std::unique_ptr<media_encoder> media;  // with --mmproj, from load() on (thread-safe: encode serializes)
    tls_context_ptr image_tls;             // with --image-urls: verifies https image servers (from load() on)
    rerank_layout rerank;                // the model's rerank prompt layout (with rank pooling), from load()
    std::vector<token_id> eog;           // the model's end-of-generation tokens (generation_settings), from load()
    std::string model_file;              // the model's file name (cluster records' model id)
    std::string model_name;              // --alias, else the model's file name: /v1/models and responses
    std::optional<chat_formatter> chat;  // from load() on
    node_metrics metrics;
    live_log live;  // the live view's last generations and series (GET /view/state)
    std::atomic<uint32_t> n_admitted{0};
    std::atomic<bool> drain_requested_{false};
    std::unique_ptr<node_registrar> registrar;  // when cfg.cluster is set, from load() on
    std::unique_ptr<state_hold> held;           // direct transfer: states made here for decode nodes to fetch
    std::unique_ptr<kv_publisher> kv;           // KV events: what the slots hold, from load() on
    migration_registry migrations;              // the generations that may move (live migration)
    // The paused generations' states held here that no node has fetched yet: drain waits for them (up to
    // --drain) before the node exits, so the generations go on elsewhere.
    mutable mutex unfetched_mu;
    std::set<std::string, std::less<>> unfetched BATON_GUARDED_BY(unfetched_mu);
    void note_unfetched(std::string_view id, bool add);
    size_t n_unfetched() const;

    // ---- node.cpp ----
    void install_routes();
    // record is what this node tells the cluster now (called on the registrar's strand).
    node_record record() const;
    net::awaitable<void> on_admin_drain(http_exchange & ex);
    // POST /admin/migrate ({"count": n}, optional; 0 or absent: all): asks up to n movable generations to move
    // to other decode nodes; 202 {"migrating": k}.
    net::awaitable<void> on_admin_migrate(http_exchange & ex);

    // ---- admission.cpp ----
    // check_serving: unavailable while loading or stopping.
    Status check_serving() const;
    // respond_not_serving answers a refusal from check_serving (a draining node says so: the router
    // then takes it out of selection at once and sends the request elsewhere).
    net::awaitable<void> respond_not_serving(http_exchange & ex, const Status & st);
    Status check_role(bool allowed, const char * endpoint) const;
    // admit takes a place for a generation request, or unavailable when every slot and queue place is taken.
    Result<admission_ptr> admit();
    // deadline of a request that arrived now.
    steady_clock::time_point deadline_from_now() const;
    event_wait_limits wait_limits(steady_clock::time_point deadline) const;
    // n_ctx_slot: the tokens one slot holds (the engine's context over its slots): prompts that cannot fit it
    // are refused before they are tokenized whole. REQUIRES: the engine is loaded.
    uint32_t n_ctx_slot() const { return eng->layout().n_ctx / std::max<uint32_t>(1, eng->layout().n_seq_max); }

    // ---- generation.cpp ----
    net::awaitable<void> on_openai(http_exchange & ex, openai_endpoint endpoint);
    // prepare parses a generation request with the node's defaults and renders a chat (on the bridge pool).
    net::awaitable<Result<openai_request>> prepare(std::string_view body, openai_endpoint endpoint);
    // respond_generation submits task and answers in the OpenAI shape of oreq (streamed if it asks).
    // fetch_image_urls: a chat's http(s) images, fetched when this node allows it (--image-urls, image_fetch.h);
    // otherwise they stay for render_request to refuse by name.
    net::awaitable<Status> fetch_image_urls(openai_request & r);
    // Several prompts (openai_prompts_split): one task per prompt, in order; choice i answers prompt i / n.
    // A generation the router can move (X-Baton-Migratable) may pause (migrations) and end with hand_off; one that
    // moved here (a decode task whose state carries a generation) answers with resume's id and created time and
    // sends only what it generates here.
    net::awaitable<void> respond_generation(http_exchange & ex, std::vector<engine_task> tasks,
                                            const openai_request & oreq, const generation_resume & resume = {});
    net::awaitable<void> respond_generation(http_exchange & ex, engine_task task, const openai_request & oreq,
                                            const generation_resume & resume = {}) {
        std::vector<engine_task> one;
        one.push_back(std::move(task));
        co_await respond_generation(ex, std::move(one), oreq, resume);
    }
    // hand_off ends a generation that paused to move (live migration): its state is held here (state_hold, as a
    // direct transfer's) and the answer ends with where it is (pd_protocol.h: a stream's last event after
    // `pending`, or a whole answer's 200 with X-Baton-Migrated), for the router to resume it on another node.
    net::awaitable<void> hand_off(http_exchange & ex, std::vector<uint8_t> blob, const openai_response_meta & meta,
                                  bool stream, std::string pending);
    // log_generation: one line per finished generation, at info with --verbose, else at debug.
    void log_generation(std::string_view request_id, const openai_request & oreq, const openai_result & r) const;

    // ---- pd_handlers.cpp ----
    net::awaitable<void> on_prefill(http_exchange & ex);
    net::awaitable<void> on_decode(http_exchange & ex);
    // run_to_done waits for the terminal event of a task without tokens (prefill, slot operations).
    net::awaitable<Result<event_done>> run_to_done(http_exchange & ex, engine_task task);
    // blob_parse_counted verifies blob bytes against the node's limits (validated_blob::parse); failures are
    // counted by reason. blob_parse_edge runs it on the bridge pool.
    Result<blob_ptr> blob_parse_counted(std::vector<uint8_t> bytes);
    net::awaitable<Result<blob_ptr>> blob_parse_edge(std::vector<uint8_t> bytes);
    // tier_warm: with a tier, when the node holds less of prompt than the tier may (a block or more), fetches
    // the longest prefix state the tier has (on the bridge pool) and hands it to the engine's host prompt cache
    // ahead of the prompt's task (task_cache_put: queued first, admitted first). Any failure: nothing is
    // handed over and the prompt is computed.
    net::awaitable<void> tier_warm(const std::vector<token_id> & prompt);
    // send_blob answers with blob bytes (through the test seam's on_blob_out when one is installed).
    net::awaitable<void> send_blob(http_exchange & ex, std::vector<uint8_t> blob, http_headers headers = {});
    // Packed states (blob_pack.h, --state-compress-level): pack_for returns blob packed (off the event loop,
    // counted) when this node packs and the request's Accept-Encoding takes it, else nothing; unpack_body
    // returns the blob inside bytes whose Content-Encoding is coding (bytes as they are when coding is empty or
    // "identity"), bounded by --max-blob-mb, a refusal counted as a rejected blob.
    net::awaitable<Result<std::optional<std::vector<uint8_t>>>> pack_for(const http_exchange & ex,
                                                                         std::span<const uint8_t> blob);
    net::awaitable<Result<std::vector<uint8_t>>> unpack_body(std::vector<uint8_t> bytes, std::string_view coding);
    // Direct transfer: GET (a decode node fetches) and DELETE (the router releases) a held state; the
    // decode side's fetch of the state a router names (X-Baton-State-Source/-Id), dependency_failed when it
    // cannot be had; and the sweeper that ends expired leases every second.
    net::awaitable<void> on_held_get(http_exchange & ex);
    net::awaitable<void> on_held_delete(http_exchange & ex);
    net::awaitable<Result<std::vector<uint8_t>>> fetch_held(http_exchange & ex, std::string_view source,
                                                            std::string_view id);
    net::awaitable<void> sweep_held();
    // Streamed transfer (state_stream.h, --state-stream-tokens): prefill_streamed holds the state as a stream
    // from the start, answers with its id at once and leaves the prompt to stream_prefill_run, which ends the
    // stream with an error frame when the task fails; send_stream serves a held stream (every frame from the
    // first, then each as it comes); fetch_stream reads one, joining each part as it arrives, into the whole
    // state's blob.
    net::awaitable<void> prefill_streamed(http_exchange & ex, gen_request gen, admission_ptr ticket);
    net::awaitable<void> stream_prefill_run(request_ptr h, std::shared_ptr<held_stream> stream, admission_ptr ticket);
    net::awaitable<void> send_stream(http_exchange & ex, std::shared_ptr<held_stream> stream);
    net::awaitable<Result<std::vector<uint8_t>>> fetch_stream(http_upstream & up, const std::string & where);
    // KV events (kv_publisher.h): the batches after a router's last, or the snapshot.
    net::awaitable<void> on_kv_events(http_exchange & ex);
    net::awaitable<void> on_kv_snapshot(http_exchange & ex);

    // ---- status_endpoints.cpp ----
    net::awaitable<void> on_health(http_exchange & ex);
    net::awaitable<void> on_models(http_exchange & ex);
    net::awaitable<void> on_metrics(http_exchange & ex);
    net::awaitable<void> on_slots(http_exchange & ex);
    // view_state: the live view's state (live_view.h): this node, its slots, its last generations, series.
    nlohmann::json view_state();
    nlohmann::json view_caches(bool is_ready) const;  // (the state's "caches": host cache, parked, held, tier)

    // ---- slot_state.cpp ----
    net::awaitable<void> on_state_get(http_exchange & ex);
    net::awaitable<void> on_state_put(http_exchange & ex);
    net::awaitable<void> on_state_delete(http_exchange & ex);
    net::awaitable<void> on_slot_action(http_exchange & ex);  // llama-server's /slots/{id}?action=...

    // ---- llama_compat.cpp ----
    net::awaitable<void> on_tokenize(http_exchange & ex);
    // ---- embeddings.cpp ----
    // on_embeddings: /embedding (/embeddings) in llama-server's shape, /v1/embeddings (oai) in OpenAI's.
    net::awaitable<void> on_embeddings(http_exchange & ex, bool oai);
    // ---- rerank.cpp ----
    // on_rerank: /rerank, /reranking, /v1/rerank, /v1/reranking (an embedder with rank pooling).
    net::awaitable<void> on_rerank(http_exchange & ex);
    net::awaitable<void> on_detokenize(http_exchange & ex);
    net::awaitable<void> on_apply_template(http_exchange & ex);
    // on_count_tokens: Anthropic's /v1/messages/count_tokens, the tokens of the prompt the chat renders to.
    net::awaitable<void> on_count_tokens(http_exchange & ex);
    net::awaitable<void> on_props(http_exchange & ex);
    net::awaitable<void> on_llama_slots(http_exchange & ex);  // GET /slots (with --slots)
};

}  // namespace baton
