// prefix_index_test.cpp — the router's prefix index (prefix_index.h): in-order batches apply, replays are
// stale, a lost batch is a gap that drops the node until its snapshot, a restarted node (new epoch) starts
// over, the index stays within max_blocks by evicting the least recently used block, another chain key is
// refused, and indexes fed the same streams in different orders (with replays, or from a snapshot) answer
// match identically — and as a plain set-per-node model of the streams says they should.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "baton/pd/kv_blocks.h"
#include "prefix_index.h"

namespace baton {
namespace {

constexpr uint32_t k_prefix_test_block_tokens = 4;
const uint64_t k_prefix_test_seed = kv_block_seed("fp", "f16/unified", k_prefix_test_block_tokens);

// prefix_test_chain: the block hashes of a document of n_blocks full blocks (tokens first, first+1, ...).
std::vector<uint64_t> prefix_test_chain(int32_t first, size_t n_blocks) {
    std::vector<int32_t> tokens(n_blocks * k_prefix_test_block_tokens);
    for (size_t i = 0; i < tokens.size(); i++) tokens[i] = first + int32_t(i);
    return kv_block_hashes(tokens, k_prefix_test_seed, k_prefix_test_block_tokens);
}

kv_event_batch prefix_test_batch(const std::string & node, const std::string & epoch, uint64_t seq,
                                 std::vector<kv_event> events) {
    kv_event_batch b;
    b.node = node;
    b.epoch = epoch;
    b.seed = k_prefix_test_seed;
    b.seq = seq;
    b.events = std::move(events);
    return b;
}

kv_event_stored prefix_test_stored(const std::vector<uint64_t> & chain, size_t from, size_t to) {
    kv_event_stored s;
    if (from > 0) s.parent = chain[from - 1];
    s.blocks.assign(chain.begin() + ptrdiff_t(from), chain.begin() + ptrdiff_t(to));
    return s;
}

kv_snapshot prefix_test_snapshot(const std::string & node, const std::string & epoch, uint64_t seq,
                                 std::vector<uint64_t> blocks) {
    kv_snapshot s;
    s.node = node;
    s.epoch = epoch;
    s.seed = k_prefix_test_seed;
    s.seq = seq;
    s.blocks = std::move(blocks);
    return s;
}

using outcome = prefix_index_outcome;

TEST(PrefixIndex, MatchCountsLeadingBlocksPerNodeAndStopsAtTheFirstMiss) {
    prefix_index idx(k_prefix_test_seed, 1000);
    const auto doc = prefix_test_chain(1, 6);
    // a holds blocks 0..3; b holds 0, 1 and 3 (not 2); c holds nothing of it.
    EXPECT_EQ(idx.apply(prefix_test_batch("a", "ea", 1, {prefix_test_stored(doc, 0, 4)})), outcome::applied);
    EXPECT_EQ(
        idx.apply(prefix_test_batch("b", "eb", 1, {prefix_test_stored(doc, 0, 2), prefix_test_stored(doc, 3, 4)})),
        outcome::applied);
    EXPECT_EQ(idx.apply(prefix_test_batch("c", "ec", 1, {prefix_test_stored(prefix_test_chain(1000, 3), 0, 3)})),
              outcome::applied);
    EXPECT_EQ(idx.match(doc, {"a", "b", "c", "unknown"}), (std::vector<size_t>{4, 2, 0, 0}));
    // A query shorter than what a node holds counts only the query's blocks.
    EXPECT_EQ(idx.match(std::span(doc).first(3), {"a", "b"}), (std::vector<size_t>{3, 2}));
    // Another document sharing the first 2 blocks' tokens (block 2 differs): its hash 2 differs, so a holds 2.
    std::vector<int32_t> tokens(6 * k_prefix_test_block_tokens);
    for (size_t i = 0; i < tokens.size(); i++) tokens[i] = 1 + int32_t(i);
    tokens[2 * k_prefix_test_block_tokens] = -1;
    EXPECT_EQ(idx.match(kv_block_hashes(tokens, k_prefix_test_seed, k_prefix_test_block_tokens), {"a"}),
              (std::vector<size_t>{2}));
    EXPECT_EQ(idx.match({}, {"a"}), (std::vector<size_t>{0}));
    EXPECT_EQ(idx.stats().blocks, 4u + 3u);
    EXPECT_EQ(idx.stats().nodes, 3u);
}

TEST(PrefixIndex, RemovedAndClearedEventsDropBlocksOfThatNodeOnly) {
    prefix_index idx(k_prefix_test_seed, 1000);
    const auto doc = prefix_test_chain(1, 4);
    ASSERT_EQ(idx.apply(prefix_test_batch("a", "e", 1, {prefix_test_stored(doc, 0, 4)})), outcome::applied);
    ASSERT_EQ(idx.apply(prefix_test_batch("b", "e", 1, {prefix_test_stored(doc, 0, 4)})), outcome::applied);
    ASSERT_EQ(idx.apply(prefix_test_batch("a", "e", 2, {kv_event_removed{{doc[2], doc[3]}}})), outcome::applied);
    EXPECT_EQ(idx.match(doc, {"a", "b"}), (std::vector<size_t>{2, 4}));
    EXPECT_EQ(idx.stats().blocks, 4u);  // b still holds 2 and 3
    ASSERT_EQ(idx.apply(prefix_test_batch("b", "e", 2, {kv_event_cleared{}})), outcome::applied);
    EXPECT_EQ(idx.match(doc, {"a", "b"}), (std::vector<size_t>{2, 0}));
    EXPECT_EQ(idx.stats().blocks, 2u);
    // Events apply in order within a batch: cleared then stored keeps the stored.
    ASSERT_EQ(idx.apply(prefix_test_batch("a", "e", 3, {kv_event_cleared{}, prefix_test_stored(doc, 0, 1)})),
              outcome::applied);
    EXPECT_EQ(idx.match(doc, {"a"}), (std::vector<size_t>{1}));
    // Removing what a node does not hold changes nothing.
    ASSERT_EQ(idx.apply(prefix_test_batch("a", "e", 4, {kv_event_removed{{doc[3], 12345}}})), outcome::applied);
    EXPECT_EQ(idx.match(doc, {"a"}), (std::vector<size_t>{1}));
}

TEST(PrefixIndex, ABatchAtOrBeforeTheLastSeqIsStaleAndChangesNothing) {
    prefix_index idx(k_prefix_test_seed, 1000);
    const auto doc = prefix_test_chain(1, 4);
    const auto b1 = prefix_test_batch("a", "e", 1, {prefix_test_stored(doc, 0, 2)});
    const auto b2 = prefix_test_batch("a", "e", 2, {kv_event_removed{{doc[1]}}});
    ASSERT_EQ(idx.apply(b1), outcome::applied);
    ASSERT_EQ(idx.apply(b2), outcome::applied);
    EXPECT_EQ(idx.apply(b1), outcome::stale);  // would re-store doc[1] if applied
    EXPECT_EQ(idx.apply(b2), outcome::stale);
    EXPECT_EQ(idx.match(doc, {"a"}), (std::vector<size_t>{1}));
    EXPECT_EQ(idx.stats().stale, 2u);
    EXPECT_FALSE(idx.needs_snapshot("a"));
}

TEST(PrefixIndex, AGapDropsTheNodeUntilASnapshotAndBatchesContinueFromItsSeq) {
    prefix_index idx(k_prefix_test_seed, 1000);
    const auto doc = prefix_test_chain(1, 4);
    ASSERT_EQ(idx.apply(prefix_test_batch("a", "e", 1, {prefix_test_stored(doc, 0, 2)})), outcome::applied);
    ASSERT_EQ(idx.apply(prefix_test_batch("b", "e", 1, {prefix_test_stored(doc, 0, 1)})), outcome::applied);
    // seq 2 is lost: 3 is a gap, and a's entries are gone (they may be wrong now).
    EXPECT_EQ(idx.apply(prefix_test_batch("a", "e", 3, {prefix_test_stored(doc, 2, 3)})), outcome::gap);
    EXPECT_TRUE(idx.needs_snapshot("a"));
    EXPECT_FALSE(idx.needs_snapshot("b"));
    EXPECT_EQ(idx.match(doc, {"a", "b"}), (std::vector<size_t>{0, 1}));
    EXPECT_EQ(idx.stats().gaps, 1u);
    // Until the snapshot every batch of a answers gap (counted once) and changes nothing.
    EXPECT_EQ(idx.apply(prefix_test_batch("a", "e", 4, {prefix_test_stored(doc, 0, 4)})), outcome::gap);
    EXPECT_EQ(idx.match(doc, {"a"}), (std::vector<size_t>{0}));
    EXPECT_EQ(idx.stats().gaps, 1u);
    // The snapshot as of seq 4, then seq 5 applies; seq 4 is stale.
    EXPECT_EQ(idx.apply_snapshot(prefix_test_snapshot("a", "e", 4, {doc[0], doc[1], doc[2]})), outcome::applied);
    EXPECT_FALSE(idx.needs_snapshot("a"));
    EXPECT_EQ(idx.match(doc, {"a"}), (std::vector<size_t>{3}));
    EXPECT_EQ(idx.apply(prefix_test_batch("a", "e", 4, {kv_event_cleared{}})), outcome::stale);
    EXPECT_EQ(idx.apply(prefix_test_batch("a", "e", 5, {prefix_test_stored(doc, 3, 4)})), outcome::applied);
    EXPECT_EQ(idx.match(doc, {"a"}), (std::vector<size_t>{4}));
}

TEST(PrefixIndex, ANodeFirstSeenPastSeqOneIsAGap) {
    prefix_index idx(k_prefix_test_seed, 1000);
    const auto doc = prefix_test_chain(1, 2);
    EXPECT_EQ(idx.apply(prefix_test_batch("late", "e", 9, {prefix_test_stored(doc, 0, 2)})), outcome::gap);
    EXPECT_TRUE(idx.needs_snapshot("late"));
    EXPECT_EQ(idx.match(doc, {"late"}), (std::vector<size_t>{0}));
    EXPECT_EQ(idx.apply_snapshot(prefix_test_snapshot("late", "e", 9, {doc[0], doc[1]})), outcome::applied);
    EXPECT_EQ(idx.match(doc, {"late"}), (std::vector<size_t>{2}));
    EXPECT_EQ(idx.apply(prefix_test_batch("late", "e", 10, {})), outcome::applied);
}

TEST(PrefixIndex, ANewEpochAtSeqOneReplacesTheNodeAndAnyOtherSeqIsAGap) {
    prefix_index idx(k_prefix_test_seed, 1000);
    const auto doc = prefix_test_chain(1, 3);
    ASSERT_EQ(idx.apply(prefix_test_batch("a", "old", 1, {prefix_test_stored(doc, 0, 3)})), outcome::applied);
    ASSERT_EQ(idx.apply(prefix_test_batch("a", "old", 2, {})), outcome::applied);
    // The node restarted: its cache is empty, its stream starts at 1 again.
    EXPECT_EQ(idx.apply(prefix_test_batch("a", "new", 1, {prefix_test_stored(doc, 0, 1)})), outcome::applied);
    EXPECT_EQ(idx.match(doc, {"a"}), (std::vector<size_t>{1}));
    EXPECT_EQ(idx.apply(prefix_test_batch("a", "new", 2, {})), outcome::applied);
    // Restarted again, and this router missed the new stream's first batches.
    EXPECT_EQ(idx.apply(prefix_test_batch("a", "newer", 3, {prefix_test_stored(doc, 0, 3)})), outcome::gap);
    EXPECT_EQ(idx.match(doc, {"a"}), (std::vector<size_t>{0}));
    EXPECT_TRUE(idx.needs_snapshot("a"));
    EXPECT_EQ(idx.stats().gaps, 1u);
}

TEST(PrefixIndex, ASnapshotReplacesEverythingKnownAboutTheNodeAndAnOlderOneIsStale) {
    prefix_index idx(k_prefix_test_seed, 1000);
    const auto doc = prefix_test_chain(1, 4);
    const auto other = prefix_test_chain(500, 2);
    ASSERT_EQ(idx.apply(prefix_test_batch("a", "e", 1, {prefix_test_stored(other, 0, 2)})), outcome::applied);
    ASSERT_EQ(idx.apply(prefix_test_batch("a", "e", 2, {})), outcome::applied);
    ASSERT_EQ(idx.apply(prefix_test_batch("a", "e", 3, {})), outcome::applied);
    // A late answer to an earlier fetch (seq 2 < 3): ignored.
    EXPECT_EQ(idx.apply_snapshot(prefix_test_snapshot("a", "e", 2, {doc[0]})), outcome::stale);
    EXPECT_EQ(idx.match(other, {"a"}), (std::vector<size_t>{2}));
    // At the same seq it replaces (same content by the protocol; here different, to see the replacement).
    EXPECT_EQ(idx.apply_snapshot(prefix_test_snapshot("a", "e", 3, {doc[0], doc[1]})), outcome::applied);
    EXPECT_EQ(idx.match(other, {"a"}), (std::vector<size_t>{0}));
    EXPECT_EQ(idx.match(doc, {"a"}), (std::vector<size_t>{2}));
    EXPECT_EQ(idx.stats().blocks, 2u);
    // Another epoch's snapshot replaces whatever seq it has.
    EXPECT_EQ(idx.apply_snapshot(prefix_test_snapshot("a", "f", 1, {doc[0]})), outcome::applied);
    EXPECT_EQ(idx.match(doc, {"a"}), (std::vector<size_t>{1}));
    EXPECT_EQ(idx.apply(prefix_test_batch("a", "f", 2, {prefix_test_stored(doc, 1, 3)})), outcome::applied);
    EXPECT_EQ(idx.match(doc, {"a"}), (std::vector<size_t>{3}));
    EXPECT_EQ(idx.stats().stale, 1u);
}

TEST(PrefixIndex, DropNodeForgetsItAndItsBlocks) {
    prefix_index idx(k_prefix_test_seed, 1000);
    const auto doc = prefix_test_chain(1, 3);
    ASSERT_EQ(idx.apply(prefix_test_batch("a", "e", 1, {prefix_test_stored(doc, 0, 3)})), outcome::applied);
    ASSERT_EQ(idx.apply(prefix_test_batch("b", "e", 1, {prefix_test_stored(doc, 0, 1)})), outcome::applied);
    idx.drop_node("a");
    idx.drop_node("never-seen");
    EXPECT_EQ(idx.match(doc, {"a", "b"}), (std::vector<size_t>{0, 1}));
    EXPECT_EQ(idx.stats().nodes, 1u);
    EXPECT_EQ(idx.stats().blocks, 1u);
    // Its next stream starts it again as a new node (from seq 1).
    EXPECT_EQ(idx.apply(prefix_test_batch("a", "e", 2, {})), outcome::gap);
    idx.drop_node("a");
    EXPECT_EQ(idx.apply(prefix_test_batch("a", "e", 1, {prefix_test_stored(doc, 0, 2)})), outcome::applied);
    EXPECT_EQ(idx.match(doc, {"a"}), (std::vector<size_t>{2}));
}

TEST(PrefixIndex, StaysWithinMaxBlocksByEvictingTheLeastRecentlyUsed) {
    prefix_index idx(k_prefix_test_seed, 4);
    const auto x = prefix_test_chain(1, 2);
    const auto y = prefix_test_chain(100, 2);
    const auto z = prefix_test_chain(200, 2);
    ASSERT_EQ(idx.apply(prefix_test_batch("a", "e", 1, {prefix_test_stored(x, 0, 2)})), outcome::applied);
    ASSERT_EQ(idx.apply(prefix_test_batch("b", "e", 1, {prefix_test_stored(y, 0, 2)})), outcome::applied);
    EXPECT_EQ(idx.stats().blocks, 4u);
    // x is matched, so y is now the least recently used chain; z's two blocks evict y's.
    EXPECT_EQ(idx.match(x, {"a"}), (std::vector<size_t>{2}));
    ASSERT_EQ(idx.apply(prefix_test_batch("a", "e", 2, {prefix_test_stored(z, 0, 2)})), outcome::applied);
    auto st = idx.stats();
    EXPECT_EQ(st.blocks, 4u);
    EXPECT_EQ(st.evictions, 2u);
    EXPECT_EQ(idx.match(x, {"a"}), (std::vector<size_t>{2}));
    EXPECT_EQ(idx.match(y, {"b"}), (std::vector<size_t>{0}));
    EXPECT_EQ(idx.match(z, {"a"}), (std::vector<size_t>{2}));
    // A chain is evicted from its tail: after z was matched, x is the least recently used chain, and one
    // more block takes x[1] before x[0].
    ASSERT_EQ(idx.apply(prefix_test_batch("b", "e", 2, {prefix_test_stored(prefix_test_chain(300, 1), 0, 1)})),
              outcome::applied);
    EXPECT_EQ(idx.match(x, {"a"}), (std::vector<size_t>{1}));  // and x[0] is the most recent now
    ASSERT_EQ(idx.apply(prefix_test_batch("b", "e", 3, {prefix_test_stored(prefix_test_chain(400, 1), 0, 1)})),
              outcome::applied);
    EXPECT_EQ(idx.match(z, {"a"}), (std::vector<size_t>{1}));  // z[1] went, z[0] stays
    EXPECT_EQ(idx.stats().blocks, 4u);
    EXPECT_EQ(idx.stats().evictions, 4u);
    // Never above the bound, whatever arrives (one event larger than the bound included).
    ASSERT_EQ(idx.apply(prefix_test_batch("a", "e", 3, {prefix_test_stored(prefix_test_chain(1000, 10), 0, 10)})),
              outcome::applied);
    EXPECT_EQ(idx.stats().blocks, 4u);
    EXPECT_EQ(idx.stats().evictions, 14u);
    // The first 4 blocks of that chain are what remain (the tail went first).
    EXPECT_EQ(idx.match(prefix_test_chain(1000, 10), {"a"}), (std::vector<size_t>{4}));

    prefix_index none(k_prefix_test_seed, 0);
    ASSERT_EQ(none.apply(prefix_test_batch("a", "e", 1, {prefix_test_stored(x, 0, 2)})), outcome::applied);
    EXPECT_EQ(none.stats().blocks, 0u);
    EXPECT_EQ(none.match(x, {"a"}), (std::vector<size_t>{0}));
}

TEST(PrefixIndex, AnotherChainKeyIsWrongSeedAndIgnored) {
    prefix_index idx(k_prefix_test_seed, 1000);
    const auto doc = prefix_test_chain(1, 2);
    auto b = prefix_test_batch("a", "e", 1, {prefix_test_stored(doc, 0, 2)});
    b.seed = kv_block_seed("fp", "q8_0/unified", k_prefix_test_block_tokens);
    EXPECT_EQ(idx.apply(b), outcome::wrong_seed);
    auto s = prefix_test_snapshot("a", "e", 1, {doc[0]});
    s.seed = kv_block_seed("other-model", "f16/unified", k_prefix_test_block_tokens);
    EXPECT_EQ(idx.apply_snapshot(s), outcome::wrong_seed);
    EXPECT_EQ(idx.match(doc, {"a"}), (std::vector<size_t>{0}));
    EXPECT_EQ(idx.stats().nodes, 0u);
    EXPECT_EQ(idx.stats().wrong_seed, 2u);
    // It did not consume seq 1 of the node's stream.
    EXPECT_EQ(idx.apply(prefix_test_batch("a", "e", 1, {prefix_test_stored(doc, 0, 2)})), outcome::applied);
    EXPECT_EQ(idx.match(doc, {"a"}), (std::vector<size_t>{2}));
}

TEST(PrefixIndex, OutcomeNames) {
    EXPECT_STREQ(prefix_index_outcome_name(outcome::applied), "applied");
    EXPECT_STREQ(prefix_index_outcome_name(outcome::stale), "stale");
    EXPECT_STREQ(prefix_index_outcome_name(outcome::gap), "gap");
    EXPECT_STREQ(prefix_index_outcome_name(outcome::wrong_seed), "wrong_seed");
}

// ---- convergence ----

// A node's stream, generated with a plain model of what it holds after each batch (the oracle).
struct prefix_test_stream {
    std::string node;
    std::vector<kv_event_batch> batches;         // seq 1..n
    std::vector<std::set<uint64_t>> held_after;  // [k]: held after batch k (0: before any)
};

prefix_test_stream prefix_test_make_stream(const std::string & node, const std::vector<std::vector<uint64_t>> & docs,
                                           size_t n_batches, std::mt19937 & rng) {
    prefix_test_stream s;
    s.node = node;
    std::set<uint64_t> held;
    s.held_after.push_back(held);
    for (uint64_t seq = 1; seq <= n_batches; seq++) {
        std::vector<kv_event> events;
        const size_t n_events = 1 + rng() % 3;
        for (size_t e = 0; e < n_events; e++) {
            const unsigned kind = rng() % 10;
            const auto & doc = docs[rng() % docs.size()];
            if (kind < 6) {  // store a prefix (from a block it may already hold)
                const size_t to = 1 + rng() % doc.size();
                const size_t from = rng() % to;
                events.push_back(prefix_test_stored(doc, from, to));
                for (size_t i = from; i < to; i++) held.insert(doc[i]);
            } else if (kind < 9) {  // drop a tail
                const size_t from = rng() % doc.size();
                kv_event_removed r;
                for (size_t i = from; i < doc.size(); i++) {
                    r.blocks.push_back(doc[i]);
                    held.erase(doc[i]);
                }
                events.push_back(r);
            } else {
                events.push_back(kv_event_cleared{});
                held.clear();
            }
        }
        s.batches.push_back(prefix_test_batch(node, "epoch-" + node, seq, std::move(events)));
        s.held_after.push_back(held);
    }
    return s;
}

// prefix_test_interleave: every stream's batches in one random order that keeps each stream's own order.
std::vector<const kv_event_batch *> prefix_test_interleave(const std::vector<prefix_test_stream> & streams,
                                                           size_t from_seq, std::mt19937 & rng) {
    std::vector<size_t> next(streams.size(), from_seq);  // index into batches
    std::vector<const kv_event_batch *> out;
    for (;;) {
        std::vector<size_t> open;
        for (size_t i = 0; i < streams.size(); i++)
            if (next[i] < streams[i].batches.size()) open.push_back(i);
        if (open.empty()) return out;
        const size_t i = open[rng() % open.size()];
        out.push_back(&streams[i].batches[next[i]++]);
    }
}

TEST(PrefixIndex, IndexesFedTheSameStreamsInAnyOrderAnswerMatchIdentically) {
    std::mt19937 rng(20240611);
    std::vector<std::vector<uint64_t>> docs;
    for (int d = 0; d < 6; d++) docs.push_back(prefix_test_chain(1 + 10000 * d, 8));
    // Documents that share a prefix with docs[0] (the same first 3 blocks' tokens, then others).
    for (int d = 0; d < 2; d++) {
        std::vector<int32_t> tokens(8 * k_prefix_test_block_tokens);
        for (size_t i = 0; i < tokens.size(); i++) tokens[i] = 1 + int32_t(i);
        tokens[3 * k_prefix_test_block_tokens] = -100 - d;
        docs.push_back(kv_block_hashes(tokens, k_prefix_test_seed, k_prefix_test_block_tokens));
    }
    const std::vector<std::string> nodes = {"n0", "n1", "n2"};
    std::vector<prefix_test_stream> streams;
    for (const auto & n : nodes) streams.push_back(prefix_test_make_stream(n, docs, 40, rng));
    const size_t cut = 17;  // the snapshot index C starts from: as of seq cut

    prefix_index a(k_prefix_test_seed, 100000), b(k_prefix_test_seed, 100000), c(k_prefix_test_seed, 100000);
    // A: one interleaving, each batch once.
    for (const auto * batch : prefix_test_interleave(streams, 0, rng)) ASSERT_EQ(a.apply(*batch), outcome::applied);
    // B: another interleaving, every batch followed now and then by a replay of an earlier one (another
    // router's copy, a retransmission): those are stale.
    std::map<std::string, std::vector<const kv_event_batch *>> seen;
    for (const auto * batch : prefix_test_interleave(streams, 0, rng)) {
        ASSERT_EQ(b.apply(*batch), outcome::applied);
        auto & mine = seen[batch->node];
        mine.push_back(batch);
        if (rng() % 3 == 0) {
            EXPECT_EQ(b.apply(*mine[rng() % mine.size()]), outcome::stale);
        }
    }
    // C: a router that restarted: each node's snapshot as of seq `cut` (from the oracle), then the batches
    // after it in a third interleaving, with some of the batches before it (stale) mixed in.
    for (const auto & s : streams) {
        const auto & held = s.held_after[cut];
        ASSERT_EQ(c.apply_snapshot(prefix_test_snapshot(s.node, "epoch-" + s.node, cut, {held.begin(), held.end()})),
                  outcome::applied);
    }
    for (const auto * batch : prefix_test_interleave(streams, cut, rng)) {
        ASSERT_EQ(c.apply(*batch), outcome::applied);
        if (rng() % 4 == 0) {
            EXPECT_EQ(c.apply(streams[rng() % streams.size()].batches[rng() % cut]), outcome::stale);
        }
    }

    // Every query: each document and each of its prefixes; the oracle's answer is the leading run of its
    // blocks in the node's final set.
    size_t nonzero = 0;
    for (const auto & doc : docs)
        for (size_t len = 0; len <= doc.size(); len++) {
            const std::span<const uint64_t> q(doc.data(), len);
            std::vector<size_t> expect;
            for (const auto & s : streams) {
                size_t k = 0;
                while (k < len && s.held_after.back().contains(doc[k])) k++;
                expect.push_back(k);
                nonzero += k > 0;
            }
            const auto ma = a.match(q, nodes);
            EXPECT_EQ(ma, expect) << "A, prefix of " << len;
            EXPECT_EQ(b.match(q, nodes), ma) << "B, prefix of " << len;
            EXPECT_EQ(c.match(q, nodes), ma) << "C, prefix of " << len;
        }
    EXPECT_GT(nonzero, 0u) << "the streams left nothing to match: the test would prove nothing";
    EXPECT_EQ(a.stats().blocks, b.stats().blocks);
    EXPECT_EQ(a.stats().blocks, c.stats().blocks);
    EXPECT_EQ(a.stats().evictions, 0u);
}

TEST(PrefixIndex, ConcurrentApplyAndMatchEndInTheSequentialState) {
    prefix_index idx(k_prefix_test_seed, 100000);
    std::mt19937 rng(7);
    std::vector<std::vector<uint64_t>> docs;
    for (int d = 0; d < 4; d++) docs.push_back(prefix_test_chain(1 + 1000 * d, 8));
    std::vector<prefix_test_stream> streams;
    for (const char * n : {"t0", "t1"}) streams.push_back(prefix_test_make_stream(n, docs, 300, rng));
    std::vector<std::thread> threads;
    for (const auto & s : streams)
        threads.emplace_back([&idx, &s] {
            for (const auto & batch : s.batches) EXPECT_EQ(idx.apply(batch), outcome::applied);
        });
    threads.emplace_back([&idx, &docs] {
        for (int i = 0; i < 300; i++) (void)idx.match(docs[size_t(i) % docs.size()], {"t0", "t1"});
    });
    for (auto & t : threads) t.join();
    for (const auto & doc : docs) {
        std::vector<size_t> expect;
        for (const auto & s : streams) {
            size_t k = 0;
            while (k < doc.size() && s.held_after.back().contains(doc[k])) k++;
            expect.push_back(k);
        }
        EXPECT_EQ(idx.match(doc, {"t0", "t1"}), expect);
    }
}

}  // namespace
}  // namespace baton
