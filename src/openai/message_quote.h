// message_quote.h — how error messages quote a value that may come from a client (private to the server).
#pragma once

#include <array>
#include <cstdio>
#include <string>
#include <string_view>

namespace baton {

// quoted_for_message: s in double quotes, printable ASCII kept (backslash and quote escaped), other bytes
// as \xNN, at most 32 bytes of s (then "...").
inline std::string quoted_for_message(std::string_view s) {
    constexpr size_t k_max = 32;
    std::string out = "\"";
    for (const char c : s.substr(0, k_max)) {
        const auto u = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (u >= 0x20 && u < 0x7f) {
            out += c;
        } else {
            std::array<char, 8> hex{};
            std::snprintf(hex.data(), hex.size(), "\\x%02x", u);
            out += hex.data();
        }
    }
    out += '"';
    if (s.size() > k_max) out += "...";
    return out;
}

}  // namespace baton
