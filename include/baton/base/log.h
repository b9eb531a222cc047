// log.h — Baton's one logger: levels, text or JSON lines on stderr, the request id on every line a request
// causes.
//
// Every diagnostic a Baton process writes goes through here (no raw fprintf(stderr, ...) in modules;
// scripts/check-logging). A line is one of:
//   text:  2026-12-02T18:40:01.123Z info [req=abc123] message
//   json:  {"time":"2026-12-02T18:40:01.123Z","level":"info","request_id":"abc123","msg":"message"}
// Time is UTC with milliseconds; `[req=...]` / "request_id" appear only when the line names a request. The
// message (and id) are escaped so that one call is always exactly one line: in JSON as JSON strings
// (quotes, backslashes, control characters; invalid UTF-8 becomes U+FFFD), in text with control characters
// written as \n, \t, \xNN and invalid UTF-8 as U+FFFD, so nothing a client sends can forge a line.
//
// The message is formatted with libfmt ({} placeholders, checked at compile time) only when its level is
// enabled; spdlog (its stderr sink: one mutex, one write per line, flushed) is behind log.cpp and never seen
// by callers. Thread-safety: every function here may be called from any thread; lines never interleave.
#pragma once

#include <fmt/base.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "baton/base/status.h"

namespace baton {

enum class log_level : uint8_t { debug, info, warn, error, off };
enum class log_format : uint8_t { text, json };

// log_level_parse: "debug" | "info" | "warn" | "error" | "off"; invalid_argument naming the values otherwise.
Result<log_level> log_level_parse(std::string_view s);
// log_format_parse: "text" | "json"; invalid_argument otherwise.
Result<log_format> log_format_parse(std::string_view s);
// The names the parsers take ("info", "json").
const char * log_level_name(log_level level);
const char * log_format_name(log_format format);

// log_configure sets the process-wide level (lines below it are dropped, `off` drops all) and format.
// Default before any call: info, text. Lines already being written finish in the old format.
void log_configure(log_level level, log_format format);
// log_enabled: whether a line at `level` would be written now.
bool log_enabled(log_level level);

// The request a line belongs to: printed on every line a request causes ("" = none). Its id is an
// X-Request-Id value: request_id_new()'s, or a client's that request_id_valid accepted.
struct log_request {
    std::string_view id;
};

// log_write writes one line (the log_* templates below call it with their arguments type-erased, so
// formatting code is compiled once, in log.cpp). REQUIRES: level is not `off`.
void log_write(log_level level, std::string_view request_id, fmt::string_view format, fmt::format_args args);

template <class... A>
void log_debug(fmt::format_string<A...> f, A &&... a) {
    if (log_enabled(log_level::debug)) log_write(log_level::debug, {}, f, fmt::make_format_args(a...));
}
template <class... A>
void log_info(fmt::format_string<A...> f, A &&... a) {
    if (log_enabled(log_level::info)) log_write(log_level::info, {}, f, fmt::make_format_args(a...));
}
template <class... A>
void log_warn(fmt::format_string<A...> f, A &&... a) {
    if (log_enabled(log_level::warn)) log_write(log_level::warn, {}, f, fmt::make_format_args(a...));
}
template <class... A>
void log_error(fmt::format_string<A...> f, A &&... a) {
    if (log_enabled(log_level::error)) log_write(log_level::error, {}, f, fmt::make_format_args(a...));
}
template <class... A>
void log_debug(log_request r, fmt::format_string<A...> f, A &&... a) {
    if (log_enabled(log_level::debug)) log_write(log_level::debug, r.id, f, fmt::make_format_args(a...));
}
template <class... A>
void log_info(log_request r, fmt::format_string<A...> f, A &&... a) {
    if (log_enabled(log_level::info)) log_write(log_level::info, r.id, f, fmt::make_format_args(a...));
}
template <class... A>
void log_warn(log_request r, fmt::format_string<A...> f, A &&... a) {
    if (log_enabled(log_level::warn)) log_write(log_level::warn, r.id, f, fmt::make_format_args(a...));
}
template <class... A>
void log_error(log_request r, fmt::format_string<A...> f, A &&... a) {
    if (log_enabled(log_level::error)) log_write(log_level::error, r.id, f, fmt::make_format_args(a...));
}

// X-Request-Id values. request_id_new: a fresh id, 16 lowercase hex characters (64 bits from a per-thread
// generator seeded by std::random_device). request_id_valid: whether an id a client sent may be used as
// is: 1..128 characters, each printable ASCII without space (0x21..0x7e); a caller replaces any other with
// request_id_new().
std::string request_id_new();
bool request_id_valid(std::string_view id);

}  // namespace baton
