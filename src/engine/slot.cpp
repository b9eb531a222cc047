// slot.cpp — slot bookkeeping, the one restore routine, prefix reuse and checkpoints.
#include "slot.h"

#include <llama.h>

#include <algorithm>

#include "baton/state_splice.h"

namespace baton {

namespace {
llama_memory_t mem_of(llama_context * ctx) { return llama_get_memory(ctx); }
}  // namespace

size_t common_prefix(const std::vector<token_id> & a, const std::vector<token_id> & b) {
    const size_t n = std::min(a.size(), b.size());
    size_t i = 0;
    while (i < n && a[i] == b[i]) ++i;
    return i;
}

const std::vector<token_id> & slot_held_tokens(const slot & s) { return s.parked ? s.parked->view().tokens : s.tokens; }

void slot_clear(llama_context * ctx, slot & s) {
    llama_memory_seq_rm(mem_of(ctx), s.id, -1, -1);
    s.tokens.clear();
    s.positions.clear();
    s.checkpoints.clear();
    s.logits.clear();
    s.parked.reset();
    s.idle_blob.reset();
}

Status slot_check_memory(llama_context * ctx, const slot & s) {
    const llama_pos pmin = llama_memory_seq_pos_min(mem_of(ctx), s.id);
    const llama_pos pmax = llama_memory_seq_pos_max(mem_of(ctx), s.id);
    const int64_t want_max = s.tokens.empty() ? -1 : int64_t(s.positions.pos_of(s.tokens.size() - 1));
    if (pmax != want_max || (s.tokens.empty() ? pmin != -1 : pmin < 0))
        return {status_code::internal,
                "slot " + std::to_string(s.id) + ": memory holds positions " + std::to_string(pmin) + ".." +
                    std::to_string(pmax) + " but the slot has " + std::to_string(s.tokens.size()) + " tokens" +
                    (s.positions.empty() ? std::string() : " ending at position " + std::to_string(want_max))};
    return {};
}

namespace {

// check_state_bytes: the blob's state and every checkpoint against this node's state layout; positions: where the
// state's cells put its tokens (an M-RoPE model's images).
Status check_state_bytes(const restore_env & env, const validated_blob & blob, position_map & positions) {
    const blob_view & b = blob.view();
    if (!env.shape_error.ok())
        return {status_code::unsupported,
                "state: this node cannot validate states, so it restores none: " + env.shape_error.message()};
    const uint8_t * base = blob.bytes().data();
    state_expect e;
    e.n_tokens = uint32_t(b.tokens.size());
    e.n_cells_max = env.n_ctx_slot;
    e.tokens = b.tokens;
    if (Status st = state_payload_check(b.state, env.shape, e, uint64_t(b.state.data() - base), &positions); !st.ok())
        return {st.code(), "state: " + st.message()};
    e.partial = true;
    for (size_t i = 0; i < b.checkpoints.size(); ++i) {
        const auto & c = b.checkpoints[i];
        e.n_tokens = c.n_tokens;
        if (Status st = state_payload_check(c.data, env.shape, e, uint64_t(c.data.data() - base)); !st.ok())
            return {st.code(), "checkpoints[" + std::to_string(i) + "]: " + st.message()};
    }
    return {};
}

Status fault_after(const restore_env & env, restore_step step) {
    if (env.faults && env.faults->fail_after && env.faults->fail_after(step))
        return {status_code::engine_error, "restore: injected failure (test)"};
    return {};
}

}  // namespace

Status slot_restore(const restore_env & env, slot & s, const validated_blob & blob, uint64_t owner) {
    const blob_view & b = blob.view();
    // 1. Everything about the blob is checked before the slot is touched.
    BATON_RETURN_IF_ERROR(blob_check_compatible(b, env.identity, env.context));
    if (b.tokens.empty()) return {status_code::corrupt, "tokens: a blob must cover at least one token"};
    if (b.tokens.size() > env.n_ctx_slot)
        return {status_code::incompatible, "tokens: " + std::to_string(b.tokens.size()) +
                                               " tokens do not fit a slot of " + std::to_string(env.n_ctx_slot) +
                                               " (start the node with a larger -c)"};
    position_map positions;
    BATON_RETURN_IF_ERROR(check_state_bytes(env, blob, positions));
    // 2. Take the slot.
    if (s.owner != 0 && s.owner != owner)
        return {status_code::busy, "slot " + std::to_string(s.id) + " is busy"};
    // 3. Clear, apply, verify, register.
    slot_clear(env.ctx, s);
    Status st = fault_after(env, restore_step::cleared);
    if (st.ok()) {
        const size_t n_read = llama_state_seq_set_data(env.ctx, b.state.data(), b.state.size(), s.id);
        if (n_read == 0) {
            // The bytes passed every check, so they are what the sender wrote: a state this node's libllama
            // cannot read is a bad blob (422), not a node fault.
            st = Status(status_code::corrupt,
                        "state: libllama rejected the state bytes (" + std::to_string(b.state.size()) + " bytes)");
        } else if (n_read != b.state.size()) {
            st = Status(status_code::corrupt, "state: libllama read " + std::to_string(n_read) + " of " +
                                                  std::to_string(b.state.size()) + " state bytes");
        }
    }
    if (st.ok()) st = fault_after(env, restore_step::applied);
    if (st.ok()) {
        s.tokens.assign(b.tokens.begin(), b.tokens.end());
        s.positions = std::move(positions);
        st = slot_check_memory(env.ctx, s);
        if (!st.ok()) st = Status(status_code::corrupt, "state: " + st.message() + " (the blob's token section)");
    }
    if (st.ok()) st = fault_after(env, restore_step::verified);
    if (st.ok()) {
        for (const auto & c : b.checkpoints)
            s.checkpoints.push_back({c.pos_min, c.pos_max, c.n_tokens, std::vector<uint8_t>(c.data.begin(), c.data.end())});
        if (b.logits) s.logits = *b.logits;
        st = fault_after(env, restore_step::registered);
    }
    if (st.ok()) return {};
    // 4. Any failure: empty and consistent.
    slot_clear(env.ctx, s);
    return st;
}

bool slot_holds_base(const slot & s, const blob_view & delta) {
    const std::vector<token_id> & held = slot_held_tokens(s);
    const size_t n = delta.base_tokens;
    return n > 0 && held.size() >= n && delta.tokens.size() >= n &&
           std::equal(delta.tokens.begin(), delta.tokens.begin() + ptrdiff_t(n), held.begin());
}

namespace {

// export_state: the slot's full state bytes (its memory), into scratch.
Result<std::span<const uint8_t>> export_state(llama_context * ctx, const slot & s, std::vector<uint8_t> & scratch) {
    const size_t size = llama_state_seq_get_size(ctx, s.id);
    if (scratch.size() < size) scratch.resize(size);
    if (size == 0 || llama_state_seq_get_data(ctx, scratch.data(), size, s.id) != size)
        return Status(status_code::engine_error, "state: libllama could not serialize slot " + std::to_string(s.id));
    return std::span<const uint8_t>(scratch.data(), size);
}

}  // namespace

Status slot_restore_delta(const restore_env & env, slot & s, const validated_blob & delta, uint64_t owner,
                          std::vector<uint8_t> & state_scratch) {
    const blob_view & d = delta.view();
    if (d.base_tokens == 0) return slot_restore(env, s, delta, owner);
    // 1. The delta is for this node and this slot's base, or nothing happens.
    BATON_RETURN_IF_ERROR(blob_check_compatible(d, env.identity, env.context));
    if (!env.shape_error.ok())
        return {status_code::unsupported,
                "state: this node cannot validate states, so it restores none: " + env.shape_error.message()};
    if (s.owner != 0 && s.owner != owner) return {status_code::busy, "slot " + std::to_string(s.id) + " is busy"};
    if (!slot_holds_base(s, d))
        return {status_code::incompatible,
                "base: slot " + std::to_string(s.id) + " does not hold the delta's base of " +
                    std::to_string(d.base_tokens) + " tokens (it holds " + std::to_string(slot_held_tokens(s).size()) +
                    " tokens, " + std::to_string(common_prefix(slot_held_tokens(s), d.tokens)) + " of them shared)"};
    if (d.tokens.size() > env.n_ctx_slot)
        return {status_code::incompatible, "tokens: " + std::to_string(d.tokens.size()) +
                                               " tokens do not fit a slot of " + std::to_string(env.n_ctx_slot) +
                                               " (start the node with a larger -c)"};
    // 2. Join what the slot holds below the base with the delta's cells.
    auto full = slot_join_delta(env, s, d, state_scratch);
    if (!full.ok()) return full.status();
    // 3. The one restore routine.
    return slot_restore(env, s, *full.value(), owner);
}

Result<blob_ptr> slot_join_delta(const restore_env & env, const slot & s, const blob_view & d,
                                 std::vector<uint8_t> & state_scratch) {
    std::span<const uint8_t> held;
    std::vector<blob_checkpoint_view> held_checkpoints;
    if (s.parked) {
        held = s.parked->view().state;
        held_checkpoints = s.parked->view().checkpoints;
    } else {
        auto e = export_state(env.ctx, s, state_scratch);
        if (!e.ok()) return e.status();
        held = e.value();
        for (const auto & c : s.checkpoints) held_checkpoints.push_back({c.pos_min, c.pos_max, c.n_tokens, c.data});
    }
    return state_join_delta(env, held, uint32_t(slot_held_tokens(s).size()), held_checkpoints, d);
}

Result<blob_ptr> state_join_delta(const restore_env & env, std::span<const uint8_t> held, uint32_t n_held,
                                  const std::vector<blob_checkpoint_view> & held_checkpoints, const blob_view & d) {
    auto joined =
        state_join(held, n_held, d.state, env.shape, uint32_t(d.tokens.size()), d.base_tokens, env.n_ctx_slot);
    if (!joined.ok()) return joined.status();
    blob_parts parts = blob_view_parts(d);
    parts.base_tokens = 0;
    parts.state = joined.value();
    parts.checkpoints.clear();
    for (const auto & c : held_checkpoints)
        if (c.n_tokens <= d.base_tokens) parts.checkpoints.push_back(c);
    for (const auto & c : d.checkpoints) parts.checkpoints.push_back(c);
    blob_buffer_sink sink;
    BATON_RETURN_IF_ERROR(blob_write(parts, sink));
    blob_limits limits;
    limits.max_tokens = std::max<uint32_t>(limits.max_tokens, env.n_ctx_slot);
    limits.max_checkpoints = std::max<uint32_t>(limits.max_checkpoints, uint32_t(parts.checkpoints.size()));
    auto full = validated_blob::parse(std::move(sink.bytes()), limits);
    if (!full.ok())
        return Status(status_code::internal, "delta: the joined blob does not parse: " + full.status().message());
    return blob_ptr(std::move(full.value()));
}

Result<std::vector<uint8_t>> state_delta_of(const restore_env & env, const blob_view & full, uint32_t n_base,
                                            const blob_key * key) {
    if (full.base_tokens != 0 || n_base == 0 || n_base >= full.tokens.size())
        return Status(status_code::invalid_argument, "delta: a base of " + std::to_string(n_base) +
                                                         " tokens for a state of " +
                                                         std::to_string(full.tokens.size()));
    if (!env.shape_error.ok()) return Status(status_code::unsupported, "delta: " + env.shape_error.message());
    auto cut = state_cut(full.state, env.shape, uint32_t(full.tokens.size()), n_base, env.n_ctx_slot);
    if (!cut.ok()) return cut.status();
    blob_parts parts = blob_view_parts(full);
    parts.state = cut.value();
    parts.checkpoints.clear();
    for (const auto & c : full.checkpoints)
        if (c.n_tokens > n_base) parts.checkpoints.push_back(c);
    parts.base_tokens = n_base;
    blob_buffer_sink sink;
    BATON_RETURN_IF_ERROR(blob_write(parts, sink, key));
    return std::move(sink.bytes());
}

Result<blob_ptr> slot_snapshot(const restore_env & env, const slot & s, std::vector<uint8_t> & state_scratch) {
    blob_buffer_sink sink;
    if (Status st = slot_export(env.ctx, s, env.identity, env.context, true, "", sink, state_scratch); !st.ok())
        return st;
    blob_limits limits;
    limits.max_tokens = std::max<uint32_t>(limits.max_tokens, env.n_ctx_slot);
    auto b = validated_blob::parse(std::move(sink.bytes()), limits);
    if (!b.ok()) return Status(status_code::internal, "the slot's own blob does not parse: " + b.status().message());
    return blob_ptr(std::move(b.value()));
}

Result<size_t> slot_park(const restore_env & env, slot & s, std::vector<uint8_t> & state_scratch) {
    Result<blob_ptr> b = s.idle_blob ? Result<blob_ptr>(std::move(s.idle_blob)) : slot_snapshot(env, s, state_scratch);
    slot_clear(env.ctx, s);
    if (!b.ok()) return Status(b.status().code(), "park: " + b.status().message());
    s.parked = std::move(b.value());
    return s.parked->size();
}

Status slot_unpark(const restore_env & env, slot & s, uint64_t owner) {
    const blob_ptr b = std::move(s.parked);
    s.parked.reset();
    if (!b) return {};
    return slot_restore(env, s, *b, owner);
}

Status slot_take_checkpoint(llama_context * ctx, slot & s, uint32_t max_checkpoints) {
    if (max_checkpoints == 0) return {};
    const size_t size = llama_state_seq_get_size_ext(ctx, s.id, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
    slot_checkpoint c;
    c.n_tokens = uint32_t(s.tokens.size());
    c.pos_min = llama_memory_seq_pos_min(mem_of(ctx), s.id);
    c.pos_max = llama_memory_seq_pos_max(mem_of(ctx), s.id);
    c.data.resize(size);
    if (size == 0 || llama_state_seq_get_data_ext(ctx, c.data.data(), size, s.id, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY) != size)
        return {status_code::engine_error, "checkpoint: libllama could not snapshot slot " + std::to_string(s.id)};
    // Keep the list ordered and unique by n_tokens; drop the oldest beyond the bound.
    while (!s.checkpoints.empty() && s.checkpoints.back().n_tokens >= c.n_tokens) s.checkpoints.pop_back();
    s.checkpoints.push_back(std::move(c));
    while (s.checkpoints.size() > max_checkpoints) s.checkpoints.erase(s.checkpoints.begin());
    return {};
}

namespace {

// Roll partial-state memory back to exactly n tokens through a checkpoint taken at n.
bool rollback_to_checkpoint(llama_context * ctx, slot & s, const slot_checkpoint & c) {
    // HAZARD (measured): a hybrid partial checkpoint restored into an EMPTY sequence "succeeds" with wrong
    // output; callers only roll back a non-empty slot that holds the checkpoint's prefix.
    if (s.tokens.size() < c.n_tokens || c.n_tokens == 0) return false;
    if (llama_state_seq_set_data_ext(ctx, c.data.data(), c.data.size(), s.id, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY) == 0)
        return false;
    if (s.positions.splits_image(c.n_tokens) ||
        !llama_memory_seq_rm(mem_of(ctx), s.id, s.positions.pos_of(c.n_tokens), -1))
        return false;
    s.tokens.resize(c.n_tokens);
    s.positions.keep(c.n_tokens);
    s.logits.clear();
    while (!s.checkpoints.empty() && s.checkpoints.back().n_tokens > c.n_tokens) s.checkpoints.pop_back();
    return slot_check_memory(ctx, s).ok();
}

}  // namespace

prepare_outcome slot_prepare_prompt(llama_context * ctx, slot & s, const std::vector<token_id> & prompt,
                                    size_t keep_max, bool partial_state) {
    prepare_outcome out;
    // At least the last prompt token is recomputed: its logits are needed to sample.
    const size_t limit = std::min(keep_max, prompt.empty() ? size_t(0) : prompt.size() - 1);
    const size_t lcp = std::min(common_prefix(s.tokens, prompt), limit);
    if (lcp == s.tokens.size()) {  // the slot holds a prefix of the prompt: nothing to undo
        out.n_keep = uint32_t(lcp);
        s.logits.clear();
        return out;
    }
    if (lcp > 0 && !partial_state && !s.positions.splits_image(lcp)) {
        if (llama_memory_seq_rm(mem_of(ctx), s.id, s.positions.pos_of(lcp), -1)) {
            s.tokens.resize(lcp);
            s.positions.keep(lcp);
            s.logits.clear();
            out.n_keep = uint32_t(lcp);
            return out;
        }
    }
    if (lcp > 0 && partial_state) {
        for (auto it = s.checkpoints.rbegin(); it != s.checkpoints.rend(); ++it) {
            if (it->n_tokens > lcp) continue;
            const slot_checkpoint c = *it;  // copy: rollback trims the list
            if (rollback_to_checkpoint(ctx, s, c)) {
                out.n_keep = c.n_tokens;
                out.used_checkpoint = true;
                return out;
            }
            break;
        }
        out.reprefill = true;
    }
    slot_clear(ctx, s);
    return out;
}

Status slot_export(llama_context * ctx, const slot & s, const model_identity & id, const kv_layout & bc,
                   bool with_logits, const std::string & request_json, blob_sink & sink,
                   std::vector<uint8_t> & state_scratch, const blob_key * key,
                   std::optional<blob_generation> generation) {
    if (s.tokens.empty()) return {status_code::not_found, "slot " + std::to_string(s.id) + " holds no state"};
    BATON_RETURN_IF_ERROR(slot_check_memory(ctx, s));
    auto state = export_state(ctx, s, state_scratch);
    if (!state.ok()) return state.status();
    blob_parts parts;
    parts.identity = id;
    parts.context = bc;
    parts.tokens = std::span<const int32_t>(s.tokens.data(), s.tokens.size());
    parts.state = state.value();
    for (const auto & c : s.checkpoints) parts.checkpoints.push_back({c.pos_min, c.pos_max, c.n_tokens, c.data});
    if (with_logits && !s.logits.empty()) parts.logits = s.logits;
    parts.request = request_json;
    parts.generation = generation;
    return blob_write(parts, sink, key);
}

Status slot_export_delta(const restore_env & env, const slot & s, uint32_t n_base, const std::string & request_json,
                         blob_sink & sink, std::vector<uint8_t> & state_scratch, const blob_key * key,
                         bool with_logits) {
    if (n_base == 0 || n_base >= s.tokens.size())
        return {status_code::invalid_argument, "delta: a base of " + std::to_string(n_base) + " tokens for a slot of " +
                                                   std::to_string(s.tokens.size())};
    BATON_RETURN_IF_ERROR(slot_check_memory(env.ctx, s));
    if (!env.shape_error.ok()) return {status_code::unsupported, "delta: " + env.shape_error.message()};
    auto full = export_state(env.ctx, s, state_scratch);
    if (!full.ok()) return full.status();
    auto cut = state_cut(full.value(), env.shape, uint32_t(s.tokens.size()), n_base, env.n_ctx_slot);
    if (!cut.ok())
        return Status(status_code::internal, "delta: this slot's own state does not cut: " + cut.status().message());
    blob_parts parts;
    parts.identity = env.identity;
    parts.context = env.context;
    parts.tokens = std::span<const int32_t>(s.tokens.data(), s.tokens.size());
    parts.state = cut.value();
    for (const auto & c : s.checkpoints)
        if (c.n_tokens > n_base) parts.checkpoints.push_back({c.pos_min, c.pos_max, c.n_tokens, c.data});
    if (with_logits && !s.logits.empty()) parts.logits = s.logits;
    parts.request = request_json;
    parts.base_tokens = n_base;
    return blob_write(parts, sink, key);
}

}  // namespace baton
