// image_fetch.cpp — see image_fetch.h.
#include "image_fetch.h"

#include "baton/base/log.h"
#include "baton/http/http_fetch.h"

namespace baton {

net::awaitable<Status> image_fetch_all(openai_chat & chat, const image_url_config & cfg, uint64_t max_bytes,
                                       tls_context_ptr tls) {
    const fetch_limits limits{std::chrono::steady_clock::now() + cfg.timeout, max_bytes, cfg.max_redirects};
    for (const auto & u : chat.image_urls) {
        if (u.index >= chat.images.size())
            co_return Status(status_code::internal, u.where + ": image index out of range");
        auto got = co_await http_fetch(u.url, limits, tls);
        if (!got.ok()) {
            const Status & st = got.status();
            const std::string why = st.code() == status_code::deadline_exceeded
                                        ? "the --image-url-timeout of " + std::to_string(cfg.timeout.count()) +
                                              " ms passed (" + st.message() + ")"
                                        : st.message();
            co_return Status(status_code::invalid_argument, u.where + ": cannot fetch the image: " + why);
        }
        const std::string & type = got->content_type;
        // (A page, not a picture: refused by name. Other types go to the decoder, which names what it cannot read.)
        if (type.starts_with("text/"))
            co_return Status(status_code::invalid_argument, u.where + ": " + got->url + " answered Content-Type " +
                                                                type.substr(0, 100) + ", not an image");
        log_debug("image fetched: {} ({} bytes)", got->url, got->body.size());
        chat.images[u.index] = std::move(got->body);
    }
    chat.image_urls.clear();
    co_return Status();
}

}  // namespace baton
