// kv_blocks_test.cpp — chained block hashes against their definition (kv_blocks.h): each block's hash is
// XXH3-64 of its little-endian tokens seeded with the previous hash (the chain key for the first), computed
// here directly; a shared prefix shares hashes, a change changes its block and every later one; chain keys
// of different models, layouts or block sizes differ.
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include <xxhash.h>

#include "baton/pd/kv_blocks.h"

namespace baton {
namespace {

std::vector<int32_t> kv_blocks_test_tokens(size_t n, int32_t first = 1) {
    std::vector<int32_t> t(n);
    std::iota(t.begin(), t.end(), first);
    return t;
}

// The definition, with the little-endian bytes written out by hand (no reliance on the host's order).
uint64_t kv_blocks_test_block_hash(const std::vector<int32_t> & tokens, size_t begin, size_t n, uint64_t seed) {
    std::vector<uint8_t> bytes;
    for (size_t i = begin; i < begin + n; i++) {
        const auto u = uint32_t(tokens[i]);
        for (int b = 0; b < 4; b++) bytes.push_back(uint8_t(u >> (8 * b)));
    }
    return XXH3_64bits_withSeed(bytes.data(), bytes.size(), seed);
}

TEST(KvBlocks, EachHashIsXxh3OfItsBlockSeededWithThePreviousHash) {
    const uint32_t bt = 4;
    const uint64_t seed = kv_block_seed("00112233445566778899aabbccddeeff", "f16/unified", bt);
    std::vector<int32_t> tokens = kv_blocks_test_tokens(13);
    tokens[5] = -7;  // a negative id: its two's-complement bytes
    const auto h = kv_block_hashes(tokens, seed, bt);
    ASSERT_EQ(h.size(), 3u);
    EXPECT_EQ(h[0], kv_blocks_test_block_hash(tokens, 0, bt, seed));
    EXPECT_EQ(h[1], kv_blocks_test_block_hash(tokens, 4, bt, h[0]));
    EXPECT_EQ(h[2], kv_blocks_test_block_hash(tokens, 8, bt, h[1]));
}

TEST(KvBlocks, ASharedPrefixGivesEqualLeadingHashesAndAChangeChangesItsBlockAndEveryLaterOne) {
    const uint32_t bt = 8;
    const uint64_t seed = kv_block_seed("fp", "f16/unified", bt);
    const auto a = kv_blocks_test_tokens(8 * 6);
    auto b = a;
    b[8 * 3 + 5] += 1000;  // inside block 3
    const auto ha = kv_block_hashes(a, seed, bt);
    const auto hb = kv_block_hashes(b, seed, bt);
    ASSERT_EQ(ha.size(), 6u);
    ASSERT_EQ(hb.size(), 6u);
    for (size_t i = 0; i < 3; i++) EXPECT_EQ(ha[i], hb[i]) << "block " << i;
    for (size_t i = 3; i < 6; i++) EXPECT_NE(ha[i], hb[i]) << "block " << i;
    // A block equal in isolation but after a different prefix hashes differently: the hash names the prefix.
    auto c = a;
    c[0] += 1;
    const auto hc = kv_block_hashes(c, seed, bt);
    for (size_t i = 0; i < 6; i++) EXPECT_NE(ha[i], hc[i]) << "block " << i;
}

TEST(KvBlocks, APartialLastBlockIsNotHashed) {
    const uint32_t bt = 16;
    const uint64_t seed = kv_block_seed("fp", "f16/unified", bt);
    const auto tokens = kv_blocks_test_tokens(16 * 2 + 15);
    const auto full = kv_block_hashes(std::span(tokens).first(32), seed, bt);
    const auto with_tail = kv_block_hashes(tokens, seed, bt);
    EXPECT_EQ(with_tail, full);
    EXPECT_EQ(with_tail.size(), 2u);
    EXPECT_TRUE(kv_block_hashes(std::span(tokens).first(15), seed, bt).empty());
    EXPECT_TRUE(kv_block_hashes({}, seed, bt).empty());
}

TEST(KvBlocks, ZeroBlockTokensGivesNoHashes) {
    const auto tokens = kv_blocks_test_tokens(64);
    EXPECT_TRUE(kv_block_hashes(tokens, kv_block_seed("fp", "f16/unified", 0), 0).empty());
}

TEST(KvBlocks, TheSeedIsXxh3OfTheLengthPrefixedTriple) {
    std::string bytes("baton-kv-blocks/1\0", 18);
    auto put = [&](uint32_t v) {
        for (int b = 0; b < 4; b++) bytes.push_back(char(uint8_t(v >> (8 * b))));
    };
    put(3);
    bytes += "abc";
    put(11);
    bytes += "f16/unified";
    put(32);
    EXPECT_EQ(kv_block_seed("abc", "f16/unified", 32), XXH3_64bits(bytes.data(), bytes.size()));
}

TEST(KvBlocks, DifferentModelsLayoutsOrBlockSizesNeverShareHashesOfTheSameTokens) {
    const auto tokens = kv_blocks_test_tokens(64);
    struct key {
        const char * fp;
        const char * layout;
        uint32_t bt;
    };
    const key keys[] = {
        {"fp-a", "f16/unified", 16},
        {"fp-b", "f16/unified", 16},
        {"fp-a", "q8_0/unified", 16},
        {"fp-a", "f16/split", 16},
        {"fp-a", "f16/unified", 8},
        {"fp-a", "f16/unified", 32},
        // length-prefixed: moving a byte from one field to the next is another key
        {"fp-af", "16/unified", 16},
    };
    std::set<uint64_t> seeds, hashes;
    size_t n_hashes = 0;
    for (const auto & k : keys) {
        const uint64_t seed = kv_block_seed(k.fp, k.layout, k.bt);
        seeds.insert(seed);
        for (uint64_t h : kv_block_hashes(tokens, seed, k.bt)) {
            hashes.insert(h);
            n_hashes++;
        }
    }
    EXPECT_EQ(seeds.size(), std::size(keys));
    EXPECT_EQ(hashes.size(), n_hashes);
    // The same key twice is the same chain.
    EXPECT_EQ(kv_block_seed("fp-a", "f16/unified", 16), kv_block_seed("fp-a", "f16/unified", 16));
}

}  // namespace
}  // namespace baton
