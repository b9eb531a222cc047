// blob_pack.h — a state blob packed for the wire: lossless compression (Debian's zstd) over byte planes, used
// when a decode node fetches a held state from a prefill node (--state-compress, docs/state-blob.md "Packed
// states"). The blob inside is the same bytes, so everything that checks a blob (format, checksums, MAC, the
// one restore routine) runs unchanged after blob_unpack.
//
// Why byte planes: a state is mostly 2-byte (f16) and 4-byte (f32) numbers. Their high bytes (sign, exponent)
// repeat far more than their low bytes (mantissa), but interleaved they hide that from a compressor; grouping
// byte 0 of every 2-byte word, then byte 1 (width 2), puts the repetitive bytes side by side. Width 0 keeps the
// bytes in order.
//
// Packed layout (little-endian, version 1): 24 header bytes then exactly one zstd frame.
//   0  u8[4]  magic "BTNZ"
//   4  u8     version (1)
//   5  u8     byte-plane width (0: none, 2: two planes)
//   6  u16    reserved, 0
//   8  u64    size of the blob (bytes after unpacking)
//   16 u64    XXH3-64 of the blob
//   24 ...    one zstd frame that records its content size (equal to the blob's), holding the planes
// blob_unpack is total over untrusted bytes: every field is checked, the frame must declare its size and fill
// the rest of the input exactly, the size is bounded before anything is allocated, and the result must hash to
// the header's checksum.
// Thread-safety: plain functions over borrowed bytes.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "baton/base/status.h"

namespace baton {

// The HTTP content coding of a packed state (Accept-Encoding / Content-Encoding between nodes).
inline constexpr std::string_view blob_pack_coding = "baton-zstd";
inline constexpr uint8_t blob_pack_version = 1;
inline constexpr size_t blob_pack_header_bytes = 24;
inline constexpr int blob_pack_level_min = 1, blob_pack_level_max = 19;

// blob_pack returns blob packed at zstd level `level` (clamped to [blob_pack_level_min, blob_pack_level_max])
// with byte planes of `width` (0 or 2; anything else is taken as 0). internal only when zstd fails to allocate.
Result<std::vector<uint8_t>> blob_pack(std::span<const uint8_t> blob, int level, uint8_t width = 2);

// blob_unpack returns the blob inside packed. corrupt for a malformed header or frame, a size or checksum that
// does not match; unsupported for another version; too_large when the blob would exceed max_bytes.
Result<std::vector<uint8_t>> blob_unpack(std::span<const uint8_t> packed, uint64_t max_bytes);

// accepts_blob_pack: whether an Accept-Encoding header value lists the packed coding (a comma-separated list;
// "baton-zstd;q=0" refuses it).
bool accepts_blob_pack(std::string_view accept_encoding);

}  // namespace baton
