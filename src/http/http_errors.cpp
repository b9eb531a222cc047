// http_errors.cpp — Status -> HTTP status and JSON error body (see http_errors.h for the table).
#include "baton/http/http_errors.h"

#include <nlohmann/json.hpp>

#include <strings.h>

namespace baton {

std::string_view http_query_value(std::string_view query, std::string_view key) {
    std::string_view found;
    while (!query.empty()) {
        const size_t amp = query.find('&');
        const std::string_view kv = query.substr(0, amp);
        if (kv.size() > key.size() && kv.substr(0, key.size()) == key && kv[key.size()] == '=')
            found = kv.substr(key.size() + 1);
        query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    }
    return found;
}

std::string_view http_header_find(const http_headers & h, std::string_view name) {
    for (const auto & [k, v] : h)
        if (k.size() == name.size() && strncasecmp(k.data(), name.data(), k.size()) == 0) return v;
    return {};
}

int http_status_for(status_code code) {
    switch (code) {
        case status_code::ok: return 200;
        case status_code::invalid_argument:
        case status_code::context_exceeded: return 400;
        case status_code::unauthenticated: return 401;
        case status_code::permission_denied: return 403;
        case status_code::not_found: return 404;
        case status_code::busy: return 409;
        case status_code::too_large: return 413;
        case status_code::corrupt:
        case status_code::incompatible:
        case status_code::unsupported: return 422;
        case status_code::upstream_error: return 502;
        case status_code::dependency_failed: return 424;
        case status_code::not_implemented: return 501;
        case status_code::resource_exhausted: return 507;  // Insufficient Storage: a full store (the tier's Valkey)
        case status_code::unavailable:
        case status_code::cancelled: return 503;  // cancelled reaches a client only when the node shuts down
        case status_code::deadline_exceeded: return 504;
        case status_code::io_error:
        case status_code::engine_error:
        case status_code::internal: return 500;
    }
    return 500;
}

const char * http_error_type(status_code code) {
    switch (code) {
        case status_code::invalid_argument:
        case status_code::too_large:
        case status_code::corrupt:
        case status_code::incompatible:
        case status_code::unsupported: return "invalid_request_error";
        case status_code::context_exceeded: return "exceed_context_size_error";
        case status_code::unauthenticated: return "authentication_error";
        case status_code::permission_denied: return "permission_error";
        case status_code::not_found: return "not_found_error";
        case status_code::not_implemented: return "not_supported_error";
        case status_code::busy:
        case status_code::unavailable:
        case status_code::cancelled: return "unavailable_error";
        case status_code::ok:
        case status_code::upstream_error:
        case status_code::dependency_failed:
        case status_code::resource_exhausted:
        case status_code::deadline_exceeded:
        case status_code::io_error:
        case status_code::engine_error:
        case status_code::internal: return "server_error";
    }
    return "server_error";
}

std::string http_error_json(const Status & st, int http_status) {
    nlohmann::json e = {{"code", http_status ? http_status : http_status_for(st.code())},
                        {"message", st.message()},
                        {"type", http_error_type(st.code())},
                        {"status", status_code_name(st.code())}};
    if (const auto * over = std::get_if<context_overflow>(&st.detail())) {
        e["n_prompt_tokens"] = over->n_prompt_tokens;
        e["n_ctx"] = over->n_ctx;
    }
    return nlohmann::json{{"error", std::move(e)}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Status http_error_status(std::string_view body) {
    const auto j = nlohmann::json::parse(body, nullptr, false);
    if (!j.is_object() || !j.contains("error") || !j["error"].is_object()) return {};
    const auto & e = j["error"];
    if (!e.contains("status") || !e["status"].is_string() || !e.contains("message") || !e["message"].is_string())
        return {};
    const auto code = status_code_from_name(e["status"].get<std::string>());
    if (!code || *code == status_code::ok) return {};
    status_detail detail;
    if (*code == status_code::context_exceeded && e.contains("n_prompt_tokens") && e.contains("n_ctx") &&
        e["n_prompt_tokens"].is_number_unsigned() && e["n_ctx"].is_number_unsigned())
        detail = context_overflow{e["n_prompt_tokens"].get<uint64_t>(), e["n_ctx"].get<uint64_t>()};
    return Status(*code, e["message"].get<std::string>(), std::move(detail));
}

http_response http_error_response_status(int http_status, const Status & st) {
    http_response r = http_response::json(http_error_json(st, http_status), http_status);
    if (http_status == 503) r.headers.emplace_back("Retry-After", "1");
    return r;
}

http_response http_error_response(const Status & st) { return http_error_response_status(http_status_for(st.code()), st); }

}  // namespace baton
