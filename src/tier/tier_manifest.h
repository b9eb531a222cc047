// tier_manifest.h — a tier entry's manifest as a value, its writer and its total parser, and its parts' keys (tier_format.h has
// the layout, docs/tier.md the spec). Private to the tier module; its tests and tier_manifest_fuzz see it.
// Thread-safety: plain functions of their arguments.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "baton/base/status.h"

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
