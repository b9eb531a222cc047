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

// Images (and audio): only registered nodes that say their projector reads them take them; a static node is taken
// on trust.
TEST(NodePool, ImagesGoOnlyToNodesWithAProjector) {
    node_pool p(urls({"static"}));
    node_meta with = registered("g1", "model-1");
    with.vision = true;
    const size_t plain = p.upsert(urls({"plain"})[0], registered("g1", "model-1")).first;
    const size_t vision = p.upsert(urls({"vision"})[0], with).first;
    node_filter images;
    images.vision = true;
    EXPECT_FALSE(p.has_candidates({0, vision}, images)) << "the node without a projector never takes images";
    EXPECT_TRUE(p.has_candidates({0, plain}, images));
    EXPECT_TRUE(p.has_candidates({plain, vision}, images)) << "a static node says nothing about itself: it matches";
    EXPECT_TRUE(p.has_candidates({0, vision}, {})) << "text goes anywhere";
    // Audio: only nodes whose projector reads audio; a node reading both takes a request carrying both.
    node_meta hears = registered("g1", "model-1");
    hears.audio = true;
    const size_t audio = p.upsert(urls({"audio"})[0], hears).first;
    node_filter clips;
    clips.audio = true;
    EXPECT_FALSE(p.has_candidates({0, audio}, clips)) << "only the static node (on trust) and the audio one";
    EXPECT_TRUE(p.has_candidates({0, plain, vision}, clips));
    EXPECT_FALSE(p.has_candidates({0, vision}, images)) << "an audio-only projector takes no images";
    node_filter both = images;
    both.audio = true;
    EXPECT_FALSE(p.has_candidates({0, audio, vision}, both)) << "no registered node reads both";
    node_meta all = with;
    all.audio = true;
    const size_t omni = p.upsert(urls({"omni"})[0], all).first;
    EXPECT_TRUE(p.has_candidates({0, audio, vision}, both));
    EXPECT_FALSE(p.has_candidates({0, audio, vision, omni}, both));
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

// KV-aware routing: the node holding the most of the prompt wins within the load cap, even when it is busier;
// among nodes holding the same the rendezvous rule decides, as without the index.
TEST(NodePool, MostCachedWinsWithinTheLoadCapTiesByAffinity) {
    node_pool p(urls({"a", "b", "c"}), 4);
    const uint64_t key = affinity_key("the shared preamble of every tenant");
    const size_t home = p.pick_affine(key)->index;
    EXPECT_EQ(p.pick_affine(key, {}, {}, std::vector<uint32_t>{128, 128, 128})->index, home);
    std::vector<uint32_t> one(3, 64);
    const size_t other = (home + 1) % 3;
    one[other] = 2048;
    p.acquire(other);
    p.acquire(other);
    EXPECT_EQ(p.acquire_affine(key, {}, {}, one)->index, other);
    for (int i = 0; i < 3; ++i) p.acquire(other);  // now 6 above the others: over the cap
    EXPECT_NE(p.acquire_affine(key, {}, {}, one)->index, other);
}

TEST(RouterAffinity, FrontierKeySeparatesWhatSharesOnlyTheHeldPrefix) {
    std::vector<token_id> a(600, 7), b(600, 7);
    b[300] = 9;  // the same first 300 tokens (a shared preamble), then different
    // Nothing held: the key covers the first 4 blocks (256 tokens), where both agree.
    EXPECT_EQ(frontier_affinity_key(a, 0, 64), frontier_affinity_key(b, 0, 64));
    // 128 held: the key covers through token 383, where they differ.
    EXPECT_NE(frontier_affinity_key(a, 128, 64), frontier_affinity_key(b, 128, 64));
    // The same prompt, longer later (its next request): the same key while the held prefix is the same.
    std::vector<token_id> a2 = a;
    a2.insert(a2.end(), 50, 3);
    EXPECT_EQ(frontier_affinity_key(a, 128, 64), frontier_affinity_key(a2, 128, 64));
    // A prompt shorter than the frontier: all of it.
    EXPECT_EQ(frontier_affinity_key(std::vector<token_id>(10, 1), 64, 64),
              frontier_affinity_key(std::vector<token_id>(10, 1), 0, 64));
}

TEST(NodePool, AffinityKeyUsesOnlyThePrefix) {
    const std::string base(300, 'x');
    EXPECT_EQ(affinity_key(base + "turn 2"), affinity_key(base + "turn 3"));
    EXPECT_NE(affinity_key("a" + base), affinity_key("b" + base));
}

}  // namespace
}  // namespace baton
