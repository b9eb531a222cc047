// request_fields.cpp — see request_fields.h.
#include "request_fields.h"

#include <array>
#include <cmath>

#include "baton/openai/chat_template.h"
#include "baton/openai/openai.h"

namespace baton::request_fields {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

Status get_number(const json & j, const char * key, float & out, double lo, double hi) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return {};
    if (!it->is_number()) return invalid_input(std::string(key) + ": must be a number");
    const double v = it->get<double>();
    if (!(v >= lo && v <= hi))
        return invalid_input(std::string(key) + ": " + it->dump() + " is not in " + std::to_string(lo) + ".." +
                             std::to_string(hi));
    out = float(v);
    return {};
}

Result<json> body_object(std::string_view body) {
    json j = json::parse(body.begin(), body.end(), nullptr, false);
    if (j.is_discarded()) return invalid_input("body: malformed JSON");
    if (!j.is_object()) return invalid_input("body: must be a JSON object");
    return j;
}

Status get_bool(const json & j, const char * key, bool & out) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return {};
    if (!it->is_boolean()) return invalid_input(std::string(key) + ": must be true or false");
    out = it->get<bool>();
    return {};
}

Status get_stop(const json & j, const char * key, std::vector<std::string> & out) {
    auto it = j.find(key);
    const std::string k = key;
    if (it == j.end() || it->is_null()) return {};
    if (it->is_string()) {
        out = {it->get<std::string>()};
    } else if (it->is_array()) {
        if (it->size() > openai_stop_max)
            return invalid_input(k + ": at most " + std::to_string(openai_stop_max) + " stop strings");
        for (const auto & s : *it) {
            if (!s.is_string()) return invalid_input(k + ": must be a string or an array of strings");
            out.push_back(s.get<std::string>());
        }
    } else {
        return invalid_input(k + ": must be a string or an array of strings");
    }
    for (const auto & s : out)
        if (s.empty()) return invalid_input(k + ": stop strings must not be empty");
    return {};
}

bool json_plain(const json & v, int depth) {
    if (depth > chat_template_json_depth_max) return false;
    if (v.is_number_float()) return std::isfinite(v.get<double>());
    if (v.is_array() || v.is_object()) {
        for (const auto & e : v)
            if (!json_plain(e, depth + 1)) return false;
    }
    return true;
}

Result<ordered_json> ordered_parts(std::string_view body, const json & j) {
    static constexpr std::array<const char *, 3> keys = {"tools", "json_schema", "response_format"};
    size_t total = 0;
    bool any = false;
    for (const char * key : keys) {
        auto it = j.find(key);
        if (it == j.end() || !it->is_structured()) continue;
        any = true;
        std::vector<const json *> todo = {&*it};  // iterative: the value may nest deeply
        while (!todo.empty()) {
            const json * v = todo.back();
            todo.pop_back();
            if (v->is_object()) {
                if (v->size() > 2000) return invalid_input(std::string(key) + ": an object with more than 2000 keys");
                total += v->size();
                if (total > 20000) return invalid_input(std::string(key) + ": more than 20000 object keys");
            }
            if (v->is_structured())
                for (const auto & e : *v) todo.push_back(&e);
        }
    }
    if (!any) return ordered_json::object();
    const auto keep = [](int depth, ordered_json::parse_event_t ev, ordered_json & parsed) {
        if (depth != 1 || ev != ordered_json::parse_event_t::key) return true;
        for (const char * key : keys)
            if (parsed == key) return true;
        return false;
    };
    ordered_json o = ordered_json::parse(body.begin(), body.end(), keep, false);
    if (o.is_discarded() || !o.is_object()) return ordered_json::object();
    return o;
}

}  // namespace baton::request_fields
