// request_fields.h — the field readers every request parser of the dialect shares (private to the openai
// module): OpenAI's and llama-server's bodies (openai.cpp), Anthropic's Messages bodies
// (anthropic_request.cpp), embeddings and rerank bodies read their numbers, flags, stop strings and
// client-ordered parts alike.
// Readers: absent or null leaves the target unchanged; a wrong type or a value out of range is
// invalid_argument naming the field. Thread-safety: pure functions.
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "baton/base/status.h"

namespace baton::request_fields {

// body_object: a request body parsed, which must be one JSON object (invalid_argument otherwise).
Result<nlohmann::json> body_object(std::string_view body);

Status get_number(const nlohmann::json & j, const char * key, float & out, double lo, double hi);

template <typename T>
Status get_int(const nlohmann::json & j, const char * key, T & out, int64_t lo, int64_t hi) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return {};
    if (!it->is_number_integer()) return invalid_input(std::string(key) + ": must be an integer");
    const int64_t v = it->is_number_unsigned() ? int64_t(std::min<uint64_t>(it->get<uint64_t>(), uint64_t(INT64_MAX)))
                                               : it->get<int64_t>();
    if (v < lo || v > hi)
        return invalid_input(std::string(key) + ": " + it->dump() + " is not in " + std::to_string(lo) + ".." +
                             std::to_string(hi));
    out = T(v);
    return {};
}

Status get_bool(const nlohmann::json & j, const char * key, bool & out);

// get_stop reads stop strings under key: a string or an array of at most openai_stop_max non-empty strings.
Status get_stop(const nlohmann::json & j, const char * key, std::vector<std::string> & out);

// too_large: the Status of a body over a prompt limit (413), naming the flag in m.
inline Status too_large(const std::string & m) { return {status_code::too_large, m}; }

// json_plain: nested at most as deep as a chat template takes (chat_template_json_depth_max), every number
// finite (so the value survives a dump and a re-parse). depth: the value's own depth (0 at a field).
bool json_plain(const nlohmann::json & v, int depth);

// ordered_parts re-reads the body keeping the client's key order, but only "tools", "json_schema" and
// "response_format" (what a chat template shows, or a grammar's properties follow, in that order); the
// parser skips every other value without building it. nlohmann's ordered objects insert in linear time per
// key, so the kept values are bounded first, on the sorted parse j: at most 2,000 keys in one object and
// 20,000 in all (a 400 beyond). An empty object when the body has none of them.
Result<nlohmann::ordered_json> ordered_parts(std::string_view body, const nlohmann::json & j);

}  // namespace baton::request_fields
