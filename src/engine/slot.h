// slot.h — a slot is one llama sequence plus the bookkeeping that must always agree with its memory.
//
// Invariant (checked before every decode by slot_check_memory): the memory of sequence `id` holds exactly
// the tokens' positions, pos_max == positions.pos_of(tokens.size() - 1) (and -1 when empty) — on most models
// positions 0..tokens.size()-1; on an M-RoPE model with images fewer (position_map.h), and `positions` names
// them. Checkpoints are partial (recurrent/SWA) snapshots taken at token counts <= tokens.size().
//
// A parked slot (idle, unified KV) holds its state as a validated blob in host memory: its memory is
// empty and so is `tokens`, so the invariant holds unchanged; the parked tokens exist only inside the
// blob and come back only through slot_restore, never as bookkeeping without cells.
//
// An idle slot may also hold `idle_blob`: a snapshot of its memory made while the engine had nothing else to
// do (engine_impl::snapshot_idle_slot), so that keeping its state in the host prompt cache or parking it
// later costs no serialization on a request's path. It is a copy, never the slot's only state; anything that
// changes the slot's memory drops it (slot_clear, binding a task, a slot operation, a repair). Even a stale
// one would be a true state of its own tokens (a blob carries them), never state for someone else's.
//
// slot_restore is THE routine that puts external state into a slot; every entry point calls it.
// Thread-safety: only the engine's scheduler thread calls these functions.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "baton/base/status.h"
#include "baton/blob.h"
#include "baton/chunk_plan.h"
#include "baton/engine.h"
#include "baton/position_map.h"
#include "baton/state_payload.h"
#include "baton/text.h"

struct llama_context;

namespace baton {

struct slot_checkpoint {
    int32_t pos_min = -1, pos_max = -1;
    uint32_t n_tokens = 0;       // the sequence covered tokens [0, n_tokens) when it was taken
    std::vector<uint8_t> data;   // PARTIAL_ONLY state bytes
};

struct active_task;  // engine.cpp: the request a slot is serving

struct slot {
    int32_t id = 0;
    std::vector<token_id> tokens;              // exactly what the memory holds
    position_map positions;                    // where they sit (M-RoPE images); empty: token k at position k
    std::vector<slot_checkpoint> checkpoints;  // ordered by n_tokens
    std::vector<float> logits;                 // [n_vocab] for tokens.back() when known, else empty
    uint64_t owner = 0;                        // request id that reserved the slot, 0 when free
    uint64_t last_used = 0;                    // scheduler step of the last use (LRU)
    std::unique_ptr<active_task> task;         // the request being served, null when idle
    blob_ptr parked;                           // idle state in host memory (memory and tokens empty), or null
    blob_ptr idle_blob;                        // a copy of the idle slot's memory made ahead of need, or null
    uint64_t idle_snapshot_failed_step = 0;    // the scheduler step at which making idle_blob failed, 0: none
};

// slot_held_tokens: what the slot holds, in its memory or parked.
const std::vector<token_id> & slot_held_tokens(const slot & s);

// The steps of slot_restore after which a test may make it fail (engine_test_seam.h), to prove that a
// failure at any point leaves the slot and its memory empty and consistent.
enum class restore_step : uint8_t { cleared, applied, verified, registered };
struct restore_faults {
    std::function<bool(restore_step)> fail_after;  // true: fail the restore right after this step
};

// What the restore routine needs to know about the node.
struct restore_env {
    llama_context * ctx = nullptr;
    model_identity identity;
    kv_layout context;
    uint32_t n_ctx_slot = 0;  // max tokens one sequence can hold
    // The structure of this node's states (state_probe.h), every incoming state and checkpoint is checked
    // against before libllama sees it; when the probe failed, `shape_error` says why and restores are refused.
    state_shape shape;
    Status shape_error;
    const restore_faults * faults = nullptr;  // tests only (engine_test_seam.h); null in production
};

// slot_clear empties the slot: memory for the sequence removed, no tokens, no checkpoints, no logits,
// nothing parked.
void slot_clear(llama_context * ctx, slot & s);

// slot_check_memory returns internal naming the disagreement when the memory does not hold exactly the
// slot's tokens.
Status slot_check_memory(llama_context * ctx, const slot & s);

// slot_restore — THE restore routine.
//   1. check the (already parsed and validated) blob's identity and context against the node, and its state
//      and checkpoint bytes against this node's state layout (state_payload_check: positions, cell counts,
//      every header field) — before anything reaches libllama;
//   2. take the slot: it must be free or reserved by request `owner`;
//   3. clear it, apply the state, check the memory covers exactly the blob's tokens, register the blob's
//      checkpoints, set tokens (the count comes from the token section only) and trailing logits;
//   4. on any failure leave the slot empty and consistent and return the typed error. (A state that passed
//      step 1 holds only positions >= 0, which llama_memory_seq_rm always removes.)
Status slot_restore(const restore_env & env, slot & s, const validated_blob & blob, uint64_t owner);

// slot_holds_base: the slot holds (in memory or parked) the delta's base, tokens[0, base_tokens) of the blob.
bool slot_holds_base(const slot & s, const blob_view & delta);

// slot_restore_delta puts a delta (blob format 1.2) into the slot that holds its base, through slot_restore:
//   1. check the delta's identity and context against the node and that the slot holds exactly its base
//      (the first base_tokens tokens, compared token for token) — incompatible otherwise, slot untouched;
//   2. join the slot's cells below the base (from its memory or its parked blob) with the delta's cells
//      (state_splice.h: every input checked against this node's state layout), its checkpoints up to the
//      base with the delta's past it — corrupt for a delta that does not check, slot untouched;
//   3. slot_restore the joined full state (so a failure from here on leaves the slot empty and consistent).
// state_scratch holds the slot's exported state on the way.
Status slot_restore_delta(const restore_env & env, slot & s, const validated_blob & delta, uint64_t owner,
                          std::vector<uint8_t> & state_scratch);

// state_join_delta: the full state (a validated blob, ready for slot_restore) of delta d over a base the node
// holds: held, the state bytes of n_held tokens that begin with d's base (a slot's memory, a parked blob or
// a host-cache entry), and held_checkpoints, its checkpoints (those up to the base are kept, the delta's past it
// added). d's identity and context must already be checked. corrupt for a delta that does not check.
Result<blob_ptr> state_join_delta(const restore_env & env, std::span<const uint8_t> held, uint32_t n_held,
                                  const std::vector<blob_checkpoint_view> & held_checkpoints, const blob_view & d);

// slot_join_delta: state_join_delta over what slot s holds (its memory, or its parked blob). REQUIRES
// slot_holds_base(s, d) (both callers check it first, one of them to name what the slot holds instead).
Result<blob_ptr> slot_join_delta(const restore_env & env, const slot & s, const blob_view & d,
                                 std::vector<uint8_t> & state_scratch);

// state_delta_of: the delta of a full state over its first n_base tokens (1 <= n_base < its tokens), written
// as a blob with key's MAC when key is set: the first attention part's cells past n_base, every other part
// whole, the checkpoints past n_base. For a shared tier's writer (engine::delta_of).
Result<std::vector<uint8_t>> state_delta_of(const restore_env & env, const blob_view & full, uint32_t n_base,
                                            const blob_key * key);

// slot_snapshot writes the slot's state (in memory) as a validated blob — tokens, state, checkpoints, logits —
// and leaves the slot as it was.
Result<blob_ptr> slot_snapshot(const restore_env & env, const slot & s, std::vector<uint8_t> & state_scratch);

// slot_park moves an idle slot's state into host memory as a validated blob (tokens, state, checkpoints,
// logits) and empties its memory: its idle_blob when it has one, else a snapshot made now. On failure the
// slot is cleared (its cache is lost, nothing else).
// Returns the parked blob's size in bytes.
Result<size_t> slot_park(const restore_env & env, slot & s, std::vector<uint8_t> & state_scratch);

// slot_unpark puts a parked slot's state back through slot_restore, for request `owner`. On failure the
// slot is empty and consistent.
Status slot_unpark(const restore_env & env, slot & s, uint64_t owner);

// slot_take_checkpoint snapshots the partial state of the slot at its current token count.
Status slot_take_checkpoint(llama_context * ctx, slot & s, uint32_t max_checkpoints);

// slot_prepare_prompt makes the slot's memory a prefix of prompt that leaves at least one prompt token to
// decode, reusing as much as possible: attention-only memory is truncated; partial-state memory is
// rolled back through the newest checkpoint at or before the divergence point, else cleared. It keeps at most
// keep_max tokens (a caller's bound: media_keep_limit never ends a kept prefix inside a non-causal image).
// Returns how the slot was prepared.
struct prepare_outcome {
    uint32_t n_keep = 0;          // tokens kept (prompt tokens that need no compute)
    bool used_checkpoint = false;
    bool reprefill = false;       // rollback was needed but impossible: cleared
};
prepare_outcome slot_prepare_prompt(llama_context * ctx, slot & s, const std::vector<token_id> & prompt,
                                    size_t keep_max, bool partial_state);

// slot_export writes the slot's state as a blob: tokens, state bytes, checkpoints, logits (when
// with_logits and known), request_json and a generation in progress (live migration; needs the logits); with a
// key, authenticated (a mac section, blob.h).
// state_scratch holds the raw state bytes on the way (the scheduler reuses one buffer: no fresh pages
// and no zero-filling per export).
Status slot_export(llama_context * ctx, const slot & s, const model_identity & id, const kv_layout & bc,
                   bool with_logits, const std::string & request_json, blob_sink & sink,
                   std::vector<uint8_t> & state_scratch, const blob_key * key = nullptr,
                   std::optional<blob_generation> generation = std::nullopt);

// slot_export_delta writes the slot's state as a delta over its first n_base tokens (1 <= n_base <
// tokens.size()): the cells past them (state_cut), the checkpoints past them, the logits (unless !with_logits:
// a streamed state's parts before its last) and request_json.
Status slot_export_delta(const restore_env & env, const slot & s, uint32_t n_base, const std::string & request_json,
                         blob_sink & sink, std::vector<uint8_t> & state_scratch, const blob_key * key = nullptr,
                         bool with_logits = true);

// common_prefix returns the length of the longest common prefix of a and b.
size_t common_prefix(const std::vector<token_id> & a, const std::vector<token_id> & b);

}  // namespace baton
