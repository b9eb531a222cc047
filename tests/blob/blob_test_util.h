// blob_test_util.h — synthetic blob parts and byte-level mutators for the blob tests.
//
// split/assemble take a blob apart into raw sections and put it back together with correct checksums, so a
// test can corrupt one field behind the checksums (duplicate, drop, resize or retype a section) and check
// that the parser's semantic validation, not just a checksum, catches it.
#pragma once

#include <xxhash.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "baton/base/byte_cursor.h"
#include "baton/blob.h"
#include "blob_format.h"

// EXPECT_CONTAINS(haystack, needle): a non-fatal check that needle occurs in haystack, printing both.
#define EXPECT_CONTAINS(haystack, needle)                                              \
    do {                                                                               \
        const std::string h_ = (haystack), n_ = (needle);                              \
        EXPECT_NE(h_.find(n_), std::string::npos) << "\"" << n_ << "\" not in \"" << h_ << "\""; \
    } while (0)

namespace baton::blob_test {

namespace bf = blob_format;

// synthetic owns the memory blob_parts borrows.
struct synthetic {
    std::vector<int32_t> tokens;
    std::vector<uint8_t> state;
    std::vector<uint8_t> cp0, cp1;
    std::vector<float> logits;
    std::string request = R"({"n_predict":4,"temperature":0})";
    blob_parts parts;

    explicit synthetic(bool with_optional = true) {
        for (int i = 0; i < 10; ++i) tokens.push_back(1 + 7 * i);
        for (int i = 0; i < 1000; ++i) state.push_back(uint8_t(i * 31 + 7));
        cp0.assign(50, 0xA5);
        cp1.assign(70, 0x5A);
        for (int i = 0; i < 100; ++i) logits.push_back(float(i) * 0.25f - 3.0f);
        auto & id = parts.identity;
        for (int i = 0; i < 16; ++i) id.fingerprint[i] = uint8_t(i + 1);
        id.llama_version = "0.7.0";
        id.arch = "llama";
        id.n_layer = 4;
        id.n_embd = 64;
        id.n_vocab = 100;
        parts.context.n_ctx = 256;
        parts.tokens = tokens;
        parts.state = state;
        parts.checkpoints.push_back({0, 3, 4, cp0});
        parts.checkpoints.push_back({7, 7, 8, cp1});
        if (with_optional) {
            parts.logits = logits;
            parts.request = request;
        }
    }
};

inline std::vector<uint8_t> write_blob(const blob_parts & p) {
    blob_buffer_sink sink;
    Status st = blob_write(p, sink);
    if (!st.ok()) return {};
    return sink.bytes();
}

struct raw_section {
    uint32_t type = 0;
    uint32_t flags = 0;
    std::vector<uint8_t> payload;
};

// split returns a valid blob's sections in order.
inline std::vector<raw_section> split(const std::vector<uint8_t> & blob) {
    std::vector<raw_section> out;
    for (const auto & s : blob_walk(blob).sections) {
        const uint8_t * p = blob.data() + s.offset + bf::k_frame_head_bytes;
        out.push_back({s.type, s.flags, std::vector<uint8_t>(p, p + s.length)});
    }
    return out;
}

inline raw_section * find(std::vector<raw_section> & secs, uint32_t type) {
    for (auto & s : secs)
        if (s.type == type) return &s;
    return nullptr;
}

// assemble frames sections behind a header; n_sections defaults to secs.size(); extra is appended after the
// last frame and counted in total_bytes.
inline std::vector<uint8_t> assemble(uint32_t flags, const std::vector<raw_section> & secs, uint16_t major = 1,
                                     uint16_t minor = 0, int64_t n_sections = -1, size_t extra = 0) {
    std::vector<uint8_t> b(bf::k_header_bytes);
    for (const auto & s : secs) {
        const size_t off = b.size();
        b.resize(off + bf::k_frame_head_bytes);
        le_store_u32(b.data() + off, s.type);
        le_store_u32(b.data() + off + 4, s.flags);
        le_store_u64(b.data() + off + 8, s.payload.size());
        b.insert(b.end(), s.payload.begin(), s.payload.end());
        const uint64_t h = XXH3_64bits(b.data() + off, b.size() - off);
        b.resize(b.size() + 8);
        le_store_u64(b.data() + b.size() - 8, h);
    }
    b.resize(b.size() + extra, 0xEE);
    std::memcpy(b.data(), bf::k_magic, 8);
    le_store_u16(b.data() + 8, major);
    le_store_u16(b.data() + 10, minor);
    le_store_u32(b.data() + 12, flags);
    le_store_u32(b.data() + 16, n_sections < 0 ? uint32_t(secs.size()) : uint32_t(n_sections));
    le_store_u64(b.data() + 24, b.size());
    le_store_u64(b.data() + 32, XXH3_64bits(b.data(), 32));
    return b;
}

inline uint32_t header_flags(const std::vector<uint8_t> & blob) { return byte_cursor::load_u32(blob.data() + 12); }

// reseal_header recomputes the header checksum after a test edited header fields.
inline void reseal_header(std::vector<uint8_t> & b) { le_store_u64(b.data() + 32, XXH3_64bits(b.data(), 32)); }

}  // namespace baton::blob_test
