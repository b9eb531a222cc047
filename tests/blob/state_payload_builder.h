// state_payload_builder.h — writes sequence-state bytes in libllama 0.7.0's layout (baton/state_payload.h),
// for the state payload's unit tests and its fuzz target: attention parts (streams, cells, K/V rows, plain or
// transposed V) and recurrent parts (one cell, conv and SSM rows), every field settable to a wrong value.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "baton/state_payload.h"

namespace baton::state_payload_builder {

// The header libllama 0.7.0 writes before the first part: a magic and the sender's sequence id.
inline constexpr uint32_t k_magic = 0xAF143CD8u;

// builder writes state bytes in libllama 0.7.0's layout (state_payload.h), starting with the header.
struct builder {
    std::vector<uint8_t> b;
    explicit builder(uint32_t magic = k_magic, uint32_t seq = 2) {
        u32(magic);
        u32(seq);
    }
    void u32(uint32_t v) {
        for (int i = 0; i < 4; ++i) b.push_back(uint8_t(v >> (8 * i)));
    }
    void i32(int32_t v) { u32(uint32_t(v)); }
    void u64(uint64_t v) {
        for (int i = 0; i < 8; ++i) b.push_back(uint8_t(v >> (8 * i)));
    }
    void fill(uint64_t n) { b.insert(b.end(), size_t(n), 0x3c); }
};
inline constexpr size_t k_header_bytes = 8;

// The token an M-RoPE cell at pos records in the builder's states (the tokens a check is given: tokens_of).
inline int32_t token_at(int32_t pos) { return 100 + pos; }
inline std::vector<int32_t> tokens_of(uint32_t n) {
    std::vector<int32_t> t;
    for (uint32_t i = 0; i < n; ++i) t.push_back(token_at(int32_t(i)));
    return t;
}

// cell_meta writes one attention cell's metadata: pos, n_seq_id, on an M-RoPE layout x, y and the token
// (ext: {x, y, tok}; empty: a text token's, {pos, pos, token_at(pos)}), then its sequence ids.
inline void cell_meta(builder & w, int32_t pos, uint32_t n_seq_id, int32_t seq_id, bool positions_2d,
                      const std::vector<int32_t> & ext = {}) {
    w.i32(pos);
    w.u32(n_seq_id);
    if (positions_2d) {
        w.i32(ext.empty() ? pos : ext[0]);
        w.i32(ext.empty() ? pos : ext[1]);
        w.i32(ext.empty() ? token_at(pos) : ext[2]);
    }
    for (uint32_t j = 0; j < n_seq_id; ++j) w.i32(seq_id);
}

struct attention_spec {
    uint32_t n_stream = 1;
    uint32_t stream = 0;             // the stream holding the cells
    std::vector<int32_t> positions;  // one cell each
    uint32_t v_trans = 0;
    uint32_t n_layer = 2;
    int32_t k_type = 1, v_type = 1;  // f16
    uint64_t k_row = 64, v_row = 64;
    uint32_t v_elem = 2, v_embd = 32;  // transposed V
    uint32_t n_seq_id = 1;
    int32_t seq_id = 3;
    uint64_t reserved = 0;
    bool positions_2d = false;              // M-RoPE cells: x, y, tok after n_seq_id
    std::vector<std::vector<int32_t>> ext;  // per cell {x, y, tok} (empty: a text token's)
};

inline void attention(builder & w, const attention_spec & a) {
    w.u32(a.n_stream);
    for (uint32_t s = 0; s < a.n_stream; ++s) {
        const uint32_t n = s == a.stream ? uint32_t(a.positions.size()) : 0;
        w.u32(n);
        if (n == 0) continue;
        for (size_t i = 0; i < a.positions.size(); ++i)
            cell_meta(w, a.positions[i], a.n_seq_id, a.seq_id, a.positions_2d,
                      i < a.ext.size() ? a.ext[i] : std::vector<int32_t>{});
        w.u32(a.v_trans);
        w.u32(a.n_layer);
        w.u64(a.reserved);
        for (uint32_t l = 0; l < a.n_layer; ++l) {
            w.i32(a.k_type);
            w.u64(a.k_row);
            w.fill(a.k_row * n);
        }
        for (uint32_t l = 0; l < a.n_layer; ++l) {
            w.i32(a.v_type);
            if (a.v_trans) {
                w.u32(a.v_elem);
                w.u32(a.v_embd);
                w.fill(uint64_t(a.v_elem) * a.v_embd * n);
            } else {
                w.u64(a.v_row);
                w.fill(a.v_row * n);
            }
        }
    }
}

struct recurrent_spec {
    std::vector<int32_t> positions = {9};
    uint32_t n_seq_id = 0;
    uint32_t s_trans = 0;
    uint32_t n_layer = 4;  // all layers, as libllama writes it
    uint32_t n_rec = 2;    // layers written
    int32_t type = 0;      // f32
    uint64_t r_row = 48, s_row = 256;
};

inline void recurrent(builder & w, const recurrent_spec & r) {
    w.u32(uint32_t(r.positions.size()));
    for (int32_t p : r.positions) {
        w.i32(p);
        w.u32(r.n_seq_id);
    }
    w.u32(r.s_trans);
    w.u32(r.n_layer);
    const uint64_t n = r.positions.size();
    for (uint32_t l = 0; l < r.n_rec; ++l) {
        w.i32(r.type);
        w.u64(r.r_row);
        w.fill(r.r_row * n);
    }
    for (uint32_t l = 0; l < r.n_rec; ++l) {
        w.i32(r.type);
        w.u64(r.s_row);
        w.fill(r.s_row * n);
    }
}

// kv_tag: the byte i of the K (which 0) or V (1, or 2.. for transposed rows) row of layer `layer` of the cell of
// `key` (its position, or its token), so that a byte moved to another cell's place shows.
inline uint8_t kv_tag(int32_t key, uint32_t layer, uint32_t which, uint64_t i) {
    return uint8_t(key * 7 + layer * 31 + which * 101 + i * 13);
}

// tagged_rows: what follows an attention part's cells when V is not transposed — v_trans 0, n_layer, reserved 0,
// then n_layer K rows and n_layer V rows of `row` bytes per cell, tagged by the cells' keys in order.
inline void tagged_rows(builder & w, const std::vector<int32_t> & keys, uint32_t n_layer, uint64_t row) {
    w.u32(0);
    w.u32(n_layer);
    w.u64(0);
    for (uint32_t which = 0; which < 2; ++which)
        for (uint32_t l = 0; l < n_layer; ++l) {
            w.i32(1);
            w.u64(row);
            for (int32_t k : keys)
                for (uint64_t i = 0; i < row; ++i) w.b.push_back(kv_tag(k, l, which, i));
        }
}

inline std::vector<int32_t> iota(int32_t from, int32_t to) {
    std::vector<int32_t> v;
    for (int32_t i = from; i < to; ++i) v.push_back(i);
    return v;
}

inline std::vector<uint8_t> attention_bytes(const attention_spec & a) {
    builder w;
    attention(w, a);
    return w.b;
}

// shape_learned: the node shape the builder's states follow, learned from probe (a state whose parts are of the given
// kinds), with partial states of k_magic. Throws when probe does not parse: a broken fixture.
inline state_shape shape_learned(const std::vector<uint8_t> & probe, const std::vector<state_part_kind> & kinds,
                                 bool positions_2d = false) {
    auto full = state_shape_learn(probe, kinds, positions_2d);
    if (!full.ok()) throw std::runtime_error(full.status().to_string());
    state_shape s;
    s.full = full.value();
    s.partial.known = true;
    s.partial.magic = k_magic;
    return s;
}

}  // namespace baton::state_payload_builder
