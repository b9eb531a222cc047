// blob_pack.cpp — packed states: byte planes + one zstd frame (include/baton/blob_pack.h has the layout).
#include "baton/blob_pack.h"

#include <xxhash.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <string>

namespace baton {

namespace {

constexpr uint8_t k_pack_magic[4] = {'B', 'T', 'N', 'Z'};

void put_u64(uint8_t * p, uint64_t v) {
    for (int i = 0; i < 8; ++i) p[i] = uint8_t(v >> (8 * i));
}
uint64_t get_u64(const uint8_t * p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t(p[i]) << (8 * i);
    return v;
}

// planes_of: width 2 puts the bytes at even offsets first (ceil(n/2) of them), then the odd ones.
std::vector<uint8_t> planes_of(std::span<const uint8_t> in, uint8_t width) {
    if (width != 2) return {in.begin(), in.end()};
    std::vector<uint8_t> out(in.size());
    const size_t n = in.size(), even = (n + 1) / 2;
    uint8_t * e = out.data();
    uint8_t * o = out.data() + even;
    for (size_t i = 0; i + 1 < n; i += 2) {
        *e++ = in[i];
        *o++ = in[i + 1];
    }
    if (n % 2) *e = in[n - 1];
    return out;
}

// bytes_of: the inverse of planes_of.
std::vector<uint8_t> bytes_of(std::vector<uint8_t> planes, uint8_t width) {
    if (width != 2) return planes;
    std::vector<uint8_t> out(planes.size());
    const size_t n = planes.size(), even = (n + 1) / 2;
    const uint8_t * e = planes.data();
    const uint8_t * o = planes.data() + even;
    for (size_t i = 0; i + 1 < n; i += 2) {
        out[i] = *e++;
        out[i + 1] = *o++;
    }
    if (n % 2) out[n - 1] = *e;
    return out;
}

Status pack_corrupt(const std::string & why) { return Status(status_code::corrupt, "packed state: " + why); }

}  // namespace

Result<std::vector<uint8_t>> blob_pack(std::span<const uint8_t> blob, int level, uint8_t width) {
    if (width != 2) width = 0;
    level = std::clamp(level, blob_pack_level_min, blob_pack_level_max);
    const std::vector<uint8_t> planes = planes_of(blob, width);
    std::vector<uint8_t> out(blob_pack_header_bytes + ZSTD_compressBound(planes.size()));
    std::memcpy(out.data(), k_pack_magic, 4);
    out[4] = blob_pack_version;
    out[5] = width;
    out[6] = out[7] = 0;
    put_u64(out.data() + 8, uint64_t(blob.size()));
    put_u64(out.data() + 16, XXH3_64bits(blob.data(), blob.size()));
    // ZSTD_compress records the content size in the frame header (the unpacker requires it).
    const size_t n = ZSTD_compress(out.data() + blob_pack_header_bytes, out.size() - blob_pack_header_bytes,
                                   planes.data(), planes.size(), level);
    // The bound makes the destination large enough: what is left is zstd failing to allocate its tables.
    if (ZSTD_isError(n))
        return Status(status_code::internal, std::string("packing a state: zstd: ") + ZSTD_getErrorName(n));
    out.resize(blob_pack_header_bytes + n);
    return out;
}

Result<std::vector<uint8_t>> blob_unpack(std::span<const uint8_t> packed, uint64_t max_bytes) {
    if (packed.size() < blob_pack_header_bytes)
        return pack_corrupt(std::to_string(packed.size()) + " bytes, shorter than its " +
                            std::to_string(blob_pack_header_bytes) + "-byte header");
    const uint8_t * h = packed.data();
    if (std::memcmp(h, k_pack_magic, 4) != 0) return pack_corrupt("bad magic (not a packed state)");
    if (h[4] != blob_pack_version)
        return Status(status_code::unsupported, "packed state: version " + std::to_string(h[4]) +
                                                    ", this build reads version " + std::to_string(blob_pack_version));
    const uint8_t width = h[5];
    if (width != 0 && width != 2) return pack_corrupt("byte-plane width " + std::to_string(width) + " (0 or 2)");
    if (h[6] != 0 || h[7] != 0) return pack_corrupt("reserved bytes are not zero");
    const uint64_t size = get_u64(h + 8), want_hash = get_u64(h + 16);
    if (size > max_bytes)
        return Status(status_code::too_large, "packed state: unpacks to " + std::to_string(size) +
                                                  " bytes, over the limit of " + std::to_string(max_bytes));
    const std::span<const uint8_t> frame = packed.subspan(blob_pack_header_bytes);
    const unsigned long long declared = ZSTD_getFrameContentSize(frame.data(), frame.size());
    if (declared == ZSTD_CONTENTSIZE_ERROR) return pack_corrupt("not a zstd frame");
    if (declared == ZSTD_CONTENTSIZE_UNKNOWN) return pack_corrupt("its zstd frame does not record its size");
    if (declared != size)
        return pack_corrupt("its zstd frame holds " + std::to_string(declared) + " bytes, the header says " +
                            std::to_string(size));
    const size_t frame_bytes = ZSTD_findFrameCompressedSize(frame.data(), frame.size());
    if (ZSTD_isError(frame_bytes)) return pack_corrupt(std::string("zstd frame: ") + ZSTD_getErrorName(frame_bytes));
    if (frame_bytes != frame.size())
        return pack_corrupt(std::to_string(frame.size() - frame_bytes) + " bytes after its zstd frame");
    std::vector<uint8_t> planes(static_cast<size_t>(size));
    const size_t got = ZSTD_decompress(planes.data(), planes.size(), frame.data(), frame.size());
    if (ZSTD_isError(got)) return pack_corrupt(std::string("zstd: ") + ZSTD_getErrorName(got));
    if (got != planes.size())
        return pack_corrupt("its zstd frame gave " + std::to_string(got) + " of " + std::to_string(size) + " bytes");
    std::vector<uint8_t> blob = bytes_of(std::move(planes), width);
    if (XXH3_64bits(blob.data(), blob.size()) != want_hash) return pack_corrupt("checksum mismatch after unpacking");
    return blob;
}

bool accepts_blob_pack(std::string_view value) {
    size_t at = 0;
    while (at <= value.size()) {
        size_t end = value.find(',', at);
        if (end == std::string_view::npos) end = value.size();
        std::string_view item = value.substr(at, end - at);
        const auto trim = [](std::string_view s) {
            while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
            while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
            return s;
        };
        std::string_view params;
        if (const size_t semi = item.find(';'); semi != std::string_view::npos) {
            params = trim(item.substr(semi + 1));
            item = item.substr(0, semi);
        }
        item = trim(item);
        if (item.size() == blob_pack_coding.size() &&
            std::equal(item.begin(), item.end(), blob_pack_coding.begin(),
                       [](char a, char b) { return (a >= 'A' && a <= 'Z' ? char(a - 'A' + 'a') : a) == b; })) {
            // q=0 (or 0.0, 0.00, 0.000) refuses the coding (RFC 9110 12.4.2).
            const bool refused = params.size() >= 3 && (params[0] == 'q' || params[0] == 'Q') && params[1] == '=' &&
                                 params.substr(2).find_first_not_of("0.") == std::string_view::npos && params[2] == '0';
            return !refused;
        }
        at = end + 1;
    }
    return false;
}

}  // namespace baton
