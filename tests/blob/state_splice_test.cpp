// state_splice_test.cpp — cutting a state to the cells past a base and joining it back (state_splice.h), over
// synthetic states whose every K/V byte names its cell's position, so a byte in the wrong place shows: plain
// and transposed V, several streams, a sliding-window part and a recurrent part (which travel whole), cells
// out of position order, and the refusals (a delta with a cell below its base, a base shorter than the delta
// needs, a foreign layout).
#include <gtest/gtest.h>

#include <algorithm>

#include "baton/state_splice.h"
#include "state_payload_builder.h"

namespace baton {
namespace {

using namespace baton::state_payload_builder;
using k = state_part_kind;

constexpr uint64_t k_row = 8;               // K/V bytes per cell
constexpr uint32_t k_elem = 2, k_embd = 3;  // transposed V: 3 rows of 2-byte elements per cell
constexpr uint32_t k_layers = 2;

uint8_t tag(int32_t pos, uint32_t layer, uint32_t which, uint64_t i) { return kv_tag(pos, layer, which, i); }

// A first attention part whose bytes name their positions (cells in the order given, in stream `stream`).
void tagged_attention(builder & w, const std::vector<int32_t> & cells, bool v_trans, uint32_t n_stream = 1,
                      uint32_t stream = 0, bool positions_2d = false) {
    w.u32(n_stream);
    for (uint32_t s = 0; s < n_stream; ++s) {
        if (s != stream || cells.empty()) {
            w.u32(0);
            continue;
        }
        w.u32(uint32_t(cells.size()));
        for (int32_t p : cells) cell_meta(w, p, 1, int32_t(s), positions_2d);
        w.u32(v_trans ? 1 : 0);
        w.u32(k_layers);
        w.u64(0);
        for (uint32_t l = 0; l < k_layers; ++l) {
            w.i32(1);
            w.u64(k_row);
            for (int32_t p : cells)
                for (uint64_t i = 0; i < k_row; ++i) w.b.push_back(tag(p, l, 0, i));
        }
        for (uint32_t l = 0; l < k_layers; ++l) {
            w.i32(1);
            if (!v_trans) {
                w.u64(k_row);
                for (int32_t p : cells)
                    for (uint64_t i = 0; i < k_row; ++i) w.b.push_back(tag(p, l, 1, i));
                continue;
            }
            w.u32(k_elem);
            w.u32(k_embd);
            for (uint32_t j = 0; j < k_embd; ++j)
                for (int32_t p : cells)
                    for (uint32_t i = 0; i < k_elem; ++i) w.b.push_back(tag(p, l, 2 + j, i));
        }
    }
}

// mrope: an M-RoPE model's cache, whose cells carry x, y and the token beside the position.
enum class family { attention, attention_vtrans, streams, sliding, hybrid, recurrent, mrope };

// A full state of n tokens with the first attention part's cells in `order` (a permutation of 0..n-1).
std::vector<uint8_t> state_of(family f, uint32_t n, std::vector<int32_t> order = {}) {
    if (order.empty()) order = iota(0, int32_t(n));
    builder w;
    switch (f) {
        case family::attention: tagged_attention(w, order, false); break;
        case family::attention_vtrans: tagged_attention(w, order, true); break;
        case family::streams: tagged_attention(w, order, false, 3, 1); break;
        case family::mrope: tagged_attention(w, order, false, 1, 0, true); break;
        case family::sliding: {
            tagged_attention(w, order, false);
            attention_spec win;
            win.positions = iota(int32_t(n > 4 ? n - 4 : 0), int32_t(n));
            win.k_row = win.v_row = k_row;
            win.n_layer = k_layers;
            attention(w, win);
            break;
        }
        case family::hybrid: {
            tagged_attention(w, order, false);
            recurrent_spec r;
            r.positions = {int32_t(n) - 1};
            recurrent(w, r);
            break;
        }
        case family::recurrent: {
            recurrent_spec r;
            r.positions = {int32_t(n) - 1};
            recurrent(w, r);
            break;
        }
    }
    return w.b;
}

state_shape shape_of(family f) {
    std::vector<k> kinds = {k::attention};
    if (f == family::sliding) kinds = {k::attention, k::attention};
    if (f == family::hybrid) kinds = {k::attention, k::recurrent};
    if (f == family::recurrent) kinds = {k::recurrent};
    return shape_learned(state_of(f, 2), kinds, f == family::mrope);
}

class Splice : public ::testing::TestWithParam<family> {};

TEST_P(Splice, CutKeepsTheCellsPastTheBaseAndJoinRestoresTheWholeState) {
    const family f = GetParam();
    const state_shape sh = shape_of(f);
    const uint32_t n = 20;
    const std::vector<uint8_t> full = state_of(f, n);
    for (uint32_t base : {1u, 7u, 19u}) {
        auto cut = state_cut(full, sh, n, base, 64);
        ASSERT_TRUE(cut.ok()) << cut.status().to_string();
        if (f == family::recurrent) {
            EXPECT_EQ(cut.value(), full) << "a purely recurrent state travels whole";
        } else {
            // The cut is exactly the state built from the positions past the base.
            builder want_w;
            std::vector<uint8_t> want = state_of(f, n, iota(int32_t(base), int32_t(n)));
            EXPECT_EQ(cut.value(), want) << "base " << base;
        }
        state_expect e;
        e.n_tokens = n;
        e.n_base = base;
        e.n_cells_max = 64;
        EXPECT_TRUE(state_payload_check(cut.value(), sh, e).ok());
        // Joined onto a receiver holding exactly the base, or more (its own continuation past it).
        for (uint32_t held : {base, n, n + 5}) {
            auto joined = state_join(state_of(f, held), held, cut.value(), sh, n, base, 64);
            ASSERT_TRUE(joined.ok()) << joined.status().to_string();
            EXPECT_EQ(joined.value(), full) << "base " << base << ", receiver holding " << held;
        }
    }
}

TEST_P(Splice, CellsOutOfPositionOrderComeOutInOrder) {
    const family f = GetParam();
    if (f == family::recurrent) GTEST_SKIP() << "no cells to order";
    const state_shape sh = shape_of(f);
    const uint32_t n = 12;
    const std::vector<int32_t> shuffled = {5, 0, 11, 3, 8, 1, 10, 2, 9, 4, 7, 6};
    auto cut = state_cut(state_of(f, n, shuffled), sh, n, 6, 64);
    ASSERT_TRUE(cut.ok()) << cut.status().to_string();
    EXPECT_EQ(cut.value(), state_of(f, n, iota(6, 12)));
    auto joined = state_join(state_of(f, n, {3, 1, 0, 2, 5, 4, 6, 7, 8, 9, 10, 11}), n, cut.value(), sh, n, 6, 64);
    ASSERT_TRUE(joined.ok()) << joined.status().to_string();
    EXPECT_EQ(joined.value(), state_of(f, n));
}

TEST_P(Splice, ADeltaThatDoesNotCheckIsRefused) {
    const family f = GetParam();
    const state_shape sh = shape_of(f);
    const uint32_t n = 12;
    // A delta carrying a cell below its base (the whole state, claimed as a delta over 6).
    auto joined = state_join(state_of(f, n), n, state_of(f, n), sh, n, 6, 64);
    if (f == family::recurrent) {
        ASSERT_TRUE(joined.ok()) << "a recurrent delta is the whole state";
    } else {
        ASSERT_FALSE(joined.ok());
        EXPECT_EQ(joined.status().code(), status_code::corrupt);
        if (f != family::mrope)  // (an M-RoPE delta's positions start where its base's end: only its count tells)
            EXPECT_NE(joined.status().message().find("outside 6..11"), std::string::npos) << joined.status().message();
    }
    // A delta missing a cell past its base.
    if (f != family::recurrent) {
        auto short_delta = state_of(f, n, iota(6, 11));
        auto r = state_join(state_of(f, n), n, short_delta, sh, n, 6, 64);
        ASSERT_FALSE(r.ok());
        EXPECT_EQ(r.status().code(), status_code::corrupt);
    }
    // No cell at all (the fuzzer's find: the join read the missing cells' layout).
    if (f == family::attention || f == family::attention_vtrans || f == family::streams || f == family::mrope) {
        builder w;
        tagged_attention(w, {}, f == family::attention_vtrans, f == family::streams ? 3 : 1, 0, f == family::mrope);
        EXPECT_EQ(state_join(state_of(f, n), n, w.b, sh, n, 6, 64).status().code(), status_code::corrupt);
    }
    // Truncated bytes.
    auto cut = state_cut(state_of(f, n), sh, n, 6, 64);
    ASSERT_TRUE(cut.ok());
    std::vector<uint8_t> trunc(cut.value().begin(), cut.value().end() - 3);
    EXPECT_EQ(state_join(state_of(f, n), n, trunc, sh, n, 6, 64).status().code(), status_code::corrupt);
}

TEST_P(Splice, ABaseShorterThanTheDeltaNeedsIsRefused) {
    const family f = GetParam();
    const state_shape sh = shape_of(f);
    auto cut = state_cut(state_of(f, 12), sh, 12, 6, 64);
    ASSERT_TRUE(cut.ok());
    auto r = state_join(state_of(f, 5), 5, cut.value(), sh, 12, 6, 64);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), status_code::invalid_argument);
    // A base whose bytes hold fewer tokens than claimed.
    auto lie = state_join(state_of(f, 5), 8, cut.value(), sh, 12, 6, 64);
    ASSERT_FALSE(lie.ok());
    EXPECT_EQ(lie.status().code(), status_code::corrupt);
    EXPECT_NE(lie.status().message().find("the held base"), std::string::npos) << lie.status().message();
}

INSTANTIATE_TEST_SUITE_P(Layouts, Splice,
                         ::testing::Values(family::attention, family::attention_vtrans, family::streams,
                                           family::sliding, family::hybrid, family::recurrent, family::mrope),
                         [](const auto & info) {
                             switch (info.param) {
                                 case family::attention: return std::string("attention");
                                 case family::attention_vtrans: return std::string("attention_vtrans");
                                 case family::streams: return std::string("streams");
                                 case family::sliding: return std::string("sliding");
                                 case family::hybrid: return std::string("hybrid");
                                 case family::recurrent: return std::string("recurrent");
                                 case family::mrope: return std::string("mrope");
                             }
                             return std::string();
                         });

// An M-RoPE model's image: 6 cells at one position (a 3 x 2 grid) between text tokens, so token order is not
// position order. Tokens 0..2 text at 0..2, 3..8 the image at 3, 9..12 text at 6..9; every K/V byte names its
// token. A cut anywhere — before, inside or after the image — keeps exactly the tokens past the base, and the
// join gives back the whole state.
std::vector<uint8_t> tagged_image_state(const std::vector<int32_t> & tokens) {
    builder w;
    w.u32(1);
    w.u32(uint32_t(tokens.size()));
    for (int32_t k : tokens) {
        if (k < 3) cell_meta(w, k, 1, 0, true);
        else if (k < 9) cell_meta(w, 3, 1, 0, true, {3 + (k - 3) % 3, 3 + (k - 3) / 3, -1});
        else cell_meta(w, k - 3, 1, 0, true);
    }
    tagged_rows(w, tokens, k_layers, k_row);
    return w.b;
}

TEST(Splice, AnMRopeImageIsCutAndJoinedByTokenNotByPosition) {
    const state_shape sh = shape_learned(tagged_image_state({0, 1}), {k::attention}, true);
    const std::vector<uint8_t> full = tagged_image_state(iota(0, 13));
    const std::vector<uint8_t> shuffled = tagged_image_state({7, 12, 0, 4, 3, 11, 1, 8, 2, 5, 10, 6, 9});
    for (uint32_t base : {2u, 3u, 5u, 9u, 11u}) {
        for (const auto * src : {&full, &shuffled}) {
            auto cut = state_cut(*src, sh, 13, base, 64);
            ASSERT_TRUE(cut.ok()) << cut.status().to_string();
            EXPECT_EQ(cut.value(), tagged_image_state(iota(int32_t(base), 13))) << "base " << base;
            auto joined = state_join(*src, 13, cut.value(), sh, 13, base, 64);
            ASSERT_TRUE(joined.ok()) << joined.status().to_string();
            EXPECT_EQ(joined.value(), full) << "base " << base;
        }
    }
    // A delta whose cells, in order on their own, do not continue the base (text at positions 0..3 for tokens
    // 9..12): only the joined whole can tell, and the join refuses it.
    builder w;
    w.u32(1);
    w.u32(4);
    for (int32_t k = 0; k < 4; ++k) cell_meta(w, k, 1, 0, true);
    tagged_rows(w, iota(9, 13), k_layers, k_row);
    auto bad = state_join(full, 13, w.b, sh, 13, 9, 64);
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.status().code(), status_code::corrupt);
    EXPECT_NE(bad.status().message().find("the joined state"), std::string::npos) << bad.status().message();
}

TEST(Splice, ArgumentsOutOfRangeAreRefused) {
    const state_shape sh = shape_of(family::attention);
    const auto full = state_of(family::attention, 10);
    EXPECT_EQ(state_cut(full, sh, 10, 0, 64).status().code(), status_code::invalid_argument);
    EXPECT_EQ(state_cut(full, sh, 10, 10, 64).status().code(), status_code::invalid_argument);
    EXPECT_EQ(state_join(full, 10, full, sh, 10, 10, 64).status().code(), status_code::invalid_argument);
}

}  // namespace
}  // namespace baton
