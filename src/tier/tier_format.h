// tier_format.h — the wire layout of a tier entry's manifest, shared by its writer and its parser
// (tier_manifest.cpp), and the key scheme of docs/tier.md.
//
// An entry is stored as parts (each at most tier_config::part_bytes) under part keys, then a manifest under
// the entry key, written last: a reader that finds the manifest finds every part it names, or a part that
// expired, was evicted or was damaged, which the manifest's sizes and checksums reveal. All integers are
// little-endian, written and read byte by byte. Change the layout only with a version bump (the key scheme's
// "v1" names the whole scheme: parts, manifest and keys).
//
// Manifest header (40 bytes, at +0)
// | off | width | field        | meaning                                                  | since | why                                          |
// |-----|-------|--------------|----------------------------------------------------------|-------|----------------------------------------------|
// |   0 |     8 | magic        | "BATNTIER"                                               | 1     | refuse a value that is no manifest at once   |
// |   8 |     2 | version      | u16 LE, 1                                                | 1     | a newer writer's manifest is refused, named  |
// |  10 |     2 | reserved     | u16 LE, 0                                                | 1     | room for flags; a non-zero value is refused  |
// |  12 |     4 | n_parts      | u32 LE, part entries that follow (0 for an empty entry)  | 1     | bounds the table before it is read           |
// |  16 |     8 | total_bytes  | u64 LE, the entry's size: the sum of the parts' sizes    | 1     | the reader sizes its buffer once, and checks |
// |  24 |    16 | entry_xxh3   | XXH3-128 (seed 0) of the whole entry, canonical big-endian| 1    | the parts in the wrong order or mixed across  |
// |     |       |              |                                                          |       | two writes of one key are caught             |
//
// Part entry (16 bytes, n_parts of them, from +40; part i is stored under "<entry key>:p<i>:<xxh3 hex>")
// | off | width | field  | meaning                                   | since | why                                                |
// |-----|-------|--------|-------------------------------------------|-------|----------------------------------------------------|
// |   0 |     8 | size   | u64 LE, the part's bytes (>= 1)           | 1     | a truncated or overwritten part is caught unread   |
// |   8 |     8 | xxh3   | u64 LE, XXH3-64 (seed 0) of the part      | 1     | names the part's key; damage is caught per part    |
//
// Trailer (8 bytes, at +40 + 16 * n_parts: the manifest's last bytes; nothing may follow)
// | off | width | field         | meaning                                                   | since | why                                   |
// |-----|-------|---------------|-----------------------------------------------------------|-------|---------------------------------------|
// |   0 |     8 | manifest_xxh3 | u64 LE, XXH3-64 (seed 0) of the manifest's bytes before it | 1     | the sizes above are trusted after it  |
#pragma once

#include <cstddef>
#include <cstdint>

namespace baton::tier_format {

inline constexpr uint8_t k_magic[8] = {'B', 'A', 'T', 'N', 'T', 'I', 'E', 'R'};
inline constexpr uint16_t k_version = 1;

inline constexpr size_t k_off_magic = 0;
inline constexpr size_t k_off_version = 8;
inline constexpr size_t k_off_reserved = 10;
inline constexpr size_t k_off_n_parts = 12;
inline constexpr size_t k_off_total_bytes = 16;
inline constexpr size_t k_off_entry_xxh3 = 24;
inline constexpr size_t k_header_bytes = 40;
inline constexpr size_t k_part_entry_bytes = 16;
inline constexpr size_t k_trailer_bytes = 8;

// k_parts_max bounds n_parts (a 4 MiB part size makes that 256 GiB); the table is then at most 1 MiB.
inline constexpr uint32_t k_parts_max = 65536;
// k_part_bytes_max: Valkey's largest string (proto-max-bulk-len's default, 512 MiB).
inline constexpr uint64_t k_part_bytes_max = uint64_t(512) << 20;

// Keys: "baton:v1:<fingerprint>:<layout>:<state version>:<chain hash, 16 hex>" for the manifest, and that
// plus ":p<index>:<part xxh3, 16 hex>" for a part.
inline constexpr const char * k_key_prefix = "baton:v1:";
inline constexpr size_t k_fingerprint_chars_max = 64;
inline constexpr size_t k_layout_chars_max = 128;

}  // namespace baton::tier_format
