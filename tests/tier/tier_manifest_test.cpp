// tier_manifest_test.cpp — the tier manifest: cut and hash, write -> parse round trips, and one case per
// rejection, made with byte mutators and a resealed checksum, asserting the code and the message.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstring>
#include <numeric>

#include "baton/base/byte_cursor.h"
#include "tier_format.h"
#include "tier_manifest.h"

namespace baton {
namespace {

namespace tf = tier_format;

std::vector<uint8_t> entry_bytes(size_t n) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = uint8_t(i * 131 + 7);
    return v;
}

// reseal rewrites the trailer's checksum after a mutation, so the parser reaches the field under test.
void reseal(std::vector<uint8_t> & m) {
    const size_t covered = m.size() - tf::k_trailer_bytes;
    le_store_u64(m.data() + covered, XXH3_64bits(m.data(), covered));
}

std::vector<uint8_t> three_part_manifest() {
    const auto e = entry_bytes(2500);
    return tier_manifest_write(tier_manifest_describe(e, 1000));
}

void expect_corrupt(const std::vector<uint8_t> & m, const std::string & needle, uint64_t max = 1 << 20) {
    auto r = tier_manifest_parse(m, max);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), status_code::corrupt) << r.status().to_string();
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
}

TEST(TierManifest, DescribeCutsAtPartBytesAndHashesEachPart) {
    const auto e = entry_bytes(2500);
    const tier_manifest m = tier_manifest_describe(e, 1000);
    ASSERT_EQ(m.parts.size(), 3u);
    EXPECT_EQ(m.parts[0].size, 1000u);
    EXPECT_EQ(m.parts[2].size, 500u);
    EXPECT_EQ(m.parts[1].xxh3, XXH3_64bits(e.data() + 1000, 1000));
    EXPECT_EQ(m.total_bytes, 2500u);
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(e.data(), e.size()));
    EXPECT_EQ(std::memcmp(c.digest, m.entry_xxh3.data(), 16), 0);
}

// The hashes are fed in chunks (tier_entry_hash): parts that span several chunks, and a chunk boundary inside a
// part, hash exactly as the one-shot functions do, and add_part with an output copies the part byte for byte.
TEST(TierManifest, EntryHashInChunksEqualsOneShotHashes) {
    const size_t chunk = tier_entry_hash::k_chunk_bytes, part = chunk + chunk / 2 + 3;
    const auto e = entry_bytes(2 * part + chunk / 3);
    const tier_manifest m = tier_manifest_describe(e, part);
    ASSERT_EQ(m.parts.size(), 3u);
    tier_entry_hash hash;
    std::vector<uint8_t> out;
    for (size_t i = 0, off = 0; i < m.parts.size(); off += m.parts[i].size, ++i) {
        const uint64_t one_shot = XXH3_64bits(e.data() + off, size_t(m.parts[i].size));
        EXPECT_EQ(m.parts[i].xxh3, one_shot) << "part " << i;
        EXPECT_EQ(hash.add_part(std::span<const uint8_t>(e).subspan(off, size_t(m.parts[i].size)), &out), one_shot);
    }
    EXPECT_EQ(out, e);
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(e.data(), e.size()));
    EXPECT_EQ(std::memcmp(c.digest, m.entry_xxh3.data(), 16), 0);
    EXPECT_EQ(hash.entry_digest(), m.entry_xxh3);
    XXH128_canonicalFromHash(&c, XXH3_128bits(nullptr, 0));
    EXPECT_EQ(std::memcmp(c.digest, tier_entry_hash().entry_digest().data(), 16), 0);
}

TEST(TierManifest, WriteParseRoundTrip) {
    const auto e = entry_bytes(2500);
    const tier_manifest m = tier_manifest_describe(e, 1000);
    const auto bytes = tier_manifest_write(m);
    EXPECT_EQ(bytes.size(), tf::k_header_bytes + 3 * tf::k_part_entry_bytes + tf::k_trailer_bytes);
    EXPECT_EQ(std::memcmp(bytes.data(), "BATNTIER", 8), 0);
    auto r = tier_manifest_parse(bytes, 2500);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r.value(), m);
}

TEST(TierManifest, EmptyEntryHasNoParts) {
    const tier_manifest m = tier_manifest_describe({}, 1000);
    EXPECT_TRUE(m.parts.empty());
    auto r = tier_manifest_parse(tier_manifest_write(m), 0);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r.value(), m);
}

TEST(TierManifest, EveryTruncationIsRefused) {
    const auto m = three_part_manifest();
    for (size_t n = 0; n < m.size(); ++n) {
        std::vector<uint8_t> t(m.begin(), m.begin() + ptrdiff_t(n));
        auto r = tier_manifest_parse(t, 1 << 20);
        ASSERT_FALSE(r.ok()) << "a manifest cut to " << n << " bytes parsed";
        EXPECT_EQ(r.status().code(), status_code::corrupt);
    }
}

TEST(TierManifest, TrailingBytesAreRefused) {
    auto m = three_part_manifest();
    m.insert(m.end(), 16, 0);  // room for one more part entry than n_parts says
    reseal(m);
    expect_corrupt(m, "n_parts 3 but 64 bytes between header and trailer");
}

TEST(TierManifest, BadMagicIsRefused) {
    auto m = three_part_manifest();
    m[0] = 'X';
    expect_corrupt(m, "magic: expected \"BATNTIER\"");
}

TEST(TierManifest, AnotherVersionIsUnsupported) {
    auto m = three_part_manifest();
    le_store_u16(m.data() + tf::k_off_version, 2);
    reseal(m);
    auto r = tier_manifest_parse(m, 1 << 20);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), status_code::unsupported);
    EXPECT_NE(r.status().message().find("version 2 (this build reads 1) at +8"), std::string::npos)
        << r.status().message();
}

TEST(TierManifest, NonZeroReservedIsRefused) {
    auto m = three_part_manifest();
    le_store_u16(m.data() + tf::k_off_reserved, 1);
    reseal(m);
    expect_corrupt(m, "reserved 1 != 0 at +10");
}

TEST(TierManifest, TooManyPartsIsRefusedBeforeTheTable) {
    auto m = three_part_manifest();
    le_store_u32(m.data() + tf::k_off_n_parts, tf::k_parts_max + 1);
    reseal(m);
    expect_corrupt(m, "n_parts 65537 > 65536 at +12");
}

TEST(TierManifest, PartCountDisagreeingWithTheTableIsRefused) {
    auto m = three_part_manifest();
    le_store_u32(m.data() + tf::k_off_n_parts, 4);
    reseal(m);
    expect_corrupt(m, "n_parts 4 but 48 bytes between header and trailer");
}

TEST(TierManifest, ChecksumMismatchIsRefused) {
    auto m = three_part_manifest();
    m[tf::k_off_entry_xxh3] ^= 1;  // not resealed
    expect_corrupt(m, "manifest_xxh3: stored");
}

TEST(TierManifest, TotalOverTheLimitIsRefused) {
    const auto m = three_part_manifest();
    expect_corrupt(m, "total_bytes 2500 > entry_bytes_max 2499 at +16", 2499);
}

TEST(TierManifest, EmptyPartIsRefused) {
    auto m = three_part_manifest();
    le_store_u64(m.data() + tf::k_header_bytes + tf::k_part_entry_bytes, 0);  // part 1's size
    reseal(m);
    expect_corrupt(m, "part 1: size 0 outside [1, 536870912] at +56");
}

TEST(TierManifest, PartOverTheLargestStringIsRefused) {
    auto m = three_part_manifest();
    le_store_u64(m.data() + tf::k_header_bytes, tf::k_part_bytes_max + 1);
    reseal(m);
    expect_corrupt(m, "part 0: size 536870913 outside");
}

TEST(TierManifest, PartsAddingUpToMoreThanTotalAreRefused) {
    auto m = three_part_manifest();
    le_store_u64(m.data() + tf::k_header_bytes + 2 * tf::k_part_entry_bytes, 501);  // last part: 500 -> 501
    reseal(m);
    expect_corrupt(m, "part 2: size 501 > the 500 bytes of total_bytes 2500 left at +72");
}

TEST(TierManifest, PartsAddingUpToLessThanTotalAreRefused) {
    auto m = three_part_manifest();
    le_store_u64(m.data() + tf::k_header_bytes + 2 * tf::k_part_entry_bytes, 499);
    reseal(m);
    expect_corrupt(m, "total_bytes 2500 but the parts hold 2499 at +16");
}

TEST(TierManifest, PartKeyNamesIndexAndChecksum) {
    EXPECT_EQ(tier_part_key_name("baton:v1:ab:l:1:0000000000000001", 3, 0xabcdef),
              "baton:v1:ab:l:1:0000000000000001:p3:0000000000abcdef");
}

}  // namespace
}  // namespace baton
