// http_errors.cpp — Status -> HTTP status and JSON error body (see http_errors.h for the table).
#include "http_errors.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

namespace baton {

int http_status_for(status_code code) {
    switch (code) {
        case status_code::ok: return 200;
        case status_code::invalid_argument: return 400;
        case status_code::unauthenticated: return 401;
        case status_code::not_found: return 404;
        case status_code::busy: return 409;
        case status_code::too_large: return 413;
        case status_code::corrupt:
        case status_code::incompatible:
        case status_code::unsupported: return 422;
        case status_code::upstream_error: return 502;
        case status_code::unavailable:
        case status_code::cancelled: return 503;  // cancelled reaches a client only when the node shuts down
        case status_code::deadline_exceeded: return 504;
        case status_code::io_error:
        case status_code::engine_error:
        case status_code::internal: return 500;
    }
    return 500;
}

std::string http_error_json(const Status & st) {
    nlohmann::json j = {{"error",
                         {{"code", http_status_for(st.code())},
                          {"type", status_code_name(st.code())},
                          {"message", st.message()}}}};
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

http_error http_error_for(const Status & st) {
    http_error e;
    e.status = http_status_for(st.code());
    e.body = http_error_json(st);
    if (e.status == 503) e.retry_after_s = 1;
    return e;
}

void http_send_error(httplib::Response & res, const Status & st) {
    const http_error e = http_error_for(st);
    res.status = e.status;
    if (e.retry_after_s > 0) res.set_header("Retry-After", std::to_string(e.retry_after_s));
    res.set_content(e.body, "application/json");
}

}  // namespace baton
