// tier_manifest.h — a tier entry's manifest as a value, its writer and its total parser, and its parts' keys (tier_format.h has
// the layout, docs/tier.md the spec). Private to the tier module; its tests and tier_manifest_fuzz see it.
// Thread-safety: plain functions of their arguments.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "baton/base/status.h"

struct XXH3_state_s;  // xxhash.h's streaming state (XXH3_state_t)

namespace baton {

struct tier_manifest_part {
    uint64_t size = 0;  // bytes
    uint64_t xxh3 = 0;  // XXH3-64 (seed 0) of the part
    bool operator==(const tier_manifest_part &) const = default;
};

struct tier_manifest {
    uint64_t total_bytes = 0;              // the sum of the parts' sizes
    std::array<uint8_t, 16> entry_xxh3{};  // XXH3-128 (seed 0) of the whole entry, canonical big-endian
    std::vector<tier_manifest_part> parts;
    bool operator==(const tier_manifest &) const = default;
};

// tier_entry_hash: an entry's XXH3-128 built part by part, each part's XXH3-64 computed in the same pass. A part
// goes through in chunks of k_chunk_bytes: each chunk feeds both hashes and, when asked, is copied out while it is
// still in cache. One read of every byte from memory instead of one pass per hash and one for the copy (at 128 MiB
// the three passes cost ~25% more on the benchmark machine; bench/tier_bench.cpp).
// Thread-safety: one owner.
class tier_entry_hash {
  public:
    static constexpr size_t k_chunk_bytes = size_t(16) << 10;

    tier_entry_hash();
    ~tier_entry_hash();
    tier_entry_hash(const tier_entry_hash &) = delete;
    tier_entry_hash & operator=(const tier_entry_hash &) = delete;

    // add_part feeds part (the entry's next part) to the entry's hash and returns the part's XXH3-64 (seed 0);
    // with out, part is also appended to *out.
    uint64_t add_part(std::span<const uint8_t> part, std::vector<uint8_t> * out = nullptr);
    // entry_digest: the XXH3-128 (seed 0) of every part added so far, in order, canonical big-endian.
    std::array<uint8_t, 16> entry_digest() const;

  private:
    struct state_deleter {
        void operator()(XXH3_state_s * s) const;
    };
    std::unique_ptr<XXH3_state_s, state_deleter> whole_, part_;
};

// tier_manifest_describe cuts entry into parts of at most part_bytes and hashes them and the whole.
// REQUIRES: part_bytes >= 1.
tier_manifest tier_manifest_describe(std::span<const uint8_t> entry, uint64_t part_bytes);

// tier_manifest_write serializes m (version 1). REQUIRES: m.parts.size() <= tier_format::k_parts_max.
std::vector<uint8_t> tier_manifest_write(const tier_manifest & m);

// tier_manifest_parse validates every field of untrusted bytes: corrupt (naming the field, the offset and
// both values) for a bad magic, reserved field, length, checksum, part size or sum, or total_bytes over
// entry_bytes_max; unsupported for another version.
Result<tier_manifest> tier_manifest_parse(std::span<const uint8_t> bytes, uint64_t entry_bytes_max);

// tier_part_key_name: the key of part index of the entry whose key is entry_key ("<entry_key>:p<index>:<xxh3 as
// 16 lowercase hex digits>").
std::string tier_part_key_name(std::string_view entry_key, size_t index, uint64_t xxh3);

}  // namespace baton
