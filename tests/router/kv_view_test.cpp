// kv_view_test.cpp — the router's view of the nodes' caches (src/router/kv_view.h): node answers in, cached
// prompt tokens out; a node that restarted, or that the router fell behind, is resynced from its snapshot, and
// until then it counts as holding nothing.
#include "kv_view.h"

#include <gtest/gtest.h>

#include "baton/pd/kv_blocks.h"
#include "baton/pd/pd_protocol.h"

namespace baton {
namespace {

constexpr uint64_t k_seed = 77;
const std::string k_url = "http://10.0.0.1:8080";

std::vector<token_id> prompt(size_t n, token_id base = 0) {
    std::vector<token_id> t(n);
    for (size_t i = 0; i < n; ++i) t[i] = base + token_id(i);
    return t;
}

kv_event_batch batch(const std::string & epoch, uint64_t seq, std::vector<uint64_t> blocks) {
    kv_event_batch b;
    b.node = "n";
    b.epoch = epoch;
    b.seed = k_seed;
    b.seq = seq;
    b.events.push_back(kv_event_stored{std::nullopt, std::move(blocks)});
    return b;
}

// A node's GET /v1/kv/events answer (as src/node/pd_handlers.cpp writes it).
std::string answer(const std::string & epoch, uint64_t seq, bool resync, const std::vector<kv_event_batch> & bs) {
    std::string s = "{\"node\":\"n\",\"epoch\":\"" + epoch + "\",\"seed\":\"" + kv_hash_hex(k_seed) +
                    "\",\"seq\":" + std::to_string(seq) + ",\"resync\":" + (resync ? "true" : "false") +
                    ",\"batches\":[";
    for (size_t i = 0; i < bs.size(); ++i) s += (i ? "," : "") + kv_event_batch_encode(bs[i]);
    return s + "]}";
}

std::vector<uint64_t> blocks_of(const std::vector<token_id> & t) {
    return kv_block_hashes(t, k_seed, pd_kv_block_tokens);
}

TEST(KvView, BatchesFromTheFirstOnAreAppliedAndMatchWholeBlocks) {
    kv_view v(1 << 16);
    const auto p = prompt(3 * pd_kv_block_tokens + 10);
    const auto h = blocks_of(p);
    EXPECT_EQ(v.events_query(k_url), "after=0");
    auto r = v.apply_events(k_url, answer("e1", 1, false, {batch("e1", 1, {h[0], h[1]})}));
    ASSERT_TRUE(r.ok());
    EXPECT_FALSE(r.value());
    EXPECT_EQ(v.events_query(k_url), "after=1&epoch=e1");
    EXPECT_EQ(v.cached_tokens(p, {k_url, "http://other:1"}), (std::vector<uint32_t>{2 * pd_kv_block_tokens, 0}));
}

TEST(KvView, ANodeThatPublishedNothingIsInSyncAndHoldsNothing) {
    kv_view v(1 << 16);
    auto r = v.apply_events(k_url, answer("e1", 0, false, {}));
    ASSERT_TRUE(r.ok());
    EXPECT_FALSE(r.value());
    EXPECT_EQ(v.stats().nodes, 1u);
    EXPECT_EQ(v.cached_tokens(prompt(200), {k_url}), std::vector<uint32_t>{0});
}

TEST(KvView, ARestartedNodeOrALostBatchAsksForTheSnapshot) {
    kv_view v(1 << 16);
    const auto p = prompt(2 * pd_kv_block_tokens);
    const auto h = blocks_of(p);
    ASSERT_FALSE(v.apply_events(k_url, answer("e1", 1, false, {batch("e1", 1, {h[0]})})).value());
    // The node says the router fell behind its log.
    EXPECT_TRUE(v.apply_events(k_url, answer("e1", 9, true, {})).value());
    // A batch past the next one (a lost batch).
    kv_view w(1 << 16);
    ASSERT_FALSE(w.apply_events(k_url, answer("e1", 1, false, {batch("e1", 1, {h[0]})})).value());
    EXPECT_TRUE(w.apply_events(k_url, answer("e1", 3, false, {batch("e1", 3, {h[1]})})).value());
    EXPECT_EQ(w.cached_tokens(p, {k_url}), std::vector<uint32_t>{0}) << "out of sync: counted as holding nothing";
    // The snapshot brings it back.
    kv_snapshot s;
    s.node = "n";
    s.epoch = "e1";
    s.seed = k_seed;
    s.seq = 3;
    s.blocks = {h[0], h[1]};
    ASSERT_TRUE(w.apply_snapshot(k_url, kv_snapshot_encode(s)).ok());
    EXPECT_EQ(w.cached_tokens(p, {k_url}), std::vector<uint32_t>{2 * pd_kv_block_tokens});
    EXPECT_EQ(w.events_query(k_url), "after=3&epoch=e1");
    EXPECT_EQ(w.stats().resyncs, 1u);
    // A new epoch (the node restarted): resync again.
    EXPECT_TRUE(w.apply_events(k_url, answer("e2", 1, false, {batch("e2", 1, {h[0]})})).value());
}

TEST(KvView, AnswersThatDoNotParseChangeNothing) {
    kv_view v(1 << 16);
    const auto p = prompt(pd_kv_block_tokens);
    ASSERT_FALSE(v.apply_events(k_url, answer("e1", 1, false, {batch("e1", 1, blocks_of(p))})).value());
    EXPECT_FALSE(v.apply_events(k_url, "not json").ok());
    EXPECT_FALSE(v.apply_events(k_url, "{\"epoch\":1}").ok());
    EXPECT_FALSE(v.apply_snapshot(k_url, "{}").ok());
    EXPECT_EQ(v.cached_tokens(p, {k_url}), std::vector<uint32_t>{pd_kv_block_tokens});
    EXPECT_EQ(v.stats().rejected, 3u);
    v.forget(k_url);
    EXPECT_EQ(v.cached_tokens(p, {k_url}), std::vector<uint32_t>{0});
}

TEST(KvRouteScores, WhatSavesLittleCountsAsATie) {
    // A 2080-token prompt: a 128-token preamble held by two nodes is within an eighth of the prompt of nothing.
    EXPECT_EQ(kv_route_scores({128, 128, 0, 0}, 2080), (std::vector<uint32_t>{128, 128, 128, 128}));
    // The tenant's whole system prompt on one node is far more than an eighth: it stays ahead.
    EXPECT_EQ(kv_route_scores({2048, 128, 0}, 2080), (std::vector<uint32_t>{2048, 128, 0}));
    // Short prompts: the margin is at least a block.
    EXPECT_EQ(kv_route_scores({64, 0}, 100), (std::vector<uint32_t>{64, 0}));
    EXPECT_EQ(kv_route_scores({64, 10}, 100), (std::vector<uint32_t>{64, 64}));
    EXPECT_TRUE(kv_route_scores({}, 100).empty());
}

kv_event_batch tier_batch(const std::string & epoch, uint64_t seq, std::vector<uint64_t> blocks, uint64_t ttl_ms) {
    kv_event_batch b = batch(epoch, seq, {});
    b.events = {kv_event_tier_stored{std::move(blocks), ttl_ms}};
    return b;
}

// The tier's entries a node reports writing: any node of the chain key can fetch them, so every such node is
// credited with the longest prefix the tier holds; not the node's own cache; gone after their TTL.
TEST(KvView, TierEntriesCountForEveryNodeOfTheChainKeyUntilTheyExpire) {
    kv_view v(1 << 16);
    const auto t0 = kv_view::clock::now();
    const auto p = prompt(5 * pd_kv_block_tokens + 7);
    const auto h = blocks_of(p);
    const std::string other = "http://10.0.0.2:8080";
    ASSERT_TRUE(v.apply_events(other, answer("e9", 0, false, {}), t0).ok());  // in sync, holds nothing
    ASSERT_TRUE(
        v.apply_events(k_url, answer("e1", 2, false, {batch("e1", 1, {h[0]}), tier_batch("e1", 2, {h[1], h[3]}, 1000)}),
                       t0)
            .ok());
    // Entries at blocks 2 and 4 (a conversation's two turns): the longest wins; block 4's prefix is 4 blocks.
    EXPECT_EQ(v.tier_tokens(p, {k_url, other, "http://unknown:1"}, t0),
              (std::vector<uint32_t>{4 * pd_kv_block_tokens, 4 * pd_kv_block_tokens, 0}));
    EXPECT_EQ(v.cached_tokens(p, {k_url, other}), (std::vector<uint32_t>{pd_kv_block_tokens, 0}));  // its own cache
    EXPECT_EQ(v.stats().tier_entries, 2u);
    // A prompt that diverges inside block 3 can use the entry at block 2 only.
    auto q = p;
    q[2 * pd_kv_block_tokens + 5] = 99999;
    EXPECT_EQ(v.tier_tokens(q, {other}, t0), std::vector<uint32_t>{2 * pd_kv_block_tokens});
    // Expired: nothing. A later write renews.
    EXPECT_EQ(v.tier_tokens(p, {other}, t0 + std::chrono::milliseconds(1001)), std::vector<uint32_t>{0});
    ASSERT_TRUE(v.apply_events(k_url, answer("e1", 3, false, {tier_batch("e1", 3, {h[1]}, 5000)}), t0).ok());
    EXPECT_EQ(v.tier_tokens(p, {other}, t0 + std::chrono::milliseconds(1001)),
              std::vector<uint32_t>{2 * pd_kv_block_tokens});
    // The node restarts (a new epoch, resync): the tier's entries stay (they live in Valkey, not in the node).
    auto r = v.apply_events(k_url, answer("e2", 0, true, {}), t0);
    ASSERT_TRUE(r.ok());
    EXPECT_TRUE(r.value());
    EXPECT_EQ(v.tier_tokens(p, {other}, t0), std::vector<uint32_t>{4 * pd_kv_block_tokens});
}

// keys (the live view's cache table): per chain key, each node's blocks and sync state, and the tier's entries
// still unexpired with the soonest expiry.
TEST(KvView, KeysListEachNodesBlocksAndTheUnexpiredTierEntries) {
    kv_view v(1 << 16);
    const auto t0 = kv_view::clock::now();
    const auto h = blocks_of(prompt(4 * pd_kv_block_tokens));
    const std::string other = "http://10.0.0.2:8080";
    ASSERT_TRUE(v.apply_events(other, answer("e9", 0, false, {}), t0).ok());
    ASSERT_TRUE(v.apply_events(k_url,
                               answer("e1", 2, false,
                                      {batch("e1", 1, {h[0], h[1], h[2]}), tier_batch("e1", 2, {h[1], h[3]}, 1000)}),
                               t0)
                    .ok());
    auto keys = v.keys(t0);
    ASSERT_EQ(keys.size(), 1u);
    EXPECT_EQ(keys[0].seed, k_seed);
    EXPECT_EQ(keys[0].index_blocks, 3u);
    ASSERT_EQ(keys[0].nodes.size(), 2u);  // by name
    EXPECT_EQ(keys[0].nodes[0].node, k_url);
    EXPECT_EQ(keys[0].nodes[0].blocks, 3u);
    EXPECT_TRUE(keys[0].nodes[0].in_sync);
    EXPECT_EQ(keys[0].nodes[1].node, other);
    EXPECT_EQ(keys[0].nodes[1].blocks, 0u);
    EXPECT_EQ(keys[0].tier_entries, 2u);
    EXPECT_NEAR(keys[0].tier_next_expiry_s, 1.0, 1e-6);
    // A lost batch: the node shows resyncing, holding nothing; past the TTL the tier's entries are not counted.
    ASSERT_TRUE(v.apply_events(k_url, answer("e1", 5, false, {batch("e1", 5, {h[3]})}), t0).value());
    keys = v.keys(t0 + std::chrono::milliseconds(1001));
    ASSERT_EQ(keys.size(), 1u);
    EXPECT_FALSE(keys[0].nodes[0].in_sync);
    EXPECT_EQ(keys[0].nodes[0].blocks, 0u);
    EXPECT_EQ(keys[0].tier_entries, 0u);
    EXPECT_EQ(keys[0].tier_next_expiry_s, -1);
}

TEST(KvView, ASnapshotCarriesTheTierEntriesAndAnotherChainKeyDoesNotSeeThem) {
    kv_view v(1 << 16);
    const auto t0 = kv_view::clock::now();
    const auto p = prompt(3 * pd_kv_block_tokens);
    const auto h = blocks_of(p);
    kv_snapshot s;
    s.node = "n";
    s.epoch = "e1";
    s.seed = k_seed;
    s.seq = 4;
    s.tier = {{h[2], 60000}};
    ASSERT_TRUE(v.apply_snapshot(k_url, kv_snapshot_encode(s), t0).ok());
    EXPECT_EQ(v.tier_tokens(p, {k_url}, t0), std::vector<uint32_t>{3 * pd_kv_block_tokens});
    // A node of another model or KV layout (another seed): its hashes of the same tokens differ, and the entries
    // were reported under k_seed.
    kv_snapshot o = s;
    o.seed = k_seed + 1;
    o.tier.clear();
    ASSERT_TRUE(v.apply_snapshot("http://other:1", kv_snapshot_encode(o), t0).ok());
    EXPECT_EQ(v.tier_tokens(p, {"http://other:1"}, t0), std::vector<uint32_t>{0});
}

TEST(KvView, TierEntriesAreBoundedSoonestToExpireFirst) {
    kv_view v(2);
    const auto t0 = kv_view::clock::now();
    const auto p = prompt(3 * pd_kv_block_tokens);
    const auto h = blocks_of(p);
    ASSERT_TRUE(v.apply_events(k_url, answer("e1", 1, false, {tier_batch("e1", 1, {h[2]}, 1000)}), t0).ok());
    ASSERT_TRUE(v.apply_events(k_url, answer("e1", 2, false, {tier_batch("e1", 2, {h[0]}, 9000)}), t0).ok());
    ASSERT_TRUE(v.apply_events(k_url, answer("e1", 3, false, {tier_batch("e1", 3, {h[1]}, 5000)}), t0).ok());
    EXPECT_EQ(v.stats().tier_entries, 2u);  // h[2] (the soonest to expire) went
    EXPECT_EQ(v.tier_tokens(p, {k_url}, t0), std::vector<uint32_t>{2 * pd_kv_block_tokens});
}

TEST(KvRouteScores, ANodeHoldingAPrefixBeatsTheTierWhichBeatsRecomputing) {
    // 4096-token prompt (margin 512): the tier holds 4000 of it.
    // No node holds any: all are credited alike (load decides).
    EXPECT_EQ(kv_route_scores({0, 0, 0}, 4096, {4000, 4000, 4000}), (std::vector<uint32_t>{3488, 3488, 3488}));
    // A node that holds it all is ahead of the nodes that would fetch it.
    EXPECT_EQ(kv_route_scores({4000, 0}, 4096, {4000, 4000}), (std::vector<uint32_t>{4000, 3488}));
    // A node holding only a preamble has no edge: it would fetch the conversation from the tier like the others.
    EXPECT_EQ(kv_route_scores({1024, 0}, 4096, {4000, 4000}), (std::vector<uint32_t>{3488, 3488}));
    // Without the tier the preamble would have drawn the request there.
    EXPECT_EQ(kv_route_scores({1024, 0}, 4096), (std::vector<uint32_t>{1024, 0}));
    // A tier entry shorter than the margin counts for nothing.
    EXPECT_EQ(kv_route_scores({0, 0}, 4096, {256, 256}), (std::vector<uint32_t>{0, 0}));
}

}  // namespace
}  // namespace baton
