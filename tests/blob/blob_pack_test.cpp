// blob_pack_test.cpp — packed states (blob_pack.h): round trips of every size and width, what byte planes buy on
// f16-like data, and one test per way a packed state can be wrong.
#include "baton/blob_pack.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <cmath>
#include <cstring>
#include <random>

namespace baton {
namespace {

std::vector<uint8_t> noise(size_t n, uint32_t seed) {
    std::mt19937 g(seed);
    std::vector<uint8_t> v(n);
    for (auto & b : v) b = uint8_t(g());
    return v;
}

// f16 values of a normal distribution: random mantissas, a few distinct exponents — the shape of a KV cache.
std::vector<uint8_t> f16_like(size_t n_values, uint32_t seed) {
    std::mt19937 g(seed);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<uint8_t> v(n_values * 2);
    for (size_t i = 0; i < n_values; ++i) {
        const float x = d(g);
        // f16 by hand: sign, 5-bit exponent, 10-bit mantissa (values here are normal and in range)
        uint32_t bits;
        std::memcpy(&bits, &x, 4);
        const uint32_t sign = bits >> 31;
        int exp = int((bits >> 23) & 0xff) - 127 + 15;
        uint32_t mant = (bits >> 13) & 0x3ff;
        if (exp <= 0) exp = 0, mant = 0;
        if (exp >= 31) exp = 30;
        const uint16_t h = uint16_t((sign << 15) | (uint32_t(exp) << 10) | mant);
        v[2 * i] = uint8_t(h);
        v[2 * i + 1] = uint8_t(h >> 8);
    }
    return v;
}

std::vector<uint8_t> packed_of(std::span<const uint8_t> b, int level = 1, uint8_t width = 2) {
    auto p = blob_pack(b, level, width);
    EXPECT_TRUE(p.ok()) << p.status().to_string();
    return p.ok() ? p.value() : std::vector<uint8_t>{};
}

TEST(BlobPack, RoundTripsEverySizeAndWidth) {
    for (size_t n : {size_t(0), size_t(1), size_t(2), size_t(3), size_t(1000), size_t(65537)})
        for (uint8_t width : {uint8_t(0), uint8_t(2)}) {
            const auto b = noise(n, uint32_t(n) + width);
            const auto p = packed_of(b, 3, width);
            ASSERT_GE(p.size(), blob_pack_header_bytes);
            EXPECT_EQ(p[5], width);
            auto u = blob_unpack(p, n);  // the limit is inclusive
            ASSERT_TRUE(u.ok()) << n << " " << int(width) << ": " << u.status().to_string();
            EXPECT_EQ(u.value(), b) << n << " " << int(width);
        }
    // A width other than 0 or 2 is taken as 0; levels are clamped.
    const auto b = noise(100, 9);
    const auto p = packed_of(b, 99, 7);
    EXPECT_EQ(p[5], 0);
    EXPECT_EQ(blob_unpack(p, 100).value(), b);
}

TEST(BlobPack, BytePlanesShrinkF16DataMoreThanInterleavedBytes) {
    // Large enough that zstd's blocks (128 KiB) each lie in one plane and get its own entropy table.
    const auto b = f16_like(1 << 19, 4);
    const size_t plain = packed_of(b, 3, 0).size(), planes = packed_of(b, 3, 2).size();
    EXPECT_LT(planes, plain) << "byte planes should help f16 data";
    EXPECT_LT(planes, b.size()) << "f16 data should compress at all";
    // Random bytes do not compress: the packed form is at most a little larger (zstd stores them raw).
    const auto r = noise(1 << 16, 5);
    EXPECT_LT(packed_of(r).size(), r.size() + 256);
}

// Each way a packed state can be wrong is refused with a reason, never a crash.
class BlobPackRefuses : public ::testing::Test {
  protected:
    std::vector<uint8_t> blob = f16_like(4096, 7);
    std::vector<uint8_t> good = packed_of(blob);
    static std::string why(const Result<std::vector<uint8_t>> & r) { return r.ok() ? "ok" : r.status().to_string(); }
};

TEST_F(BlobPackRefuses, ShorterThanTheHeader) {
    for (size_t n : {size_t(0), size_t(4), blob_pack_header_bytes - 1}) {
        auto r = blob_unpack(std::span(good).first(n), 1 << 20);
        EXPECT_EQ(r.status().code(), status_code::corrupt) << why(r);
    }
}

TEST_F(BlobPackRefuses, BadMagic) {
    good[0] = 'X';
    EXPECT_NE(why(blob_unpack(good, 1 << 20)).find("bad magic"), std::string::npos);
}

TEST_F(BlobPackRefuses, AnotherVersion) {
    good[4] = 2;
    EXPECT_EQ(blob_unpack(good, 1 << 20).status().code(), status_code::unsupported);
}

TEST_F(BlobPackRefuses, AnUnknownWidthOrReservedBytes) {
    auto w = good;
    w[5] = 4;
    EXPECT_NE(why(blob_unpack(w, 1 << 20)).find("byte-plane width 4"), std::string::npos);
    auto r = good;
    r[7] = 1;
    EXPECT_NE(why(blob_unpack(r, 1 << 20)).find("reserved"), std::string::npos);
}

TEST_F(BlobPackRefuses, ABlobOverTheLimitBeforeAllocating) {
    auto r = blob_unpack(good, blob.size() - 1);
    EXPECT_EQ(r.status().code(), status_code::too_large) << why(r);
    // A header that claims 2^60 bytes is refused by its size, not by an allocation.
    auto big = good;
    for (int i = 8; i < 16; ++i) big[size_t(i)] = 0;
    big[15] = 0x10;
    EXPECT_EQ(blob_unpack(big, 1 << 20).status().code(), status_code::too_large);
}

TEST_F(BlobPackRefuses, AHeaderSizeTheFrameDoesNotHold) {
    auto r = good;
    r[8] ^= 1;  // the size, off by one
    EXPECT_NE(why(blob_unpack(r, 1 << 20)).find("the header says"), std::string::npos);
}

TEST_F(BlobPackRefuses, ATruncatedFrameOrBytesAfterIt) {
    auto cut = blob_unpack(std::span(good).first(good.size() - 1), 1 << 20);
    EXPECT_EQ(cut.status().code(), status_code::corrupt) << why(cut);
    auto longer = good;
    longer.push_back(0);
    EXPECT_NE(why(blob_unpack(longer, 1 << 20)).find("after its zstd frame"), std::string::npos);
    // Two frames: the first fills the size, the second is trailing bytes.
    auto two = good;
    two.insert(two.end(), good.begin() + blob_pack_header_bytes, good.end());
    EXPECT_NE(why(blob_unpack(two, 1 << 20)).find("after its zstd frame"), std::string::npos);
}

TEST_F(BlobPackRefuses, NotAZstdFrame) {
    auto r = good;
    r[blob_pack_header_bytes] ^= 0xff;  // the frame's magic
    EXPECT_NE(why(blob_unpack(r, 1 << 20)).find("not a zstd frame"), std::string::npos);
}

TEST_F(BlobPackRefuses, ADamagedFrameOrChecksum) {
    // Every byte of the compressed body flipped in turn (a stride): each is refused as corrupt, none crashes
    // or comes back as other bytes.
    for (size_t at = blob_pack_header_bytes + 6; at < good.size(); at += 7) {
        auto r = good;
        r[at] ^= 0x5a;
        auto u = blob_unpack(r, 1 << 20);
        if (u.ok()) {
            EXPECT_EQ(u.value(), blob) << "a damaged frame unpacked to other bytes at " << at;
        } else {
            EXPECT_EQ(u.status().code(), status_code::corrupt) << at << ": " << why(u);
        }
    }
    auto sum = good;
    sum[16] ^= 1;
    EXPECT_NE(why(blob_unpack(sum, 1 << 20)).find("checksum mismatch"), std::string::npos);
}

TEST(BlobPackCoding, AcceptEncodingListsAndRefusals) {
    EXPECT_TRUE(accepts_blob_pack("baton-zstd"));
    EXPECT_TRUE(accepts_blob_pack("gzip, BATON-ZSTD;q=0.5"));
    EXPECT_TRUE(accepts_blob_pack(" identity ,baton-zstd "));
    EXPECT_FALSE(accepts_blob_pack(""));
    EXPECT_FALSE(accepts_blob_pack("gzip, br"));
    EXPECT_FALSE(accepts_blob_pack("baton-zstd;q=0"));
    EXPECT_FALSE(accepts_blob_pack("baton-zstd;q=0.000"));
    EXPECT_FALSE(accepts_blob_pack("baton-zstdx"));
    EXPECT_FALSE(accepts_blob_pack("zstd"));
}

}  // namespace
}  // namespace baton
