// http_request_head.cpp — see http_request_head.h.
#include "http_request_head.h"

#include <algorithm>

namespace baton {

namespace http = beast::http;

namespace {

class head_error_category : public boost::system::error_category {
  public:
    const char * name() const noexcept override { return "baton.http.head"; }
    std::string message(int) const override {
        return "obs-fold: a header line starts with SP or HTAB (line folding is refused, RFC 9112 section 5.2)";
    }
};

const head_error_category k_head_errors;

}  // namespace

error_code http_error_obs_fold() { return error_code(1, k_head_errors); }

void http_request_parser_configure(http_request_parser & p, const http_limits & limits) {
    p.header_limit(uint32_t(limits.max_header_bytes));
    p.body_limit(boost::none);  // the route's cap is enforced while the body is read
    p.eager(false);             // http_request_head_put stops at the end of the head, as async_read_header does
}

http_response http_parse_error_response(const error_code & ec, const http_limits & limits) {
    const bool big = ec == http::error::header_limit || ec == http::error::buffer_overflow;
    if (big)
        return http_error_response_status(
            431, Status(status_code::too_large, "request line and headers: over --max-header-bytes (" + std::to_string(limits.max_header_bytes) + ")"));
    return http_error_response_status(400, Status(status_code::invalid_argument, "malformed HTTP request: " + ec.message()));
}

size_t http_request_head_put(http_request_parser & p, net::const_buffer in, http_head_scan & s, error_code & ec) {
    // The parser consumes whole lines only (the request line, then each field once it has seen the byte
    // after its CRLF), so unconsumed input always starts at a line start once anything was consumed, and
    // a folded line is still unconsumed when its SP/HTAB arrives.
    const char * b = static_cast<const char *>(in.data());
    for (; !s.head_end && s.scanned < in.size(); ++s.scanned) {
        const char c = b[s.scanned];
        if (s.line_start && (c == ' ' || c == '\t')) {
            ec = http_error_obs_fold();
            return 0;
        }
        if (s.line_start && c == '\r') s.head_end = true;  // the empty line: what follows is the body
        s.line_start = c == '\n';
    }
    const size_t used = p.put(in, ec);
    if (!s.head_end) s.scanned -= std::min(used, s.scanned);  // the next input starts `used` bytes later
    return used;
}

http_head_info http_request_head_take(const http_request_parser & p, const http_limits & limits, http_request & out) {
    const auto & m = p.get();
    http_head_info info;
    out.method = std::string(m.method_string());
    out.target = std::string(m.target());
    const size_t q = out.target.find('?');
    out.path = out.target.substr(0, q);
    if (q != std::string::npos) out.query = out.target.substr(q + 1);
    size_t n = 0, n_host = 0;
    for (const auto & f : m) {
        if (f.name() == http::field::host) ++n_host;
        if (++n > limits.max_headers) continue;  // counted (Host too), not kept
        out.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    }
    info.keep_alive = m.keep_alive();
    info.head = m.method() == http::verb::head;
    info.body_pending = (p.content_length() && *p.content_length() > 0) || p.chunked();
    if (n > limits.max_headers) {
        info.error = Status(status_code::too_large, "headers: more than --max-headers (" + std::to_string(limits.max_headers) + ")");
        info.error_status = 431;
    } else if (n_host > 1) {
        info.error = Status(status_code::invalid_argument,
                            "Host: " + std::to_string(n_host) + " Host fields (RFC 9112 section 3.2 allows one)");
        info.error_status = 400;
    } else if (n_host == 0 && m.version() >= 11) {
        info.error = Status(status_code::invalid_argument,
                            "Host: missing (an HTTP/1.1 request must carry it, RFC 9112 section 3.2)");
        info.error_status = 400;
    }
    return info;
}

Status http_request_body_admit(const http_request_parser & p, uint64_t route_cap, const http_limits & limits,
                               std::string_view route) {
    const std::string where = route.empty() ? std::string("this route") : std::string(route);
    if (auto cl = p.content_length()) {
        const uint64_t len = *cl;
        if (len > route_cap)
            return Status(status_code::too_large, route_cap == 0
                                                      ? "body: " + where + " takes no body"
                                                      : "body: " + std::to_string(len) + " bytes exceed the limit of " +
                                                            std::to_string(route_cap) + " bytes for " + where);
        if (len > limits.max_body_memory)
            return Status(status_code::too_large, "body: " + std::to_string(len) + " bytes exceed --max-body-memory (" +
                                                      std::to_string(limits.max_body_memory) + " bytes)");
        return Status();
    }
    if (p.chunked() && route_cap == 0) return Status(status_code::too_large, "body: " + where + " takes no body");
    return Status();
}

}  // namespace baton
