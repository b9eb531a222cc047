// byte_cursor.h — a bounded, advancing reader of little-endian fields from untrusted bytes, and the matching
// little-endian writers.
//
// Every read checks what remains first and, on shortage, returns false without advancing; lengths are
// compared against remaining() (never by adding to the position), so no arithmetic can overflow.
// offset() is absolute (base + position) so error messages can name "+N" within the whole input. In base because
// every binary parser shares it: the state blob's (src/blob/) and the tier manifest's (src/tier/).
// Thread-safety: a plain value over borrowed bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace baton {

class byte_cursor {
  public:
    // base is the absolute offset of bytes[0] within the enclosing buffer (for messages only).
    explicit byte_cursor(std::span<const uint8_t> bytes, uint64_t base = 0) : bytes_(bytes), base_(base) {}

    uint64_t offset() const { return base_ + pos_; }
    size_t remaining() const { return bytes_.size() - pos_; }
    bool empty() const { return pos_ == bytes_.size(); }

    bool read_u8(uint8_t & v) {
        if (remaining() < 1) return false;
        v = bytes_[pos_++];
        return true;
    }
    bool read_u16(uint16_t & v) {
        if (remaining() < 2) return false;
        v = uint16_t(bytes_[pos_] | (bytes_[pos_ + 1] << 8));
        pos_ += 2;
        return true;
    }
    bool read_u32(uint32_t & v) {
        if (remaining() < 4) return false;
        v = load_u32(bytes_.data() + pos_);
        pos_ += 4;
        return true;
    }
    bool read_i32(int32_t & v) {
        uint32_t u;
        if (!read_u32(u)) return false;
        v = int32_t(u);
        return true;
    }
    bool read_u64(uint64_t & v) {
        if (remaining() < 8) return false;
        v = load_u64(bytes_.data() + pos_);
        pos_ += 8;
        return true;
    }
    // read_bytes views the next n bytes (no copy).
    bool read_bytes(uint64_t n, std::span<const uint8_t> & out) {
        if (n > remaining()) return false;
        out = bytes_.subspan(pos_, size_t(n));
        pos_ += size_t(n);
        return true;
    }

    static uint32_t load_u32(const uint8_t * p) {
        return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
    }
    static uint64_t load_u64(const uint8_t * p) { return uint64_t(load_u32(p)) | uint64_t(load_u32(p + 4)) << 32; }

  private:
    std::span<const uint8_t> bytes_;
    uint64_t base_ = 0;
    size_t pos_ = 0;
};

// Little-endian stores into a caller's buffer (REQUIRES: room for the width).
inline void le_store_u16(uint8_t * p, uint16_t v) {
    p[0] = uint8_t(v);
    p[1] = uint8_t(v >> 8);
}
inline void le_store_u32(uint8_t * p, uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i));
}
inline void le_store_u64(uint8_t * p, uint64_t v) {
    for (int i = 0; i < 8; ++i) p[i] = uint8_t(v >> (8 * i));
}

// How parse errors name numbers and offsets: "n_layer 12", "... at +4096".
inline std::string num(uint64_t v) { return std::to_string(v); }
inline std::string at(uint64_t off) { return " at +" + std::to_string(off); }

}  // namespace baton
