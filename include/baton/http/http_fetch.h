// http_fetch.h — GET one resource a client named by URL (an image_url's http(s) address, when the node allows
// it: --image-urls), under a deadline and a byte cap, following a few redirects. The only place Baton
// fetches an address it did not configure itself, so every limit is explicit: http and https only, no
// credentials in URLs, at most max_redirects hops (each to http or https), one deadline for all of it, the
// body capped before it is buffered, status 200 only. The request is a plain GET (Accept: image/*, User-Agent:
// baton), nothing of the client's request forwarded.
// Thread-safety: a free function; each call has its own connections on the calling coroutine's executor.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "baton/base/status.h"
#include "baton/http/http_client.h"
#include "baton/http/net.h"

namespace baton {

// A fetchable URL: its origin (scheme, host, port) and the request target (path and query; "/" when empty).
struct fetch_url {
    http_url origin;
    std::string target;
};

// fetch_url_parse takes "http://" or "https://" (any case), a host (a name, an IPv4 address or a bracketed
// IPv6 address), an optional port (default 80/443) and an optional path and query; a fragment is dropped.
// invalid_argument naming what is wrong otherwise (another scheme, user:password@, an empty or odd host, a
// bad port, control characters or spaces, over 8 KiB).
Result<fetch_url> fetch_url_parse(std::string_view url);

// fetch_url_text: the URL of u as fetch_url_parse reads it back (scheme://host:port/target).
std::string fetch_url_text(const fetch_url & u);

struct fetch_limits {
    std::chrono::steady_clock::time_point deadline;  // for everything: resolving, connecting, every hop, the body
    uint64_t max_bytes = 0;                          // the body's size cap
    int max_redirects = 3;
};

struct fetched {
    std::string body;
    std::string content_type;  // as the final response named it (may be empty)
    std::string url;           // the URL the body came from (after redirects)
};

// http_fetch GETs url. Errors: invalid_argument (a bad URL, or a redirect to one), upstream_error (cannot
// connect, a status other than 200, too many redirects, a cut-off body), deadline_exceeded, too_large (over
// max_bytes, by Content-Length or as it arrives). https is verified against tls (invalid_argument without).
net::awaitable<Result<fetched>> http_fetch(std::string_view url, const fetch_limits & limits, tls_context_ptr tls);

}  // namespace baton
