// http_message.h — a parsed HTTP request and a response to send, as Baton's handlers see them.
//
// The edge (http_server) fills http_request once: method, path, query, headers, the body (already read
// and capped for the route) and the route template it matched. Handlers answer with an http_response or
// through the streaming calls of http_exchange (http_server.h).
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace baton {

using http_headers = std::vector<std::pair<std::string, std::string>>;

// http_header_find: the first value of a header (name compared case-insensitively), or "".
std::string_view http_header_find(const http_headers & h, std::string_view name);

// http_query_value: the value of the last `key=value` of a query string ("a=1&action=save"), as sent (not
// percent-decoded), or "" when the key is absent.
std::string_view http_query_value(std::string_view query, std::string_view key);

// The request id: read from a request (when valid: request_id_valid in base/log.h), generated when absent,
// echoed on the response, carried by a router to the nodes it calls, and printed on every log line the
// request causes.
inline constexpr std::string_view http_header_request_id = "X-Request-Id";

struct http_request {
    std::string id;      // X-Request-Id: the client's (when valid) or a new one (the edge sets it)
    std::string method;  // "GET", "POST", ... as sent
    std::string target;  // the request target as sent
    std::string path;    // target without the query (not percent-decoded)
    std::string query;   // after '?', or ""
    http_headers headers;
    std::vector<uint8_t> body;                  // the whole body (capped per route); pooled when large
    std::map<std::string, std::string> params;  // path parameters of the route template ({id})
    std::string route;                          // the matched template ("/v1/slots/{id}/state") or ""

    std::string_view header(std::string_view name) const { return http_header_find(headers, name); }
    std::string_view query_value(std::string_view key) const { return http_query_value(query, key); }
    std::string_view body_text() const { return {reinterpret_cast<const char *>(body.data()), body.size()}; }
};

struct http_response {
    int status = 200;
    std::string content_type = "application/json";
    http_headers headers;
    std::string body;

    static http_response json(std::string body, int status = 200) {
        http_response r;
        r.status = status;
        r.body = std::move(body);
        return r;
    }
};

}  // namespace baton
