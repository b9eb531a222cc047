// image_input.h — the images (and audio clips) of a chat's messages, as OpenAI's and Anthropic's bodies carry them:
// where each stands in a message's text (openai_media_marker) and its file's bytes, decoded from base64 here. They
// are then encoded by the node's projector when it renders the chat (chat_format.h, media.h).
// Inline images (a data: URL, a base64 source) are decoded here. An http(s) URL is only recorded (image_link):
// the node that prefills fetches it if its operator allowed that (--image-urls, off by default: it makes the
// server fetch an address a client chose) and refuses it otherwise.
#pragma once

#include <string>
#include <string_view>
#include <variant>

#include "baton/base/status.h"

namespace baton {

// An image named by an http(s) URL, not fetched yet.
struct image_link {
    std::string url;
};
using image_source = std::variant<std::string, image_link>;  // the file's bytes, or where to fetch them

// image_from_url: OpenAI's image_url.url: the file bytes of "data:image/<type>;base64,<data>", or an http(s)
// URL as an image_link (checked by fetch_url's rules when it is fetched). where names the field in errors
// (invalid_argument).
Result<image_source> image_from_url(std::string_view url, const std::string & where);

// image_from_base64: the file bytes of an Anthropic base64 image source: media_type image/*, data base64.
Result<std::string> image_from_base64(std::string_view media_type, std::string_view data, const std::string & where);

// audio_from_base64: the file bytes of OpenAI's input_audio part, {"data": base64, "format": "wav" | "mp3"} (the
// formats OpenAI names, as llama-server takes them; the projector's loader decides what the bytes hold).
Result<std::string> audio_from_base64(std::string_view format, std::string_view data, const std::string & where);

}  // namespace baton
