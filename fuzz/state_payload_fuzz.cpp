// state_payload_fuzz.cpp — libFuzzer target for libllama's sequence-state bytes as Baton validates them
// (src/blob/state_payload.cpp) before libllama ever parses them.
//
// Input: byte 0 picks one of six node layouts (attention; attention with transposed V; sliding window;
// hybrid; recurrent; an M-RoPE model's attention, whose cells carry x, y and the token; bit 5: its tokens are
// media tokens, so its states may hold images) and whether the state is a checkpoint, bytes 1-2 the token count (1..1024), the rest is
// the state. Properties: state_payload_check and state_shape_learn return (ASan/UBSan watch the bytes) with a
// message on failure; a state the check accepts follows the node's layout exactly — learning from it yields
// the node's own structure for every part that holds cells — and has exactly one cell per position where
// the rules say so (the full attention part covers 0..n-1).
// Deltas (state_splice.h): bit 4 of byte 0 reads the bytes as a delta over a base of n/2 tokens and joins it
// onto a built full state of that base; a join that succeeds is a full state of n tokens. An accepted full state
// of n >= 2 tokens is cut at n/2 and joined back: the cut checks as a delta, the join as a full state, and
// the join of a state whose cells are in position order is the state itself, byte for byte.
// BATON_FUZZ_WRITE_SEEDS=DIR writes valid inputs of every layout to DIR and exits (scripts/fuzz's seeds).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "baton/blob.h"
#include "baton/state_payload.h"
#include "baton/state_splice.h"
#include "blob/state_payload_builder.h"
#include "fuzz_seed_writer.h"

namespace {

using namespace baton;
using namespace baton::state_payload_builder;
using k = state_part_kind;

[[noreturn]] void fail(const char * what, const Status & st = {}) {
    std::fprintf(stderr, "state_payload_fuzz: %s %s\n", what, st.to_string().c_str());
    std::abort();
}

struct layout {
    std::vector<k> full_kinds, partial_kinds;
    state_shape shape;
};

std::vector<uint8_t> full_state(int which, uint32_t n) {
    builder w;
    attention_spec a;
    a.positions = iota(0, int32_t(n));
    recurrent_spec r;
    r.positions = {int32_t(n) - 1};
    switch (which) {
        case 0: attention(w, a); break;
        case 1:
            a.v_trans = 1;
            attention(w, a);
            break;
        case 2: {
            attention(w, a);
            attention_spec win;
            win.positions = iota(int32_t(n > 8 ? n - 8 : 0), int32_t(n));
            attention(w, win);
            break;
        }
        case 3:
            attention(w, a);
            recurrent(w, r);
            break;
        case 5:
            a.positions_2d = true;
            attention(w, a);
            break;
        default: recurrent(w, r); break;
    }
    return w.b;
}

constexpr int k_layouts = 6;
constexpr int k_mrope = 5;

std::vector<uint8_t> partial_state(int which, uint32_t n) {
    builder w;
    attention_spec win;
    win.positions = iota(int32_t(n > 8 ? n - 8 : 0), int32_t(n));
    recurrent_spec r;
    r.positions = {int32_t(n) - 1};
    switch (which) {
        case 0:
        case 1:
        case k_mrope: break;  // a plain attention cache: the header alone
        case 2: attention(w, win); break;
        default: recurrent(w, r); break;
    }
    return w.b;
}

const std::vector<layout> & layouts() {
    static const std::vector<layout> all = [] {
        std::vector<layout> out;
        const std::vector<std::vector<k>> full = {
            {k::attention}, {k::attention}, {k::attention, k::attention}, {k::attention, k::recurrent},
            {k::recurrent}, {k::attention}};
        const std::vector<std::vector<k>> partial = {{}, {}, {k::attention}, {k::recurrent}, {k::recurrent}, {}};
        for (int i = 0; i < k_layouts; ++i) {
            layout l{full[size_t(i)], partial[size_t(i)], {}};
            auto f = state_shape_learn(full_state(i, 2), l.full_kinds, i == k_mrope);
            auto p = state_shape_learn(partial_state(i, 2), l.partial_kinds, i == k_mrope);
            if (!f.ok() || !p.ok()) fail("the built-in probe does not learn", f.ok() ? p.status() : f.status());
            l.shape = {f.value(), p.value()};
            out.push_back(std::move(l));
        }
        return out;
    }();
    return all;
}

void write_seeds(const std::string & dir) {
    int n_written = 0;
    for (int i = 0; i < k_layouts; ++i)
        for (bool partial : {false, true})
            for (uint32_t n : {1u, 2u, 12u, 40u}) {
                std::vector<uint8_t> in = {uint8_t(i | (partial ? 8 : 0)), uint8_t((n - 1) & 0xFF),
                                           uint8_t((n - 1) >> 8)};
                const auto s = partial ? partial_state(i, n) : full_state(i, n);
                in.insert(in.end(), s.begin(), s.end());
                std::ofstream(dir + "/seed-" + std::to_string(n_written++), std::ios::binary)
                    .write(reinterpret_cast<const char *>(in.data()), std::streamsize(in.size()));
            }
    // An M-RoPE state of media tokens (bit 5): a 3 x 2 image at position 0, then six one-embedding media at 3..8.
    {
        attention_spec a;
        a.positions_2d = true;
        for (int32_t i = 0; i < 6; ++i) {
            a.positions.push_back(0);
            a.ext.push_back({i % 3, i / 3, -1});
        }
        for (int32_t p = 3; p < 9; ++p) {
            a.positions.push_back(p);
            a.ext.push_back({p, p, -1});
        }
        std::vector<uint8_t> in = {uint8_t(k_mrope | 32), 11, 0};
        const auto st = attention_bytes(a);
        in.insert(in.end(), st.begin(), st.end());
        std::ofstream(dir + "/seed-" + std::to_string(n_written++), std::ios::binary)
            .write(reinterpret_cast<const char *>(in.data()), std::streamsize(in.size()));
    }
    // Deltas: a full state of n tokens cut at n/2, read in delta mode.
    for (int i = 0; i < k_layouts; ++i)
        for (uint32_t n : {2u, 12u, 40u}) {
            auto cut = state_cut(full_state(i, n), layouts()[size_t(i)].shape, n, n / 2, 1024);
            if (!cut.ok()) fail("a seed does not cut", cut.status());
            std::vector<uint8_t> in = {uint8_t(i | 16), uint8_t((n - 1) & 0xFF), uint8_t((n - 1) >> 8)};
            in.insert(in.end(), cut.value().begin(), cut.value().end());
            std::ofstream(dir + "/seed-" + std::to_string(n_written++), std::ios::binary)
                .write(reinterpret_cast<const char *>(in.data()), std::streamsize(in.size()));
        }
}

void check_full(std::span<const uint8_t> bytes, const layout & l, uint32_t n, const char * what) {
    state_expect e;
    e.n_tokens = n;
    e.n_cells_max = 1024;
    if (Status st = state_payload_check(bytes, l.shape, e); !st.ok()) fail(what, st);
}

// fuzz_delta: the bytes as a delta of n tokens over n/2, joined onto a built base.
void fuzz_delta(std::span<const uint8_t> bytes, const layout & l, int which, uint32_t n) {
    if (n < 2) return;
    const uint32_t n_base = n / 2;
    const std::vector<uint8_t> base = full_state(which, n_base + (n & 1));  // the receiver may hold more
    auto joined = state_join(base, n_base + (n & 1), bytes, l.shape, n, n_base, 1024);
    if (!joined.ok()) {
        if (joined.status().message().empty()) fail("a refused join without a message");
        return;
    }
    check_full(joined.value(), l, n, "a join that succeeded is not a full state:");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) { return baton::fuzz_seed_writer_init(write_seeds); }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    if (size < 3) return 0;
    const int which = int(data[0] & 7) % k_layouts;
    const layout & l = layouts()[size_t(which)];
    const bool partial = (data[0] & 8) != 0;
    state_expect e;
    e.n_tokens = 1 + ((uint32_t(data[1]) | uint32_t(data[2]) << 8) & 1023);
    e.n_cells_max = 1024;
    e.partial = partial;
    // The M-RoPE layout's tokens: what the builder's cells record, or (bit 5) media tokens, so that accepted states
    // may hold images (grids of cells at one position) for the cut and join below.
    std::vector<int32_t> tokens = tokens_of(e.n_tokens);
    if (data[0] & 32)
        for (size_t k = 0; k < tokens.size(); ++k) tokens[k] = media_token_min + int32_t(k);
    if (which == k_mrope) e.tokens = tokens;
    const std::span<const uint8_t> bytes(data + 3, size - 3);
    if (data[0] & 16) {
        fuzz_delta(bytes, l, which, e.n_tokens);
        return 0;
    }
    const Status st = state_payload_check(bytes, l.shape, e, 3);
    if (!st.ok()) {
        if (st.message().empty()) fail("a failure without a message");
        return 0;
    }
    // Accepted: the bytes follow the node's structure exactly.
    const auto & kinds = partial ? l.partial_kinds : l.full_kinds;
    const state_format & want_format = partial ? l.shape.partial : l.shape.full;
    const auto & want = want_format.parts;
    auto learned = state_shape_learn(bytes, kinds, which == k_mrope);
    if (!learned.ok()) fail("an accepted state does not parse as a probe", learned.status());
    if (learned.value().magic != want_format.magic) fail("an accepted state has another magic");
    for (size_t i = 0; i < want.size(); ++i) {
        const state_part_shape & got = learned.value().parts[i];
        if (!got.layers_known) continue;  // no cells there: nothing to compare but the stream count
        if (got.first != want[i].first || got.second != want[i].second || got.trans != want[i].trans ||
            got.n_layer_field != want[i].n_layer_field || got.reserved != want[i].reserved)
            fail("an accepted state has another structure than the node's");
    }
    if (partial || e.n_tokens < 2) return 0;
    // Cut at the middle and joined back.
    const uint32_t n = e.n_tokens, n_base = n / 2;
    auto cut = state_cut(bytes, l.shape, n, n_base, 1024);
    if (!cut.ok()) fail("an accepted full state does not cut", cut.status());
    state_expect d = e;
    d.n_base = n_base;
    if (Status c = state_payload_check(cut.value(), l.shape, d); !c.ok()) fail("a cut is not a delta:", c);
    auto joined = state_join(bytes, n, cut.value(), l.shape, n, n_base, 1024);
    if (!joined.ok()) fail("a cut does not join back", joined.status());
    check_full(joined.value(), l, n, "a join is not a full state:");
    auto again = state_join(joined.value(), n, cut.value(), l.shape, n, n_base, 1024);
    if (!again.ok() || again.value() != joined.value())
        fail("joining twice differs (the join is not in position order)");
    return 0;
}
