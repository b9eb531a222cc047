// buffer_pool_test.cpp — recycled blob buffers: reuse, best fit, and the bounds.
#include <gtest/gtest.h>

#include <thread>

#include "baton/base/buffer_pool.h"
#include "buffer_pool_test_seam.h"

namespace baton {
namespace {

constexpr size_t MiB = size_t(1) << 20;

TEST(BufferPool, GivenBufferIsReusedEmptyWithItsPages) {
    buffer_pool pool(64 * MiB, 4);
    std::vector<uint8_t> a = pool.take(2 * MiB);
    EXPECT_GE(a.capacity(), 2 * MiB);
    a.assign(2 * MiB, 7);
    const uint8_t * pages = a.data();
    pool.give(std::move(a));
    EXPECT_EQ(pool.pooled_buffers(), 1u);
    std::vector<uint8_t> b = pool.take(MiB);
    EXPECT_EQ(b.data(), pages) << "the pooled buffer (already faulted in) must be handed out again";
    EXPECT_TRUE(b.empty());
    EXPECT_EQ(pool.pooled_buffers(), 0u);
}

TEST(BufferPool, WarmingRefillsThePoolAfterALargeTake) {
    buffer_pool pool(256 * MiB, 4, MiB, true);
    std::vector<uint8_t> a = pool.take(8 * MiB);  // fresh: the pool was empty
    buffer_pool_settle_for_test(pool);
    EXPECT_EQ(pool.warmed(), 1u);
    ASSERT_EQ(pool.pooled_buffers(), 1u);
    EXPECT_GE(pool.pooled_bytes(), 10 * MiB) << "a quarter more than was taken: a state grows";
    std::vector<uint8_t> b = pool.take(9 * MiB);  // (larger than a, as a state that grew)
    EXPECT_GE(b.capacity(), 10 * MiB) << "the warm buffer";
    EXPECT_EQ(pool.pooled_buffers(), 0u);
    buffer_pool_settle_for_test(pool);
    EXPECT_EQ(pool.warmed(), 2u) << "that take asked for the next";
    pool.give(std::move(a));
    pool.give(std::move(b));
    std::vector<uint8_t> c = pool.take(4 * MiB);  // served from the pool, which holds one that large already
    buffer_pool_settle_for_test(pool);
    EXPECT_EQ(pool.warmed(), 2u);
}

TEST(BufferPool, WarmingKeepsTheBoundsAndSkipsSmallTakes) {
    buffer_pool pool(8 * MiB, 4, MiB, true);
    std::vector<uint8_t> small = pool.take(2 * MiB);  // under k_warm_min
    std::vector<uint8_t> big = pool.take(8 * MiB);    // 10 MiB warm would exceed the pool's 8 MiB
    buffer_pool_settle_for_test(pool);
    EXPECT_EQ(pool.warmed(), 0u);
    EXPECT_EQ(pool.pooled_buffers(), 0u);
    buffer_pool cold(256 * MiB, 4);  // a pool made without warming
    std::vector<uint8_t> c = cold.take(8 * MiB);
    buffer_pool_settle_for_test(cold);
    EXPECT_EQ(cold.warmed(), 0u);
    EXPECT_EQ(cold.pooled_buffers(), 0u);
}

TEST(BufferPool, TakeChoosesTheSmallestThatFitsElseFresh) {
    buffer_pool pool(64 * MiB, 4);
    std::vector<uint8_t> small = pool.take(2 * MiB), big = pool.take(8 * MiB);
    const uint8_t * big_pages = big.data();
    pool.give(std::move(big));
    pool.give(std::move(small));
    std::vector<uint8_t> got = pool.take(4 * MiB);
    EXPECT_EQ(got.data(), big_pages);
    std::vector<uint8_t> fresh = pool.take(16 * MiB);
    EXPECT_GE(fresh.capacity(), 16 * MiB);
    EXPECT_EQ(pool.pooled_buffers(), 1u) << "a too-small pooled buffer stays pooled";
}

TEST(BufferPool, BoundsSmallBuffersCountAndBytes) {
    buffer_pool pool(10 * MiB, 2);
    std::vector<uint8_t> tiny;
    tiny.reserve(4096);
    pool.give(std::move(tiny));
    EXPECT_EQ(pool.pooled_buffers(), 0u) << "buffers under 1 MiB are left to malloc";

    for (size_t mb : {2, 3, 4}) pool.give(pool.take(mb * MiB));  // nothing pooled fits: fresh each time
    EXPECT_EQ(pool.pooled_buffers(), 2u);
    EXPECT_LE(pool.pooled_bytes(), 10 * MiB);
    EXPECT_GE(pool.take(4 * MiB).capacity(), 4 * MiB);  // the smallest (2 MiB) was dropped first
    EXPECT_GE(pool.take(3 * MiB).capacity(), 3 * MiB);
    EXPECT_EQ(pool.pooled_buffers(), 0u);

    std::vector<uint8_t> huge;
    huge.reserve(11 * MiB);
    pool.give(std::move(huge));
    EXPECT_EQ(pool.pooled_buffers(), 0u) << "a buffer over the byte bound is never kept";
}

TEST(BufferPool, ConcurrentTakeAndGiveKeepTheBounds) {
    buffer_pool pool(16 * MiB, 3);
    std::vector<std::thread> th;
    for (int t = 0; t < 4; ++t)
        th.emplace_back([&, t] {
            for (int i = 0; i < 200; ++i) {
                std::vector<uint8_t> b = pool.take(size_t(1 + (i + t) % 4) * MiB);
                b.push_back(uint8_t(i));
                pool.give(std::move(b));
            }
        });
    for (auto & x : th) x.join();
    EXPECT_LE(pool.pooled_buffers(), 3u);
    EXPECT_LE(pool.pooled_bytes(), 16 * MiB);
}

}  // namespace
}  // namespace baton
