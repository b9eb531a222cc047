// state_payload_test.cpp — libllama's sequence-state layout as Baton learns and checks it: one test per
// way a crafted state can be out of range (the real exports of every model family are checked in
// tests/engine/state_validation_test.cpp).
#include "baton/blob.h"
#include "baton/state_payload.h"

#include <gtest/gtest.h>

#include <cstring>

#include "blob_test_util.h"
#include "state_payload_builder.h"

namespace baton {
namespace {

using k = state_part_kind;
using namespace state_payload_builder;

// A node whose memory is one attention cache (a llama): learned from a probe of 2 cells.
state_shape attention_node(uint32_t n_stream = 1, uint32_t v_trans = 0) {
    attention_spec probe;
    probe.n_stream = n_stream;
    probe.v_trans = v_trans;
    probe.positions = {0, 1};
    auto full = state_shape_learn(attention_bytes(probe), {k::attention});
    EXPECT_TRUE(full.ok()) << full.status().to_string();
    auto partial = state_shape_learn(builder().b, {});  // a plain attention cache's partial state: the header
    EXPECT_TRUE(partial.ok()) << partial.status().to_string();
    return {full.value(), partial.value()};
}

state_expect expect(uint32_t n_tokens, bool partial = false) { return {n_tokens, 64, partial, 0, {}}; }

Status check(const attention_spec & a, const state_shape & shape, const state_expect & e) {
    return state_payload_check(attention_bytes(a), shape, e, 1000);
}

attention_spec valid(uint32_t n) {
    attention_spec a;
    a.positions = iota(0, int32_t(n));
    return a;
}

TEST(StatePayload, LearnsTheNodesLayoutFromItsOwnExport) {
    const state_shape s = attention_node();
    ASSERT_EQ(s.full.parts.size(), 1u);
    EXPECT_EQ(s.full.magic, k_magic);
    EXPECT_TRUE(s.full.parts[0].layers_known);
    EXPECT_EQ(s.full.parts[0].n_layer_field, 2u);
    ASSERT_EQ(s.full.parts[0].first.size(), 2u);
    EXPECT_EQ(s.full.parts[0].first[1].row_bytes, 64u);
    EXPECT_TRUE(s.partial.known);
    EXPECT_TRUE(s.partial.parts.empty());  // a plain attention cache's partial state is the header alone
}

TEST(StatePayload, AValidStatePasses) {
    const state_shape s = attention_node();
    EXPECT_TRUE(check(valid(12), s, expect(12)).ok());
    attention_spec shuffled = valid(12);
    std::swap(shuffled.positions[0], shuffled.positions[7]);  // cell order is the cache's, not the positions'
    EXPECT_TRUE(check(shuffled, s, expect(12)).ok());
}

// The finding: a state whose positions run from -1 to 1048582 was applied and poisoned the slot.
TEST(StatePayloadRegression, NegativePositionIsRefusedBeforeLibllama) {
    attention_spec a = valid(12);
    a.positions[0] = -1;
    const Status st = check(a, attention_node(), expect(12));
    EXPECT_EQ(st.code(), status_code::corrupt);
    EXPECT_CONTAINS(st.message(), "cell 0: position -1 outside 0..11");
    EXPECT_CONTAINS(st.message(), "at +1");  // offsets are absolute: base 1000 + the cell's place
}

TEST(StatePayloadRegression, HugePositionIsRefused) {
    attention_spec a = valid(12);
    a.positions[11] = 1048582;
    const Status st = check(a, attention_node(), expect(12));
    EXPECT_CONTAINS(st.message(), "cell 11: position 1048582 outside 0..11");
}

TEST(StatePayload, DuplicatePositionIsRefused) {
    attention_spec a = valid(12);
    a.positions[5] = 4;
    EXPECT_CONTAINS(check(a, attention_node(), expect(12)).message(), "cell 5: position 4 twice");
}

TEST(StatePayload, FewerCellsThanTokensIsRefused) {
    const Status st = check(valid(11), attention_node(), expect(12));
    EXPECT_EQ(st.code(), status_code::corrupt);
    EXPECT_CONTAINS(st.message(), "11 cells for 12 tokens");
}

// Regression (state_payload_fuzz, in a delta's join): an attention part with no cell in any stream passed the
// one-cell-per-position rule, which only ran on a stream's cells.
TEST(StatePayloadRegression, AttentionPartWithoutCellsIsRefused) {
    attention_spec none = valid(12);
    none.positions.clear();
    const Status st = check(none, attention_node(), expect(12));
    EXPECT_EQ(st.code(), status_code::corrupt);
    EXPECT_CONTAINS(st.message(), "no cells for 12 tokens");
}

TEST(StatePayload, MoreCellsThanASequenceMayHoldIsRefused) {
    EXPECT_CONTAINS(check(valid(70), attention_node(), {70, 64, false, 0, {}}).message(),
                    "cell_count 70 > the 64 cells a sequence may hold");
}

TEST(StatePayload, CellCountBeyondTheBytesIsRefusedWithoutOverflow) {
    builder w;
    w.u32(1);
    w.u32(0xFFFFFFFFu);
    w.fill(24);
    const Status st = state_payload_check(w.b, attention_node(), {1, 0xFFFFFFFFu, false, 0, {}});
    EXPECT_CONTAINS(st.message(), "cell_count 4294967295 needs");
}

TEST(StatePayload, CellsInTwoStreamsAreRefused) {
    const state_shape s = attention_node(2);
    builder w;
    w.u32(2);
    for (int stream = 0; stream < 2; ++stream) {
        attention_spec a = valid(2);
        a.n_stream = 1;
        builder one;
        attention(one, a);
        w.b.insert(w.b.end(), one.b.begin() + k_header_bytes + 4, one.b.end());  // the stream alone
    }
    EXPECT_CONTAINS(state_payload_check(w.b, s, expect(2)).message(), "cells in a second stream");
}

TEST(StatePayload, AnotherStreamCountIsRefused) {
    attention_spec a = valid(4);
    a.n_stream = 4;
    EXPECT_CONTAINS(check(a, attention_node(1), expect(4)).message(), "n_stream 4, this node's memory has 1");
}

TEST(StatePayload, ACellOfSeveralSequencesIsRefused) {
    attention_spec a = valid(4);
    a.n_seq_id = 2;
    EXPECT_CONTAINS(check(a, attention_node(), expect(4)).message(), "n_seq_id 2");
}

TEST(StatePayload, ANegativeSequenceIdIsRefused) {
    attention_spec a = valid(4);
    a.seq_id = -5;
    EXPECT_CONTAINS(check(a, attention_node(), expect(4)).message(), "seq_id -5");
}

TEST(StatePayload, HeaderFieldsMustBeThisNodes) {
    const state_shape s = attention_node();
    attention_spec a = valid(4);
    a.v_trans = 1;
    EXPECT_CONTAINS(check(a, s, expect(4)).message(), "v_trans 1, this node's memory has 0");
    a = valid(4);
    a.n_layer = 3;
    EXPECT_CONTAINS(check(a, s, expect(4)).message(), "n_layer 3, this node's memory has 2");
    a = valid(4);
    a.k_type = 8;
    EXPECT_CONTAINS(check(a, s, expect(4)).message(), "k layer 0: type 8, 64-byte rows, this node's memory has type 1");
    a = valid(4);
    a.v_row = 65;
    EXPECT_CONTAINS(check(a, s, expect(4)).message(), "v layer 0: type 1, 65-byte rows");
}

TEST(StatePayload, TransposedValuesAreCheckedToo) {
    const state_shape s = attention_node(1, 1);
    attention_spec a = valid(6);
    a.v_trans = 1;
    EXPECT_TRUE(check(a, s, expect(6)).ok());
    a.v_embd = 31;
    EXPECT_CONTAINS(check(a, s, expect(6)).message(), "31 x 2-byte elements per cell");
}

TEST(StatePayload, RowBytesThatWouldOverflowAreRefused) {
    const state_shape s = attention_node();
    attention_spec a = valid(4);
    std::vector<uint8_t> b = attention_bytes(a);
    // The first K row size (after n_stream, cell_count, 4 cells, v_trans, n_layer, k_type) -> 2^62.
    const size_t off = k_header_bytes + 4 + 4 + 4 * 12 + 4 + 4 + 8 + 4;
    for (int i = 0; i < 8; ++i) b[off + size_t(i)] = uint8_t((uint64_t(1) << 62) >> (8 * i));
    const Status st = state_payload_check(b, s, expect(4));
    EXPECT_EQ(st.code(), status_code::corrupt);  // a mismatch with the node's row size, caught before any product
}

TEST(StatePayload, TruncatedDataIsRefused) {
    std::vector<uint8_t> b = attention_bytes(valid(4));
    b.resize(b.size() - 1);
    EXPECT_CONTAINS(state_payload_check(b, attention_node(), expect(4)).message(), "exceed the");
}

TEST(StatePayload, TrailingBytesAreRefused) {
    std::vector<uint8_t> b = attention_bytes(valid(4));
    b.push_back(0);
    EXPECT_CONTAINS(state_payload_check(b, attention_node(), expect(4)).message(), "1 bytes after the last part");
}

TEST(StatePayload, AnotherMagicIsRefused) {
    builder w(0x1234);
    attention(w, valid(4));
    const Status st = state_payload_check(w.b, attention_node(), expect(4));
    EXPECT_EQ(st.code(), status_code::corrupt);
    EXPECT_CONTAINS(st.message(), "magic 0x00001234, this node's states start with 0xaf143cd8");
    EXPECT_CONTAINS(state_payload_check(std::vector<uint8_t>(5, 0), attention_node(), expect(4)).message(),
                    "header truncated");
}

TEST(StatePayload, TheSendersSequenceIdMayDifferButIsBounded) {
    builder other(k_magic, 7);
    attention(other, valid(4));
    EXPECT_TRUE(state_payload_check(other.b, attention_node(), expect(4)).ok());
    builder huge(k_magic, 0x7FFFFFFF);
    attention(huge, valid(4));
    EXPECT_CONTAINS(state_payload_check(huge.b, attention_node(), expect(4)).message(), "seq_id 2147483647");
}

TEST(StatePayload, TheReservedFieldMustBeThisNodes) {
    attention_spec a = valid(4);
    a.reserved = 5;
    EXPECT_CONTAINS(check(a, attention_node(), expect(4)).message(), "reserved 5, this node's memory has 0");
}

// An M-RoPE model's node (Qwen2-VL and kin): its cells carry x, y and the token beside the position.
state_shape mrope_node() {
    attention_spec probe = valid(2);
    probe.positions_2d = true;
    return shape_learned(attention_bytes(probe), {k::attention}, true);
}

attention_spec mrope_state(uint32_t n) {
    attention_spec a = valid(n);
    a.positions_2d = true;
    return a;
}

// The bug: Debian's libllama writes 12 more bytes per cell on M-RoPE models, so the probe read them as rows and
// the node restored no state at all (Qwen2-VL text through PD, host cache and tiers: off).
TEST(StatePayloadRegression, MRopeCellsAreLearnedWhenTheModelSaysSo) {
    attention_spec probe = valid(2);
    probe.positions_2d = true;
    EXPECT_EQ(state_shape_learn(attention_bytes(probe), {k::attention}).status().code(), status_code::unsupported);
    auto learned = state_shape_learn(attention_bytes(probe), {k::attention}, true);
    ASSERT_TRUE(learned.ok()) << learned.status().to_string();
    EXPECT_TRUE(learned->parts[0].positions_2d);
    EXPECT_EQ(learned->parts[0].first.size(), 2u);
}

TEST(StatePayload, MRopeCellsCarryATextTokensTwoDPositionAndItsToken) {
    const state_shape s = mrope_node();
    const std::vector<int32_t> toks = tokens_of(12);
    state_expect e = expect(12);
    e.tokens = toks;
    EXPECT_TRUE(check(mrope_state(12), s, e).ok());
    EXPECT_TRUE(check(mrope_state(12), s, expect(12)).ok()) << "without tokens the token is not compared";
    const struct {
        std::vector<int32_t> ext;
        const char * says;
    } bad[] = {{{3, 5, token_at(5)}, "token 5: 2-D position (3, 5) at position 5 (a text token's is its position)"},
               {{5, 9, token_at(5)}, "token 5: 2-D position (5, 9) at position 5"},
               {{5, 5, 7}, "token 5: the cell records token 7, the blob has 105"}};
    for (const auto & b : bad) {
        attention_spec a = mrope_state(12);
        a.ext.assign(12, {});
        a.ext[5] = b.ext;
        const Status st = check(a, s, e);
        EXPECT_EQ(st.code(), status_code::corrupt);
        EXPECT_CONTAINS(st.message(), b.says);
    }
    // A layout of the other kind: 12-byte cells to an M-RoPE node, 24-byte cells to a plain one.
    EXPECT_EQ(check(valid(12), s, e).code(), status_code::corrupt);
    EXPECT_EQ(check(mrope_state(12), attention_node(), expect(12)).code(), status_code::corrupt);
}

// An M-RoPE sequence with an image: 3 text tokens, a 3 x 2 image at position 3 (6 cells, 3 positions), 4 text
// tokens at positions 6..9 — 13 tokens. ext(k) is token k's cell: {pos, x, y, tok}.
constexpr int32_t k_media = media_token_min + 7;
std::vector<int32_t> image_tokens() {
    std::vector<int32_t> t = tokens_of(13);
    for (int k = 3; k < 9; ++k) t[size_t(k)] = k_media + k;
    return t;
}
std::vector<int32_t> image_cell(int32_t k) {
    if (k < 3) return {k, k, k, token_at(k)};
    if (k < 9) return {3, 3 + (k - 3) % 3, 3 + (k - 3) / 3, -1};
    return {k - 3, k - 3, k - 3, token_at(k)};
}
attention_spec image_state(const std::vector<int32_t> & order) {
    attention_spec a;
    a.positions_2d = true;
    for (int32_t k : order) {
        const auto c = image_cell(k);
        a.positions.push_back(c[0]);
        a.ext.push_back({c[1], c[2], c[3]});
    }
    return a;
}

TEST(StatePayload, AnMRopeImageIsAGridOfCellsAtOnePositionAndReportedAsSuch) {
    const state_shape s = mrope_node();
    const std::vector<int32_t> toks = image_tokens();
    state_expect e = expect(13);
    e.tokens = toks;
    position_map pm;
    ASSERT_TRUE(state_payload_check(attention_bytes(image_state(iota(0, 13))), s, e, 0, &pm).ok());
    ASSERT_EQ(pm.images().size(), 1u);
    EXPECT_EQ(pm.images()[0], (grid_image{3, 6, 3, 2}));
    EXPECT_EQ(pm.pos_of(9), 6);
    EXPECT_EQ(pm.pos_of(13), 10);
    // Cells in any order (the cache's): the same.
    ASSERT_TRUE(
        state_payload_check(attention_bytes(image_state({7, 12, 0, 4, 3, 11, 1, 8, 2, 5, 10, 6, 9})), s, e, 0, &pm)
            .ok());
    EXPECT_EQ(pm.images().size(), 1u);

    const struct {
        int32_t k;
        std::vector<int32_t> cell;  // {pos, x, y, tok}
        const char * says;
    } bad[] = {
        {5, {3, 5, 3, 7}, "token 5: 2-D position (5, 3), token 7 at position 3 is not embedding 2"},
        {5, {3, 3, 4, -1}, "two cells at position 3, 2-D position (3, 4)"},
        {8, {3, 6, 4, -1}, "tokens 3..8: 6 cells at position 3 do not fill a grid 4 wide"},
        {12, {11, 11, 11, token_at(12)}, "token 12 at position 11, the tokens before it end at 8"},
        {9, {6, 6, 6, 5}, "token 9: the cell records token 5"},
    };
    for (const auto & b : bad) {
        attention_spec a = image_state(iota(0, 13));
        a.positions[size_t(b.k)] = b.cell[0];
        a.ext[size_t(b.k)] = {b.cell[1], b.cell[2], b.cell[3]};
        const Status st = state_payload_check(attention_bytes(a), s, e);
        EXPECT_EQ(st.code(), status_code::corrupt) << b.says;
        EXPECT_CONTAINS(st.message(), b.says);
    }
    // Text tokens where the cells make an image, and an image's tokens where the cells are text.
    std::vector<int32_t> text_toks = tokens_of(13);
    e.tokens = text_toks;
    EXPECT_CONTAINS(check(image_state(iota(0, 13)), s, e).message(), "is text but its cell is part of an image");
    // Without tokens the structure alone is checked (the splice's checks): the image passes.
    EXPECT_TRUE(check(image_state(iota(0, 13)), s, expect(13)).ok());
}

TEST(StatePayload, ZeroTokensAreRefused) {
    EXPECT_EQ(state_payload_check(attention_bytes(valid(1)), attention_node(), expect(0)).code(), status_code::corrupt);
}

TEST(StatePayload, APartialStateOfAPlainCacheIsTheHeaderAlone) {
    const state_shape s = attention_node();
    EXPECT_TRUE(state_payload_check(builder().b, s, expect(4, true)).ok());
    EXPECT_CONTAINS(check(valid(4), s, expect(4, true)).message(), "bytes after the last part");
}

TEST(StatePayload, CellsWhereTheNodesProbeHadNoneAreRefused) {
    attention_spec empty;
    empty.positions = {};
    auto f = state_shape_learn(attention_bytes(empty), {k::attention});
    ASSERT_TRUE(f.ok());
    const state_shape s{f.value(), f.value()};
    EXPECT_TRUE(check(empty, s, expect(4, true)).ok());
    EXPECT_CONTAINS(check(valid(4), s, expect(4, true)).message(), "4 cells where this node's memory holds none");
}

// A sliding-window model: the full cache then the window, whose cells are one run ending at the last token.
state_shape swa_node() {
    attention_spec probe = valid(2);
    builder full;
    attention(full, probe);
    attention(full, probe);
    auto f = state_shape_learn(full.b, {k::attention, k::attention});
    EXPECT_TRUE(f.ok()) << f.status().to_string();
    auto p = state_shape_learn(attention_bytes(probe), {k::attention});
    EXPECT_TRUE(p.ok());
    return {f.value(), p.value()};
}

std::vector<uint8_t> swa_bytes(uint32_t n, std::vector<int32_t> window) {
    builder w;
    attention(w, valid(n));
    attention_spec win;
    win.positions = std::move(window);
    attention(w, win);
    return w.b;
}

TEST(StatePayload, SlidingWindowRunEndingAtTheLastTokenPasses) {
    EXPECT_TRUE(state_payload_check(swa_bytes(40, iota(8, 40)), swa_node(), expect(40)).ok());
}

TEST(StatePayload, SlidingWindowWithAGapIsRefused) {
    std::vector<int32_t> w = iota(8, 40);
    w.erase(w.begin() + 3);
    w.push_back(2);
    EXPECT_CONTAINS(state_payload_check(swa_bytes(40, w), swa_node(), expect(40)).message(),
                    "are not one run ending at");
}

TEST(StatePayload, SlidingWindowNotEndingAtTheLastTokenIsRefused) {
    EXPECT_CONTAINS(state_payload_check(swa_bytes(40, iota(0, 30)), swa_node(), expect(40)).message(),
                    "ending at position 39");
}

// A hybrid: attention then recurrent; its partial state is the recurrent part alone.
state_shape hybrid_node() {
    builder full;
    attention(full, valid(2));
    recurrent_spec r;
    r.positions = {1};
    recurrent(full, r);
    auto f = state_shape_learn(full.b, {k::attention, k::recurrent});
    EXPECT_TRUE(f.ok()) << f.status().to_string();
    builder part;
    recurrent(part, r);
    auto p = state_shape_learn(part.b, {k::recurrent});
    EXPECT_TRUE(p.ok()) << p.status().to_string();
    return {f.value(), p.value()};
}

std::vector<uint8_t> hybrid_bytes(uint32_t n, recurrent_spec r) {
    builder w;
    attention(w, valid(n));
    recurrent(w, r);
    return w.b;
}

TEST(StatePayload, HybridLearnsItsRecurrentRows) {
    const state_shape s = hybrid_node();
    ASSERT_EQ(s.full.parts.size(), 2u);
    EXPECT_EQ(s.full.parts[1].first.size(), 2u);   // conv rows
    EXPECT_EQ(s.full.parts[1].second.size(), 2u);  // SSM rows
    EXPECT_EQ(s.full.parts[1].second[0].row_bytes, 256u);
    recurrent_spec r;
    r.positions = {9};
    EXPECT_TRUE(state_payload_check(hybrid_bytes(10, r), s, expect(10)).ok());
    builder part;
    recurrent(part, r);
    EXPECT_TRUE(state_payload_check(part.b, s, expect(10, true)).ok());
}

TEST(StatePayload, RecurrentStateNotAtTheLastTokenIsRefused) {
    recurrent_spec r;
    r.positions = {-1};
    EXPECT_CONTAINS(state_payload_check(hybrid_bytes(10, r), hybrid_node(), expect(10)).message(),
                    "position -1 outside 0..9");
    r.positions = {5};
    EXPECT_CONTAINS(state_payload_check(hybrid_bytes(10, r), hybrid_node(), expect(10)).message(),
                    "recurrent state is at position 5, not at 9");
}

TEST(StatePayload, RecurrentStateOfTwoCellsIsRefused) {
    recurrent_spec r;
    r.positions = {8, 9};
    EXPECT_CONTAINS(state_payload_check(hybrid_bytes(10, r), hybrid_node(), expect(10)).message(),
                    "cell_count 2, a sequence's recurrent state is exactly 1 cell");
}

TEST(StatePayload, RecurrentRowsMustBeThisNodes) {
    recurrent_spec r;
    r.s_row = 128;
    EXPECT_CONTAINS(state_payload_check(hybrid_bytes(10, r), hybrid_node(), expect(10)).message(),
                    "s layer 0: type 0, 128-byte rows");
    r = recurrent_spec{};
    r.n_rec = 1;
    EXPECT_EQ(state_payload_check(hybrid_bytes(10, r), hybrid_node(), expect(10)).code(), status_code::corrupt);
}

TEST(StatePayload, ANodeThatCouldNotLearnRefusesEveryState) {
    EXPECT_EQ(state_payload_check(attention_bytes(valid(2)), state_shape{}, expect(2)).code(),
              status_code::unsupported);
}

TEST(StatePayload, LearningRefusesALayoutItDoesNotKnow) {
    std::vector<uint8_t> b = attention_bytes(valid(2));
    b.push_back(1);
    EXPECT_EQ(state_shape_learn(b, {k::attention}).status().code(), status_code::unsupported);
    EXPECT_EQ(state_shape_learn(std::vector<uint8_t>(6, 0), {}).status().code(), status_code::unsupported);
    EXPECT_EQ(state_shape_learn(attention_bytes(valid(2)), {k::attention, k::attention}).status().code(),
              status_code::unsupported);
    builder odd;
    recurrent_spec r;
    recurrent(odd, r);
    odd.i32(0);
    odd.u64(4);
    odd.fill(4);  // a third kind of recurrent row: not conv/SSM pairs
    EXPECT_EQ(state_shape_learn(odd.b, {k::recurrent}).status().code(), status_code::unsupported);
}

}  // namespace
}  // namespace baton
