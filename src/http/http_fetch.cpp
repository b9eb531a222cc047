// http_fetch.cpp — see baton/http/http_fetch.h.
#include "baton/http/http_fetch.h"

#include <charconv>
#include <memory>

namespace baton {
namespace {

constexpr size_t max_url_bytes = 8192;

Status bad_url(std::string_view url, const std::string & why) {
    const std::string shown = url.size() > 200 ? std::string(url.substr(0, 200)) + "..." : std::string(url);
    return Status(status_code::invalid_argument, "URL '" + shown + "': " + why);
}

char lower(char c) { return (c >= 'A' && c <= 'Z') ? char(c | 0x20) : c; }

bool starts_nocase(std::string_view s, std::string_view p) {
    if (s.size() < p.size()) return false;
    for (size_t i = 0; i < p.size(); ++i)
        if (lower(s[i]) != p[i]) return false;
    return true;
}

bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
           c == '_';
}

bool hex_or_colon(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == ':' || c == '.';
}

bool is_redirect(int status) {
    return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

// resolve: the URL a Location header names, relative to the URL it came from.
std::string resolve(const fetch_url & from, std::string_view loc) {
    // A scheme before any '/', '?' or '#': an absolute URL (fetch_url_parse refuses those not http(s)).
    const size_t colon = loc.find(':');
    if (colon != std::string_view::npos && colon < loc.find_first_of("/?#")) return std::string(loc);
    const std::string scheme = from.origin.tls ? "https:" : "http:";
    if (loc.substr(0, 2) == "//") return scheme + std::string(loc);
    std::string base = fetch_url_text(from);
    const size_t origin_end = base.find('/', scheme.size() + 2);
    if (!loc.empty() && loc[0] == '/') return base.substr(0, origin_end) + std::string(loc);
    std::string dir = from.target.substr(0, from.target.find('?'));
    dir = dir.substr(0, dir.rfind('/') + 1);
    return base.substr(0, origin_end) + dir + std::string(loc);
}

}  // namespace

Result<fetch_url> fetch_url_parse(std::string_view url) {
    if (url.size() > max_url_bytes) return bad_url(url, "longer than 8 KiB");
    for (char c : url)
        if (uint8_t(c) <= 0x20 || c == 0x7f) return bad_url(url, "has a space or a control character");
    fetch_url u;
    if (starts_nocase(url, "https://")) u.origin.tls = true;
    else if (!starts_nocase(url, "http://")) return bad_url(url, "only http:// and https:// URLs are fetched");
    std::string_view rest = url.substr(u.origin.tls ? 8 : 7);
    rest = rest.substr(0, rest.find('#'));
    const size_t auth_end = rest.find_first_of("/?");
    std::string_view auth = rest.substr(0, auth_end);
    std::string_view target = auth_end == std::string_view::npos ? std::string_view() : rest.substr(auth_end);
    if (auth.find('@') != std::string_view::npos) return bad_url(url, "credentials (user@) in URLs are not taken");
    std::string_view host, port;
    if (!auth.empty() && auth[0] == '[') {
        const size_t close = auth.find(']');
        if (close == std::string_view::npos || close == 1) return bad_url(url, "an unterminated or empty [IPv6] host");
        host = auth.substr(1, close - 1);
        for (char c : host)
            if (!hex_or_colon(c)) return bad_url(url, "an [IPv6] host holds only hex digits, ':' and '.'");
        std::string_view after = auth.substr(close + 1);
        if (!after.empty() && after[0] != ':') return bad_url(url, "text after the ] of an [IPv6] host");
        if (!after.empty()) port = after.substr(1);
        if (after.size() == 1) return bad_url(url, "an empty port");
    } else {
        const size_t colon = auth.find(':');
        host = auth.substr(0, colon);
        if (colon != std::string_view::npos) {
            port = auth.substr(colon + 1);
            if (port.empty()) return bad_url(url, "an empty port");
        }
        if (host.empty()) return bad_url(url, "no host");
        for (char c : host)
            if (!name_char(c)) return bad_url(url, "a host holds only letters, digits, '-', '.' and '_'");
    }
    unsigned p = u.origin.tls ? 443 : 80;
    if (!port.empty()) {
        auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
        if (ec != std::errc() || end != port.data() + port.size() || p == 0 || p > 65535)
            return bad_url(url, "the port is not a number in 1..65535");
    }
    u.origin.host = std::string(host);
    u.origin.port = uint16_t(p);
    const bool v6 = u.origin.host.find(':') != std::string::npos;
    u.origin.text = std::string(u.origin.tls ? "https://" : "http://") + (v6 ? "[" : "") + u.origin.host +
                    (v6 ? "]" : "") + ":" + std::to_string(p);
    u.target = target.empty() ? "/" : target[0] == '?' ? "/" + std::string(target) : std::string(target);
    return u;
}

std::string fetch_url_text(const fetch_url & u) { return u.origin.text + u.target; }

net::awaitable<Result<fetched>> http_fetch(std::string_view url_text, const fetch_limits & limits,
                                           tls_context_ptr tls) {
    auto url = fetch_url_parse(url_text);
    if (!url.ok()) co_return url.status();
    for (int hop = 0;; ++hop) {
        const std::string where = fetch_url_text(*url);
        auto up = co_await http_upstream::connect(url->origin, limits.deadline, tls);
        if (!up.ok()) co_return up.status();
        http_upstream & u = *up.value();
        Status st =
            co_await u.send("GET", url->target, {{"Accept", "image/*, */*;q=0.5"}, {"User-Agent", "baton"}}, "", "");
        if (!st.ok()) co_return st;
        auto head = co_await u.read_head();
        if (!head.ok()) co_return head.status();
        if (is_redirect(head->status)) {
            std::string loc;
            for (const auto & [k, v] : head->headers)
                if (k.size() == 8 && starts_nocase(k, "location")) loc = v;
            if (loc.empty())
                co_return Status(status_code::upstream_error,
                                 where + ": a redirect (" + std::to_string(head->status) + ") without a Location");
            if (hop >= limits.max_redirects)
                co_return Status(status_code::upstream_error,
                                 where + ": more than " + std::to_string(limits.max_redirects) + " redirects");
            auto next = fetch_url_parse(resolve(*url, loc));
            if (!next.ok())
                co_return Status(status_code::invalid_argument, where + ": redirected to " + next.status().message());
            url = std::move(next);
            continue;
        }
        if (head->status != 200)
            co_return Status(status_code::upstream_error, where + ": answered " + std::to_string(head->status));
        if (head->content_length && *head->content_length > limits.max_bytes)
            co_return Status(status_code::too_large, where + ": " + std::to_string(*head->content_length) +
                                                         " bytes, over the limit of " +
                                                         std::to_string(limits.max_bytes));
        auto body = co_await u.read_all(size_t(limits.max_bytes));
        if (!body.ok()) {
            if (body.status().code() == status_code::too_large)
                co_return Status(status_code::too_large,
                                 where + ": over the limit of " + std::to_string(limits.max_bytes) + " bytes");
            co_return body.status();
        }
        co_return fetched{std::move(body.value()), head->content_type, where};
    }
}

}  // namespace baton
