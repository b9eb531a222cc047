// log_backend.h — what log.cpp shares with the logger's test seam (log_test_seam.cpp); private to base.
#pragma once

#include <spdlog/common.h>
#include <spdlog/sinks/sink.h>

#include <memory>
#include <string_view>

#include "baton/base/log.h"

namespace baton {

// log_format_line appends one whole line, '\n' included, for a message at `time` (log.h has the formats).
void log_format_line(spdlog::memory_buf_t & out, spdlog::log_clock::time_point time, log_level level,
                     std::string_view request_id, std::string_view msg, log_format f);

// log_sink_replace makes `sink` (given Baton's line formatter) the destination of every line from now on;
// nullptr: stderr again. Thread-safe: lines being written finish on the old sink.
void log_sink_replace(std::shared_ptr<spdlog::sinks::sink> sink);

}  // namespace baton
