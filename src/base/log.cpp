// log.cpp — the logger behind log.h: one spdlog logger whose lines a formatter of ours writes.
//
// spdlog does the plumbing: the time of each line (log_msg::time), the sinks and their mutex, one write and
// a flush per line. The logger has one sink, a dist_sink_mt (a sink whose sinks can be swapped while other
// threads log, which the test seam uses) holding spdlog's stderr_sink_mt. line_formatter turns a message
// into a text or JSON line (log_format_line); the request id reaches it through a thread-local set by
// log_write around the synchronous logger->log() call, since spdlog's log_msg has no field for it.
#include "baton/base/log.h"

#include <fmt/format.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/dist_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <atomic>
#include <ctime>
#include <random>

#include "log_backend.h"

namespace baton {

namespace {

std::atomic<log_level> g_level{log_level::info};
std::atomic<log_format> g_format{log_format::text};
thread_local std::string_view t_request_id;

spdlog::level::level_enum spdlog_level(log_level l) {
    switch (l) {
        case log_level::debug: return spdlog::level::debug;
        case log_level::info: return spdlog::level::info;
        case log_level::warn: return spdlog::level::warn;
        case log_level::error: return spdlog::level::err;
        case log_level::off: break;
    }
    return spdlog::level::off;
}

log_level level_of(spdlog::level::level_enum l) {
    switch (l) {
        case spdlog::level::trace:
        case spdlog::level::debug: return log_level::debug;
        case spdlog::level::info: return log_level::info;
        case spdlog::level::warn: return log_level::warn;
        default: return log_level::error;
    }
}

// utf8_next: the length of the valid UTF-8 sequence at s[i] (1..4), or 0 when the bytes there are not one
// (a stray continuation byte, an overlong form, a surrogate, beyond U+10FFFF, or cut short).
size_t utf8_next(std::string_view s, size_t i) {
    const auto b = [&](size_t k) { return uint8_t(s[k]); };
    const uint8_t c = b(i);
    if (c < 0x80) return 1;
    size_t n;
    uint8_t lo = 0x80, hi = 0xBF;  // the range of the second byte
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c == 0xE0) n = 3, lo = 0xA0;
    else if (c == 0xED) n = 3, hi = 0x9F;
    else if (c >= 0xE1 && c <= 0xEF) n = 3;
    else if (c == 0xF0) n = 4, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3) n = 4;
    else if (c == 0xF4) n = 4, hi = 0x8F;
    else return 0;
    if (s.size() - i < n) return 0;
    if (b(i + 1) < lo || b(i + 1) > hi) return 0;
    for (size_t k = 2; k < n; ++k)
        if (b(i + k) < 0x80 || b(i + k) > 0xBF) return 0;
    return n;
}

void put(spdlog::memory_buf_t & out, std::string_view s) { out.append(s.data(), s.data() + s.size()); }

constexpr std::string_view k_replacement = "\xEF\xBF\xBD";  // U+FFFD

// append_escaped: s as one line's worth of text. json: the inside of a JSON string (RFC 8259). text:
// control characters as \n, \r, \t or \xNN and backslashes doubled, so an escaped line is never taken for
// two. Both: invalid UTF-8 as U+FFFD.
void append_escaped(spdlog::memory_buf_t & out, std::string_view s, log_format f) {
    const bool json = f == log_format::json;
    for (size_t i = 0; i < s.size();) {
        const uint8_t c = uint8_t(s[i]);
        if (c >= 0x80) {
            const size_t n = utf8_next(s, i);
            if (n == 0) {
                put(out, k_replacement);
                ++i;
            } else {
                put(out, s.substr(i, n));
                i += n;
            }
            continue;
        }
        ++i;
        switch (c) {
            case '\n': put(out, std::string_view("\\n")); continue;
            case '\r': put(out, std::string_view("\\r")); continue;
            case '\t': put(out, std::string_view("\\t")); continue;
            case '\\': put(out, std::string_view("\\\\")); continue;
            case '"':
                if (json) {
                    put(out, std::string_view("\\\""));
                    continue;
                }
                break;
            default: break;
        }
        if (c >= 0x20 && c != 0x7f) {
            out.push_back(char(c));
            continue;
        }
        put(out, json ? std::string_view("\\u00") : std::string_view("\\x"));  // \u00XX or \xXX
        constexpr char k_hex[] = "0123456789abcdef";
        out.push_back(k_hex[c >> 4]);
        out.push_back(k_hex[c & 15]);
    }
}

// The line's time: 2026-12-02T18:40:01.123Z.
void append_time(spdlog::memory_buf_t & out, spdlog::log_clock::time_point t) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
    const std::time_t secs = std::time_t(ms / 1000 - (ms % 1000 < 0));
    std::tm tm{};
    gmtime_r(&secs, &tm);
    fmt::format_to(fmt::appender(out), "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                   tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, int((ms % 1000 + 1000) % 1000));
}

class line_formatter final : public spdlog::formatter {
  public:
    void format(const spdlog::details::log_msg & msg, spdlog::memory_buf_t & dest) override {
        log_format_line(dest, msg.time, level_of(msg.level), t_request_id,
                        std::string_view(msg.payload.data(), msg.payload.size()), g_format.load());
    }
    std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<line_formatter>(); }
};

struct backend {
    std::shared_ptr<spdlog::sinks::sink> stderr_sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    std::shared_ptr<spdlog::sinks::dist_sink_mt> dist = std::make_shared<spdlog::sinks::dist_sink_mt>();
    spdlog::logger logger{"baton", dist};
    backend() {
        logger.set_level(spdlog::level::trace);  // log_enabled filters; the logger writes what reaches it
        stderr_sink->set_formatter(std::make_unique<line_formatter>());  // the sink flushes every line itself
        dist->set_sinks({stderr_sink});
    }
};

backend & backend_get() {
    static backend * b = new backend;  // never destroyed: threads may log while the process exits
    return *b;
}

}  // namespace

void log_format_line(spdlog::memory_buf_t & out, spdlog::log_clock::time_point time, log_level level,
                     std::string_view request_id, std::string_view msg, log_format f) {
    if (f == log_format::json) {
        put(out, std::string_view("{\"time\":\""));
        append_time(out, time);
        put(out, std::string_view("\",\"level\":\""));
        put(out, std::string_view(log_level_name(level)));
        if (!request_id.empty()) {
            put(out, std::string_view("\",\"request_id\":\""));
            append_escaped(out, request_id, f);
        }
        put(out, std::string_view("\",\"msg\":\""));
        append_escaped(out, msg, f);
        put(out, std::string_view("\"}\n"));
        return;
    }
    append_time(out, time);
    out.push_back(' ');
    put(out, std::string_view(log_level_name(level)));
    out.push_back(' ');
    if (!request_id.empty()) {
        put(out, std::string_view("[req="));
        append_escaped(out, request_id, f);
        put(out, std::string_view("] "));
    }
    append_escaped(out, msg, f);
    out.push_back('\n');
}

void log_sink_replace(std::shared_ptr<spdlog::sinks::sink> sink) {
    backend & b = backend_get();
    if (!sink) sink = b.stderr_sink;
    sink->set_formatter(std::make_unique<line_formatter>());
    b.dist->set_sinks({std::move(sink)});
}

Result<log_level> log_level_parse(std::string_view s) {
    for (log_level l : {log_level::debug, log_level::info, log_level::warn, log_level::error, log_level::off})
        if (s == log_level_name(l)) return l;
    return Status(status_code::invalid_argument,
                  "log level '" + std::string(s) + "' is not debug, info, warn, error or off");
}

Result<log_format> log_format_parse(std::string_view s) {
    for (log_format f : {log_format::text, log_format::json})
        if (s == log_format_name(f)) return f;
    return Status(status_code::invalid_argument, "log format '" + std::string(s) + "' is not text or json");
}

const char * log_level_name(log_level level) {
    switch (level) {
        case log_level::debug: return "debug";
        case log_level::info: return "info";
        case log_level::warn: return "warn";
        case log_level::error: return "error";
        case log_level::off: break;
    }
    return "off";
}

const char * log_format_name(log_format format) { return format == log_format::json ? "json" : "text"; }

void log_configure(log_level level, log_format format) {
    g_format.store(format);
    g_level.store(level);
}

bool log_enabled(log_level level) {
    return level != log_level::off && uint8_t(level) >= uint8_t(g_level.load(std::memory_order_relaxed));
}

void log_write(log_level level, std::string_view request_id, fmt::string_view format, fmt::format_args args) {
    if (level == log_level::off) return;
    spdlog::memory_buf_t msg;
    fmt::vformat_to(fmt::appender(msg), format, args);
    backend & b = backend_get();
    const std::string_view outer = t_request_id;  // a line logged while formatting another (never, but safe)
    t_request_id = request_id;
    b.logger.log(spdlog_level(level), spdlog::string_view_t(msg.data(), msg.size()));
    t_request_id = outer;
}

std::string request_id_new() {
    thread_local std::mt19937_64 gen = [] {
        std::random_device rd;
        std::seed_seq seq{rd(), rd(), rd(), rd(), rd(), rd(), rd(), rd()};
        return std::mt19937_64(seq);
    }();
    return fmt::format("{:016x}", gen());
}

bool request_id_valid(std::string_view id) {
    if (id.empty() || id.size() > 128) return false;
    for (char c : id)
        if (uint8_t(c) < 0x21 || uint8_t(c) > 0x7e) return false;
    return true;
}

}  // namespace baton
