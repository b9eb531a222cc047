// base64.h — standard base64 (RFC 4648, with padding): etcd's JSON gateway (keys, values) and OpenAI's
// base64 embeddings.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace baton {

std::string base64_encode(std::string_view bytes);
// base64_decode: nullopt when s is not canonical padded base64 (the bits padding drops must be zero).
std::optional<std::string> base64_decode(std::string_view s);

}  // namespace baton
