// status.cpp — names and formatting for Status (the lowest module, so every other module can use it).
#include "baton/base/status.h"

namespace baton {

const char * status_code_name(status_code code) {
    switch (code) {
        case status_code::ok: return "ok";
        case status_code::invalid_argument: return "invalid_argument";
        case status_code::not_found: return "not_found";
        case status_code::busy: return "busy";
        case status_code::unavailable: return "unavailable";
        case status_code::too_large: return "too_large";
        case status_code::corrupt: return "corrupt";
        case status_code::incompatible: return "incompatible";
        case status_code::unsupported: return "unsupported";
        case status_code::io_error: return "io_error";
        case status_code::engine_error: return "engine_error";
        case status_code::cancelled: return "cancelled";
        case status_code::deadline_exceeded: return "deadline_exceeded";
        case status_code::unauthenticated: return "unauthenticated";
        case status_code::permission_denied: return "permission_denied";
        case status_code::upstream_error: return "upstream_error";
        case status_code::dependency_failed: return "dependency_failed";
        case status_code::not_implemented: return "not_implemented";
        case status_code::resource_exhausted: return "resource_exhausted";
        case status_code::internal: return "internal";
    }
    return "unknown";
}

std::string Status::to_string() const {
    if (ok()) return "ok";
    return std::string(status_code_name(code_)) + ": " + message_;
}

}  // namespace baton
