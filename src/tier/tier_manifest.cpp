// tier_manifest.cpp — a tier entry's manifest: cut and hash an entry, write the manifest, parse it totally
// with a bounded cursor (every count checked against the bytes that remain, sums without overflow).
#include "tier_manifest.h"

#include <xxhash.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

#include "baton/base/byte_cursor.h"
#include "tier_format.h"

namespace baton {
namespace {

namespace tf = tier_format;

Status corrupt(std::string message) { return Status(status_code::corrupt, "tier manifest: " + std::move(message)); }

std::string hex64(uint64_t v) {
    char buf[19];
    std::snprintf(buf, sizeof buf, "0x%016" PRIx64, v);
    return buf;
}

}  // namespace

void tier_entry_hash::state_deleter::operator()(XXH3_state_s * s) const { XXH3_freeState(s); }

tier_entry_hash::tier_entry_hash() : whole_(XXH3_createState()), part_(XXH3_createState()) {
    if (!whole_ || !part_) throw std::bad_alloc();
    XXH3_128bits_reset(whole_.get());
}

tier_entry_hash::~tier_entry_hash() = default;

uint64_t tier_entry_hash::add_part(std::span<const uint8_t> part, std::vector<uint8_t> * out) {
    XXH3_64bits_reset(part_.get());
    for (size_t off = 0; off < part.size(); off += k_chunk_bytes) {
        const std::span<const uint8_t> chunk = part.subspan(off, std::min(k_chunk_bytes, part.size() - off));
        XXH3_64bits_update(part_.get(), chunk.data(), chunk.size());
        XXH3_128bits_update(whole_.get(), chunk.data(), chunk.size());
        if (out) out->insert(out->end(), chunk.begin(), chunk.end());
    }
    return XXH3_64bits_digest(part_.get());
}

std::array<uint8_t, 16> tier_entry_hash::entry_digest() const {
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits_digest(whole_.get()));
    std::array<uint8_t, 16> out;
    std::memcpy(out.data(), c.digest, out.size());
    return out;
}

tier_manifest tier_manifest_describe(std::span<const uint8_t> entry, uint64_t part_bytes) {
    tier_manifest m;
    m.total_bytes = entry.size();
    tier_entry_hash hash;
    for (size_t off = 0; off < entry.size();) {
        const size_t n = size_t(std::min<uint64_t>(part_bytes, entry.size() - off));
        m.parts.push_back({n, hash.add_part(entry.subspan(off, n))});
        off += n;
    }
    m.entry_xxh3 = hash.entry_digest();
    return m;
}

std::vector<uint8_t> tier_manifest_write(const tier_manifest & m) {
    std::vector<uint8_t> out(tf::k_header_bytes + tf::k_part_entry_bytes * m.parts.size() + tf::k_trailer_bytes);
    uint8_t * p = out.data();
    std::memcpy(p + tf::k_off_magic, tf::k_magic, sizeof tf::k_magic);
    le_store_u16(p + tf::k_off_version, tf::k_version);
    le_store_u16(p + tf::k_off_reserved, 0);
    le_store_u32(p + tf::k_off_n_parts, uint32_t(m.parts.size()));
    le_store_u64(p + tf::k_off_total_bytes, m.total_bytes);
    std::memcpy(p + tf::k_off_entry_xxh3, m.entry_xxh3.data(), m.entry_xxh3.size());
    uint8_t * q = p + tf::k_header_bytes;
    for (const tier_manifest_part & part : m.parts) {
        le_store_u64(q, part.size);
        le_store_u64(q + 8, part.xxh3);
        q += tf::k_part_entry_bytes;
    }
    le_store_u64(q, XXH3_64bits(p, size_t(q - p)));
    return out;
}

Result<tier_manifest> tier_manifest_parse(std::span<const uint8_t> bytes, uint64_t entry_bytes_max) {
    byte_cursor cur(bytes);
    std::span<const uint8_t> magic;
    if (!cur.read_bytes(sizeof tf::k_magic, magic))
        return corrupt("length " + num(bytes.size()) + " < " + num(tf::k_header_bytes + tf::k_trailer_bytes) +
                       " (header and trailer)");
    if (std::memcmp(magic.data(), tf::k_magic, sizeof tf::k_magic) != 0)
        return corrupt("magic: expected \"BATNTIER\", found " + hex64(byte_cursor::load_u64(magic.data())) + at(0));
    uint16_t version = 0, reserved = 0;
    uint32_t n_parts = 0;
    uint64_t total_bytes = 0;
    std::span<const uint8_t> entry_xxh3;
    if (!cur.read_u16(version) || !cur.read_u16(reserved) || !cur.read_u32(n_parts) || !cur.read_u64(total_bytes) ||
        !cur.read_bytes(16, entry_xxh3) || cur.remaining() < tf::k_trailer_bytes)
        return corrupt("length " + num(bytes.size()) + " < " + num(tf::k_header_bytes + tf::k_trailer_bytes) +
                       " (header and trailer)");
    if (version != tf::k_version)
        return Status(status_code::unsupported, "tier manifest: version " + num(version) + " (this build reads " +
                                                    num(tf::k_version) + ")" + at(tf::k_off_version));
    if (reserved != 0) return corrupt("reserved " + num(reserved) + " != 0" + at(tf::k_off_reserved));
    if (n_parts > tf::k_parts_max)
        return corrupt("n_parts " + num(n_parts) + " > " + num(tf::k_parts_max) + at(tf::k_off_n_parts));
    // The table's room, from what remains (never by multiplying into a position): exactly n_parts entries and
    // the trailer, nothing after it.
    const size_t table_bytes = cur.remaining() - tf::k_trailer_bytes;
    if (table_bytes % tf::k_part_entry_bytes != 0 || table_bytes / tf::k_part_entry_bytes != n_parts)
        return corrupt("n_parts " + num(n_parts) + " but " + num(table_bytes) +
                       " bytes between header and trailer (16 per part)" + at(tf::k_off_n_parts));
    const size_t covered = bytes.size() - tf::k_trailer_bytes;
    const uint64_t stored = byte_cursor::load_u64(bytes.data() + covered);
    const uint64_t computed = XXH3_64bits(bytes.data(), covered);
    if (stored != computed)
        return corrupt("manifest_xxh3: stored " + hex64(stored) + ", computed " + hex64(computed) + at(covered));
    if (total_bytes > entry_bytes_max)
        return corrupt("total_bytes " + num(total_bytes) + " > entry_bytes_max " + num(entry_bytes_max) +
                       at(tf::k_off_total_bytes));

    tier_manifest m;
    m.total_bytes = total_bytes;
    std::memcpy(m.entry_xxh3.data(), entry_xxh3.data(), m.entry_xxh3.size());
    m.parts.reserve(n_parts);
    uint64_t left = total_bytes;  // what the parts not yet read must add up to
    for (uint32_t i = 0; i < n_parts; ++i) {
        const uint64_t off = cur.offset();
        tier_manifest_part part;
        if (!cur.read_u64(part.size) || !cur.read_u64(part.xxh3))
            return corrupt("part " + num(i) + ": truncated" + at(off));  // unreachable: the room was checked
        if (part.size == 0 || part.size > tf::k_part_bytes_max)
            return corrupt("part " + num(i) + ": size " + num(part.size) + " outside [1, " + num(tf::k_part_bytes_max) +
                           "]" + at(off));
        if (part.size > left)
            return corrupt("part " + num(i) + ": size " + num(part.size) + " > the " + num(left) +
                           " bytes of total_bytes " + num(total_bytes) + " left" + at(off));
        left -= part.size;
        m.parts.push_back(part);
    }
    if (left != 0)
        return corrupt("total_bytes " + num(total_bytes) + " but the parts hold " + num(total_bytes - left) +
                       at(tf::k_off_total_bytes));
    return m;
}

std::string tier_part_key_name(std::string_view entry_key, size_t index, uint64_t xxh3) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016" PRIx64, xxh3);
    return std::string(entry_key) + ":p" + std::to_string(index) + ":" + buf;
}

}  // namespace baton
