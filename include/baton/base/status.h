// status.h — errors as values across Baton's module boundaries.
//
// Every fallible function that crosses a module boundary returns Status or Result<T>. A Status carries a
// code (what kind of failure, which decides the HTTP status in exactly one place: the HTTP edge's error
// map, src/http/http_errors.cpp) and a message that names the field, the offset and the values involved. Exceptions thrown by third-party
// code are caught where they enter and turned into a Status. Thread-safety: plain values, no shared state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace baton {

enum class status_code : uint8_t {
    ok = 0,
    invalid_argument,   // a parameter or request field is malformed or out of range
    not_found,          // unknown slot, file, route
    busy,               // the resource exists but is taken (slot busy)
    unavailable,        // no capacity now (no free slot); retry later
    too_large,          // over a configured size limit
    corrupt,            // untrusted bytes failed validation (truncation, checksum, bad field)
    incompatible,       // valid bytes that do not fit this model/context (fingerprint, KV type, ...)
    unsupported,        // a newer format version or a feature this build does not have
    io_error,           // reading or writing a file or socket failed
    engine_error,       // libllama refused an operation on valid input
    cancelled,          // the request was cancelled (client went away, shutdown)
    deadline_exceeded,  // a timeout elapsed
    unauthenticated,    // missing or wrong API key; a state without a valid MAC
    permission_denied,  // authenticated or not, this caller may not do this (a browser page on a node-internal route)
    upstream_error,     // a node the router forwarded to failed, timed out or answered garbage
    dependency_failed,  // what this request names on another node (a held state: direct transfer) could not be had
    not_implemented,    // an endpoint or action this server does not offer as configured (llama-server's 501)
    resource_exhausted,  // a store is full (Valkey's OOM under maxmemory with noeviction); the caller may go on without it
    context_exceeded,  // the request's prompt does not fit the slot's context (detail: context_overflow)
    internal,          // a bug in Baton: should never happen (stays last: status_code_from_name counts to it)
};

// status_code_name returns a stable lower_snake name ("corrupt") used in logs, metrics and JSON errors.
const char * status_code_name(status_code code);

// status_code_from_name is status_code_name's inverse (nullopt for a name it does not give).
std::optional<status_code> status_code_from_name(std::string_view name);

// context_overflow: the numbers a context_exceeded Status carries, for clients that read them (llama-server's
// error fields n_prompt_tokens and n_ctx).
struct context_overflow {
    uint64_t n_prompt_tokens = 0;
    uint64_t n_ctx = 0;  // the context one slot can use
    bool operator==(const context_overflow &) const = default;
};

// status_detail: typed facts a Status may carry besides its message (none for most codes).
using status_detail = std::variant<std::monostate, context_overflow>;

class [[nodiscard]] Status {
  public:
    Status() = default;
    Status(status_code code, std::string message) : code_(code), message_(std::move(message)) {}
    Status(status_code code, std::string message, status_detail detail)
        : code_(code), message_(std::move(message)), detail_(std::move(detail)) {}

    static Status ok_status() { return {}; }

    bool ok() const { return code_ == status_code::ok; }
    status_code code() const { return code_; }
    const std::string & message() const { return message_; }
    const status_detail & detail() const { return detail_; }

    // to_string returns "code: message", or "ok".
    std::string to_string() const;

  private:
    status_code code_ = status_code::ok;
    std::string message_;
    status_detail detail_;
};

// context_exceeded_status: a prompt of n_prompt tokens that does not fit a slot context of n_ctx, with
// llama-server's message ("request (N tokens) exceeds the available context size (M tokens), ..."). at_least:
// n_prompt is a lower bound (a tokenizer that stopped counting once the prompt could not fit).
Status context_exceeded_status(uint64_t n_prompt, uint64_t n_ctx, bool at_least = false);

// invalid_input: the Status a parser returns for input it refuses (an HTTP 400 at the edge).
inline Status invalid_input(std::string message) { return Status(status_code::invalid_argument, std::move(message)); }

// Result<T> holds either a value or a non-ok Status.
template <typename T>
class [[nodiscard]] Result {
  public:
    Result(T value) : v_(std::move(value)) {}         // NOLINT: implicit by design
    Result(Status status) : v_(std::move(status)) {}  // NOLINT: implicit by design
    Result(status_code code, std::string message) : v_(Status(code, std::move(message))) {}

    bool ok() const { return std::holds_alternative<T>(v_); }
    // REQUIRES: ok().
    T & value() & { return std::get<T>(v_); }
    const T & value() const & { return std::get<T>(v_); }
    T && value() && { return std::get<T>(std::move(v_)); }
    T * operator->() { return &value(); }
    const T * operator->() const { return &value(); }
    T & operator*() { return value(); }
    // status() is ok_status() when ok().
    Status status() const { return ok() ? Status() : std::get<Status>(v_); }

  private:
    std::variant<T, Status> v_;
};

}  // namespace baton

// BATON_RETURN_IF_ERROR(expr): evaluate a Status expression and return it from the caller if not ok.
#define BATON_RETURN_IF_ERROR(expr)                                                                                    \
    do {                                                                                                               \
        ::baton::Status baton_status_ = (expr);                                                                        \
        if (!baton_status_.ok()) return baton_status_;                                                                 \
    } while (0)
