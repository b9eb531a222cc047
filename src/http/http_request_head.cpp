// http_request_head.cpp — see http_request_head.h.
#include "http_request_head.h"

namespace baton {

namespace http = beast::http;

void http_request_parser_configure(http_request_parser & p, const http_limits & limits) {
    p.header_limit(uint32_t(limits.max_header_bytes));
    p.body_limit(boost::none);  // the route's cap is enforced while the body is read
}

http_response http_parse_error_response(const error_code & ec, const http_limits & limits) {
    const bool big = ec == http::error::header_limit || ec == http::error::buffer_overflow;
    if (big)
        return http_error_response_status(
            431, Status(status_code::too_large, "request line and headers: over --max-header-bytes (" + std::to_string(limits.max_header_bytes) + ")"));
    return http_error_response_status(400, Status(status_code::invalid_argument, "malformed HTTP request: " + ec.message()));
}

http_head_info http_request_head_take(const http_request_parser & p, const http_limits & limits, http_request & out) {
    const auto & m = p.get();
    http_head_info info;
    out.method = std::string(m.method_string());
    out.target = std::string(m.target());
    const size_t q = out.target.find('?');
    out.path = out.target.substr(0, q);
    if (q != std::string::npos) out.query = out.target.substr(q + 1);
    size_t n = 0;
    for (const auto & f : m) {
        if (++n > limits.max_headers) break;
        out.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    }
    info.keep_alive = m.keep_alive();
    info.head = m.method() == http::verb::head;
    info.body_pending = (p.content_length() && *p.content_length() > 0) || p.chunked();
    if (n > limits.max_headers)
        info.error = Status(status_code::too_large, "headers: more than --max-headers (" + std::to_string(limits.max_headers) + ")");
    return info;
}

}  // namespace baton
