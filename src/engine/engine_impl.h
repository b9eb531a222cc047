// engine_impl.h — the engine's private state: the context, the slots, the task queue and the scheduler.
// Thread-safety: fields marked "scheduler" are touched only by the scheduler thread; the queue and the
// published snapshots are guarded by their mutexes.
#pragma once

#include <llama.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "baton/engine.h"
#include "baton/model.h"
#include "prompt_cache.h"
#include "slot.h"
#include "text_stream.h"

namespace baton {

using steady = std::chrono::steady_clock;

enum class task_kind : uint8_t { generate, prefill, decode };

// The request a slot is serving.
struct active_task {
    task_kind kind = task_kind::generate;
    request_ptr h;
    gen_request req;
    std::vector<token_id> seq;          // tokens that must be in memory before the next sample
    std::vector<uint32_t> plan;         // remaining chunk ends (token counts), ascending
    std::vector<uint32_t> checkpoint_at;
    sampler_ptr chain;
    text_stream text{{}};
    bool need_sample = false;           // slot.logits are fresh for seq.back(): sample in this step
    int32_t batch_row = -1;             // row of this slot's logits in the current batch, -1 if none
    uint32_t n_generated = 0;
    bool context_full = false;  // generation stopped because the slot's context was full
    bool progress = false;      // req.return_progress and the prompt is not all in memory yet
    uint32_t part_end = 0;      // streamed prefill: tokens the parts handed on so far cover
    uint32_t part_tokens = 0;   // streamed prefill: tokens per part (0: not streamed)
    usage_counts usage;
    steady::time_point t_start, t_prompt_done;
};

// One slot's share of a batch.
struct batch_part {
    size_t slot = 0;
    uint32_t n_begin = 0, n_end = 0;    // token counts: memory grows from n_begin to n_end
};

struct engine_test_seam;

class engine_impl {
  public:
    // create builds the context and the slots and starts the scheduler thread. seam is null except in the
    // engine's tests (engine_test_seam.h).
    static Result<std::unique_ptr<engine_impl>> create(std::shared_ptr<const loaded_model> model,
                                                       const engine_config & cfg,
                                                       std::shared_ptr<const engine_test_seam> seam);
    std::shared_ptr<const loaded_model> model;
    engine_config cfg;
    context_ptr ctx;
    restore_env env;
    restore_faults faults;  // tests only: what env.faults points to when the seam asks for faults
    bool partial_state = false;
    bool positions_2d = false;  // an M-RoPE model: its embeddings take four position components (position_map.h)
    int32_t n_vocab = 0;
    uint32_t n_embd_inp = 0;  // floats per input embedding (an image's, media.h)
    token_pieces pieces;  // every token's text, for grammar chains' UTF-8 guard (built at create)
    std::vector<token_id> eog;  // the vocabulary's end-of-generation tokens, which ignore_eos bans (at create)
    llama_batch batch{};
    llama_batch media_batch{};  // an image's embeddings (n_batch rows of n_embd_inp floats), made at first use
    std::vector<llama_pos> grid_pos;               // an M-RoPE image's positions for media_batch: 4 per embedding
    std::shared_ptr<const engine_test_seam> seam;  // immutable after create; null in production

    // scheduler
    std::vector<slot> slots;
    uint64_t step_no = 0;
    // Mean llama_decode milliseconds per token over recent prompt-sized batches (>= 16 tokens), 0 until one
    // ran: the estimate behind the admission window (gather_arrivals).
    double prompt_ms_per_token = 0;
    std::vector<uint8_t> state_scratch;  // raw state bytes of the export in progress (largest one kept)
    prompt_cache host_cache{0};          // engine_config::cache_ram_mib (set at create)

    // queue
    mutex mu;
    condition_variable cv;
    std::deque<std::pair<engine_task, request_ptr>> queue BATON_GUARDED_BY(mu);
    bool stopping BATON_GUARDED_BY(mu) = false;
    uint64_t next_id BATON_GUARDED_BY(mu) = 1;
    std::thread thread;

    // published state
    mutable mutex pub_mu;
    engine_metrics metrics BATON_GUARDED_BY(pub_mu);
    std::vector<slot_info> slot_snapshot BATON_GUARDED_BY(pub_mu);
    std::vector<std::shared_ptr<const std::vector<token_id>>> cache_snapshot BATON_GUARDED_BY(pub_mu);

    ~engine_impl();
    void run();  // the scheduler thread's loop
    // gather_arrivals: on an idle engine, the first generation tasks wait briefly for the ones arriving with
    // them (concurrent clients), so their prompts share the first batch instead of most of them waiting for
    // a batch planned without them. The wait ends 1 ms after the latest arrival, at 1% of the estimated
    // prompt time of what is queued (at most 2 ms after the first), or as soon as the queued prompts fill
    // a batch or the free slots.
    void gather_arrivals() BATON_REQUIRES(mu);
    size_t new_prompt_tokens(const std::vector<token_id> & prompt) const;  // not held by any free slot

    // Idle snapshots (slot.h, idle_blob): with nothing queued and no slot working, the scheduler serializes
    // one idle slot's memory at a time (least recently used first; only where the host prompt cache or
    // parking would serialize it later, and only while the node holds more than one conversation), so that
    // work is off the next request's path. A request arriving meanwhile waits for at most that one snapshot.
    // idle_snapshot_due: the slot to snapshot now, or null.
    slot * idle_snapshot_due();
    void snapshot_idle_slot(slot & s);

    // ---- scheduler step phases (scheduler.cpp) ----
    void step();
    void phase_admit();
    void phase_cancel();
    bool phase_park();  // true when it parked a slot (that took time: admit again before planning)
    bool parks() const;      // parking applies (engine_config::park_idle, a unified cache, not purely recurrent)
    bool park_idle_slots();  // parks every idle slot holding cells; true when it parked one
    std::vector<batch_part> phase_plan_batch();
    void phase_guard(const std::vector<batch_part> & parts);
    bool phase_decode(const std::vector<batch_part> & parts);
    bool decode_batch(llama_batch & b, const std::vector<batch_part> & parts);
    void phase_sample();
    void publish();
    // deliver publishes the slot snapshot, then pushes a terminal event.
    void deliver(const request_ptr & h, engine_event ev);

    // ---- helpers (scheduler.cpp) ----
    bool admit_one(engine_task & task, const request_ptr & h);  // false: no slot free, keep queued
    void run_slot_op(engine_task & task, const request_ptr & h);
    void bind_task(slot & s, std::unique_ptr<active_task> t, engine_task & task);
    int32_t pick_slot(const std::vector<token_id> & prompt) const;
    size_t reuse_min(const std::vector<token_id> & prompt) const;  // engine_config::reuse_min_tokens
    void start_prompt(slot & s, active_task & t);
    void add_part_stops(active_task & t, uint32_t n_begin);
    Status send_part(slot & s, bool last);
    void take_parked(slot & s, const std::vector<token_id> & prompt);
    // Prefix sharing between slots (unified KV, attention-only models): a prompt whose prefix another slot
    // holds in memory or is computing takes it from there instead of computing it again.
    bool prefix_share_on() const;
    // share_wait: true while a slot still computing its prompt will hold more of `prompt` than any slot
    // holds now (by at least reuse_min): the task waits for it instead of computing the same tokens.
    bool share_wait(const std::vector<token_id> & prompt) const;
    // share_prefix: copies into s the longest prefix of prompt another slot holds in memory
    // (llama_memory_seq_cp: the cells become shared) when that is more than s holds itself.
    void share_prefix(slot & s, const gen_request & req);
    // The host prompt cache (prompt_cache.h). cache_out: before a slot makes way for `next` (a prompt, or the
    // tokens of a state restored into it), keeps a copy of what it holds when at least reuse_min of its tokens
    // would be lost (its parked blob or idle_blob as it is, else a snapshot of its memory); the slot's idle_blob
    // is dropped either way (the slot is about to change). cache_in: when an entry gives
    // more of the prompt than the slot holds, restores it into the slot (slot_restore; the entry stays).
    void cache_out(slot & s, const std::vector<token_id> & next);
    void cache_keep(blob_ptr b);  // host_cache.put, counted (cache_out and task_cache_put)
    // cache_join: the full state of a delta (a shared tier's) over the base a host-cache entry or an idle
    // slot holds; incompatible when none holds it.
    Result<blob_ptr> cache_join(const blob_view & d);
    void cache_in(slot & s, const std::vector<token_id> & prompt);
    void after_chunk(slot & s, uint32_t n_end);
    void sample_one(slot & s);
    void migrate_out(slot & s);
    Status resume_generation(slot & s, active_task & t, const blob_generation & g);
    void finish(slot & s, finish_reason why, Status error = {}, std::vector<uint8_t> blob = {});
    void fail_task(slot & s, Status error);
    void repair(slot & s, const Status & why);
    void count_restore(const Status & st, double seconds, size_t bytes);
    void count_delta(const Status & st, const blob_view & b);  // a restored delta and the base it did not carry
    template <typename F> void bump(F f) {
        lock_guard lk(pub_mu);
        f(metrics);
    }
};

// probs_of: the chosen token's log-probability and the n_top most likely tokens' under softmax(logits).
token_probs probs_of(const std::vector<float> & logits, token_id chosen, int32_t n_top);

}  // namespace baton
