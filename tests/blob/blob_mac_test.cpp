// blob_mac_test.cpp — authenticated blobs: the mac section, the cluster secret, rotation, and every way a
// blob without the right MAC is refused before any section is parsed.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "baton/blob.h"
#include "blob_format.h"
#include "blob_test_util.h"

namespace baton {
namespace {

using namespace blob_test;

blob_key_ptr key_of(std::vector<std::string> secrets) {
    auto k = blob_key::make(std::move(secrets));
    EXPECT_TRUE(k.ok()) << k.status().to_string();
    return k.ok() ? k.value() : nullptr;
}

const std::string k_secret_a = "0123456789abcdef0123456789abcdef";
const std::string k_secret_b = "fedcba9876543210fedcba9876543210";

std::vector<uint8_t> signed_blob(const blob_key & key, bool with_optional = true) {
    synthetic s(with_optional);
    blob_buffer_sink sink;
    EXPECT_TRUE(blob_write(s.parts, sink, &key).ok());
    return sink.bytes();
}

blob_limits with_key(blob_key_ptr k) {
    blob_limits l;
    l.key = std::move(k);
    return l;
}

TEST(BlobMac, ASignedBlobParsesWithTheKeyAndWithout) {
    auto key = key_of({k_secret_a});
    const auto b = signed_blob(*key);
    auto v = blob_parse(b, with_key(key));
    ASSERT_TRUE(v.ok()) << v.status().to_string();
    EXPECT_EQ(v->version_minor, 1);
    EXPECT_TRUE(blob_parse(b).ok());  // a node without a secret reads it (and checks the mac section's form)
    // The signed blob is the unsigned one plus the mac frame: the same sections otherwise.
    synthetic s;
    const auto plain = write_blob(s.parts);
    EXPECT_EQ(b.size(), plain.size() + bf::k_frame_bytes + bf::k_mac_payload_bytes);
    EXPECT_EQ(byte_cursor::load_u32(plain.data() + 8) >> 16, 0u);  // unsigned blobs stay format 1.0
}

TEST(BlobMac, AnUnsignedBlobIsRefusedByANodeWithASecret) {
    synthetic s;
    const Status st = blob_parse(write_blob(s.parts), with_key(key_of({k_secret_a}))).status();
    EXPECT_EQ(st.code(), status_code::unauthenticated);
    EXPECT_CONTAINS(st.message(), "carries no mac section");
}

// The finding: checksums are integrity, not authenticity — a crafted state resealed with fresh XXH3 sums
// passed. With a secret, any change anywhere is refused, whatever the checksums say.
TEST(BlobMacRegression, ResealedCraftedStateIsRefusedBeforeParsing) {
    auto key = key_of({k_secret_a});
    const auto b = signed_blob(*key);
    auto secs = split(b);
    raw_section * state = find(secs, bf::section_type_state);
    ASSERT_NE(state, nullptr);
    state->payload[20] ^= 0x40;
    const auto crafted = assemble(header_flags(b), secs, 1, 1);  // every checksum recomputed
    const Status st = blob_parse(crafted, with_key(key)).status();
    EXPECT_EQ(st.code(), status_code::unauthenticated);
    EXPECT_CONTAINS(st.message(), "does not match");
    EXPECT_TRUE(blob_parse(crafted).ok());  // without the secret only the checksums speak: they pass
}

TEST(BlobMac, EveryByteIsCovered) {
    auto key = key_of({k_secret_a});
    const auto b = signed_blob(*key, false);
    const size_t mac_frame = b.size() - bf::k_frame_bytes - bf::k_mac_payload_bytes;
    for (size_t i = 0; i < mac_frame; i += 7) {
        auto c = b;
        c[i] ^= 0x01;
        const Status st = blob_parse(c, with_key(key)).status();
        ASSERT_FALSE(st.ok()) << "byte " << i;
        // The header checksum speaks first for the header; everything after it is the MAC's.
        if (i >= bf::k_header_bytes) {
            ASSERT_EQ(st.code(), status_code::unauthenticated) << "byte " << i;
        }
    }
}

TEST(BlobMac, AnotherSecretIsNamedByItsKeyId) {
    auto a = key_of({k_secret_a});
    auto b = key_of({k_secret_b});
    const Status st = blob_parse(signed_blob(*a), with_key(b)).status();
    EXPECT_EQ(st.code(), status_code::unauthenticated);
    EXPECT_CONTAINS(st.message(), "made with state secret " + blob_key_id_hex(a->signing_id()));
    EXPECT_CONTAINS(st.message(), "this node holds " + blob_key_id_hex(b->signing_id()));
}

TEST(BlobMac, RotationVerifiesWithEverySecretAndSignsWithTheFirst) {
    auto old_key = key_of({k_secret_a});
    auto rotating = key_of({k_secret_b, k_secret_a});  // new first, old still accepted
    EXPECT_TRUE(blob_parse(signed_blob(*old_key), with_key(rotating)).ok());
    const auto fresh = signed_blob(*rotating);
    EXPECT_TRUE(blob_parse(fresh, with_key(key_of({k_secret_b}))).ok());
    EXPECT_EQ(blob_parse(fresh, with_key(old_key)).status().code(), status_code::unauthenticated);
}

TEST(BlobMac, ForgedMacWithTheRightKeyIdIsRefused) {
    auto key = key_of({k_secret_a});
    auto b = signed_blob(*key);
    b[b.size() - 8 - 1] ^= 0xFF;  // the MAC's last byte (before the frame checksum)
    EXPECT_EQ(blob_parse(b, with_key(key)).status().code(), status_code::unauthenticated);
}

TEST(BlobMac, MacSectionMustBeTheLastFrame) {
    auto key = key_of({k_secret_a});
    auto secs = split(signed_blob(*key));
    ASSERT_EQ(secs.back().type, bf::section_type_mac);
    std::swap(secs[secs.size() - 1], secs[secs.size() - 2]);
    const auto moved = assemble(header_flags(signed_blob(*key)), secs, 1, 1);
    EXPECT_EQ(blob_parse(moved, with_key(key)).status().code(), status_code::unauthenticated);
    const Status st = blob_parse(moved).status();
    EXPECT_EQ(st.code(), status_code::corrupt);
    EXPECT_CONTAINS(st.message(), "mac: not the last frame");
}

TEST(BlobMac, UnknownAlgorithmIsRefused) {
    auto key = key_of({k_secret_a});
    auto secs = split(signed_blob(*key));
    secs.back().payload[0] = 2;
    const auto b = assemble(header_flags(signed_blob(*key)), secs, 1, 1);
    EXPECT_CONTAINS(blob_parse(b, with_key(key)).status().message(), "algorithm 2 is not HMAC-SHA256");
    EXPECT_CONTAINS(blob_parse(b).status().message(), "algorithm 2 is not HMAC-SHA256");
}

TEST(BlobKey, SecretsShorterThanSixteenBytesAreRefused) {
    const Status st = blob_key::make({"short"}).status();
    EXPECT_EQ(st.code(), status_code::invalid_argument);
    EXPECT_CONTAINS(st.message(), "at least 16");
    EXPECT_FALSE(blob_key::make({}).ok());
    EXPECT_FALSE(blob_key::make({k_secret_a, k_secret_a}).ok());
}

TEST(BlobKey, LoadsOneSecretPerLine) {
    const std::string path = ::testing::TempDir() + "/baton-state-secret";
    {
        std::ofstream f(path, std::ios::binary);
        f << k_secret_b << "\r\n\n" << k_secret_a << "\n";
    }
    auto k = blob_key::load_file(path);
    ASSERT_TRUE(k.ok()) << k.status().to_string();
    EXPECT_EQ(k.value()->size(), 2u);
    EXPECT_EQ(k.value()->secret(0), k_secret_b);
    EXPECT_EQ(k.value()->signing_id(), key_of({k_secret_b})->signing_id());
    std::remove(path.c_str());
    EXPECT_EQ(blob_key::load_file(path).status().code(), status_code::io_error);
}

}  // namespace
}  // namespace baton
