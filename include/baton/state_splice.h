// state_splice.h — cutting a sequence state down to the cells past a base, and joining such a delta onto the
// base a receiver holds: the two halves of a delta transfer (blob format 1.2, docs/state-blob.md "Deltas").
//
// Why bytes, not libllama: libllama's public API has no "export cells from position p" and its cross-sequence
// copy (llama_memory_seq_cp) copies a whole stream when the KV cache is not unified (one stream per
// sequence), overwriting the destination. Working on the state bytes, whose layout state_payload.h documents
// and checks, is the same for unified and non-unified caches and every model family, and the joined state
// then goes through the one restore routine like any other state.
//
// What is cut: only the FIRST attention part of a full state (the model's full-context KV cache) is split by
// token: its cells, one per token, in token order (by position; on an M-RoPE model, whose image cells share a
// position, then by row and column: position_map.h). Every other part — a sliding-window cache, a recurrent (conv + SSM) state — describes the end of
// the sequence, is small, and travels whole in the delta. A purely recurrent model's delta is its whole state.
//
// Both functions check their inputs against the node's shape (state_payload_check) before reading them, so
// they are total over untrusted bytes; their output is a state in the same layout, cells in token order.
// Thread-safety: plain functions over borrowed bytes.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "baton/base/status.h"
#include "baton/state_payload.h"

namespace baton {

// state_cut returns the delta of a full state covering n_tokens tokens: the first attention part keeps the
// cells at positions n_base..n_tokens-1 only, every other part is copied. REQUIRES 1 <= n_base < n_tokens.
// corrupt when full is not a valid full state of n_tokens tokens for this shape.
Result<std::vector<uint8_t>> state_cut(std::span<const uint8_t> full, const state_shape & shape, uint32_t n_tokens,
                                       uint32_t n_base, uint32_t n_cells_max);

// state_join returns the full state of n_tokens tokens made of the base's cells at positions 0..n_base-1
// (base: a full state of base_tokens >= n_base tokens, e.g. the receiver's slot, which may hold more) and
// the delta's (a state_cut of n_tokens over n_base): the delta's header and every other part, the first
// attention part merged. corrupt when either input does not check (on an M-RoPE model, whose delta's positions
// continue its base's, when the joined state does not).
Result<std::vector<uint8_t>> state_join(std::span<const uint8_t> base, uint32_t base_tokens,
                                        std::span<const uint8_t> delta, const state_shape & shape, uint32_t n_tokens,
                                        uint32_t n_base, uint32_t n_cells_max);

}  // namespace baton
