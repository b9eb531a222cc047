// image_fetch.h — the http(s) images of a chat, fetched by the node that prefills it before the chat is rendered
// (--image-urls; off by default). Every URL of a request is fetched in turn under one deadline (--image-url-timeout)
// and each body under the projector's per-image size limit (--mmproj-max-image-mb); any failure refuses the request
// (400 naming the field, the URL and why: OpenAI answers a failed image download the same way). A text/* answer
// (an error page sent with 200) is refused by its type; other bytes go to the projector, which names what it
// cannot decode.
#pragma once

#include <cstdint>

#include "baton/http/http_client.h"
#include "baton/http/net.h"
#include "baton/node/node.h"
#include "baton/openai/openai.h"

namespace baton {

// image_fetch_all fills chat.images[u.index] for every u of chat.image_urls and clears image_urls. REQUIRES: cfg
// is the node's --image-urls configuration (the caller refuses URLs when it is unset); tls verifies https.
net::awaitable<Status> image_fetch_all(openai_chat & chat, const image_url_config & cfg, uint64_t max_bytes,
                                       tls_context_ptr tls);

}  // namespace baton
