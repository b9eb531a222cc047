// blob_fuzz.cpp — libFuzzer target for the blob parser.
//
// For any input: blob_parse and blob_walk must return (never crash, hang or touch memory outside the input,
// which ASan/UBSan check) and a failure must carry a message. For an input that parses: the blob must be
// compatible with its own identity and context and incompatible with a different one, and writing it back
// must succeed and re-parse to an identical view, whose own re-write is byte-identical.
// Each input is also run a second time with every checksum recomputed ("resealed"), so mutations reach the
// semantic checks behind the checksums instead of stopping at the first mismatch.
// Packed states (blob_pack.h): every input also goes to blob_unpack, which must return, with a message when
// it fails; what unpacks is checked as a blob, and packing it again must unpack to the same bytes. The seeds
// hold packed blobs (make_seeds: <arch>.packed).
#include <xxhash.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <cstdio>

#include "baton/base/byte_cursor.h"
#include "baton/blob.h"
#include "baton/blob_pack.h"
#include "blob_format.h"

namespace {

using namespace baton;

[[noreturn]] void fail(const char * what, const Status & st = {}) {
    std::fprintf(stderr, "blob_fuzz: %s %s\n", what, st.to_string().c_str());
    std::abort();
}

bool same_bytes(std::span<const uint8_t> a, std::span<const uint8_t> b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

bool same_view(const blob_view & a, const blob_view & b) {
    if (a.identity != b.identity || a.context != b.context) return false;
    if (a.tokens != b.tokens || !same_bytes(a.state, b.state) || a.checkpoints.size() != b.checkpoints.size())
        return false;
    for (size_t i = 0; i < a.checkpoints.size(); ++i) {
        const auto & p = a.checkpoints[i];
        const auto & q = b.checkpoints[i];
        if (p.pos_min != q.pos_min || p.pos_max != q.pos_max || p.n_tokens != q.n_tokens || !same_bytes(p.data, q.data))
            return false;
    }
    if (a.logits.has_value() != b.logits.has_value()) return false;
    if (a.logits &&
        (a.logits->size() != b.logits->size() ||
         (!a.logits->empty() && std::memcmp(a.logits->data(), b.logits->data(), a.logits->size() * 4) != 0)))
        return false;
    return a.request == b.request && a.base_tokens == b.base_tokens && a.base_hash == b.base_hash &&
           a.generation == b.generation;
}

// reseal rewrites the header checksum and the checksum of every frame that can be delimited.
std::vector<uint8_t> reseal(std::span<const uint8_t> in) {
    std::vector<uint8_t> b(in.begin(), in.end());
    const blob_layout l = blob_walk(b);
    if (!l.header_complete) return b;
    le_store_u64(b.data() + blob_format::k_off_header_xxh3, XXH3_64bits(b.data(), blob_format::k_off_header_xxh3));
    for (const auto & s : l.sections)
        if (s.complete) le_store_u64(b.data() + s.offset + blob_format::k_frame_head_bytes + s.length, s.checksum_computed);
    return b;
}

void check_one(std::span<const uint8_t> bytes) {
    blob_limits limits;
    limits.max_bytes = 64u << 20;
    (void)blob_walk(bytes);
    auto r = blob_parse(bytes, limits);
    if (!r.ok()) {
        if (r.status().message().empty()) fail("error without a message");
        return;
    }
    const blob_view & v = r.value();
    kv_layout own = v.context;
    own.n_ctx = 0;  // the per-sequence capacity check is about the node, not the blob
    Status st = blob_check_compatible(v, v.identity, own);
    if (!st.ok()) fail("incompatible with its own identity:", st);
    model_identity other = v.identity;
    other.n_embd ^= 1;
    if (blob_check_compatible(v, other, own).ok()) fail("compatible with a different n_embd");

    blob_buffer_sink first;
    st = blob_write(blob_view_parts(v), first);
    if (!st.ok()) fail("a parsed blob does not write back:", st);
    auto r2 = blob_parse(first.bytes(), limits);
    if (!r2.ok()) fail("a re-written blob does not parse:", r2.status());
    if (!same_view(v, r2.value())) fail("re-parsed blob differs");
    blob_buffer_sink second;
    st = blob_write(blob_view_parts(r2.value()), second);
    if (!st.ok() || second.bytes() != first.bytes()) fail("second re-write is not byte-identical", st);
}

void check_packed(std::span<const uint8_t> bytes) {
    auto u = blob_unpack(bytes, 64u << 20);
    if (!u.ok()) {
        if (u.status().message().empty()) fail("unpack error without a message");
        return;
    }
    check_one(u.value());
    for (uint8_t width : {uint8_t(0), uint8_t(2)}) {
        auto again = blob_pack(u.value(), 1, width);
        if (!again.ok()) fail("an unpacked state does not pack:", again.status());
        auto back = blob_unpack(again.value(), 64u << 20);
        if (!back.ok() || back.value() != u.value()) fail("a re-packed state does not unpack to the same bytes");
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    check_packed({data, size});
    check_one({data, size});
    const std::vector<uint8_t> sealed = reseal({data, size});
    check_one(sealed);
    return 0;
}
