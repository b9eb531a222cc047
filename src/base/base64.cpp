// base64.cpp — see base64.h.
#include "baton/base/base64.h"

#include <cstdint>

namespace baton {
namespace {

constexpr char k_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int value_of(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

}  // namespace

std::string base64_encode(std::string_view in) {
    std::string out;
    out.reserve((in.size() + 2) / 3 * 4);
    size_t i = 0;
    for (; i + 3 <= in.size(); i += 3) {
        const uint32_t v = uint32_t(uint8_t(in[i])) << 16 | uint32_t(uint8_t(in[i + 1])) << 8 | uint8_t(in[i + 2]);
        for (int s = 18; s >= 0; s -= 6) out += k_alphabet[(v >> s) & 63];
    }
    if (const size_t rest = in.size() - i; rest > 0) {
        uint32_t v = uint32_t(uint8_t(in[i])) << 16;
        if (rest == 2) v |= uint32_t(uint8_t(in[i + 1])) << 8;
        out += k_alphabet[(v >> 18) & 63];
        out += k_alphabet[(v >> 12) & 63];
        out += rest == 2 ? k_alphabet[(v >> 6) & 63] : '=';
        out += '=';
    }
    return out;
}

std::optional<std::string> base64_decode(std::string_view s) {
    if (s.size() % 4 != 0) return std::nullopt;
    std::string out;
    out.reserve(s.size() / 4 * 3);
    for (size_t i = 0; i < s.size(); i += 4) {
        int v[4];
        int pad = 0;
        for (int k = 0; k < 4; ++k) {
            const char c = s[i + k];
            if (c == '=') {
                // Padding only at the very end, in the last one or two places.
                if (i + 4 != s.size() || k < 2) return std::nullopt;
                ++pad;
                v[k] = 0;
                continue;
            }
            if (pad > 0) return std::nullopt;
            v[k] = value_of(c);
            if (v[k] < 0) return std::nullopt;
        }
        // Canonical only: the bits padding drops must be zero (etcd writes no other form).
        if ((pad == 2 && (v[1] & 0x0f) != 0) || (pad == 1 && (v[2] & 0x03) != 0)) return std::nullopt;
        const uint32_t w = uint32_t(v[0]) << 18 | uint32_t(v[1]) << 12 | uint32_t(v[2]) << 6 | uint32_t(v[3]);
        out += char((w >> 16) & 0xff);
        if (pad < 2) out += char((w >> 8) & 0xff);
        if (pad < 1) out += char(w & 0xff);
    }
    return out;
}

}  // namespace baton
