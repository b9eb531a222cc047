// engine.h — slots over one llama context, driven by one scheduler thread.
//
// The engine owns a llama_context with one sequence per slot. Callers submit typed tasks (generate,
// prefill, decode-apply, slot save/restore/erase) and read the task's events from a request_handle; only
// the scheduler thread touches the context and the slots. Each scheduler step runs named phases:
// admit -> plan batch -> guard invariants -> decode -> sample -> emit.
//
// Every path that puts state into a slot (decode-apply, slot restore, any future cache) goes through one
// routine, slot_restore (slot.h): validate + check compatibility, take the slot, clear, apply, verify the
// memory covers exactly the blob's tokens, register checkpoints/tokens/logits; on any failure the slot is
// left empty and consistent and the failure is counted by reason.
//
// Thread-safety: submit(), metrics() and slots() are safe from any thread; a request_handle is used by
// one consumer thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "baton/base/status.h"
#include "baton/base/thread_annotations.h"
#include "baton/blob.h"
#include "baton/context.h"
#include "baton/media.h"
#include "baton/sampling.h"
#include "baton/state_stream.h"
#include "baton/text.h"

namespace baton {

class loaded_model;

class validated_blob;  // below

struct engine_config {
    context_config ctx;           // ctx.n_seq_max is the number of slots; each holds n_ctx / slots tokens
    blob_limits limits;           // applied to every blob a slot restores
    // queue_max: requests that may wait for a slot. The engine's task queue holds at most n_seq_max +
    // queue_max tasks that have not started (beyond: submit fails with unavailable); the server admits at
    // most n_seq_max + queue_max generation requests at once, so the engine never refuses one it admitted.
    uint32_t queue_max = 64;
    // park_idle (unified KV only): while any slot is working, idle slots keep their state in host memory
    // instead of the KV cache, because every decode attends over all used cells of a unified cache. A
    // later prompt that reuses a parked slot's prefix restores it (through the restore routine).
    bool park_idle = true;
    // A slot's cached prefix counts for a new prompt only when it covers at least this many tokens (or all
    // of the prompt but its last token); otherwise the prompt goes to an empty slot, else the least
    // recently used one, so a shared BOS alone never evicts another conversation's cache.
    uint32_t reuse_min_tokens = 16;
    // cache_ram_mib (`--cache-ram`, llama-server's flag): host memory for states that leave the slots — when a
    // slot's cells (or its parked state) are about to make way for another conversation, its state is kept as a
    // blob here, least recently used out first; a prompt whose prefix one holds better than any slot restores
    // it through the restore routine. MiB; 0: off; -1: no limit. (docs/engine.md "The host prompt cache".)
    int64_t cache_ram_mib = 8192;
    // state_kept (a shared tier's writer, docs/tier.md): called on the scheduler thread with every state the host
    // prompt cache keeps and, when keep_finished, with the state a slot holds when a generation ends (prompt and
    // answer), and how many of its leading tokens name it (key_tokens): the whole state, or for a finished
    // generation its prompt — a next turn's prompt repeats that text, while its answer, rendered back to text and
    // tokenized again, may not give the same tokens. It must not block (hand the state to another thread).
    // Null: nothing is offered.
    std::function<void(const std::shared_ptr<const validated_blob> &, size_t key_tokens)> state_kept;
    bool keep_finished = false;
};

// What on_state_part learns with each part: whether it is the last, the tokens the parts so far cover and (the
// last only) how many checkpoints the whole state keeps (the stream's end frame, state_stream.h).
struct state_part_info {
    bool last = false;
    uint32_t n_tokens = 0;
    uint32_t n_checkpoints = 0;
};
inline constexpr uint32_t state_parts_max = 16;

// A generation request, already parsed and tokenized at the edge.
struct gen_request {
    std::vector<token_id> prompt;      // non-empty
    // The images of the prompt (media.h): where each stands in prompt and its embeddings. Every media token of
    // prompt lies in a span (a decode task's prompt comes with its state, so it needs none).
    std::vector<media_span> media;
    int32_t n_predict = 128;           // tokens to generate at most
    sampling_params sampling;
    std::vector<std::string> stop;     // stop strings (not included in the output)
    bool ignore_eos = false;
    // Log-probabilities of each generated token: -1 none; 0..gen_top_probs_max: the sampled token's and the
    // n most likely tokens'. They are the model's distribution (log-softmax of the raw logits, before any
    // sampler: logit_bias, grammar, penalties, temperature, top-k/p), as llama-server reports them.
    int32_t n_probs = -1;
    std::string request_json;  // prefill only: embedded in the blob, opaque to the engine
    // prefill only: the receiver holds the prompt's first delta_base tokens, so the blob is a delta over them
    // (blob format 1.2: only the cells past them). Clamped to prompt.size() - 1; 0: the whole state.
    uint32_t delta_base = 0;
    // return_progress (llama-server's field): event_progress before the first token, when the prompt starts
    // and after every chunk of it computed (a decode task: once, when its state is restored).
    bool return_progress = false;
    // prefill only, streamed transfer (state_stream.h): when set, the state leaves as parts while the prompt
    // computes — the engine stops the prompt every state_part_tokens tokens (at least prompt/16, so a prompt
    // makes at most 16 parts) and hands on_state_part a blob of the cells computed since the last part (the
    // first whole, then deltas over the parts before); the last part, with the logits and request, when the
    // prompt is in. The task's event_done then carries no blob. Called on the scheduler thread: must not block.
    // Ignored (one whole blob in event_done) when delta_base > 0.
    uint32_t state_part_tokens = 0;
    std::function<void(std::vector<uint8_t> blob, const state_part_info &)> on_state_part;
};
inline constexpr int32_t gen_top_probs_max = 20;

// migrated: the generation paused and its state left in event_done::blob (request_handle::migrate), to go on
// elsewhere; not an end of the answer.
enum class finish_reason : uint8_t { none, stop, length, cancelled, error, migrated };
const char * finish_reason_name(finish_reason r);

struct usage_counts {
    uint32_t prompt_tokens = 0;     // prompt tokens of the request
    uint32_t cached_tokens = 0;     // of those, reused from the slot's memory (prefix cache or a blob)
    uint32_t generated_tokens = 0;
};

// The events of a task, in order: zero or more event_progress (only when gen_request::return_progress), zero or
// more event_token, then exactly one terminal event (event_done or event_error). Only generate and decode tasks
// emit tokens.

struct token_prob {
    token_id token = -1;
    float logprob = 0;
    bool operator==(const token_prob &) const = default;
};
struct token_probs {
    float logprob = 0;            // of the sampled token
    std::vector<token_prob> top;  // the n_probs most likely tokens, most likely first (ties: lower id first)
    bool operator==(const token_probs &) const = default;
};

// event_token: one generated token.
struct event_token {
    token_id token = -1;
    // A token generated before the generation moved here (a decode task resuming a migrated state,
    // blob_generation): its text was already emitted by the node it came from. The replayed tokens come first,
    // in order, with their text as it was emitted there (never probs), so that the consumer knows the output so
    // far; the tokens generated here follow.
    bool replayed = false;
    std::optional<token_probs> probs;  // when the request asked for them (gen_request::n_probs >= 0)
    std::string text;            // bytes that complete UTF-8 and are not part of a stop string; may be empty
                                 // while bytes are held back (they come in a later token's text or the tail)
};

// event_progress: how far the prompt is (llama-server's "prompt_progress"): processed of total prompt tokens are
// in the slot's memory, cache of them reused rather than computed (processed counts them too); ms since the task
// started. The first comes when the prompt starts (processed == cache), the last when it is all in (processed
// == total), before the first token.
struct event_progress {
    uint32_t total = 0, cache = 0, processed = 0;
    double ms = 0;
    bool operator==(const event_progress &) const = default;
};

// event_done: the task ended as asked (finish says why it stopped generating).
struct event_done {
    finish_reason finish = finish_reason::none;  // none for slot operations
    usage_counts usage;          // slot operations: cached_tokens = tokens the slot holds (save, restore)
                                 // or held (erase)
    std::string tail;            // the held-back tail of the output (bytes that waited for a UTF-8 or
                                 // stop-string decision): append it after the token events' text
    std::vector<uint8_t> blob;   // prefill, slot-save and finish migrated: the state blob; empty otherwise
    std::string stop_word;       // the stop string that ended generation (finish stop), or "" (end of generation)
    bool context_full = false;   // finish length because the slot's context was full, not n_predict
                                 // (llama-server's "truncated")
    int32_t slot = -1;           // slot that served the task
    double ms_prompt = 0;        // ms spent processing the prompt (generate, prefill, decode)
    double ms_generate = 0;      // ms spent generating after the prompt
};

// event_error: the task failed or was cancelled (code cancelled); no further events follow.
struct event_error {
    Status error;                // never ok
};

using engine_event = std::variant<event_token, event_done, event_error, event_progress>;

// engine_event_text returns the bytes an event adds to the output: a token's text, the done event's tail,
// nothing for an error or progress. The concatenation over all events of a task is the task's output text.
const std::string & engine_event_text(const engine_event & ev);

// The consumer side of a task. next() blocks until an event or the deadline.
class request_handle {
  public:
    // next waits for the next event; false on timeout (the task goes on: call cancel() to stop it).
    bool next(engine_event & ev, std::chrono::milliseconds timeout);
    // try_next takes the next event if one is there, without waiting.
    bool try_next(engine_event & ev);
    // set_notify registers a callback the producer calls (on its own thread, after queueing) for every
    // event, so an event-driven consumer can wait without a thread. It must be cheap and must not block.
    void set_notify(std::function<void()> fn);
    // cancel asks the scheduler to stop the task; a terminal event still follows.
    void cancel() { cancelled_.store(true); }
    bool cancelled() const { return cancelled_.load(); }
    // migrate asks the scheduler to pause a generate or decode task before its next token and end it with
    // event_done{finish migrated} carrying its state: a blob with a generation section (blob_generation) that a
    // decode task on any node of the same model and context resumes, token for token as if it had not moved.
    // The tail of the output held back so far is not in that event (the resuming node emits it). Ignored by
    // other tasks; a task that ends first ends as it would have.
    void migrate() { migrate_.store(true); }
    bool migrate_requested() const { return migrate_.load(); }
    uint64_t id() const { return id_; }

    // Producer side (scheduler thread).
    void push(engine_event ev);
    explicit request_handle(uint64_t id) : id_(id) {}

  private:
    const uint64_t id_;
    std::atomic<bool> cancelled_{false};
    std::atomic<bool> migrate_{false};
    mutex mu_;
    condition_variable cv_;
    std::deque<engine_event> events_ BATON_GUARDED_BY(mu_);
    std::function<void()> notify_ BATON_GUARDED_BY(mu_);
};
using request_ptr = std::shared_ptr<request_handle>;

// A blob that passed blob_parse: only validated_blob::parse constructs one, so the restore routine can
// never see unvalidated bytes.
class validated_blob {
  public:
    static Result<std::shared_ptr<const validated_blob>> parse(std::vector<uint8_t> bytes, const blob_limits & limits);
    ~validated_blob();  // the bytes go back to buffer_pool::shared()
    validated_blob(const validated_blob &) = delete;
    validated_blob & operator=(const validated_blob &) = delete;
    const blob_view & view() const { return view_; }
    size_t size() const { return bytes_.size(); }
    const std::vector<uint8_t> & bytes() const { return bytes_; }

  private:
    validated_blob() = default;
    std::vector<uint8_t> bytes_;
    blob_view view_;  // borrows bytes_
};
using blob_ptr = std::shared_ptr<const validated_blob>;

// Typed tasks.
struct task_generate { gen_request req; };                       // prompt -> tokens
struct task_prefill { gen_request req; };                        // prompt -> blob (no generation)
struct task_decode {
    blob_ptr blob;
    gen_request req;
};                                                               // restore + generate (req.prompt ignored);
// a delta goes to the slot holding its base;
// a blob with a generation section resumes it
struct task_slot_save { int32_t slot; };                         // idle slot -> blob
struct task_slot_restore { int32_t slot; blob_ptr blob; };       // blob -> idle slot
struct task_slot_erase { int32_t slot; };
struct task_cache_put {
    blob_ptr blob;
};  // a state (a shared tier's) -> the host prompt
// cache, for the prompts queued after it
using engine_task = std::variant<task_generate, task_prefill, task_decode, task_slot_save, task_slot_restore,
                                 task_slot_erase, task_cache_put>;

struct slot_info {
    int32_t id = 0;
    bool busy = false;
    uint32_t n_tokens = 0;       // tokens the slot holds (in its memory, or in host memory when parked)
    bool parked = false;         // idle state moved out of the KV cache (engine_config::park_idle)
    uint32_t n_checkpoints = 0;
    int32_t pos_min = -1, pos_max = -1;
    // The tokens the slot holds (n_tokens of them), shared and immutable: a new vector only when they change,
    // so a reader (the node's KV-event publisher) can tell an unchanged slot by the pointer.
    std::shared_ptr<const std::vector<token_id>> tokens;
};

struct engine_metrics {
    uint64_t prompt_tokens = 0, cached_tokens = 0, generated_tokens = 0;
    uint64_t prefix_reuse_hits = 0;        // requests that reused part of a slot's memory
    uint64_t prefix_shares = 0;            // requests that took their prefix from another slot's memory
    uint64_t prefix_shared_tokens = 0;     // tokens those requests took (counted in cached_tokens too)
    // The host prompt cache (engine_config::cache_ram_mib): states kept, restored (and the prompt tokens they
    // gave, counted in cached_tokens too), dropped for the budget or made redundant; its size now.
    uint64_t cache_ram_stores = 0, cache_ram_hits = 0, cache_ram_hit_tokens = 0, cache_ram_evictions = 0;
    uint64_t cache_ram_bytes = 0, cache_ram_entries = 0;
    // Time spent serializing a slot's state for the host cache on a request's path: a slot taken over whose
    // state no idle snapshot had serialized yet (cache_out), before the request's own work in that slot.
    double cache_ram_store_seconds = 0;
    uint64_t checkpoint_restores = 0;      // rollbacks through a checkpoint
    uint64_t reprefills = 0;               // rollbacks impossible without a checkpoint: prompt recomputed
    uint64_t invariant_repairs = 0;        // slots whose memory disagreed with their tokens before a decode
    uint64_t restores_ok = 0;
    std::map<std::string, uint64_t> restore_failures;  // by reason (status code name)
    uint64_t blob_bytes_out = 0, blob_bytes_in = 0;
    uint64_t deltas_out = 0, deltas_in = 0;  // delta blobs written (prefill) and restored (decode, slot restore)
    uint64_t state_parts_out = 0;            // parts of streamed states handed on (prefill, state_stream.h)
    // Live migration: generations paused and handed on as states, generations resumed here, and the tokens
    // the resumed ones had generated before they came.
    uint64_t migrations_out = 0, migrations_in = 0, migrated_tokens_in = 0;
    uint64_t delta_base_tokens_in = 0;       // tokens restored deltas did not carry (their bases, held here)
    double restore_seconds = 0, serialize_seconds = 0;
    uint32_t slots_busy = 0, slots_total = 0;
    uint64_t decode_calls = 0;
    uint64_t parks = 0, unparks = 0;       // idle slots moved to host memory / restored from it
    uint64_t parked_bytes = 0;             // host memory held by parked slots now
    double park_seconds = 0;               // time spent parking and unparking
    // Idle slots' states serialized while the engine had nothing else to do (slot.h, idle_blob), those later
    // kept in the host cache or parked without serializing again, the time it took, and the bytes held now.
    uint64_t idle_snapshots = 0, idle_snapshots_used = 0;
    double idle_snapshot_seconds = 0;
    uint64_t idle_snapshot_bytes = 0;
};

class engine_impl;
struct engine_test_access;

class engine {
  public:
    // create builds the context and starts the scheduler thread.
    static Result<std::unique_ptr<engine>> create(std::shared_ptr<const loaded_model> model, const engine_config & cfg);
    ~engine();  // stops the scheduler; pending tasks end with a cancelled error

    // submit validates the task's typed fields and queues it. invalid_argument for bad requests,
    // unavailable when the queue is full.
    Result<request_ptr> submit(engine_task task);

    engine_metrics metrics() const;
    std::vector<slot_info> slots() const;
    // The token sequences the host prompt cache holds states for (the same pointer while an entry is kept).
    std::vector<std::shared_ptr<const std::vector<token_id>>> cached_prefixes() const;
    const loaded_model & model() const;
    const engine_config & config() const;
    const model_identity & identity() const;
    const kv_layout & layout() const;  // with the n_ctx libllama made
    // state_validation: ok when the engine learned its own state layout at start, so every external state is
    // checked against it before libllama parses it (state_payload.h); otherwise why it restores no state.
    Status state_validation() const;
    // resumes_exactly: whether a generation paused here (request_handle::migrate) resumes on a node of the same
    // model and context with the logits it would have had here, bit for bit. Not for a sliding-window model
    // without flash attention: paused past the window, its logits elsewhere differ in the last bits at some
    // points (the restored window's cells do not sit where generation left them, and the attention's product
    // with V transposed rounds by where they sit; flash attention accumulates cell by cell: exact), pinned by
    // tests/engine/migration_test.cpp. The node offers to move only generations that resume exactly. Any thread.
    bool resumes_exactly() const;
    // delta_of: a full state's delta over its first n_base tokens, as blob bytes (with key's MAC when set): the
    // first attention part's cells past n_base, every other part whole (state_splice.h). For a shared tier's
    // writer; any thread (it reads only the state layout the engine learned at start).
    Result<std::vector<uint8_t>> delta_of(const blob_view & full, uint32_t n_base, const blob_key * key) const;
    // stream_assembler: a joiner of a streamed state's parts (state_stream.h) against this node's state layout,
    // cells per sequence and blob limits; any thread. unsupported when the engine learned no state layout.
    Result<std::unique_ptr<state_stream_assembler>> stream_assembler() const;

    // stop: finish no new work; tasks in flight end with a cancelled error. Idempotent.
    void stop();

  private:
    friend struct engine_test_access;  // the engine's tests (src/engine/engine_test_seam.h)
    explicit engine(std::unique_ptr<engine_impl> impl);
    std::unique_ptr<engine_impl> impl_;
};

// engine_run_to_end is a convenience for CLIs and tests: waits for all events of a task. On timeout it
// cancels the task and ends with deadline_exceeded.
struct engine_result {
    std::vector<token_id> tokens;
    std::string text;  // engine_event_text of every event, concatenated
    // done: the terminal event_done, or the Status of the event_error (or of the timeout).
    Result<event_done> done{Status(status_code::internal, "the task has not ended")};
};
engine_result engine_run_to_end(const request_ptr & h, std::chrono::milliseconds timeout = std::chrono::minutes(10));

}  // namespace baton
