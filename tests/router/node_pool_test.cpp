// node_pool_test.cpp — selection rules: least outstanding, prefix affinity with a load cap, ejection.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "node_pool.h"
#include "request_affinity.h"

namespace baton {
namespace {

std::vector<http_url> urls(std::initializer_list<const char *> hosts) {
    std::vector<http_url> out;
    for (const char * h : hosts) out.push_back(http_url{h, 80, std::string("http://") + h});
    return out;
}

node_meta registered(const std::string & group, const std::string & model, uint32_t capacity = 0) {
    return node_meta{group, model, "", capacity};
}

TEST(NodePool, LeastLoadedSkipsBusyEjectedAndExcluded) {
    node_pool p(urls({"a", "b", "c"}));
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
    node_pool p(urls({"a", "b", "c", "d"}), 1000);
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
    node_pool p(urls({"a", "b"}), 2);
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

TEST(NodePool, RegisteredNodesJoinLeaveAndRejoinAtTheirIndex) {
    node_pool p(urls({"static"}));
    const auto a = urls({"a"})[0], b = urls({"b"})[0];
    auto [ia, joined_a] = p.upsert(a, registered("g1", "m1", 3));
    EXPECT_TRUE(joined_a);
    auto [ib, joined_b] = p.upsert(b, registered("g1", "m1"));
    EXPECT_TRUE(joined_b);
    EXPECT_EQ(p.capacity(ia), 3u) << "the record's capacity is used at once";
    EXPECT_FALSE(p.upsert(a, registered("g1", "m1", 3)).second) << "an update is no join";
    EXPECT_EQ(p.n_members(), 3u);
    EXPECT_EQ(p.retire_others({a.text}), 1u) << "b's record went away";
    EXPECT_FALSE(p.member(ib));
    EXPECT_TRUE(p.member(0)) << "static nodes never retire";
    for (int k = 0; k < 50; ++k) EXPECT_NE(p.pick_least_loaded()->index, ib) << "a retired node is never picked";
    auto back = p.upsert(b, registered("g1", "m1"));
    EXPECT_EQ(back.first, ib) << "a returning node keeps its index (requests may hold it)";
    EXPECT_TRUE(back.second);
    EXPECT_TRUE(p.member(ib));
}

TEST(NodePool, FilterByModelAndGroupStaticNodesMatchAll) {
    node_pool p(urls({"static"}));
    const size_t m1 = p.upsert(urls({"m1"})[0], registered("g1", "model-1")).first;
    const size_t m2 = p.upsert(urls({"m2"})[0], node_meta{"g2", "model-2", "alias-2", 0}).first;
    p.mark_failure(0);  // only the registered nodes remain usable
    EXPECT_EQ(p.pick_least_loaded({}, {"", "model-1"})->index, m1);
    EXPECT_EQ(p.pick_least_loaded({}, {"", "alias-2"})->index, m2) << "the alias names the model too";
    EXPECT_EQ(p.pick_least_loaded({}, {"g2", ""})->index, m2);
    EXPECT_FALSE(p.pick_least_loaded({}, {"g1", "model-2"}).has_value()) << "a blob of g1 never reaches model-2's node";
    EXPECT_FALSE(p.has_candidates({}, {"g3", ""}));
    EXPECT_TRUE(p.serves("alias-2"));
    EXPECT_FALSE(p.serves("model-3"));
    EXPECT_EQ(p.models(), (std::set<std::string>{"model-1", "model-2"}));
    p.mark_healthy(0);
    EXPECT_TRUE(p.has_candidates({m1, m2}, {"g3", "model-3"})) << "a static node says nothing about itself: it matches";
}

TEST(NodePool, DrainingNodeIsNeverPickedUntilItRejoins) {
    node_pool p(urls({}));
    const auto a = urls({"a"})[0], b = urls({"b"})[0];
    const size_t ia = p.upsert(a, registered("g", "m")).first;
    const size_t ib = p.upsert(b, registered("g", "m")).first;
    p.acquire(ib);
    p.mark_draining(ia);
    for (int k = 0; k < 20; ++k) {
        EXPECT_EQ(p.pick_least_loaded()->index, ib);
        EXPECT_EQ(p.pick_affine(affinity_key("k" + std::to_string(k)))->index, ib);
    }
    EXPECT_EQ(p.n_healthy(), 1u);
    EXPECT_TRUE(p.upsert(a, registered("g", "m")).second) << "a drained node that registers again joins again";
    EXPECT_EQ(p.pick_least_loaded()->index, ia);
}

TEST(RouterAffinity, TokenPromptsGetTheirOwnKeysRegression) {
    // Regression: the key was built from text and chat only, so every token-id prompt had the same key
    // and went to the same decode node.
    openai_request a, b;
    a.input = openai_prompt_tokens{{1, 17, 99, 4}};
    b.input = openai_prompt_tokens{{1, 18, 99, 4}};
    EXPECT_NE(request_affinity_key(a), request_affinity_key(b));
    EXPECT_NE(request_affinity_key(a), request_affinity_key(openai_request{}));
    openai_request chat1, chat2;
    chat1.input = openai_chat{.messages = {{"user", "hi"}}};
    chat2.input = openai_chat{.messages = {{"user", "hi"}, {"assistant", "hello"}}};
    EXPECT_NE(request_affinity_key(chat1), request_affinity_key(a));
    EXPECT_EQ(request_affinity_key(chat2), affinity_key("user:hi\nassistant:hello\n"));
}

// KV-aware routing: the node holding the most of the prompt wins within the load cap; among nodes holding the same
// (a preamble every node holds, or nothing) the least loaded wins, not the one the shared leading bytes hash to;
// without the index the rendezvous rule is unchanged.
TEST(NodePool, CachedPrefixWinsAndTiesGoToTheLeastLoaded) {
    node_pool p(urls({"a", "b", "c"}), 4);
    const uint64_t key = affinity_key("the shared preamble of every tenant");
    const size_t home = p.pick_affine(key)->index;
    // Load the home node by one: with the index consulted and every node tied, another node takes the request.
    auto held = p.acquire_affine(key);
    ASSERT_EQ(held->index, home);
    const std::vector<uint32_t> tied = {128, 128, 128};
    const size_t spread = p.acquire_affine(key, {}, {}, tied)->index;
    EXPECT_NE(spread, home) << "a tie must go to a less loaded node";
    // Without the index, affinity keeps the key on its home node (within the load cap).
    EXPECT_EQ(p.pick_affine(key)->index, home);
    // The node holding the most wins even when loaded (within the cap).
    std::vector<uint32_t> one(3, 64);
    one[home] = 2048;
    EXPECT_EQ(p.acquire_affine(key, {}, {}, one)->index, home);
}

TEST(NodePool, AffinityKeyUsesOnlyThePrefix) {
    const std::string base(300, 'x');
    EXPECT_EQ(affinity_key(base + "turn 2"), affinity_key(base + "turn 3"));
    EXPECT_NE(affinity_key("a" + base), affinity_key("b" + base));
}

}  // namespace
}  // namespace baton
