// image_input.h — the images of a chat's messages, as OpenAI's and Anthropic's bodies carry them: where each stands
// in a message's text (openai_media_marker) and its file's bytes, decoded from base64 here. Images are then
// encoded by the node's projector when it renders the chat (chat_format.h, media.h).
// Only inline images are taken: a data: URL or base64 source. This server downloads nothing (an image URL would
// make it fetch an address a client chose), so http(s) URLs are refused with that reason.
#pragma once

#include <string>
#include <string_view>

#include "baton/base/status.h"

namespace baton {

// image_from_data_url: the file bytes of "data:image/<type>;base64,<data>" (OpenAI's image_url.url). where names
// the field in errors (invalid_argument).
Result<std::string> image_from_data_url(std::string_view url, const std::string & where);

// image_from_base64: the file bytes of an Anthropic base64 image source: media_type image/*, data base64.
Result<std::string> image_from_base64(std::string_view media_type, std::string_view data, const std::string & where);

}  // namespace baton
