// kv_publisher_test.cpp — a node's KV events (src/node/kv_publisher.h): what the slots hold, as stored and
// removed blocks, numbered batches, the log's bound and the snapshot. The expected hashes come from
// kv_block_hashes itself (its own tests pin the chaining).
#include "kv_publisher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <thread>

#include "baton/pd/kv_blocks.h"

namespace baton {
namespace {

constexpr uint32_t k_block = 4;

kv_publisher make(size_t log = 256) {
    kv_publisher_config c;
    c.node = "n";
    c.epoch = "e1";
    c.seed = 42;
    c.block_tokens = k_block;
    c.log_batches = log;
    return kv_publisher(c);
}

kv_publisher::tokens_ptr toks(std::vector<token_id> t) { return std::make_shared<const std::vector<token_id>>(t); }

std::vector<uint64_t> hashes(const std::vector<token_id> & t) { return kv_block_hashes(t, 42, k_block); }

std::set<uint64_t> snapshot_set(const kv_publisher & p) {
    const kv_snapshot s = p.snapshot();
    return std::set<uint64_t>(s.blocks.begin(), s.blocks.end());
}

TEST(KvPublisher, StoresFullBlocksOfEverySlotOnceAndNumbersBatches) {
    kv_publisher p = make();
    const std::vector<token_id> a = {1, 2, 3, 4, 5, 6, 7, 8, 9};  // two full blocks, one partial
    const std::vector<token_id> b = {1, 2, 3, 4, 9, 9, 9, 9};     // shares the first block with a
    p.observe({toks(a), toks(b)});
    auto batches = p.batches_after(0);
    ASSERT_TRUE(batches);
    ASSERT_EQ(batches->size(), 1u);
    EXPECT_EQ((*batches)[0].seq, 1u);
    EXPECT_EQ((*batches)[0].epoch, "e1");
    EXPECT_EQ((*batches)[0].seed, 42u);
    std::vector<uint64_t> stored;
    for (const kv_event & e : (*batches)[0].events) {
        const auto * s = std::get_if<kv_event_stored>(&e);
        ASSERT_NE(s, nullptr);
        stored.insert(stored.end(), s->blocks.begin(), s->blocks.end());
    }
    const auto ha = hashes(a), hb = hashes(b);
    std::set<uint64_t> want(ha.begin(), ha.end());
    want.insert(hb.begin(), hb.end());
    EXPECT_EQ(std::set<uint64_t>(stored.begin(), stored.end()), want);
    EXPECT_EQ(stored.size(), want.size()) << "a block two slots share is stored once";
    EXPECT_EQ(snapshot_set(p), want);
    EXPECT_EQ(p.snapshot().seq, 1u);
}

TEST(KvPublisher, AStoredRunNamesTheBlockBeforeIt) {
    kv_publisher p = make();
    const std::vector<token_id> a = {1, 2, 3, 4};
    p.observe({toks(a)});
    std::vector<token_id> longer = a;
    longer.insert(longer.end(), {5, 6, 7, 8, 9, 10, 11, 12});
    p.observe({toks(longer)});
    auto batches = p.batches_after(1);
    ASSERT_TRUE(batches);
    ASSERT_EQ(batches->size(), 1u);
    ASSERT_EQ((*batches)[0].events.size(), 1u);
    const auto & s = std::get<kv_event_stored>((*batches)[0].events[0]);
    const auto h = hashes(longer);
    ASSERT_EQ(s.parent, h[0]);
    EXPECT_EQ(s.blocks, std::vector<uint64_t>(h.begin() + 1, h.end()));
}

TEST(KvPublisher, ABlockIsRemovedWhenNoSlotHoldsItAnyMore) {
    kv_publisher p = make();
    const std::vector<token_id> a = {1, 2, 3, 4, 5, 6, 7, 8};
    const std::vector<token_id> b = {1, 2, 3, 4};
    p.observe({toks(a), toks(b)});
    p.observe({toks({}), toks(b)});  // slot 0 cleared: its second block goes, the first stays (slot 1)
    auto batches = p.batches_after(1);
    ASSERT_TRUE(batches);
    ASSERT_EQ(batches->size(), 1u);
    ASSERT_EQ((*batches)[0].events.size(), 1u);
    const auto & r = std::get<kv_event_removed>((*batches)[0].events[0]);
    EXPECT_EQ(r.blocks, std::vector<uint64_t>{hashes(a)[1]});
    const auto hb = hashes(b);
    EXPECT_EQ(snapshot_set(p), std::set<uint64_t>(hb.begin(), hb.end()));
}

TEST(KvPublisher, UnchangedSlotsMakeNoBatch) {
    kv_publisher p = make();
    auto t = toks({1, 2, 3, 4});
    p.observe({t});
    p.observe({t});
    p.observe({toks({1, 2, 3, 4, 5})});  // a partial block more: nothing new is held
    auto batches = p.batches_after(0);
    ASSERT_TRUE(batches);
    EXPECT_EQ(batches->size(), 1u);
    EXPECT_TRUE(p.batches_after(1)->empty());
}

TEST(KvPublisher, AReaderBehindTheLogOrAheadOfItMustResync) {
    kv_publisher p = make(2);
    for (int i = 0; i < 4; ++i) p.observe({toks({i, i, i, i})});
    EXPECT_FALSE(p.batches_after(0)) << "batches 1 and 2 left the log";
    EXPECT_FALSE(p.batches_after(1));
    ASSERT_TRUE(p.batches_after(2));
    EXPECT_EQ(p.batches_after(2)->size(), 2u);
    EXPECT_FALSE(p.batches_after(9)) << "a reader ahead of the node read another epoch";
    EXPECT_EQ(p.snapshot().seq, 4u);
    EXPECT_EQ(snapshot_set(p).size(), 1u);
}

TEST(KvPublisher, TierWritesAreABatchAndStayInTheSnapshotUntilTheyExpire) {
    kv_publisher p = make();
    p.observe({toks({1, 2, 3, 4})});
    p.tier_stored(0xabc, 3600000);
    p.tier_stored(0xdef, 1);
    EXPECT_EQ(p.seq(), 3u);
    auto b = p.batches_after(1);
    ASSERT_TRUE(b.has_value());
    ASSERT_EQ(b->size(), 2u);
    EXPECT_EQ((*b)[0].events, (std::vector<kv_event>{kv_event_tier_stored{{0xabc}, 3600000}}));
    // Not a block the node holds.
    const std::vector<uint64_t> held = hashes({1, 2, 3, 4});
    EXPECT_EQ(snapshot_set(p), std::set<uint64_t>(held.begin(), held.end()));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // 0xdef's 1 ms has passed
    const kv_snapshot s = p.snapshot();
    ASSERT_EQ(s.tier.size(), 1u);
    EXPECT_EQ(s.tier[0].block, 0xabcu);
    EXPECT_GT(s.tier[0].ttl_ms, 3500000u);
    EXPECT_LE(s.tier[0].ttl_ms, 3600000u);
    auto d = kv_snapshot_decode(kv_snapshot_encode(s));  // what a router reads
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    EXPECT_EQ(d.value(), s);
}

}  // namespace
}  // namespace baton
