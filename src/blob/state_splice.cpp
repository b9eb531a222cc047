// state_splice.cpp — see state_splice.h. Both inputs are checked first (state_payload_check), so the walk
// below reads a structure already known to be complete and this node's; it re-derives offsets, never trusts
// a length the check did not bound.
#include "baton/state_splice.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "baton/base/byte_cursor.h"

namespace baton {

namespace {

constexpr size_t k_header_bytes = 8;     // u32 magic, u32 seq_id
constexpr size_t k_mid_bytes = 16;       // u32 v_trans, u32 n_layer, u64 reserved
constexpr size_t k_row_head_bytes = 12;  // i32 type, u64 row_bytes | i32 type, u32 elem_bytes, u32 n_embd

// One layer's tensor of the first attention part, as laid out for its cells.
struct row_ref {
    const uint8_t * head = nullptr;
    const uint8_t * data = nullptr;
    uint64_t cell_bytes = 0;  // plain rows: bytes per cell
    uint32_t n_embd = 0;      // transposed V: rows of `cells` elements of elem_bytes each
    uint32_t elem_bytes = 0;
};

// Where the first attention part of a checked full state lies, and its one non-empty stream.
struct attention_layout {
    size_t begin = 0, end = 0;  // byte range of the part
    uint32_t n_stream = 0, stream = 0, cells = 0;
    size_t cell_bytes = state_attention_cell_bytes;  // one cell's metadata (12, or 24 with M-RoPE's x, y, tok)
    const uint8_t * meta = nullptr;                  // cells x cell_bytes bytes
    const uint8_t * mid = nullptr;   // 16 bytes
    std::vector<row_ref> k, v;
};

attention_layout walk_attention(std::span<const uint8_t> st, const state_part_shape & w) {
    attention_layout a;
    a.begin = k_header_bytes;
    if (w.positions_2d) a.cell_bytes = state_attention_cell_bytes + state_cell_2d_bytes;
    const uint8_t * p = st.data() + k_header_bytes;
    a.n_stream = byte_cursor::load_u32(p);
    p += 4;
    for (uint32_t s = 0; s < a.n_stream; ++s) {
        const uint32_t cc = byte_cursor::load_u32(p);
        p += 4;
        if (cc == 0) continue;
        a.stream = s;
        a.cells = cc;
        a.meta = p;
        p += size_t(cc) * a.cell_bytes;
        a.mid = p;
        p += k_mid_bytes;
        for (size_t l = 0; l < w.first.size(); ++l) {
            row_ref r{p, p + k_row_head_bytes, w.first[l].row_bytes, 0, 0};
            p = r.data + size_t(cc) * r.cell_bytes;
            a.k.push_back(r);
        }
        for (size_t l = 0; l < w.second.size(); ++l) {
            row_ref r{p, p + k_row_head_bytes, 0, 0, 0};
            if (w.trans == 1) {
                r.n_embd = w.second[l].n_embd;
                r.elem_bytes = w.second[l].elem_bytes;
                p = r.data + size_t(r.n_embd) * cc * r.elem_bytes;
            } else {
                r.cell_bytes = w.second[l].row_bytes;
                p = r.data + size_t(cc) * r.cell_bytes;
            }
            a.v.push_back(r);
        }
    }
    a.end = size_t(p - st.data());
    return a;
}

// cell_key: a cell's place in token order — its position, then (M-RoPE: an image's cells share a position) its
// row and column.
std::array<int32_t, 3> cell_key(const attention_layout & a, uint32_t i) {
    const uint8_t * m = a.meta + size_t(i) * a.cell_bytes;
    const int32_t pos = int32_t(byte_cursor::load_u32(m));
    if (a.cell_bytes == state_attention_cell_bytes) return {pos, 0, 0};
    return {pos, int32_t(byte_cursor::load_u32(m + 12)), int32_t(byte_cursor::load_u32(m + 8))};
}

// A run of consecutive cells of one source, in the order they go out.
struct cell_run {
    const attention_layout * src = nullptr;
    uint32_t first = 0, count = 0;
};

// runs_of: the cells of a that hold tokens [lo, hi), in token order, as runs of consecutive indices. The part's
// cells are one per token (checked), its first cell token `first_token` (a delta's: its base); on a model whose
// tokens take positions 0..n-1 a cell's rank in token order is its position.
void runs_of(const attention_layout & a, uint32_t first_token, int64_t lo, int64_t hi, std::vector<cell_run> & out) {
    std::vector<std::pair<std::array<int32_t, 3>, uint32_t>> cells;
    cells.reserve(a.cells);
    for (uint32_t i = 0; i < a.cells; ++i) cells.emplace_back(cell_key(a, i), i);
    std::sort(cells.begin(), cells.end());
    for (size_t r = 0; r < cells.size(); ++r) {
        const int64_t token = int64_t(first_token) + int64_t(r);
        if (token < lo || token >= hi) continue;
        const uint32_t i = cells[r].second;
        if (!out.empty() && out.back().src == &a && out.back().first + out.back().count == i) ++out.back().count;
        else out.push_back({&a, i, 1});
    }
}

class byte_out {
  public:
    explicit byte_out(size_t reserve) { b_.reserve(reserve); }
    void put(const uint8_t * p, size_t n) {
        const size_t at = b_.size();
        b_.resize(at + n);
        if (n) std::memcpy(b_.data() + at, p, n);
    }
    void u32(uint32_t v) {
        uint8_t x[4];
        le_store_u32(x, v);
        put(x, 4);
    }
    std::vector<uint8_t> take() { return std::move(b_); }

  private:
    std::vector<uint8_t> b_;
};

// write_attention writes the first attention part holding the runs' cells, in the layout of `like`.
void write_attention(byte_out & o, const attention_layout & like, uint32_t stream, const std::vector<cell_run> & runs) {
    uint32_t total = 0;
    for (const auto & r : runs) total += r.count;
    o.u32(like.n_stream);
    for (uint32_t s = 0; s < like.n_stream; ++s) {
        if (s != stream || total == 0) {
            o.u32(0);
            continue;
        }
        o.u32(total);
        for (const auto & r : runs)
            o.put(r.src->meta + size_t(r.first) * r.src->cell_bytes, size_t(r.count) * r.src->cell_bytes);
        o.put(like.mid, k_mid_bytes);
        for (size_t l = 0; l < like.k.size(); ++l) {
            o.put(like.k[l].head, k_row_head_bytes);
            for (const auto & r : runs) {
                const row_ref & x = r.src->k[l];
                o.put(x.data + size_t(r.first) * x.cell_bytes, size_t(r.count) * x.cell_bytes);
            }
        }
        for (size_t l = 0; l < like.v.size(); ++l) {
            o.put(like.v[l].head, k_row_head_bytes);
            if (like.v[l].n_embd == 0) {
                for (const auto & r : runs) {
                    const row_ref & x = r.src->v[l];
                    o.put(x.data + size_t(r.first) * x.cell_bytes, size_t(r.count) * x.cell_bytes);
                }
                continue;
            }
            // Transposed: n_embd rows, each holding one element per cell.
            for (uint32_t j = 0; j < like.v[l].n_embd; ++j)
                for (const auto & r : runs) {
                    const row_ref & x = r.src->v[l];
                    const size_t row = size_t(j) * r.src->cells;
                    o.put(x.data + (row + r.first) * x.elem_bytes, size_t(r.count) * x.elem_bytes);
                }
        }
    }
}

bool has_attention(const state_shape & shape) {
    return !shape.full.parts.empty() && shape.full.parts.front().kind == state_part_kind::attention;
}

Status check(std::span<const uint8_t> st, const state_shape & shape, uint32_t n_tokens, uint32_t n_base,
             uint32_t n_cells_max, const char * what) {
    state_expect e;
    e.n_tokens = n_tokens;
    e.n_base = n_base;
    e.n_cells_max = n_cells_max;
    Status s = state_payload_check(st, shape, e);
    if (!s.ok()) return Status(s.code(), std::string(what) + ": " + s.message());
    return {};
}

}  // namespace

Result<std::vector<uint8_t>> state_cut(std::span<const uint8_t> full, const state_shape & shape, uint32_t n_tokens,
                                       uint32_t n_base, uint32_t n_cells_max) {
    if (n_base < 1 || n_base >= n_tokens)
        return Status(status_code::invalid_argument,
                      "state_cut: base " + num(n_base) + " not in 1.." + num(n_tokens - 1));
    BATON_RETURN_IF_ERROR(check(full, shape, n_tokens, 0, n_cells_max, "state"));
    if (!has_attention(shape)) return std::vector<uint8_t>(full.begin(), full.end());
    const attention_layout a = walk_attention(full, shape.full.parts.front());
    std::vector<cell_run> runs;
    runs_of(a, 0, n_base, n_tokens, runs);
    byte_out o(full.size());
    o.put(full.data(), k_header_bytes);
    write_attention(o, a, a.stream, runs);
    o.put(full.data() + a.end, full.size() - a.end);
    return o.take();
}

Result<std::vector<uint8_t>> state_join(std::span<const uint8_t> base, uint32_t base_tokens,
                                        std::span<const uint8_t> delta, const state_shape & shape, uint32_t n_tokens,
                                        uint32_t n_base, uint32_t n_cells_max) {
    if (n_base < 1 || n_base >= n_tokens || base_tokens < n_base)
        return Status(status_code::invalid_argument, "state_join: base of " + num(n_base) + " tokens, held " +
                                                         num(base_tokens) + ", state of " + num(n_tokens));
    BATON_RETURN_IF_ERROR(check(base, shape, base_tokens, 0, n_cells_max, "the held base"));
    BATON_RETURN_IF_ERROR(check(delta, shape, n_tokens, n_base, n_cells_max, "state"));
    if (!has_attention(shape)) return std::vector<uint8_t>(delta.begin(), delta.end());
    const attention_layout b = walk_attention(base, shape.full.parts.front());
    const attention_layout d = walk_attention(delta, shape.full.parts.front());
    std::vector<cell_run> runs;
    runs_of(b, 0, 0, n_base, runs);
    runs_of(d, n_base, n_base, n_tokens, runs);
    byte_out o(base.size() + delta.size());
    o.put(delta.data(), k_header_bytes);
    write_attention(o, d, d.stream, runs);
    o.put(delta.data() + d.end, delta.size() - d.end);
    std::vector<uint8_t> out = o.take();
    // On an M-RoPE model a delta alone says only its cells' order (its positions continue its base's, which it
    // does not hold), so the whole is checked here: a join that succeeds is always a full state.
    if (shape.full.parts.front().positions_2d)
        BATON_RETURN_IF_ERROR(check(out, shape, n_tokens, 0, n_cells_max, "the joined state"));
    return out;
}

}  // namespace baton
