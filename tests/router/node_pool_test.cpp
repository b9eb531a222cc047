// node_pool_test.cpp — selection rules: least outstanding, prefix affinity with a load cap, ejection.
#include <gtest/gtest.h>

#include <map>

#include "node_pool.h"

namespace baton {
namespace {

TEST(NodePool, LeastLoadedSkipsBusyEjectedAndExcluded) {
    node_pool p({"http://a", "http://b", "http://c"});
    p.acquire(0);
    p.acquire(0);
    p.acquire(1);
    EXPECT_EQ(p.pick_least_loaded()->index, 2u);
    p.mark_failure(2);
    EXPECT_EQ(p.pick_least_loaded()->index, 1u);
    EXPECT_EQ(p.pick_least_loaded({1})->index, 0u);
    p.mark_failure(0);
    p.mark_failure(1);
    EXPECT_FALSE(p.pick_least_loaded().has_value());
    p.mark_healthy(2);
    EXPECT_EQ(p.pick_least_loaded()->index, 2u);
    EXPECT_EQ(p.n_healthy(), 1u);
}

TEST(NodePool, AffinityIsStableAndSpreadsKeys) {
    node_pool p({"http://a", "http://b", "http://c", "http://d"}, 1000);
    std::map<size_t, int> count;
    for (int k = 0; k < 400; ++k) {
        const uint64_t key = affinity_key("conversation " + std::to_string(k));
        const size_t first = p.pick_affine(key)->index;
        EXPECT_EQ(p.pick_affine(key)->index, first) << "affinity must be stable";
        ++count[first];
    }
    EXPECT_EQ(count.size(), 4u);
    for (auto & [node, n] : count) EXPECT_GT(n, 50) << "node " << node << " got too few keys";
}

TEST(NodePool, AffinityRespectsLoadCapAndEjection) {
    node_pool p({"http://a", "http://b"}, 2);
    const uint64_t key = affinity_key("same conversation");
    const size_t home = p.pick_affine(key)->index, other = 1 - home;
    for (int i = 0; i < 2; ++i) p.acquire(home);
    EXPECT_EQ(p.pick_affine(key)->index, home) << "within the cap the home node keeps the key";
    p.acquire(home);
    EXPECT_EQ(p.pick_affine(key)->index, other) << "over the cap the key moves";
    p.release(home);
    EXPECT_EQ(p.pick_affine(key)->index, home);
    p.mark_failure(home);
    EXPECT_EQ(p.pick_affine(key)->index, other);
    EXPECT_EQ(p.pick_affine(key, {other}), std::nullopt);
}

TEST(NodePool, AffinityKeyUsesOnlyThePrefix) {
    const std::string base(300, 'x');
    EXPECT_EQ(affinity_key(base + "turn 2"), affinity_key(base + "turn 3"));
    EXPECT_NE(affinity_key("a" + base), affinity_key("b" + base));
}

}  // namespace
}  // namespace baton
