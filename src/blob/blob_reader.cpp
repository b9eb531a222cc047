// blob_reader.cpp — blob_parse (total validation of untrusted bytes) and blob_walk (lenient, for inspect).
//
// blob_parse works in three steps: the header (magic, version, checksum, total size), the frames (each
// bounded by what remains, checksummed, typed; duplicates and unknown mandatory types rejected), then the
// known payloads decoded in dependency order (identity and context before tokens, tokens before everything
// that restates or bounds a token count). Every failure names the section and field, the absolute offset
// ("+N") and the values. The state and checkpoint payloads are views into the input: never copied.
#include <xxhash.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "baton/base/byte_cursor.h"
#include "baton/blob.h"
#include "blob_format.h"
#include "blob_mac.h"
#include "blob_rules.h"

namespace baton {
namespace {

namespace bf = blob_format;

std::string hex64(uint64_t v) {
    char b[24];
    std::snprintf(b, sizeof b, "0x%016" PRIx64, v);
    return b;
}
Status corrupt(const std::string & m) { return Status(status_code::corrupt, m); }

// payload_reader reads one section's fields; failures name "<section>: <field>" and the offset.
class payload_reader {
  public:
    payload_reader(std::string section, std::span<const uint8_t> payload, uint64_t base)
        : section_(std::move(section)), c_(payload, base) {}

    uint64_t offset() const { return c_.offset(); }
    size_t remaining() const { return c_.remaining(); }
    const std::string & section() const { return section_; }

    Status u8(const char * field, uint8_t & v) { return c_.read_u8(v) ? Status() : truncated(field, 1); }
    Status u16(const char * field, uint16_t & v) { return c_.read_u16(v) ? Status() : truncated(field, 2); }
    Status u32(const char * field, uint32_t & v) { return c_.read_u32(v) ? Status() : truncated(field, 4); }
    Status i32(const char * field, int32_t & v) { return c_.read_i32(v) ? Status() : truncated(field, 4); }
    Status u64(const char * field, uint64_t & v) { return c_.read_u64(v) ? Status() : truncated(field, 8); }
    Status bytes(const char * field, uint64_t n, std::span<const uint8_t> & out) {
        if (c_.read_bytes(n, out)) return {};
        return corrupt(section_ + ": " + field + " length " + num(n) + " exceeds the " + num(c_.remaining()) +
                       " bytes remaining" + at(c_.offset()));
    }
    Status zero(const char * field, uint64_t v, uint64_t off) {
        if (v == 0) return {};
        return corrupt(section_ + ": " + field + " " + hex64(v) + " is not 0" + at(off));
    }
    Status done() {
        if (c_.empty()) return {};
        return corrupt(section_ + ": " + num(c_.remaining()) + " trailing bytes after the last field" + at(c_.offset()));
    }
    Status fail(const std::string & what, uint64_t off) const { return corrupt(section_ + ": " + what + at(off)); }

  private:
    Status truncated(const char * field, size_t width) const {
        return corrupt(section_ + ": " + field + " truncated (needs " + num(width) + " bytes, " + num(c_.remaining()) +
                       " remain)" + at(c_.offset()));
    }
    std::string section_;
    byte_cursor c_;
};

struct found_section {
    bool present = false;
    uint64_t frame_offset = 0;
    uint64_t payload_offset = 0;
    std::span<const uint8_t> payload;
};
using found_sections = std::array<found_section, bf::k_section_type_max_known + 1>;

Status read_string(payload_reader & r, const char * len_field, const char * field, std::string & out) {
    const uint64_t off = r.offset();
    uint16_t n = 0;
    BATON_RETURN_IF_ERROR(r.u16(len_field, n));
    // The length alone first: a too-long length must not be read as bytes.
    if (n == 0 || n > bf::k_identity_string_max)
        return r.fail(blob_rules::identity_string(len_field, field, std::string(n, ' ')), off);
    std::span<const uint8_t> s;
    BATON_RETURN_IF_ERROR(r.bytes(field, n, s));
    const std::string_view text(reinterpret_cast<const char *>(s.data()), s.size());
    if (auto m = blob_rules::identity_string(len_field, field, text); !m.empty()) return r.fail(m, off + 2);
    out.assign(text);
    return {};
}

// parse_header checks magic, version, checksum, reserved bits and total size; returns n_sections.
Status parse_header(std::span<const uint8_t> bytes, const blob_limits & limits, blob_view & v, uint32_t & n_sections) {
    const size_t size = bytes.size();
    if (size < sizeof bf::k_magic)
        return corrupt("magic: truncated (blob is " + num(size) + " bytes, header needs " + num(bf::k_header_bytes) + ")" +
                       at(0));
    if (std::memcmp(bytes.data(), bf::k_magic, sizeof bf::k_magic) != 0)
        return corrupt("magic: expected \"BATNBLOB\", found " + hex64(byte_cursor::load_u64(bytes.data())) + at(0));
    byte_cursor c(bytes.subspan(sizeof bf::k_magic), sizeof bf::k_magic);
    uint16_t major = 0, minor = 0;
    if (!c.read_u16(major) || !c.read_u16(minor))
        return corrupt("version: truncated (blob is " + num(size) + " bytes)" + at(bf::k_off_version_major));
    const std::string ours = num(bf::k_version_major) + "." + num(bf::k_version_minor);
    // Checked before the header checksum: a different major may lay the header out differently.
    if (major != bf::k_version_major)
        return Status(status_code::unsupported, "version_major: blob is format " + num(major) + "." + num(minor) +
                                                    ", this build reads format " + ours +
                                                    (major > bf::k_version_major ? " (upgrade Baton)" : "") +
                                                    at(bf::k_off_version_major));
    if (size < bf::k_header_bytes)
        return corrupt("header: truncated (blob is " + num(size) + " bytes, header needs " + num(bf::k_header_bytes) + ")" +
                       at(size));
    const uint64_t stored = byte_cursor::load_u64(bytes.data() + bf::k_off_header_xxh3);
    const uint64_t computed = XXH3_64bits(bytes.data(), bf::k_off_header_xxh3);
    if (stored != computed)
        return corrupt("header: checksum mismatch" + at(bf::k_off_header_xxh3) + " (stored " + hex64(stored) +
                       ", computed " + hex64(computed) + ")");
    uint32_t flags = 0, reserved = 0;
    uint64_t total = 0;
    c.read_u32(flags);
    c.read_u32(n_sections);
    c.read_u32(reserved);
    c.read_u64(total);
    if (flags & ~bf::k_flags_known)
        return corrupt("flags: unknown bits " + hex64(flags & ~bf::k_flags_known) + at(bf::k_off_flags));
    if (reserved != 0) return corrupt("reserved: " + hex64(reserved) + " is not 0" + at(bf::k_off_reserved));
    if (total > limits.max_bytes)
        return Status(status_code::too_large,
                      "total_bytes: " + num(total) + " > max_bytes " + num(limits.max_bytes) + at(bf::k_off_total_bytes));
    if (total > size)
        return corrupt("total_bytes: " + num(total) + " but the blob is truncated to " + num(size) + " bytes" +
                       at(bf::k_off_total_bytes));
    if (total < size)
        return corrupt("trailing bytes: " + num(size - total) + " after total_bytes " + num(total) + at(total));
    if (n_sections > bf::k_sections_max)
        return corrupt("n_sections: " + num(n_sections) + " > " + num(bf::k_sections_max) + at(bf::k_off_n_sections));
    v.version_major = major;
    v.version_minor = minor;
    v.flags = flags;
    v.total_bytes = size;
    return {};
}

// walk_frames delimits and checksums every frame, recording the known ones.
Status walk_frames(std::span<const uint8_t> bytes, uint32_t n_sections, uint16_t minor, found_sections & found) {
    byte_cursor c(bytes.subspan(bf::k_header_bytes), bf::k_header_bytes);
    for (uint32_t i = 0; i < n_sections; ++i) {
        const uint64_t frame = c.offset();
        if (c.empty())
            return corrupt("n_sections: header says " + num(n_sections) + " but the blob ends after " + num(i) +
                           " sections" + at(frame));
        uint32_t type = 0, flags = 0;
        uint64_t length = 0;
        if (!c.read_u32(type) || !c.read_u32(flags) || !c.read_u64(length))
            return corrupt("section #" + num(i) + ": frame head truncated (needs " + num(bf::k_frame_head_bytes) +
                           " bytes)" + at(frame));
        const char * known = bf::section_type_name(type);
        const std::string name = known ? known : "section #" + num(i) + " (type " + num(type) + ")";
        std::span<const uint8_t> payload, tail;
        if (c.remaining() < bf::k_frame_tail_bytes || length > c.remaining() - bf::k_frame_tail_bytes)
            return corrupt(name + ": length " + num(length) + " exceeds the " + num(c.remaining()) +
                           " bytes remaining (payload + 8-byte checksum)" + at(frame + 8));
        c.read_bytes(length, payload);
        c.read_bytes(bf::k_frame_tail_bytes, tail);
        const uint64_t stored = byte_cursor::load_u64(tail.data());
        const uint64_t computed = XXH3_64bits(bytes.data() + frame, bf::k_frame_head_bytes + size_t(length));
        if (stored != computed)
            return corrupt(name + ": checksum mismatch" + at(frame) + " (stored " + hex64(stored) + ", computed " +
                           hex64(computed) + ")");
        if (flags & ~bf::k_section_flags_known)
            return corrupt(name + ": flags unknown bits " + hex64(flags & ~bf::k_section_flags_known) + at(frame + 4));
        if (!known) {
            if (flags & bf::k_section_flag_optional) continue;  // a newer minor's optional addition
            return Status(status_code::unsupported,
                          name + ": unknown section type is not flagged optional (blob format " +
                              num(bf::k_version_major) + "." + num(minor) + ", this build reads " +
                              num(bf::k_version_major) + "." + num(bf::k_version_minor) + ")" + at(frame));
        }
        found_section & f = found[type];
        if (f.present) return corrupt("duplicate section " + name + at(frame) + " (first at +" + num(f.frame_offset) + ")");
        f.present = true;
        f.frame_offset = frame;
        f.payload_offset = frame + bf::k_frame_head_bytes;
        f.payload = payload;
    }
    if (!c.empty())
        return corrupt("trailing bytes: " + num(c.remaining()) + " after the last of n_sections " + num(n_sections) +
                       at(c.offset()));
    return {};
}

Status parse_identity(const found_section & s, model_identity & id) {
    payload_reader r("identity", s.payload, s.payload_offset);
    std::span<const uint8_t> fp;
    BATON_RETURN_IF_ERROR(r.bytes("fingerprint", 16, fp));
    std::memcpy(id.fingerprint.data(), fp.data(), 16);
    BATON_RETURN_IF_ERROR(r.u32("n_layer", id.n_layer));
    BATON_RETURN_IF_ERROR(r.u32("n_embd", id.n_embd));
    const uint64_t vocab_off = r.offset();
    BATON_RETURN_IF_ERROR(r.u32("n_vocab", id.n_vocab));
    if (auto m = blob_rules::n_vocab(id.n_vocab); !m.empty()) return r.fail(m, vocab_off);
    BATON_RETURN_IF_ERROR(read_string(r, "arch_len", "arch", id.arch));
    BATON_RETURN_IF_ERROR(read_string(r, "version_len", "llama_version", id.llama_version));
    return r.done();
}

Status parse_context(const found_section & s, kv_layout & c) {
    payload_reader r("context", s.payload, s.payload_offset);
    uint64_t off = r.offset();
    BATON_RETURN_IF_ERROR(r.i32("type_k", c.type_k));
    if (auto m = blob_rules::kv_type("type_k", c.type_k); !m.empty()) return r.fail(m, off);
    off = r.offset();
    BATON_RETURN_IF_ERROR(r.i32("type_v", c.type_v));
    if (auto m = blob_rules::kv_type("type_v", c.type_v); !m.empty()) return r.fail(m, off);
    uint8_t fa = 0, unified = 0;
    off = r.offset();
    BATON_RETURN_IF_ERROR(r.u8("flash_attn", fa));
    if (fa > 1) return r.fail("flash_attn " + num(fa) + " is not 0 or 1", off);
    off = r.offset();
    BATON_RETURN_IF_ERROR(r.u8("kv_unified", unified));
    if (unified > 1) return r.fail("kv_unified " + num(unified) + " is not 0 or 1", off);
    c.flash_attn = fa == 1;
    c.kv_unified = unified == 1;
    uint16_t reserved = 0;
    off = r.offset();
    BATON_RETURN_IF_ERROR(r.u16("reserved", reserved));
    BATON_RETURN_IF_ERROR(r.zero("reserved", reserved, off));
    off = r.offset();
    BATON_RETURN_IF_ERROR(r.u32("n_seq_max", c.n_seq_max));
    if (auto m = blob_rules::n_seq_max(c.n_seq_max); !m.empty()) return r.fail(m, off);
    BATON_RETURN_IF_ERROR(r.u32("n_ctx", c.n_ctx));
    return r.done();
}

Status parse_tokens(const found_section & s, uint16_t minor, const blob_limits & limits, const model_identity & id,
                    const kv_layout & ctx, std::vector<int32_t> & tokens) {
    payload_reader r("tokens", s.payload, s.payload_offset);
    const uint64_t off = r.offset();
    uint32_t n = 0;
    BATON_RETURN_IF_ERROR(r.u32("n_tokens", n));
    if (n > limits.max_tokens)
        return Status(status_code::too_large,
                      "tokens: n_tokens " + num(n) + " > max_tokens " + num(limits.max_tokens) + at(off));
    if (auto m = blob_rules::n_tokens(n, ctx.n_ctx); !m.empty()) return r.fail(m, off);
    const uint64_t need = uint64_t(4) * n;
    if (r.remaining() != need)
        return r.fail("n_tokens " + num(n) + " needs " + num(need) + " bytes of ids but the section holds " +
                          num(r.remaining()),
                      off);
    std::span<const uint8_t> ids;
    BATON_RETURN_IF_ERROR(r.bytes("ids", need, ids));
    tokens.resize(n);
    for (uint32_t i = 0; i < n; ++i) {
        const int32_t t = int32_t(byte_cursor::load_u32(ids.data() + 4 * size_t(i)));
        if (auto m = blob_rules::token(i, t, id.n_vocab, minor); !m.empty())
            return r.fail(m, off + 4 + 4 * uint64_t(i));
        tokens[i] = t;
    }
    return r.done();
}

Status parse_state(const found_section & s, uint32_t n_tokens, std::span<const uint8_t> & state) {
    payload_reader r("state", s.payload, s.payload_offset);
    uint64_t off = r.offset();
    uint32_t n = 0, reserved = 0;
    BATON_RETURN_IF_ERROR(r.u32("n_tokens", n));
    if (n != n_tokens)
        return r.fail("n_tokens " + num(n) + " disagrees with the tokens section's n_tokens " + num(n_tokens), off);
    off = r.offset();
    BATON_RETURN_IF_ERROR(r.u32("reserved", reserved));
    BATON_RETURN_IF_ERROR(r.zero("reserved", reserved, off));
    if (r.remaining() == 0) return r.fail("no state bytes", r.offset());
    return r.bytes("data", r.remaining(), state);
}

// parse_base reads a delta's base (format 1.2) and checks it against the token section and the checkpoints.
Status parse_base(const found_section & s, uint16_t minor, std::span<const int32_t> tokens,
                  const std::vector<blob_checkpoint_view> & checkpoints, blob_view & v) {
    if (minor < 2)
        return corrupt("base: a delta in a format 1." + num(minor) + " blob (deltas are 1.2)" + at(s.frame_offset));
    payload_reader r("base", s.payload, s.payload_offset);
    uint64_t off = r.offset();
    uint32_t n_base = 0, reserved = 0;
    BATON_RETURN_IF_ERROR(r.u32("n_base", n_base));
    if (auto m = blob_rules::base_tokens(n_base, uint32_t(tokens.size())); !m.empty()) return r.fail(m, off);
    off = r.offset();
    BATON_RETURN_IF_ERROR(r.u32("reserved", reserved));
    BATON_RETURN_IF_ERROR(r.zero("reserved", reserved, off));
    off = r.offset();
    std::span<const uint8_t> hash;
    BATON_RETURN_IF_ERROR(r.bytes("base_hash", bf::k_base_hash_bytes, hash));
    BATON_RETURN_IF_ERROR(r.done());
    const blob_base_hash want = blob_tokens_hash(tokens.first(n_base));
    if (!std::equal(want.begin(), want.end(), hash.begin()))
        return r.fail("base_hash does not match the first " + num(n_base) + " tokens of the tokens section", off);
    for (size_t i = 0; i < checkpoints.size(); ++i)
        if (auto m = blob_rules::delta_checkpoint(checkpoints[i].n_tokens, n_base); !m.empty())
            return corrupt("checkpoints[" + num(i) + "]: " + m);
    v.base_tokens = n_base;
    std::copy(hash.begin(), hash.end(), v.base_hash.begin());
    return {};
}

// parse_generation reads a generation in progress (format 1.4) and checks it against the tokens and the logits.
Status parse_generation(const found_section & s, uint16_t minor, uint32_t n_tokens, bool has_logits, blob_view & v) {
    if (minor < 4)
        return corrupt("generation: a generation section in a format 1." + num(minor) + " blob (it is 1.4)" +
                       at(s.frame_offset));
    if (s.payload.size() != bf::k_generation_payload_bytes)
        return corrupt("generation: length " + num(s.payload.size()) +
                       " bytes != " + num(bf::k_generation_payload_bytes) + at(s.frame_offset + 8));
    payload_reader r("generation", s.payload, s.payload_offset);
    const uint64_t off_generated = r.offset();
    blob_generation g;
    BATON_RETURN_IF_ERROR(r.u32("n_generated", g.n_generated));
    const uint64_t off_cached = r.offset();
    BATON_RETURN_IF_ERROR(r.u32("n_cached", g.n_cached));
    for (int i = 0; i < 2; ++i) {
        uint32_t reserved = 0;
        const uint64_t off = r.offset();
        BATON_RETURN_IF_ERROR(r.u32("reserved", reserved));
        BATON_RETURN_IF_ERROR(r.zero("reserved", reserved, off));
    }
    BATON_RETURN_IF_ERROR(r.done());
    // (the offset of what breaks the rule: n_generated, n_cached, or the header's flags when the logits are missing)
    if (auto m = blob_rules::generation(g.n_generated, g.n_cached, n_tokens, has_logits); !m.empty())
        return r.fail(m, g.n_generated >= n_tokens               ? off_generated
                         : g.n_cached > n_tokens - g.n_generated ? off_cached
                                                                 : uint64_t(bf::k_off_flags));
    v.generation = g;
    return {};
}

Status parse_checkpoints(const found_section & s, const blob_limits & limits, uint32_t n_tokens,
                         std::vector<blob_checkpoint_view> & out) {
    payload_reader r("checkpoints", s.payload, s.payload_offset);
    uint64_t off = r.offset();
    uint32_t n = 0, reserved = 0;
    BATON_RETURN_IF_ERROR(r.u32("n_checkpoints", n));
    if (n > limits.max_checkpoints)
        return Status(status_code::too_large, "checkpoints: n_checkpoints " + num(n) + " > max_checkpoints " +
                                                  num(limits.max_checkpoints) + at(off));
    off = r.offset();
    BATON_RETURN_IF_ERROR(r.u32("reserved", reserved));
    BATON_RETURN_IF_ERROR(r.zero("reserved", reserved, off));
    out.clear();
    out.reserve(n);
    uint32_t prev = 0;
    for (uint32_t i = 0; i < n; ++i) {
        const std::string name = "checkpoints[" + num(i) + "]";
        blob_checkpoint_view cp;
        const uint64_t entry = r.offset();
        uint32_t entry_reserved = 0;
        uint64_t n_bytes = 0;
        BATON_RETURN_IF_ERROR(r.i32("pos_min", cp.pos_min));
        BATON_RETURN_IF_ERROR(r.i32("pos_max", cp.pos_max));
        BATON_RETURN_IF_ERROR(r.u32("n_tokens", cp.n_tokens));
        BATON_RETURN_IF_ERROR(r.u32("reserved", entry_reserved));
        BATON_RETURN_IF_ERROR(r.zero("reserved", entry_reserved, entry + 12));
        BATON_RETURN_IF_ERROR(r.u64("n_bytes", n_bytes));
        if (auto m = blob_rules::checkpoint_n_tokens(cp.n_tokens, prev, n_tokens); !m.empty())
            return corrupt(name + ": " + m + at(entry + 8));
        prev = cp.n_tokens;
        if (auto m = blob_rules::checkpoint_positions(cp.pos_min, cp.pos_max, cp.n_tokens); !m.empty())
            return corrupt(name + ": " + m + at(cp.pos_min < 0 || cp.pos_min > cp.pos_max ? entry : entry + 4));
        if (n_bytes == 0) return corrupt(name + ": n_bytes is 0" + at(entry + 16));
        if (n_bytes > r.remaining())
            return corrupt(name + ": n_bytes " + num(n_bytes) + " exceeds the " + num(r.remaining()) +
                           " bytes remaining" + at(entry + 16));
        BATON_RETURN_IF_ERROR(r.bytes("data", n_bytes, cp.data));
        out.push_back(cp);
    }
    return r.done();
}

Status parse_logits(const found_section & s, uint32_t n_vocab, std::vector<float> & logits) {
    const uint64_t need = uint64_t(4) * n_vocab;
    if (s.payload.size() != need)
        return corrupt("logits: length " + num(s.payload.size()) + " bytes != n_vocab " + num(n_vocab) + " * 4 = " +
                       num(need) + at(s.frame_offset + 8));
    logits.resize(n_vocab);
    if constexpr (std::endian::native == std::endian::little) {
        std::memcpy(logits.data(), s.payload.data(), size_t(need));
    } else {
        for (uint32_t i = 0; i < n_vocab; ++i)
            logits[i] = std::bit_cast<float>(byte_cursor::load_u32(s.payload.data() + 4 * size_t(i)));
    }
    return {};
}

Status unauthenticated(const std::string & m) { return Status(status_code::unauthenticated, m); }

// check_mac authenticates the blob before any section is parsed: the mac section must be the last frame
// (so it is found from total_bytes alone, trusting no frame length) and its HMAC over every byte before it
// must match one of the key's secrets.
Status check_mac(std::span<const uint8_t> bytes, const blob_key & key) {
    constexpr size_t frame = bf::k_frame_bytes + bf::k_mac_payload_bytes;
    const std::string need = " (this node accepts only states authenticated with its --state-secret-file)";
    if (bytes.size() < bf::k_header_bytes + frame)
        return unauthenticated("mac: the blob carries no mac section" + need);
    const uint64_t off = bytes.size() - frame;
    const uint8_t * h = bytes.data() + off;
    if (byte_cursor::load_u32(h) != bf::section_type_mac ||
        byte_cursor::load_u32(h + 4) != bf::k_section_flag_optional ||
        byte_cursor::load_u64(h + 8) != bf::k_mac_payload_bytes)
        return unauthenticated("mac: the blob carries no mac section as its last frame" + need);
    const uint8_t * p = h + bf::k_frame_head_bytes;
    const uint32_t algorithm = byte_cursor::load_u32(p);
    if (algorithm != bf::k_mac_algorithm_hmac_sha256)
        return unauthenticated("mac: algorithm " + num(algorithm) + " is not HMAC-SHA256 (1)" + at(off + 16));
    blob_key::key_id id{};
    std::memcpy(id.data(), p + 8, id.size());
    const int which = key.find(id);
    if (which < 0) {
        std::string held;
        for (size_t i = 0; i < key.size(); ++i) held += (held.empty() ? "" : ", ") + blob_key_id_hex(key.id(i));
        return unauthenticated("mac: made with state secret " + blob_key_id_hex(id) + ", this node holds " + held +
                               " (the nodes' --state-secret-file differ)" + at(off + 24));
    }
    auto d = blob_mac_compute(key.secret(size_t(which)), bytes.first(size_t(off)));
    if (!d.ok()) return d.status();
    if (!blob_mac_equal(d.value(), std::span<const uint8_t>(p + 16, bf::k_mac_bytes)))
        return unauthenticated("mac: does not match the blob's bytes (altered after it was made, or made without "
                               "this secret)" +
                               at(off + 32));
    return {};
}

// parse_mac checks the form of a mac section (whether or not this reader holds a key): the last frame,
// 48 bytes, a known algorithm, reserved 0.
Status parse_mac(const found_section & s, uint64_t total) {
    if (s.payload.size() != bf::k_mac_payload_bytes)
        return corrupt("mac: length " + num(s.payload.size()) + " bytes != " + num(bf::k_mac_payload_bytes) +
                       at(s.frame_offset + 8));
    if (s.payload_offset + bf::k_mac_payload_bytes + bf::k_frame_tail_bytes != total)
        return corrupt("mac: not the last frame" + at(s.frame_offset));
    const uint32_t algorithm = byte_cursor::load_u32(s.payload.data());
    if (algorithm != bf::k_mac_algorithm_hmac_sha256)
        return corrupt("mac: algorithm " + num(algorithm) + " is not HMAC-SHA256 (1)" + at(s.payload_offset));
    const uint32_t reserved = byte_cursor::load_u32(s.payload.data() + 4);
    if (reserved != 0) return corrupt("mac: reserved " + hex64(reserved) + " is not 0" + at(s.payload_offset + 4));
    return {};
}

}  // namespace

Result<blob_view> blob_parse(std::span<const uint8_t> bytes, const blob_limits & limits) {
    if (bytes.size() > limits.max_bytes)
        return Status(status_code::too_large,
                      "blob: size " + num(bytes.size()) + " bytes > max_bytes " + num(limits.max_bytes));
    blob_view v;
    uint32_t n_sections = 0;
    BATON_RETURN_IF_ERROR(parse_header(bytes, limits, v, n_sections));
    if (limits.key) BATON_RETURN_IF_ERROR(check_mac(bytes, *limits.key));
    found_sections found{};
    BATON_RETURN_IF_ERROR(walk_frames(bytes, n_sections, v.version_minor, found));
    if (found[bf::section_type_mac].present)
        BATON_RETURN_IF_ERROR(parse_mac(found[bf::section_type_mac], bytes.size()));
    for (uint32_t t : {bf::section_type_identity, bf::section_type_context, bf::section_type_tokens,
                       bf::section_type_state, bf::section_type_checkpoints})
        if (!found[t].present) return corrupt(std::string("missing mandatory section ") + bf::section_type_name(t));
    const found_section & logits = found[bf::section_type_logits];
    const found_section & request = found[bf::section_type_request];
    const bool has_logits = (v.flags & bf::k_flag_has_logits) != 0;
    const bool has_request = (v.flags & bf::k_flag_has_request) != 0;
    if (has_logits != logits.present)
        return corrupt(std::string("flags: has_logits is ") + (has_logits ? "set" : "clear") +
                       " but the logits section is " + (logits.present ? "present" : "absent") + at(bf::k_off_flags));
    if (has_request != request.present)
        return corrupt(std::string("flags: has_request is ") + (has_request ? "set" : "clear") +
                       " but the request section is " + (request.present ? "present" : "absent") + at(bf::k_off_flags));
    const found_section & base = found[bf::section_type_base];
    const bool delta = (v.flags & bf::k_flag_delta) != 0;
    if (delta != base.present)
        return corrupt(std::string("flags: delta is ") + (delta ? "set" : "clear") + " but the base section is " +
                       (base.present ? "present" : "absent") + at(bf::k_off_flags));
    const found_section & generation = found[bf::section_type_generation];
    const bool has_generation = (v.flags & bf::k_flag_generation) != 0;
    if (has_generation != generation.present)
        return corrupt(std::string("flags: generation is ") + (has_generation ? "set" : "clear") +
                       " but the generation section is " + (generation.present ? "present" : "absent") +
                       at(bf::k_off_flags));

    BATON_RETURN_IF_ERROR(parse_identity(found[bf::section_type_identity], v.identity));
    BATON_RETURN_IF_ERROR(parse_context(found[bf::section_type_context], v.context));
    BATON_RETURN_IF_ERROR(
        parse_tokens(found[bf::section_type_tokens], v.version_minor, limits, v.identity, v.context, v.tokens));
    const uint32_t n_tokens = uint32_t(v.tokens.size());
    BATON_RETURN_IF_ERROR(parse_state(found[bf::section_type_state], n_tokens, v.state));
    BATON_RETURN_IF_ERROR(parse_checkpoints(found[bf::section_type_checkpoints], limits, n_tokens, v.checkpoints));
    if (base.present) BATON_RETURN_IF_ERROR(parse_base(base, v.version_minor, v.tokens, v.checkpoints, v));
    if (generation.present)
        BATON_RETURN_IF_ERROR(parse_generation(generation, v.version_minor, n_tokens, has_logits, v));
    if (logits.present) BATON_RETURN_IF_ERROR(parse_logits(logits, v.identity.n_vocab, v.logits.emplace()));
    if (request.present) {
        if (request.payload.empty()) return corrupt("request: empty section" + at(request.frame_offset + 8));
        v.request.emplace(reinterpret_cast<const char *>(request.payload.data()), request.payload.size());
    }
    return v;
}

blob_layout blob_walk(std::span<const uint8_t> bytes) {
    blob_layout l;
    l.size = bytes.size();
    l.magic_ok = bytes.size() >= sizeof bf::k_magic && std::memcmp(bytes.data(), bf::k_magic, sizeof bf::k_magic) == 0;
    if (bytes.size() < bf::k_header_bytes) {
        l.stopped = "header truncated: " + num(bytes.size()) + " of " + num(bf::k_header_bytes) + " bytes";
        return l;
    }
    l.header_complete = true;
    const uint8_t * h = bytes.data();
    l.version_major = uint16_t(h[8] | h[9] << 8);
    l.version_minor = uint16_t(h[10] | h[11] << 8);
    l.flags = byte_cursor::load_u32(h + bf::k_off_flags);
    l.n_sections = byte_cursor::load_u32(h + bf::k_off_n_sections);
    l.total_bytes = byte_cursor::load_u64(h + bf::k_off_total_bytes);
    l.header_checksum_stored = byte_cursor::load_u64(h + bf::k_off_header_xxh3);
    l.header_checksum_computed = XXH3_64bits(h, bf::k_off_header_xxh3);
    byte_cursor c(bytes.subspan(bf::k_header_bytes), bf::k_header_bytes);
    // Bounded by the buffer (every frame is at least 24 bytes), not by the untrusted n_sections.
    while (!c.empty()) {
        blob_section_info s;
        s.offset = c.offset();
        s.payload_offset = s.offset + bf::k_frame_head_bytes;
        if (!c.read_u32(s.type) || !c.read_u32(s.flags) || !c.read_u64(s.length)) {
            l.stopped = "frame head truncated at +" + num(s.offset);
            return l;
        }
        const char * known = bf::section_type_name(s.type);
        s.name = known ? known : "unknown#" + num(s.type);
        std::span<const uint8_t> payload, tail;
        if (c.remaining() >= bf::k_frame_tail_bytes && s.length <= c.remaining() - bf::k_frame_tail_bytes) {
            c.read_bytes(s.length, payload);
            c.read_bytes(bf::k_frame_tail_bytes, tail);
            s.complete = true;
            s.checksum_stored = byte_cursor::load_u64(tail.data());
            s.checksum_computed = XXH3_64bits(bytes.data() + s.offset, bf::k_frame_head_bytes + size_t(s.length));
        }
        l.sections.push_back(s);
        if (!s.complete) {
            l.stopped = s.name + ": length " + num(s.length) + " runs past the end of the buffer";
            return l;
        }
    }
    return l;
}

}  // namespace baton
