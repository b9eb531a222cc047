// state_payload.h — libllama's sequence-state bytes (a blob's state section and checkpoints), parsed and
// checked before libllama sees them.
//
// Why: libllama 0.7 applies a sequence state without checking its cell metadata. A checksum-valid state whose
// positions are negative, huge, duplicated or too many is applied as given, and a cell at a negative
// position even survives llama_memory_seq_rm (which clamps p0 to 0), so one crafted state poisons a slot
// until the node restarts. Baton parses the payload as far as its layout goes and refuses anything out of
// range before llama_state_seq_set_data; the layout of this node's own memory (layer count, tensor types and
// row sizes, V transposition, stream count) is learned once at start from a probe sequence the node exports
// itself (state_shape, filled by the engine), so a state must match this node's memory byte for byte in its
// structure and may differ only in the cells' contents.
//
// The layout (libllama 0.7.0, little-endian, as llama_state_seq_get_data[_ext] writes one sequence, read off
// its exports): a header — u32 magic (0xAF143CD8, required equal to this node's), u32 the sender's sequence
// id — then the memory's parts one after another — an attention KV cache; a sliding-window model: the full cache
// then the sliding one; a hybrid: attention then recurrent; a partial (checkpoint) state: only the partial
// parts.
//   attention part:  u32 n_stream; per stream: u32 cell_count; if cell_count > 0:
//                      cell_count x { i32 pos; u32 n_seq_id (1); [M-RoPE: i32 x; i32 y; i32 tok;] i32 seq_id }
//                      u32 v_trans; u32 n_layer; u64 reserved (0 on 0.7.0: required equal to this node's);
//                      n_layer x { i32 k_type; u64 k_row_bytes; cell_count * k_row_bytes bytes }
//                      v_trans 0: n_layer x { i32 v_type; u64 v_row_bytes; cell_count * v_row_bytes bytes }
//                      v_trans 1: n_layer x { i32 v_type; u32 v_elem_bytes; u32 n_embd_v;
//                                             n_embd_v * cell_count * v_elem_bytes bytes }
//   recurrent part:  u32 cell_count; cell_count x { i32 pos; u32 n_seq_id (0) };
//                      u32 s_trans (0); u32 n_layer (all layers, written or not);
//                      n_rec x { i32 r_type; u64 r_row_bytes; cell_count * r_row_bytes bytes }   (conv state)
//                      n_rec x { i32 s_type; u64 s_row_bytes; cell_count * s_row_bytes bytes }   (SSM state)
// What a valid state for a sequence of n_tokens tokens must hold (Baton's slot invariant):
//   - the first attention part of a full state: exactly one cell per position 0..n_tokens-1 (a delta's:
//     n_base..n_tokens-1, state_expect::n_base);
//   - any other attention part (sliding window, or a checkpoint's): distinct positions forming one run that
//     ends at n_tokens-1 (or no cells);
//   - a recurrent part: exactly one cell, at position n_tokens-1;
//   - cells only in one stream, at most n_cells_max of them; every header field equal to this node's;
//   - on an M-RoPE model (its cells carry x, y and the token, state_part_shape::positions_2d), the first
//     attention part of a full state, its cells ordered by (pos, y, x), is the sequence token by token
//     (position_map.h): a text token one cell at the next position with (x, y) = (pos, pos) and tok its token,
//     an image a group of cells at one position p forming a w x h grid — its i-th cell at (p + i % w, p + i / w),
//     tok -1 (no token), its tokens media tokens — that advances the next position by max(w, h); tokens are
//     compared when the check is given them (state_expect::tokens: the restore routine always gives them); a
//     delta's cells only for order (no two at one 2-D position: the joined state is checked whole); every other
//     part holds text cells only, x == y == pos.
// Thread-safety: plain functions over borrowed bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "baton/base/status.h"
#include "baton/position_map.h"

namespace baton {

enum class state_part_kind : uint8_t { attention, recurrent };

// An attention cell's metadata in the layout above: i32 pos, u32 n_seq_id, i32 seq_id — and on an M-RoPE model
// i32 x, y, tok between n_seq_id and seq_id.
inline constexpr size_t state_attention_cell_bytes = 12;
inline constexpr size_t state_cell_2d_bytes = 12;

// One tensor's entry header as libllama writes it per layer.
struct state_row {
    int32_t type = -1;        // ggml_type
    uint64_t row_bytes = 0;   // bytes per cell (plain rows)
    uint32_t elem_bytes = 0;  // transposed V only: bytes per element
    uint32_t n_embd = 0;      // transposed V only: elements per cell
    bool operator==(const state_row &) const = default;
};

// The structure of one memory part on this node.
struct state_part_shape {
    state_part_kind kind = state_part_kind::attention;
    uint32_t n_stream = 1;          // attention only
    bool layers_known = false;      // the probe had cells here, so the rows below are this node's
    uint32_t trans = 0;             // v_trans (attention) / s_trans (recurrent)
    uint32_t n_layer_field = 0;     // the n_layer value written
    uint64_t reserved = 0;          // attention: the u64 after n_layer
    bool positions_2d = false;      // attention: each cell carries i32 x, y, tok after n_seq_id (M-RoPE)
    std::vector<state_row> first;   // K rows (attention) / conv rows (recurrent)
    std::vector<state_row> second;  // V rows (attention) / SSM rows (recurrent)
    bool operator==(const state_part_shape &) const = default;
};

// The structure of one kind of sequence state (full, or partial) on this node.
struct state_format {
    bool known = false;  // learned (a plain attention cache's partial state has no parts)
    uint32_t magic = 0;  // the header's first field
    std::vector<state_part_shape> parts;
    bool operator==(const state_format &) const = default;
};

// The structure of this node's full and partial (PARTIAL_ONLY) sequence states.
struct state_shape {
    state_format full;
    state_format partial;
    bool operator==(const state_shape &) const = default;
};

// state_shape_learn parses a state this node exported itself (the probe), whose parts are of the given
// kinds, and returns its structure; positions_2d: the model is an M-RoPE one (loaded_model::positions_2d), so
// its attention cells carry x and y (the bytes cannot say). unsupported when the bytes do not follow the
// layout above (a libllama whose state layout Baton does not know).
Result<state_format> state_shape_learn(std::span<const uint8_t> bytes, const std::vector<state_part_kind> & kinds,
                                       bool positions_2d = false);

// What a state to check must cover.
struct state_expect {
    uint32_t n_tokens = 0;     // the sequence covers positions 0..n_tokens-1 (>= 1)
    uint32_t n_cells_max = 0;  // cells one sequence may hold on this node
    bool partial = false;      // a checkpoint (PARTIAL_ONLY) state
    // A delta's state (blob format 1.2): the first attention part of a full state holds exactly one cell per
    // position n_base..n_tokens-1 (the receiver holds the rest); every other part is whole. 0: a whole state.
    uint32_t n_base = 0;
    // The tokens the state covers (tokens[pos] for a cell at pos), when the caller has them: an M-RoPE cell's
    // recorded token must equal its position's. Empty: not checked (state_splice's structural checks; the
    // restore routine checks the joined state again with its tokens).
    std::span<const int32_t> tokens;
};

// state_payload_check validates untrusted state bytes against this node's shape and the expected token
// count. corrupt, naming the part, stream, cell or layer and the offset (base + position within bytes), on
// anything out of range or different from the shape. positions (optional): the images of an M-RoPE model's
// full state, as its cells place them (empty: every token k at position k).
Status state_payload_check(std::span<const uint8_t> bytes, const state_shape & shape, const state_expect & expect,
                           uint64_t base = 0, position_map * positions = nullptr);

}  // namespace baton
