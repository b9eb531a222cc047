// state_payload.cpp — the structure of libllama's sequence-state bytes: learned from this node's own export,
// and every untrusted state checked against it (see state_payload.h for the layout and the rules).
//
// One parser serves both: in learn mode it records each header field it reads, in check mode it compares
// each one with the node's and applies the position rules. Every length is compared against what remains
// (byte_cursor), products of counts are checked against what remains by division, so no arithmetic can
// overflow, and nothing recurses.
#include "baton/state_payload.h"

#include <algorithm>
#include <cstdint>

#include "baton/base/byte_cursor.h"
#include "baton/blob.h"

namespace baton {

namespace {

constexpr uint32_t k_streams_max = 4096;       // libllama: one stream per sequence at most
constexpr uint32_t k_layers_max = 65536;       // far above any model's layer count
constexpr int32_t k_seq_id_max = 65536;        // the sender's sequence id: libllama discards it, we bound it
constexpr size_t k_recurrent_cell_bytes = 8;   // i32 pos, u32 n_seq_id (0)

constexpr int32_t k_no_token = -1;  // the token libllama records for a cell computed from an embedding

// One cell of an M-RoPE model's full cache, ordered as the tokens are: by position, row, column.
struct grid_cell {
    int32_t pos = 0, x = 0, y = 0, tok = 0;
    uint64_t off = 0;  // where its metadata starts
    bool operator<(const grid_cell & o) const { return pos != o.pos ? pos < o.pos : y != o.y ? y < o.y : x < o.x; }
};

std::string hex(uint32_t v) {
    static const char * digits = "0123456789abcdef";
    std::string s = "0x";
    for (int i = 7; i >= 0; --i) s += digits[(v >> (4 * i)) & 15];
    return s;
}

// How the cells of a part must cover the sequence (check mode).
enum class cells_rule : uint8_t {
    every_position,  // exactly one cell per position 0..n_tokens-1 (the full attention cache)
    run_at_end,      // distinct positions in one run ending at n_tokens-1, or no cells (sliding window)
    tail_only,       // exactly one cell at n_tokens-1 (recurrent)
};

class part_parser {
  public:
    part_parser(byte_cursor & c, std::string label, state_part_shape * learn, const state_part_shape * want,
                const state_expect * expect, cells_rule rule, position_map * positions = nullptr)
        : c_(c), label_(std::move(label)), learn_(learn), want_(want), expect_(expect), rule_(rule),
          positions_(positions) {}

    Status attention() {
        uint32_t n_stream = 0;
        BATON_RETURN_IF_ERROR(u32("n_stream", n_stream));
        if (learn_) {
            if (n_stream == 0 || n_stream > k_streams_max)
                return unsupported("n_stream " + num(n_stream) + " is not in 1.." + num(k_streams_max));
            learn_->n_stream = n_stream;
        } else if (n_stream != want_->n_stream) {
            return fail("n_stream " + num(n_stream) + ", this node's memory has " + num(want_->n_stream) +
                            " (a state of another KV layout)",
                        last_);
        }
        uint32_t filled = 0;
        for (uint32_t s = 0; s < n_stream; ++s) {
            stream_ = "stream " + num(s) + ": ";
            uint32_t cell_count = 0;
            BATON_RETURN_IF_ERROR(u32("cell_count", cell_count));
            if (cell_count == 0) continue;
            if (!learn_) {
                if (++filled > 1) return fail("cells in a second stream (one sequence lives in one stream)", last_);
                if (!want_->layers_known)
                    return fail(num(cell_count) + " cells where this node's memory holds none (" +
                                    (expect_->partial ? "partial" : "full") + " state)",
                                last_);
            }
            const bool two_d = learn_ ? learn_->positions_2d : want_->positions_2d;
            BATON_RETURN_IF_ERROR(
                cells(cell_count, state_attention_cell_bytes + (two_d ? state_cell_2d_bytes : 0), true));
            BATON_RETURN_IF_ERROR(u32_field("v_trans", want_ ? want_->trans : 0, learn_ ? &learn_->trans : nullptr));
            const uint32_t n_layer = learn_ ? 0 : want_->n_layer_field;
            uint32_t n = 0;
            BATON_RETURN_IF_ERROR(u32("n_layer", n));
            if (learn_) {
                if (n == 0 || n > k_layers_max)
                    return unsupported("n_layer " + num(n) + " is not in 1.." + num(k_layers_max));
                learn_->n_layer_field = n;
                learn_->layers_known = true;
                learn_->first.assign(n, {});
                learn_->second.assign(n, {});
            } else if (n != n_layer) {
                return fail("n_layer " + num(n) + ", this node's memory has " + num(n_layer), last_);
            }
            uint64_t reserved = 0;
            BATON_RETURN_IF_ERROR(u64("reserved", reserved));
            if (learn_) learn_->reserved = reserved;
            else if (reserved != want_->reserved)
                return fail("reserved " + num(reserved) + ", this node's memory has " + num(want_->reserved), last_);
            const uint32_t trans = learn_ ? learn_->trans : want_->trans;
            if (learn_ && trans > 1) return unsupported("v_trans " + num(trans) + " is not 0 or 1");
            for (uint32_t l = 0; l < n; ++l) BATON_RETURN_IF_ERROR(row("k", l, cell_count, false, true));
            for (uint32_t l = 0; l < n; ++l) BATON_RETURN_IF_ERROR(row("v", l, cell_count, trans == 1, false));
        }
        stream_.clear();
        // Regression (found by state_payload_fuzz): a part that must hold a cell per position but holds no cell in
        // any stream skipped the rule, which only ran on a stream's cells.
        if (!learn_ && filled == 0 && rule_ == cells_rule::every_position)
            return fail("no cells for " + num(expect_->n_tokens - expect_->n_base) +
                            " tokens (the attention cache holds one cell per position)",
                        c_.offset());
        return {};
    }

    // REQUIRES: learn mode: the recurrent part is the last part of the bytes.
    Status recurrent() {
        uint32_t cell_count = 0;
        BATON_RETURN_IF_ERROR(u32("cell_count", cell_count));
        if (!learn_ && cell_count != 1)
            return fail("cell_count " + num(cell_count) + ", a sequence's recurrent state is exactly 1 cell", last_);
        BATON_RETURN_IF_ERROR(cells(cell_count, k_recurrent_cell_bytes, false));
        BATON_RETURN_IF_ERROR(u32_field("s_trans", want_ ? want_->trans : 0, learn_ ? &learn_->trans : nullptr));
        if (learn_ && learn_->trans != 0) return unsupported("s_trans " + num(learn_->trans) + " is not 0");
        BATON_RETURN_IF_ERROR(
            u32_field("n_layer", want_ ? want_->n_layer_field : 0, learn_ ? &learn_->n_layer_field : nullptr));
        if (learn_) {
            // The count of written layers is not in the bytes: the probe's entries run to the end, conv rows
            // first, then as many SSM rows.
            std::vector<state_row> rows;
            while (!c_.empty()) {
                if (rows.size() >= 2 * size_t(k_layers_max)) return unsupported("too many recurrent rows");
                state_row r;
                BATON_RETURN_IF_ERROR(i32("type", r.type));
                BATON_RETURN_IF_ERROR(u64("row_bytes", r.row_bytes));
                BATON_RETURN_IF_ERROR(skip_rows("recurrent row " + num(rows.size()), cell_count, r.row_bytes));
                rows.push_back(r);
            }
            if (rows.empty() || rows.size() % 2 != 0)
                return unsupported(num(rows.size()) + " recurrent rows, expected conv and SSM rows in pairs");
            learn_->first.assign(rows.begin(), rows.begin() + ptrdiff_t(rows.size() / 2));
            learn_->second.assign(rows.begin() + ptrdiff_t(rows.size() / 2), rows.end());
            learn_->layers_known = true;
            return {};
        }
        for (size_t l = 0; l < want_->first.size(); ++l)
            BATON_RETURN_IF_ERROR(plain_row("r", l, cell_count, want_->first[l]));
        for (size_t l = 0; l < want_->second.size(); ++l)
            BATON_RETURN_IF_ERROR(plain_row("s", l, cell_count, want_->second[l]));
        return {};
    }

  private:
    // cells reads cell metadata and, in check mode, applies the part's rule.
    Status cells(uint32_t cell_count, size_t cell_bytes, bool attention) {
        if (!learn_ && cell_count > expect_->n_cells_max)
            return fail("cell_count " + num(cell_count) + " > the " + num(expect_->n_cells_max) +
                            " cells a sequence may hold on this node",
                        last_);
        if (cell_count > c_.remaining() / cell_bytes)
            return fail("cell_count " + num(cell_count) + " needs " + num(uint64_t(cell_count) * cell_bytes) +
                            " bytes of cells, " + num(c_.remaining()) + " remain",
                        last_);
        const bool two_d = attention && cell_bytes > state_attention_cell_bytes;
        // An M-RoPE model's full cache: an image's cells share a position, so cells are checked as a whole below.
        const bool grid = two_d && rule_ == cells_rule::every_position;
        const uint32_t n_tokens = learn_ ? 0 : expect_->n_tokens;
        std::vector<bool> seen(learn_ || grid ? 0 : n_tokens, false);
        std::vector<grid_cell> grid_cells;
        int64_t lo = INT64_MAX, hi = -1;
        for (uint32_t i = 0; i < cell_count; ++i) {
            const uint64_t cell_off = c_.offset();
            int32_t pos = 0;
            uint32_t n_seq_id = 0;
            c_.read_i32(pos);
            c_.read_u32(n_seq_id);
            const uint32_t want_seq = attention ? 1 : 0;
            if (n_seq_id != want_seq)
                return learn_ ? unsupported("cell " + num(i) + ": n_seq_id " + num(n_seq_id))
                              : fail("cell " + num(i) + ": n_seq_id " + num(n_seq_id) + " (a one-sequence state has " +
                                         num(want_seq) + ")",
                                     cell_off + 4);
            grid_cell g{pos, 0, 0, 0, cell_off};
            if (two_d) {
                c_.read_i32(g.x);
                c_.read_i32(g.y);
                c_.read_i32(g.tok);
                if (!learn_ && !grid && (g.x != pos || g.y != pos))
                    return fail("cell " + num(i) + ": 2-D position (" + std::to_string(g.x) + ", " +
                                    std::to_string(g.y) + ") at position " + std::to_string(pos) +
                                    " (only the full cache holds an image's cells; a text token's is its position)",
                                cell_off + 8);
                if (!learn_ && !grid && !token_matches(pos, g.tok))
                    return fail("cell " + num(i) + ": token " + std::to_string(g.tok) + " at position " +
                                    std::to_string(pos) + ", the blob has " +
                                    std::to_string(expect_->tokens[size_t(pos)]) + " there",
                                cell_off + 16);
            }
            if (attention) {
                int32_t seq = 0;
                const uint64_t seq_off = c_.offset();
                c_.read_i32(seq);
                if (!learn_ && (seq < 0 || seq >= k_seq_id_max))
                    return fail("cell " + num(i) + ": seq_id " + std::to_string(seq) + " is not in 0.." +
                                    num(k_seq_id_max - 1),
                                seq_off);
            }
            if (learn_) continue;
            // Positions never exceed token indices (an image takes fewer positions than tokens), and a delta's
            // cells of an M-RoPE model start at its base's position, which only the base knows.
            const uint32_t first = rule_ == cells_rule::every_position && !grid ? expect_->n_base : 0;
            if (pos < int64_t(first) || uint32_t(pos) >= n_tokens)
                return fail("cell " + num(i) + ": position " + std::to_string(pos) + " outside " + num(first) + ".." +
                                num(n_tokens - 1) + " (the blob's " + num(n_tokens) + " tokens" +
                                (first ? ", past a base of " + num(first) : std::string()) + ")",
                            cell_off);
            if (grid) {
                grid_cells.push_back(g);
                continue;
            }
            if (seen[size_t(pos)])
                return fail("cell " + num(i) + ": position " + num(uint32_t(pos)) + " twice", cell_off);
            seen[size_t(pos)] = true;
            lo = std::min<int64_t>(lo, pos);
            hi = std::max<int64_t>(hi, pos);
        }
        if (learn_) return {};
        const uint64_t end = c_.offset();
        switch (rule_) {
            case cells_rule::every_position:
                if (cell_count != n_tokens - expect_->n_base)
                    return fail(num(cell_count) + " cells for " + num(n_tokens - expect_->n_base) +
                                    " tokens (the attention cache holds one cell per position)",
                                end);
                if (grid) return grid_walk(grid_cells);
                break;
            case cells_rule::run_at_end:
                if (cell_count > 0 && (hi != int64_t(n_tokens) - 1 || hi - lo + 1 != int64_t(cell_count)))
                    return fail("positions " + std::to_string(lo) + ".." + std::to_string(hi) + " in " +
                                    num(cell_count) + " cells are not one run ending at position " + num(n_tokens - 1),
                                end);
                break;
            case cells_rule::tail_only:
                if (cell_count != 1 || hi != int64_t(n_tokens) - 1)
                    return fail("the recurrent state is at position " + std::to_string(hi) + ", not at " +
                                    num(n_tokens - 1) + " (the last token)",
                                end);
                break;
        }
        return {};
    }

    // token_matches: a cell's recorded token against the blob's token at its position (when the check has them).
    bool token_matches(int32_t pos, int32_t tok) const {
        return expect_->tokens.empty() || pos < 0 || size_t(pos) >= expect_->tokens.size() ||
               tok == expect_->tokens[size_t(pos)];
    }

    // grid_walk: the cells of an M-RoPE model's full cache, in token order — by position, then row, then column
    // (an image's embeddings run row by row) — are the sequence's tokens: a text token one cell at the next
    // position with its own (x, y) = (pos, pos) and its token; an image a group of cells at one position p on a
    // w x h grid, (p + column, p + row) for its i-th embedding, recorded with no token, advancing the position by
    // max(w, h). A delta's cells are checked for order only: its first group may be the tail of an image whose
    // head the base holds (the joined state is checked whole before it is restored).
    Status grid_walk(std::vector<grid_cell> & cells) const {
        std::sort(cells.begin(), cells.end());
        for (size_t i = 1; i < cells.size(); ++i)
            if (!(cells[i - 1] < cells[i]))
                return fail("two cells at position " + std::to_string(cells[i].pos) + ", 2-D position (" +
                                std::to_string(cells[i].x) + ", " + std::to_string(cells[i].y) + ")",
                            cells[i].off);
        if (expect_->n_base != 0) return {};
        const auto & toks = expect_->tokens;
        int64_t p = 0;   // the position the next token takes
        uint32_t k = 0;  // its index
        for (size_t i = 0; i < cells.size();) {
            const grid_cell & c = cells[i];
            size_t j = i;
            while (j < cells.size() && cells[j].pos == c.pos) ++j;
            const uint32_t m = uint32_t(j - i);
            if (c.pos != p)
                return fail("token " + num(k) + " at position " + std::to_string(c.pos) +
                                ", the tokens before it end at " + std::to_string(p - 1),
                            c.off);
            const bool media = !toks.empty() && media_token_is(toks[k]);
            if (m == 1 && !media) {  // a text token
                if (c.x != c.pos || c.y != c.pos)
                    return fail("token " + num(k) + ": 2-D position (" + std::to_string(c.x) + ", " +
                                    std::to_string(c.y) + ") at position " + std::to_string(c.pos) +
                                    " (a text token's is its position)",
                                c.off + 8);
                if (!toks.empty() && c.tok != toks[k])
                    return fail("token " + num(k) + ": the cell records token " + std::to_string(c.tok) +
                                    ", the blob has " + std::to_string(toks[k]),
                                c.off + 16);
                ++p, ++k, ++i;
                continue;
            }
            // An image: w from its last column, then every cell where the raster puts it.
            // (x is untrusted: 64-bit arithmetic, and a width beyond the group's cells fails before any use.)
            int64_t w = 0;
            for (size_t t = i; t < j; ++t) w = std::max<int64_t>(w, int64_t(cells[t].x) - c.pos + 1);
            const uint32_t uw = w > 0 && w <= int64_t(m) ? uint32_t(w) : 0, h = uw > 0 ? m / uw : 0;
            if (uw == 0 || uw * h != m)
                return fail("tokens " + num(k) + ".." + num(k + m - 1) + ": " + num(m) + " cells at position " +
                                std::to_string(c.pos) + " do not fill a grid " + std::to_string(w) + " wide",
                            c.off);
            for (uint32_t t = 0; t < m; ++t) {
                const grid_cell & e = cells[i + t];
                const bool placed =
                    e.x == c.pos + int32_t(t % uw) && e.y == c.pos + int32_t(t / uw) && e.tok == k_no_token;
                if (!placed)
                    return fail("token " + num(k + t) + ": 2-D position (" + std::to_string(e.x) + ", " +
                                    std::to_string(e.y) + "), token " + std::to_string(e.tok) + " at position " +
                                    std::to_string(c.pos) + " is not embedding " + num(t) + " of an image's grid",
                                e.off + 8);
                if (!toks.empty() && !media_token_is(toks[k + t]))
                    return fail("token " + num(k + t) + " (" + std::to_string(toks[k + t]) +
                                    ") is text but its cell is part of an image's grid at position " +
                                    std::to_string(c.pos),
                                e.off);
            }
            if (positions_) positions_->add({k, m, uw, h});
            p += std::max(uw, h);
            k += m;
            i = j;
        }
        return {};
    }

    // row reads one layer's entry of an attention part.
    Status row(const char * which, uint32_t l, uint32_t cell_count, bool transposed, bool first) {
        const std::string name = std::string(which) + " layer " + num(l);
        state_row r;
        const uint64_t off = c_.offset();
        BATON_RETURN_IF_ERROR(i32("type", r.type));
        if (!transposed) {
            BATON_RETURN_IF_ERROR(u64("row_bytes", r.row_bytes));
        } else {
            BATON_RETURN_IF_ERROR(u32("elem_bytes", r.elem_bytes));
            BATON_RETURN_IF_ERROR(u32("n_embd", r.n_embd));
        }
        if (learn_) {
            (first ? learn_->first : learn_->second)[l] = r;
        } else {
            const state_row & w = (first ? want_->first : want_->second)[l];
            if (!(r == w)) return fail(name + ": " + describe(r) + ", this node's memory has " + describe(w), off);
        }
        if (!transposed) return skip_rows(name, cell_count, r.row_bytes);
        // n_embd rows of cell_count elements each.
        if (r.elem_bytes == 0 || r.n_embd == 0)
            return learn_ ? unsupported(name + ": empty transposed rows") : Status();
        if (cell_count > c_.remaining() / r.elem_bytes) return fail(name + ": data runs past the end", c_.offset());
        return skip_rows(name, r.n_embd, uint64_t(cell_count) * r.elem_bytes);
    }

    Status plain_row(const char * which, size_t l, uint32_t cell_count, const state_row & w) {
        const std::string name = std::string(which) + " layer " + num(l);
        const uint64_t off = c_.offset();
        state_row r;
        BATON_RETURN_IF_ERROR(i32("type", r.type));
        BATON_RETURN_IF_ERROR(u64("row_bytes", r.row_bytes));
        if (!(r == w)) return fail(name + ": " + describe(r) + ", this node's memory has " + describe(w), off);
        return skip_rows(name, cell_count, r.row_bytes);
    }

    // skip_rows passes n rows of row_bytes each, checked against what remains.
    Status skip_rows(const std::string & name, uint64_t n, uint64_t row_bytes) {
        if (n != 0 && row_bytes > c_.remaining() / n)
            return fail(name + ": " + num(n) + " rows of " + num(row_bytes) + " bytes exceed the " +
                            num(c_.remaining()) + " bytes remaining",
                        c_.offset());
        std::span<const uint8_t> skipped;
        c_.read_bytes(n * row_bytes, skipped);
        return {};
    }

    static std::string describe(const state_row & r) {
        std::string s = "type " + std::to_string(r.type);
        if (r.n_embd) return s + ", " + num(r.n_embd) + " x " + num(r.elem_bytes) + "-byte elements per cell";
        return s + ", " + num(r.row_bytes) + "-byte rows";
    }

    // u32_field reads a header field that must equal this node's (check) or is recorded (learn).
    Status u32_field(const char * field, uint32_t want, uint32_t * learn) {
        uint32_t v = 0;
        BATON_RETURN_IF_ERROR(u32(field, v));
        if (learn) *learn = v;
        else if (v != want)
            return fail(std::string(field) + " " + num(v) + ", this node's memory has " + num(want), last_);
        return {};
    }
    Status u32(const char * field, uint32_t & v) {
        last_ = c_.offset();
        return c_.read_u32(v) ? Status() : truncated(field, 4);
    }
    Status i32(const char * field, int32_t & v) {
        last_ = c_.offset();
        return c_.read_i32(v) ? Status() : truncated(field, 4);
    }
    Status u64(const char * field, uint64_t & v) {
        last_ = c_.offset();
        return c_.read_u64(v) ? Status() : truncated(field, 8);
    }
    Status truncated(const char * field, size_t width) const {
        return fail(std::string(field) + " truncated (needs " + num(width) + " bytes, " + num(c_.remaining()) +
                        " remain)",
                    c_.offset());
    }
    Status fail(const std::string & what, uint64_t off) const {
        return Status(learn_ ? status_code::unsupported : status_code::corrupt, label_ + stream_ + what + at(off));
    }
    Status unsupported(const std::string & what) const {
        return Status(status_code::unsupported, label_ + stream_ + what + at(c_.offset()));
    }

    byte_cursor & c_;
    std::string label_;
    std::string stream_;
    state_part_shape * learn_;
    const state_part_shape * want_;
    const state_expect * expect_;
    cells_rule rule_;
    position_map * positions_;  // check mode, an M-RoPE model's full cache: its images go here
    uint64_t last_ = 0;         // offset of the field read last
};

std::string part_label(size_t i, state_part_kind k) {
    return "part " + num(i) + " (" + (k == state_part_kind::attention ? "attention" : "recurrent") + "): ";
}

}  // namespace

Result<state_format> state_shape_learn(std::span<const uint8_t> bytes, const std::vector<state_part_kind> & kinds,
                                       bool positions_2d) {
    for (size_t i = 0; i + 1 < kinds.size(); ++i)
        if (kinds[i] == state_part_kind::recurrent)
            return Status(status_code::invalid_argument, "state_shape_learn: a recurrent part must come last");
    byte_cursor c(bytes);
    state_format out;
    uint32_t seq = 0;
    if (!c.read_u32(out.magic) || !c.read_u32(seq))
        return Status(status_code::unsupported, "probe state: shorter than its header");
    out.known = true;
    out.parts.resize(kinds.size());
    for (size_t i = 0; i < kinds.size(); ++i) {
        out.parts[i].kind = kinds[i];
        out.parts[i].positions_2d = positions_2d && kinds[i] == state_part_kind::attention;
        part_parser p(c, part_label(i, kinds[i]), &out.parts[i], nullptr, nullptr, cells_rule::every_position);
        BATON_RETURN_IF_ERROR(kinds[i] == state_part_kind::attention ? p.attention() : p.recurrent());
    }
    if (!c.empty())
        return Status(status_code::unsupported,
                      "probe state: " + num(c.remaining()) + " bytes after the last part" + at(c.offset()));
    return out;
}

Status state_payload_check(std::span<const uint8_t> bytes, const state_shape & shape, const state_expect & expect,
                           uint64_t base, position_map * positions) {
    if (positions) positions->clear();
    const state_format & f = expect.partial ? shape.partial : shape.full;
    const auto & parts = f.parts;
    if (!f.known)
        return Status(status_code::unsupported,
                      "this node could not learn its own state layout at start (see its log)");
    if (expect.n_tokens == 0) return Status(status_code::corrupt, "a state must cover at least one token");
    if (expect.n_base >= expect.n_tokens || (expect.n_base != 0 && expect.partial))
        return Status(status_code::corrupt, "a delta's base of " + num(expect.n_base) +
                                                " tokens must leave tokens of " + num(expect.n_tokens) +
                                                " past it (and checkpoints are never deltas)");
    byte_cursor c(bytes, base);
    uint32_t magic = 0, seq = 0;
    if (!c.read_u32(magic) || !c.read_u32(seq))
        return Status(status_code::corrupt, "header truncated (needs 8 bytes)" + at(base));
    if (magic != f.magic)
        return Status(status_code::corrupt, "magic " + hex(magic) + ", this node's states start with " + hex(f.magic) +
                                                " (not a libllama " + std::string(expect.partial ? "partial " : "") +
                                                "sequence state of this build)" + at(base));
    if (seq >= uint32_t(k_seq_id_max))
        return Status(status_code::corrupt,
                      "seq_id " + num(seq) + " is not in 0.." + num(k_seq_id_max - 1) + at(base + 4));
    bool first_attention = true;
    for (size_t i = 0; i < parts.size(); ++i) {
        const state_part_shape & w = parts[i];
        cells_rule rule = cells_rule::tail_only;
        if (w.kind == state_part_kind::attention) {
            rule = !expect.partial && first_attention ? cells_rule::every_position : cells_rule::run_at_end;
            first_attention = false;
        }
        part_parser p(c, part_label(i, w.kind), nullptr, &w, &expect, rule,
                      rule == cells_rule::every_position ? positions : nullptr);
        BATON_RETURN_IF_ERROR(w.kind == state_part_kind::attention ? p.attention() : p.recurrent());
    }
    if (!c.empty())
        return Status(status_code::corrupt, num(c.remaining()) + " bytes after the last part" + at(c.offset()));
    return {};
}

}  // namespace baton
