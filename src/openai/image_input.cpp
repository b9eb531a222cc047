// image_input.cpp — see image_input.h.
#include "image_input.h"

#include "baton/base/base64.h"
#include "message_quote.h"

namespace baton {
namespace {

Status bad(const std::string & where, const std::string & m) {
    return Status(status_code::invalid_argument, where + ": " + m);
}

bool starts_with_nocase(std::string_view s, std::string_view p) {
    if (s.size() < p.size()) return false;
    for (size_t i = 0; i < p.size(); ++i)
        if (char(s[i] | 0x20) != p[i]) return false;
    return true;
}

Result<std::string> decode(std::string_view data, const std::string & where, const char * what = "image") {
    if (data.empty()) return bad(where, std::string("the ") + what + " is empty");
    auto bytes = base64_decode(data);
    if (!bytes) return bad(where, std::string("the ") + what + " is not valid base64 (standard alphabet, padded)");
    return std::move(*bytes);
}

}  // namespace

Result<image_source> image_from_url(std::string_view url, const std::string & where) {
    if (starts_with_nocase(url, "http://") || starts_with_nocase(url, "https://"))
        return image_source(image_link{std::string(url)});
    if (!starts_with_nocase(url, "data:"))
        return bad(where, "must be a data: URL (data:image/png;base64,...) or an http(s) URL");
    const size_t comma = url.find(',');
    if (comma == std::string_view::npos) return bad(where, "a data: URL needs a ',' before its data");
    const std::string_view head = url.substr(5, comma - 5);
    constexpr std::string_view b64 = ";base64";
    if (head.size() < b64.size() || !starts_with_nocase(head.substr(head.size() - b64.size()), b64))
        return bad(where, "the data: URL must be base64 (data:image/png;base64,...)");
    const std::string_view type = head.substr(0, head.size() - b64.size());
    if (!type.empty() && !starts_with_nocase(type, "image/"))
        return bad(where, "media type " + quoted_for_message(std::string(type)) +
                              " is not an image (image/png, "
                              "image/jpeg, ...)");
    auto bytes = decode(url.substr(comma + 1), where);
    if (!bytes.ok()) return bytes.status();
    return image_source(std::move(bytes.value()));
}

Result<std::string> image_from_base64(std::string_view media_type, std::string_view data, const std::string & where) {
    if (!starts_with_nocase(media_type, "image/"))
        return bad(where + ".media_type", quoted_for_message(std::string(media_type)) + " is not an image type");
    return decode(data, where + ".data");
}

Result<std::string> audio_from_base64(std::string_view format, std::string_view data, const std::string & where) {
    if (format != "wav" && format != "mp3")
        return bad(where + ".format", quoted_for_message(std::string(format)) + " is not wav or mp3");
    return decode(data, where + ".data", "audio");
}

}  // namespace baton
