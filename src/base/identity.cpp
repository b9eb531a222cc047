// identity.cpp — how model identities and KV types are written in messages, records and listings.
#include "baton/base/identity.h"

#include <ggml.h>

namespace baton {

std::string hex_encode(std::span<const uint8_t> bytes) {
    static const char * digits = "0123456789abcdef";
    std::string s;
    s.reserve(bytes.size() * 2);
    for (uint8_t b : bytes) {
        s += digits[b >> 4];
        s += digits[b & 15];
    }
    return s;
}

std::string identity_fingerprint_hex(const std::array<uint8_t, 16> & fp) { return hex_encode(fp); }

std::string identity_kv_type_name(int32_t type) {
    if (type < 0 || type >= GGML_TYPE_COUNT) return "type#" + std::to_string(type);
    const char * n = ggml_type_name(ggml_type(type));
    return n ? n : "type#" + std::to_string(type);
}

}  // namespace baton
