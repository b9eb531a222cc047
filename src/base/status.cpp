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
        case status_code::context_exceeded: return "context_exceeded";
        case status_code::internal: return "internal";
    }
    return "unknown";
}

std::optional<status_code> status_code_from_name(std::string_view name) {
    for (int c = 0; c <= int(status_code::internal); ++c)
        if (name == status_code_name(status_code(c))) return status_code(c);
    return std::nullopt;
}

Status context_exceeded_status(uint64_t n_prompt, uint64_t n_ctx, bool at_least) {
    return Status(status_code::context_exceeded,
                  std::string("request (") + (at_least ? "at least " : "") + std::to_string(n_prompt) +
                      " tokens) exceeds the available context size (" + std::to_string(n_ctx) +
                      " tokens), try increasing it",
                  context_overflow{n_prompt, n_ctx});
}

std::string Status::to_string() const {
    if (ok()) return "ok";
    return std::string(status_code_name(code_)) + ": " + message_;
}

}  // namespace baton
