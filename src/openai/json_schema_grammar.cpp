// json_schema_grammar.cpp — JSON Schema -> GBNF (see json_schema_grammar.h for what is supported and how the
// grammar is stricter than the schema).
//
// One json_schema_converter walks one schema. Every schema becomes a named rule; a $ref becomes a reference
// to the rule of its target, made once per target, so recursive schemas give recursive rules and the walk
// terminates. libllama refuses left-recursive grammars (a rule that reaches itself before matching a
// character) and expands every alternative reachable before the next character into its own parse stack,
// so the converter tracks, for each $ref rule, the rules it can start with ("heads") and, at the end,
// refuses cycles among them and positions with more than head_fanout_max alternatives.
#include "baton/openai/json_schema_grammar.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <utility>
#include <vector>

namespace baton {

namespace {

using ojson = nlohmann::ordered_json;  // properties keep the schema's order

constexpr int64_t int_digits_max = 15;
constexpr int64_t int_abs_max = 999999999999999;  // 15 nines
constexpr size_t head_fanout_max = 4096;          // alternatives libllama expands before one character
constexpr size_t allof_members_max = 256;

const std::set<std::string, std::less<>> k_ignored = {"title",   "description", "$schema",    "$id",      "$comment",
                                                      "default", "examples",    "deprecated", "readOnly", "writeOnly",
                                                      "strict",  "$defs",       "definitions"};
const std::set<std::string, std::less<>> k_supported = {"type",
                                                        "properties",
                                                        "required",
                                                        "additionalProperties",
                                                        "enum",
                                                        "const",
                                                        "items",
                                                        "prefixItems",
                                                        "minItems",
                                                        "maxItems",
                                                        "anyOf",
                                                        "oneOf",
                                                        "allOf",
                                                        "$ref",
                                                        "minLength",
                                                        "maxLength",
                                                        "format",
                                                        "minimum",
                                                        "maximum",
                                                        "exclusiveMinimum",
                                                        "exclusiveMaximum"};
const std::set<std::string, std::less<>> k_object_kw = {"properties", "required", "additionalProperties"};
const std::set<std::string, std::less<>> k_array_kw = {"items", "prefixItems", "minItems", "maxItems"};
const std::set<std::string, std::less<>> k_string_kw = {"minLength", "maxLength", "format"};
const std::set<std::string, std::less<>> k_number_kw = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};

std::string pointer_token(const std::string & key) {
    std::string out;
    for (char c : key) {
        if (c == '~') out += "~0";
        else if (c == '/') out += "~1";
        else out += c;
    }
    return out;
}

std::string child(const std::string & ptr, const std::string & key) { return ptr + "/" + pointer_token(key); }

Status refuse(const std::string & ptr, const std::string & what) {
    return Status(status_code::invalid_argument,
                  "json_schema: " + (ptr.empty() ? std::string("(root)") : ptr) + ": " + what);
}

Status unsupported(const std::string & ptr, const std::string & keyword) {
    return refuse(ptr, "'" + keyword + "' is not supported");
}

std::string dump(const ojson & v) { return v.dump(-1, ' ', false, ojson::error_handler_t::replace); }

// hex escapes a code point for a GBNF literal or character class.
std::string cp_escape(uint32_t cp) {
    static const char * hex = "0123456789ABCDEF";
    std::string out;
    int n = 0;
    if (cp <= 0xFF) out = "\\x", n = 2;
    else if (cp <= 0xFFFF) out = "\\u", n = 4;
    else out = "\\U", n = 8;
    for (int i = n - 1; i >= 0; --i) out += hex[(cp >> (4 * i)) & 0xF];
    return out;
}

// utf8_decode decodes s into code points; false when s is not valid UTF-8.
bool utf8_decode(const std::string & s, std::vector<uint32_t> & out) {
    for (size_t i = 0; i < s.size();) {
        const auto c = uint8_t(s[i]);
        const size_t n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : 4;
        if (n == 4 || s.size() - i <= n) return false;
        uint32_t cp = n == 0 ? c : c & (0x3Fu >> n);
        for (size_t k = 1; k <= n; ++k) {
            const auto d = uint8_t(s[i + k]);
            if ((d >> 6) != 2) return false;
            cp = (cp << 6) | (d & 0x3Fu);
        }
        if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)) ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        out.push_back(cp);
        i += n + 1;
    }
    return true;
}

// json_depth_exceeds: whether v nests arrays/objects deeper than limit (iterative: v is untrusted).
bool json_depth_exceeds(const ojson & v, size_t limit) {
    std::vector<std::pair<const ojson *, size_t>> todo{{&v, 1}};
    while (!todo.empty()) {
        auto [j, d] = todo.back();
        todo.pop_back();
        if (!j->is_structured()) continue;
        if (d > limit) return true;
        for (const auto & e : *j) todo.push_back({&e, d + 1});
    }
    return false;
}

constexpr size_t json_nesting_max = 256;  // JSON levels in the whole schema (copies and dumps recurse)

// A schema value that must be a non-negative integer (5 and 5.0 alike); -1 when it is not one.
int64_t count_value(const ojson & v) {
    if (v.is_number_unsigned()) return v.get<uint64_t>() > uint64_t(INT64_MAX) ? INT64_MAX : int64_t(v.get<uint64_t>());
    if (v.is_number_integer()) return v.get<int64_t>() < 0 ? -1 : v.get<int64_t>();
    if (v.is_number_float()) {
        const double d = v.get<double>();
        if (!(d >= 0) || std::floor(d) != d) return -1;
        return d > 9e18 ? INT64_MAX : int64_t(d);
    }
    return -1;
}

std::string repeat_suffix(int64_t lo, int64_t hi) {  // hi < 0: unbounded
    if (hi < 0) {
        if (lo == 0) return "*";
        if (lo == 1) return "+";
        return "{" + std::to_string(lo) + ",}";
    }
    if (lo == hi) return lo == 1 ? "" : "{" + std::to_string(lo) + "}";
    if (lo == 0 && hi == 1) return "?";
    return "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
}

std::string digits_any(size_t n) { return n == 0 ? "" : " [0-9]" + repeat_suffix(int64_t(n), int64_t(n)); }

// same_length_range: alternatives matching the decimal strings from x to y (same length, x <= y).
void same_length_range(const std::string & x, const std::string & y, const std::string & prefix,
                       std::vector<std::string> & out) {
    if (x.empty()) {
        out.push_back(prefix);
        return;
    }
    const std::string lit = [](char c) { return std::string(" [") + c + "]"; }(x[0]);
    if (x[0] == y[0]) return same_length_range(x.substr(1), y.substr(1), prefix + lit, out);
    const size_t rest = x.size() - 1;
    const bool low_full = x.find_first_not_of('0', 1) == std::string::npos;
    const bool high_full = y.find_first_not_of('9', 1) == std::string::npos;
    char start = x[0], end = y[0];
    if (!low_full) {
        same_length_range(x.substr(1), std::string(rest, '9'), prefix + lit, out);
        ++start;
    }
    if (!high_full) --end;
    if (start <= end)
        out.push_back(prefix + " [" + std::string(1, start) + (start == end ? "" : "-" + std::string(1, end)) + "]" +
                      digits_any(rest));
    if (!high_full) same_length_range(std::string(rest, '0'), y.substr(1), prefix + " [" + y[0] + "]", out);
}

// nonneg_range: alternatives matching the integers a..b (0 <= a <= b <= int_abs_max) without leading zeros.
void nonneg_range(int64_t a, int64_t b, const std::string & prefix, std::vector<std::string> & out) {
    int64_t lo_d = 0, hi_d = 9;
    for (int64_t d = 1; d <= int_digits_max; ++d, lo_d = hi_d + 1, hi_d = hi_d * 10 + 9) {
        const int64_t x = std::max(a, lo_d), y = std::min(b, hi_d);
        if (x > y) continue;
        same_length_range(std::to_string(x), std::to_string(y), prefix, out);
    }
}

struct heads {
    size_t base = 0;                // alternatives that start with a character
    std::vector<std::string> refs;  // $ref rules this position can start with
};

}  // namespace

class json_schema_converter {
  public:
    json_schema_converter(gbnf_builder & b, const ojson & root) : b_(b), root_(root) {}

    Result<std::string> convert_root(std::string_view hint) {
        if (json_depth_exceeds(root_, json_nesting_max))
            return refuse("", "the schema nests JSON deeper than " + std::to_string(json_nesting_max) + " levels");
        heads h;
        head_ = &h;
        auto r = convert_ref_target("", root_, hint);
        head_ = nullptr;
        if (!r.ok()) return r;
        BATON_RETURN_IF_ERROR(check_heads());
        BATON_RETURN_IF_ERROR(check_rules(""));
        return r;
    }

    static std::string any_object(gbnf_builder & b) { return b.shared_rule("object"); }

  private:
    gbnf_builder & b_;
    const ojson & root_;
    heads * head_ = nullptr;
    size_t depth_ = 0;
    std::map<std::string, std::string> ref_names_;  // pointer -> rule name
    std::map<std::string, std::string> ref_ptrs_;   // rule name -> pointer (messages)
    std::map<std::string, heads> ref_heads_;        // rule name -> its heads

    struct depth_guard {
        size_t & d;
        explicit depth_guard(size_t & depth) : d(depth) { ++d; }
        ~depth_guard() { --d; }
        depth_guard(const depth_guard &) = delete;
        depth_guard & operator=(const depth_guard &) = delete;
    };
    // consuming_scope: inside it every position follows a character, so nothing is a head.
    struct consuming_scope {
        heads *& h;
        heads * saved;
        explicit consuming_scope(heads *& head) : h(head), saved(head) { h = nullptr; }
        ~consuming_scope() { h = saved; }
        consuming_scope(const consuming_scope &) = delete;
        consuming_scope & operator=(const consuming_scope &) = delete;
    };

    void count_head(size_t alternatives) {
        if (head_) head_->base += alternatives;
    }

    Status check_rules(const std::string & ptr) const {
        if (b_.rules_.size() > json_schema_rules_max)
            return refuse(ptr, "the grammar needs more than " + std::to_string(json_schema_rules_max) + " rules");
        if (b_.bytes_ > json_schema_grammar_bytes_max)
            return refuse(ptr, "the grammar would be larger than " +
                                   std::to_string(json_schema_grammar_bytes_max >> 20) + " MiB");
        return {};
    }

    std::string rule(std::string_view hint, const std::string & body, size_t alternatives) {
        count_head(alternatives);
        return b_.add_rule(hint, body);
    }

    std::string ws() { return b_.shared_rule("ws"); }

    // check_heads refuses left recursion among $ref rules and positions with too many alternatives.
    Status check_heads() {
        std::map<std::string, size_t> fan;  // finished
        std::set<std::string> on_path;
        for (const auto & [start, unused] : ref_heads_) {
            if (fan.count(start)) continue;
            std::vector<std::pair<std::string, size_t>> stack{{start, 0}};
            on_path.insert(start);
            while (!stack.empty()) {
                const std::string name = stack.back().first;
                const size_t next = stack.back().second++;
                const heads & h = ref_heads_.at(name);
                if (next < h.refs.size()) {
                    const std::string to = h.refs[next];
                    if (on_path.count(to))
                        return refuse(ref_ptrs_[to], "'$ref' recursion that reaches itself before matching any "
                                                     "character (left recursion) is not supported");
                    if (!fan.count(to)) {
                        on_path.insert(to);
                        stack.push_back({to, 0});
                    }
                    continue;
                }
                size_t total = h.base;
                for (const auto & r : h.refs) total = std::min(head_fanout_max + 1, total + fan[r]);
                if (total > head_fanout_max)
                    return refuse(ref_ptrs_[name], "more than " + std::to_string(head_fanout_max) +
                                                       " alternatives at one position (anyOf/$ref) are not supported");
                fan[name] = total;
                on_path.erase(name);
                stack.pop_back();
            }
        }
        return {};
    }

    Result<std::string> convert(const ojson & s, const std::string & ptr, std::string_view hint) {
        depth_guard g(depth_);
        if (depth_ > json_schema_depth_max)
            return refuse(ptr, "schemas nested deeper than " + std::to_string(json_schema_depth_max) +
                                   " (counting $ref) are not supported");
        BATON_RETURN_IF_ERROR(check_rules(ptr));
        if (s.is_boolean()) {
            if (!s.get<bool>()) return refuse(ptr, "the schema false accepts nothing");
            count_head(7);
            return b_.shared_rule("value");
        }
        if (!s.is_object()) return refuse(ptr, "a schema must be an object or a boolean");
        for (const auto & [k, v] : s.items()) {
            if (k_ignored.count(k) || k_supported.count(k)) continue;
            return unsupported(ptr, k);
        }
        if (s.contains("$ref")) {
            BATON_RETURN_IF_ERROR(only_annotations(s, "$ref", ptr));
            return convert_ref(s["$ref"], child(ptr, "$ref"), hint);
        }
        if (s.contains("anyOf") || s.contains("oneOf")) {
            const char * kw = s.contains("anyOf") ? "anyOf" : "oneOf";
            BATON_RETURN_IF_ERROR(only_annotations(s, kw, ptr));
            return convert_any_of(s[kw], child(ptr, kw), hint);
        }
        if (s.contains("allOf")) return convert_all_of(s, ptr, hint);
        if (s.contains("enum") || s.contains("const")) return convert_enum(s, ptr, hint);
        return convert_types(s, ptr, hint);
    }

    Status only_annotations(const ojson & s, const std::string & kw, const std::string & ptr) {
        for (const auto & [k, v] : s.items())
            if (k != kw && !k_ignored.count(k)) return refuse(ptr, "'" + kw + "' with '" + k + "' is not supported");
        return {};
    }

    // resolve turns a "$ref" value into the pointer it names and the schema there.
    Result<std::pair<std::string, const ojson *>> resolve(const ojson & ref, const std::string & ptr) {
        if (!ref.is_string()) return refuse(ptr, "'$ref' must be a string");
        const std::string & r = ref.get_ref<const std::string &>();
        if (r == "#") return std::pair<std::string, const ojson *>{"", &root_};
        if (r.rfind("#/", 0) != 0) return refuse(ptr, "'$ref' '" + r + "' outside the document is not supported");
        std::vector<std::string> tokens(1);
        for (size_t i = 2; i < r.size(); ++i) {
            const char c = r[i];
            if (c == '/') tokens.emplace_back();
            else if (c == '~') {
                if (i + 1 >= r.size() || (r[i + 1] != '0' && r[i + 1] != '1'))
                    return refuse(ptr, "'$ref' '" + r + "' has a bad '~' escape");
                tokens.back() += r[++i] == '0' ? '~' : '/';
            } else if (c == '%') {
                auto hexval = [](char h) {
                    return h >= '0' && h <= '9'   ? h - '0'
                           : h >= 'a' && h <= 'f' ? h - 'a' + 10
                           : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                                  : -1;
                };
                if (i + 2 >= r.size() || hexval(r[i + 1]) < 0 || hexval(r[i + 2]) < 0)
                    return refuse(ptr, "'$ref' '" + r + "' has a bad '%' escape");
                tokens.back() += char(hexval(r[i + 1]) * 16 + hexval(r[i + 2]));
                i += 2;
            } else tokens.back() += c;
        }
        if (tokens.size() != 2 || (tokens[0] != "$defs" && tokens[0] != "definitions"))
            return refuse(ptr, "'$ref' '" + r +
                                   "' is not supported (only \"#\", \"#/$defs/<name>\" and "
                                   "\"#/definitions/<name>\")");
        if (!root_.is_object() || !root_.contains(tokens[0]) || !root_[tokens[0]].is_object() ||
            !root_[tokens[0]].contains(tokens[1]))
            return refuse(ptr, "'$ref' '" + r + "' names no schema");
        return std::pair<std::string, const ojson *>{child(child("", tokens[0]), tokens[1]),
                                                     &root_[tokens[0]][tokens[1]]};
    }

    Result<std::string> convert_ref(const ojson & ref, const std::string & ptr, std::string_view hint) {
        auto target = resolve(ref, ptr);
        if (!target.ok()) return target.status();
        const auto & [tptr, schema] = target.value();
        const size_t slash = tptr.rfind('/');
        return convert_ref_target(tptr, *schema, tptr.empty() ? hint : std::string_view(tptr).substr(slash + 1));
    }

    Result<std::string> convert_ref_target(const std::string & tptr, const ojson & schema, std::string_view hint) {
        if (auto it = ref_names_.find(tptr); it != ref_names_.end()) {
            if (head_) head_->refs.push_back(it->second);
            return it->second;
        }
        const std::string name = b_.fresh_name(hint);
        ref_names_[tptr] = name;
        ref_ptrs_[name] = tptr;
        heads * saved = head_;
        head_ = &ref_heads_[name];
        auto body = convert(schema, tptr, hint);
        head_ = saved;
        if (!body.ok()) return body;
        b_.set_rule(name, body.value());
        if (head_) head_->refs.push_back(name);
        return name;
    }

    Result<std::string> convert_any_of(const ojson & list, const std::string & ptr, std::string_view hint) {
        if (!list.is_array() || list.empty()) return refuse(ptr, "must be a non-empty array of schemas");
        if (list.size() > json_schema_alternatives_max)
            return refuse(ptr, "more than " + std::to_string(json_schema_alternatives_max) +
                                   " alternatives are not supported");
        std::vector<std::string> alts;
        std::set<std::string> seen;
        for (size_t i = 0; i < list.size(); ++i) {
            if (list[i].is_boolean() && !list[i].get<bool>()) continue;
            auto r = convert(list[i], child(ptr, std::to_string(i)), hint);
            if (!r.ok()) return r;
            if (seen.insert(r.value()).second) alts.push_back(r.value());
        }
        if (alts.empty()) return refuse(ptr, "every alternative accepts nothing");
        std::string body;
        for (const auto & a : alts) body += (body.empty() ? "" : " | ") + a;
        return b_.add_rule(hint, body);  // the alternatives counted their own heads
    }

    // convert_all_of merges object schemas (each possibly through $ref) into one object schema.
    Result<std::string> convert_all_of(const ojson & s, const std::string & ptr, std::string_view hint) {
        ojson merged = ojson::object();
        merged["type"] = "object";
        ojson props = ojson::object();
        ojson required = ojson::array();
        std::vector<std::pair<const ojson *, std::string>> todo{{&s, ptr}};
        size_t seen = 0;
        while (!todo.empty()) {
            auto [m, mptr] = todo.back();
            todo.pop_back();
            if (++seen > allof_members_max)
                return refuse(ptr, "'allOf' with more than " + std::to_string(allof_members_max) +
                                       " members is not supported");
            size_t hops = 0;
            while (m->is_object() && m->contains("$ref")) {
                BATON_RETURN_IF_ERROR(only_annotations(*m, "$ref", mptr));
                auto t = resolve((*m)["$ref"], child(mptr, "$ref"));
                if (!t.ok()) return t.status();
                m = t.value().second;
                mptr = t.value().first;
                if (++hops > json_schema_depth_max) return refuse(ptr, "'allOf' follows too many '$ref's");
            }
            if (m->is_boolean() && m->get<bool>()) continue;
            if (!m->is_object()) return refuse(mptr, "'allOf' of anything but object schemas is not supported");
            for (const auto & [k, v] : m->items()) {
                if (k_ignored.count(k)) continue;
                if (k == "allOf") {
                    if (!v.is_array()) return refuse(child(mptr, k), "must be an array of schemas");
                    for (size_t i = v.size(); i-- > 0;)  // a stack: pushed backwards, merged in the members' order
                        todo.push_back({&v[i], child(child(mptr, k), std::to_string(i))});
                } else if (k == "type") {
                    if (v != "object")
                        return refuse(child(mptr, k), "'allOf' of anything but object schemas is not supported");
                } else if (k == "properties") {
                    if (!v.is_object()) return refuse(child(mptr, k), "must be an object");
                    for (const auto & [pk, pv] : v.items()) {
                        if (props.contains(pk) && props[pk] != pv)
                            return refuse(child(mptr, k), "'allOf' with two different schemas for property '" + pk +
                                                              "' is not supported");
                        props[pk] = pv;
                    }
                } else if (k == "required") {
                    if (!v.is_array()) return refuse(child(mptr, k), "must be an array of strings");
                    for (const auto & r : v) required.push_back(r);
                } else {
                    return refuse(mptr, "'allOf' with '" + k + "' is not supported");
                }
            }
        }
        merged["properties"] = std::move(props);
        merged["required"] = std::move(required);
        return convert_types(merged, ptr, hint);
    }

    Result<std::string> convert_enum(const ojson & s, const std::string & ptr, std::string_view hint) {
        for (const auto & [k, v] : s.items())
            if (k != "enum" && k != "const" && k != "type" && !k_ignored.count(k))
                return refuse(ptr, "'" + std::string(s.contains("enum") ? "enum" : "const") + "' with '" + k +
                                       "' is not supported");
        // The entries are counted before any is copied, and their text measured as it is written.
        std::vector<const ojson *> values;
        if (s.contains("enum")) {
            const ojson & e = s["enum"];
            if (!e.is_array()) return refuse(child(ptr, "enum"), "must be an array");
            if (e.size() > json_schema_alternatives_max)
                return refuse(child(ptr, "enum"), "more than " + std::to_string(json_schema_alternatives_max) +
                                                      " entries are not supported");
            for (const auto & v : e) values.push_back(&v);
        }
        if (s.contains("const")) {
            const ojson * c = &s["const"];
            if (s.contains("enum")) {
                const bool in = std::any_of(values.begin(), values.end(), [&](const ojson * v) { return *v == *c; });
                values.clear();
                if (in) values.push_back(c);
            } else values.push_back(c);
        }
        std::set<std::string> types;
        if (s.contains("type")) {
            auto t = type_set(s["type"], child(ptr, "type"));
            if (!t.ok()) return t.status();
            types = t.value();
        }
        std::vector<std::string> alts;
        std::set<std::string> seen;
        size_t bytes = 0;
        const std::string kw = s.contains("enum") ? "enum" : "const";
        for (const ojson * v : values) {
            if (!types.empty() && !type_allows(types, *v)) continue;
            std::string lit = gbnf_builder::literal(dump(*v));
            bytes += lit.size() + 3;
            if (bytes > json_schema_enum_bytes_max)
                return refuse(child(ptr, kw), "values of more than " +
                                                  std::to_string(json_schema_enum_bytes_max >> 10) +
                                                  " KiB together are not supported");
            if (seen.insert(lit).second) alts.push_back(std::move(lit));
        }
        if (alts.empty()) return refuse(ptr, "the enum/const accepts nothing");
        std::string body;
        for (const auto & a : alts) body += (body.empty() ? "" : " | ") + a;
        return rule(std::string(hint) + "-enum", body, alts.size());
    }

    static bool type_allows(const std::set<std::string> & types, const ojson & v) {
        const std::string t = json_type(v);
        if (types.count(t)) return true;
        if (t == "integer" && types.count("number")) return true;
        return t == "number" && types.count("integer") && std::floor(v.get<double>()) == v.get<double>();
    }

    static std::string json_type(const ojson & v) {
        if (v.is_null()) return "null";
        if (v.is_boolean()) return "boolean";
        if (v.is_number_integer() || v.is_number_unsigned()) return "integer";
        if (v.is_number()) return "number";
        if (v.is_string()) return "string";
        if (v.is_array()) return "array";
        return "object";
    }

    Result<std::set<std::string>> type_set(const ojson & t, const std::string & ptr) {
        static const std::set<std::string> known = {"null",   "boolean", "integer", "number",
                                                    "string", "array",   "object"};
        std::set<std::string> out;
        auto add = [&](const ojson & v) -> Status {
            if (!v.is_string() || !known.count(v.get<std::string>())) return refuse(ptr, "unknown type " + dump(v));
            out.insert(v.get<std::string>());
            return {};
        };
        if (t.is_array()) {
            for (const auto & v : t) BATON_RETURN_IF_ERROR(add(v));
            if (out.empty()) return refuse(ptr, "an empty type list accepts nothing");
        } else BATON_RETURN_IF_ERROR(add(t));
        if (out.count("number")) out.erase("integer");  // number includes integers (and accepts them)
        return out;
    }

    Result<std::string> convert_types(const ojson & s, const std::string & ptr, std::string_view hint) {
        std::set<std::string> types;
        if (s.contains("type")) {
            auto t = type_set(s["type"], child(ptr, "type"));
            if (!t.ok()) return t.status();
            types = t.value();
        } else {
            for (const auto & [k, v] : s.items()) {
                if (k_object_kw.count(k)) types.insert("object");
                if (k_array_kw.count(k)) types.insert("array");
                if (k_string_kw.count(k)) types.insert("string");
                if (k_number_kw.count(k))
                    return refuse(ptr, "'" + k + "' without \"type\": \"integer\" is not supported");
            }
            if (types.empty()) {
                count_head(7);
                return b_.shared_rule("value");
            }
        }
        std::vector<std::string> alts;
        for (const auto & t : types) {
            Result<std::string> r = std::string();
            if (t == "null") r = rule("null", "\"null\"", 1);
            else if (t == "boolean") r = rule("boolean", "\"true\" | \"false\"", 2);
            else if (t == "integer") r = convert_integer(s, ptr, hint);
            else if (t == "number") r = convert_number(s, ptr);
            else if (t == "string") r = convert_string(s, ptr, hint);
            else if (t == "array") r = convert_array(s, ptr, hint);
            else r = convert_object(s, ptr, hint);
            if (!r.ok()) return r;
            alts.push_back(r.value());
        }
        if (alts.size() == 1) return alts[0];
        std::string body;
        for (const auto & a : alts) body += (body.empty() ? "" : " | ") + a;
        return b_.add_rule(hint, body);
    }

    Result<std::string> convert_number(const ojson & s, const std::string & ptr) {
        for (const auto & k : k_number_kw)
            if (s.contains(k))
                return refuse(ptr, "'" + k + "' on a number is not supported (use \"type\": \"integer\")");
        count_head(2);
        return b_.shared_rule("number");
    }

    // bound reads minimum/maximum and their exclusive forms as an integer bound, clamped to one past the
    // 15-digit range; lower: the smallest integer allowed, else the largest.
    Status bound(const ojson & s, const std::string & ptr, bool lower, int64_t & out) {
        const char * incl = lower ? "minimum" : "maximum";
        const char * excl = lower ? "exclusiveMinimum" : "exclusiveMaximum";
        auto read = [&](const ojson & v, const std::string & kptr, bool exclusive, int64_t & b) -> Status {
            if (!v.is_number()) return refuse(kptr, "must be a number");
            const double big = double(int_abs_max) + 2;
            double d = v.get<double>();
            int64_t r = 0;
            if (v.is_number_integer() && !v.is_number_unsigned()) {
                const int64_t i = v.get<int64_t>();
                r = std::clamp<int64_t>(i, -int_abs_max - 2, int_abs_max + 2);
                if (exclusive) r += lower ? 1 : -1;
            } else if (v.is_number_unsigned()) {
                r = v.get<uint64_t>() > uint64_t(int_abs_max + 2) ? int_abs_max + 2 : int64_t(v.get<uint64_t>());
                if (exclusive) r += lower ? 1 : -1;
            } else {
                d = std::clamp(d, -big, big);
                if (lower) r = exclusive ? int64_t(std::floor(d)) + 1 : int64_t(std::ceil(d));
                else r = exclusive ? int64_t(std::ceil(d)) - 1 : int64_t(std::floor(d));
            }
            b = lower ? std::max(b, r) : std::min(b, r);
            return {};
        };
        bool incl_exclusive = false;
        if (s.contains(excl) && s[excl].is_boolean()) incl_exclusive = s[excl].get<bool>();
        else if (s.contains(excl)) BATON_RETURN_IF_ERROR(read(s[excl], child(ptr, excl), true, out));
        if (s.contains(incl)) BATON_RETURN_IF_ERROR(read(s[incl], child(ptr, incl), incl_exclusive, out));
        return {};
    }

    Result<std::string> convert_integer(const ojson & s, const std::string & ptr, std::string_view hint) {
        int64_t lo = -int_abs_max, hi = int_abs_max;
        BATON_RETURN_IF_ERROR(bound(s, ptr, true, lo));
        BATON_RETURN_IF_ERROR(bound(s, ptr, false, hi));
        if (lo == -int_abs_max && hi == int_abs_max) {
            count_head(2);
            return b_.shared_rule("integer");
        }
        if (lo > hi)
            return refuse(ptr,
                          "the integer bounds accept nothing (within " + std::to_string(int_digits_max) + " digits)");
        std::vector<std::string> alts;
        if (lo < 0) nonneg_range(hi < 0 ? -hi : 1, -lo, "\"-\"", alts);
        if (hi >= 0) nonneg_range(std::max<int64_t>(lo, 0), hi, "", alts);
        std::string body;
        for (auto & a : alts) {
            const size_t first = a.find_first_not_of(' ');
            body += (body.empty() ? "" : " | ") + a.substr(first);
        }
        return rule(std::string(hint) + "-int", body, alts.size());
    }

    Result<int64_t> count(const ojson & s, const char * kw, const std::string & ptr, int64_t dflt) {
        if (!s.contains(kw)) return dflt;
        const int64_t n = count_value(s[kw]);
        if (n < 0) return refuse(child(ptr, kw), "must be a non-negative integer");
        if (n > int64_t(json_schema_repeat_max))
            return refuse(child(ptr, kw), "'" + std::string(kw) + "' " + std::to_string(n) + " is over the limit " +
                                              std::to_string(json_schema_repeat_max));
        return n;
    }

    Result<std::string> convert_string(const ojson & s, const std::string & ptr, std::string_view hint) {
        if (s.contains("format")) {
            if (s.contains("minLength") || s.contains("maxLength"))
                return refuse(ptr, "'format' with 'minLength'/'maxLength' is not supported");
            const ojson & f = s["format"];
            static const std::set<std::string> formats = {"date", "time", "date-time", "uuid"};
            if (!f.is_string() || !formats.count(f.get<std::string>()))
                return refuse(child(ptr, "format"), "'format' " + dump(f) + " is not supported");
            count_head(1);
            return b_.shared_rule("format-" + f.get<std::string>());
        }
        auto lo = count(s, "minLength", ptr, 0);
        if (!lo.ok()) return lo.status();
        auto hi = count(s, "maxLength", ptr, -1);
        if (!hi.ok()) return hi.status();
        if (hi.value() >= 0 && hi.value() < lo.value()) return refuse(ptr, "maxLength < minLength accepts nothing");
        if (lo.value() == 0 && hi.value() < 0) {
            count_head(1);
            return b_.shared_rule("string");
        }
        const std::string ch = b_.shared_rule("char");
        return rule(std::string(hint) + "-string",
                    "\"\\\"\" " + ch + repeat_suffix(lo.value(), hi.value()) + " \"\\\"\"", 1);
    }

    Result<std::string> convert_array(const ojson & s, const std::string & ptr, std::string_view hint) {
        count_head(1);
        consuming_scope cs(head_);
        auto lo_r = count(s, "minItems", ptr, 0);
        if (!lo_r.ok()) return lo_r.status();
        auto hi_r = count(s, "maxItems", ptr, -1);
        if (!hi_r.ok()) return hi_r.status();
        int64_t lo = lo_r.value();
        int64_t hi = hi_r.value();
        std::vector<std::string> prefix;
        // "items" as an array: the tuple form of older drafts (draft 4-2019's prefixItems), taken as
        // llama-server takes it: exactly those items, in order.
        const bool tuple = s.contains("items") && s["items"].is_array();
        if (tuple && s.contains("prefixItems"))
            return refuse(child(ptr, "items"), "an array of schemas (the old tuple form) together with prefixItems");
        if (s.contains("prefixItems") || tuple) {
            const char * key = tuple ? "items" : "prefixItems";
            const ojson & p = s[key];
            const std::string pptr = child(ptr, key);
            if (tuple) {
                lo = std::max<int64_t>(lo, int64_t(p.size()));
                hi = hi < 0 ? int64_t(p.size()) : std::min<int64_t>(hi, int64_t(p.size()));
            }
            if (!p.is_array()) return refuse(pptr, "must be an array of schemas");
            for (size_t i = 0; i < p.size() && (hi < 0 || int64_t(i) < hi); ++i) {
                if (p[i].is_boolean() && !p[i].get<bool>()) {
                    hi = int64_t(i);  // nothing can stand at position i
                    break;
                }
                auto r = convert(p[i], child(pptr, std::to_string(i)), std::string(hint) + "-item");
                if (!r.ok()) return r;
                prefix.push_back(r.value());
            }
        }
        std::string item;
        if (tuple) {
            // (no items past the tuple)
        } else if (s.contains("items")) {
            const ojson & it = s["items"];
            if (it.is_boolean() && !it.get<bool>()) {
                const int64_t n = int64_t(prefix.size());
                hi = hi < 0 ? n : std::min(hi, n);
            } else {
                auto r = convert(it, child(ptr, "items"), std::string(hint) + "-item");
                if (!r.ok()) return r;
                item = r.value();
            }
        } else item = b_.shared_rule("value");
        if (hi >= 0 && hi < lo) return refuse(ptr, "the array length bounds accept nothing");
        const std::string w = ws();
        const std::string sep = w + " \",\" " + w + " ";
        // tail(i): elements from position i (0-based, i >= 1), each after a separator.
        std::string tail;
        const int64_t n_prefix = int64_t(prefix.size());
        if (hi < 0 || hi > n_prefix) {
            if (!item.empty()) {
                const int64_t rest_lo = std::max<int64_t>(lo - n_prefix, 0);
                const int64_t rest_hi = hi < 0 ? -1 : hi - n_prefix;
                tail = "(" + sep + item + ")" + repeat_suffix(rest_lo, rest_hi);
                if (rest_hi == 0) tail.clear();
            }
        }
        for (int64_t i = std::min<int64_t>(n_prefix, hi < 0 ? n_prefix : hi) - 1; i >= 1; --i) {
            std::string seq = sep + prefix[size_t(i)] + (tail.empty() ? "" : " " + tail);
            const std::string name = b_.add_rule(std::string(hint) + "-tail", seq);
            tail = i < lo ? name : name + "?";
        }
        std::string first;
        if (n_prefix > 0 && hi != 0) first = prefix[0];
        else if (!item.empty() && hi != 0) first = item;
        std::string list;
        if (!first.empty()) {
            if (n_prefix == 0 && !tail.empty()) {
                // items only: positions 1.. repeat the same item
                const int64_t rest_lo = std::max<int64_t>(lo - 1, 0);
                const int64_t rest_hi = hi < 0 ? -1 : hi - 1;
                list = first + (rest_hi == 0 ? "" : " (" + sep + item + ")" + repeat_suffix(rest_lo, rest_hi));
            } else list = first + (tail.empty() ? "" : " " + tail);
        }
        if (lo > 0 && list.empty()) return refuse(ptr, "the array accepts nothing");
        std::string body;
        if (list.empty()) body = "\"[\" " + w + " \"]\"";
        else if (lo > 0) body = "\"[\" " + w + " " + list + " " + w + " \"]\"";
        else body = "\"[\" " + w + " (" + list + " " + w + ")? \"]\"";
        return b_.add_rule(std::string(hint) + "-array", body);
    }

    // key_not_in: the rule for a string key without escapes that is none of names (a trie's complement).
    std::string key_not_in(const std::set<std::string> & names, std::string_view hint) {
        struct node {
            bool terminal = false;
            std::map<uint32_t, size_t> next;
        };
        std::vector<node> trie(1);
        for (const auto & n : names) {
            std::vector<uint32_t> cps;
            if (!utf8_decode(n, cps)) continue;
            if (std::any_of(cps.begin(), cps.end(), [](uint32_t c) { return c < 0x20 || c == '"' || c == '\\'; }))
                continue;  // unreachable without escapes
            size_t at = 0;
            for (uint32_t c : cps) {
                auto it = trie[at].next.find(c);
                if (it == trie[at].next.end()) {
                    trie.push_back({});
                    it = trie[at].next.emplace(c, trie.size() - 1).first;
                }
                at = it->second;
            }
            trie[at].terminal = true;
        }
        const std::string plain = b_.shared_rule("plain-char");
        std::vector<std::string> names_of(trie.size());
        for (size_t i = 0; i < trie.size(); ++i) names_of[i] = b_.fresh_name(std::string(hint) + "-key");
        for (size_t i = 0; i < trie.size(); ++i) {
            std::string body;
            auto alt = [&](const std::string & a) { body += (body.empty() ? "" : " | ") + a; };
            if (!trie[i].terminal) alt("\"\\\"\"");
            std::string cls = "[^\"\\\\\\x00-\\x1F";
            for (const auto & [c, to] : trie[i].next) {
                alt("\"" + cp_escape(c) + "\" " + names_of[to]);
                cls += cp_escape(c);
            }
            alt(cls + "] " + plain + "* \"\\\"\"");
            b_.set_rule(names_of[i], body);
        }
        return "\"\\\"\" " + names_of[0];
    }

    Result<std::string> convert_object(const ojson & s, const std::string & ptr, std::string_view hint) {
        count_head(1);
        consuming_scope cs(head_);
        const std::string w = ws();
        const std::string sep = w + " \",\" " + w + " ";
        const ojson empty = ojson::object();
        const ojson & props = s.contains("properties") ? s["properties"] : empty;
        if (!props.is_object()) return refuse(child(ptr, "properties"), "must be an object");
        std::set<std::string> required;
        if (s.contains("required")) {
            const ojson & r = s["required"];
            if (!r.is_array()) return refuse(child(ptr, "required"), "must be an array of strings");
            for (const auto & n : r) {
                if (!n.is_string()) return refuse(child(ptr, "required"), "must be an array of strings");
                required.insert(n.get<std::string>());
            }
        }
        // additional: "" none, else the value rule of additional properties.
        std::string additional;
        const ojson * add_schema = nullptr;
        const std::string aptr = child(ptr, "additionalProperties");
        if (s.contains("additionalProperties")) {
            const ojson & a = s["additionalProperties"];
            if (!(a.is_boolean() && !a.get<bool>())) add_schema = &a;
        } else if (!s.contains("properties")) {
            add_schema = nullptr;
            static const ojson any = true;
            add_schema = &any;
        }
        if (add_schema) {
            auto r = convert(*add_schema, aptr, std::string(hint) + "-additional");
            if (!r.ok()) return r;
            additional = r.value();
        }
        struct member {
            std::string kv;
            bool required = false;
        };
        std::vector<member> members;
        std::set<std::string> declared;
        const std::string pptr = child(ptr, "properties");
        for (const auto & [k, v] : props.items()) {
            declared.insert(k);
            const bool req = required.count(k) > 0;
            if (v.is_boolean() && !v.get<bool>()) {
                if (req) return refuse(child(pptr, k), "required property with the schema false accepts nothing");
                continue;
            }
            auto r = convert(v, child(pptr, k), k);
            if (!r.ok()) return r;
            members.push_back({gbnf_builder::literal(dump(ojson(k))) + " " + w + " \":\" " + w + " " + r.value(), req});
        }
        for (const auto & k : required) {
            if (declared.count(k)) continue;
            if (additional.empty())
                return refuse(child(ptr, "required"), "required property '" + k +
                                                          "' is not allowed by "
                                                          "additionalProperties (accepts nothing)");
            declared.insert(k);
            members.push_back(
                {gbnf_builder::literal(dump(ojson(k))) + " " + w + " \":\" " + w + " " + additional, true});
        }
        std::string extra_kv;
        if (!additional.empty()) {
            const std::string key = !declared.empty() ? key_not_in(declared, hint) : b_.shared_rule("string");
            extra_kv = b_.add_rule(std::string(hint) + "-extra", key + " " + w + " \":\" " + w + " " + additional);
        }
        BATON_RETURN_IF_ERROR(check_rules(ptr));
        // rest: members from i on after at least one member; first: the non-empty ways to start at i.
        std::string rest = extra_kv.empty() ? "" : "(" + sep + extra_kv + ")*";
        std::vector<std::string> first_alts;
        if (!extra_kv.empty()) first_alts.push_back(extra_kv + (rest.empty() ? "" : " " + rest));
        std::string first_rule;  // rule matching first_alts
        bool nullable = true;
        auto make_first = [&]() {
            std::string body;
            for (const auto & a : first_alts) body += (body.empty() ? "" : " | ") + a;
            return body.empty() ? std::string() : b_.add_rule(std::string(hint) + "-first", body);
        };
        for (size_t i = members.size(); i-- > 0;) {
            const member & m = members[i];
            const std::string start = m.kv + (rest.empty() ? "" : " " + rest);
            if (m.required) {
                first_alts = {start};
                nullable = false;
                rest = b_.add_rule(std::string(hint) + "-rest", sep + start);
            } else {
                const std::string later = make_first();
                first_alts = {start};
                if (!later.empty()) first_alts.push_back(later);
                rest = b_.add_rule(std::string(hint) + "-rest",
                                   "(" + sep + m.kv + ")?" + (rest.empty() ? "" : " " + rest));
            }
            BATON_RETURN_IF_ERROR(check_rules(ptr));
        }
        first_rule = make_first();
        std::string body;
        if (first_rule.empty()) body = "\"{\" " + w + " \"}\"";
        else if (!nullable) body = "\"{\" " + w + " " + first_rule + " " + w + " \"}\"";
        else body = "\"{\" " + w + " (" + first_rule + " " + w + ")? \"}\"";
        return b_.add_rule(std::string(hint) + "-object", body);
    }
};

std::string gbnf_builder::literal(std::string_view s) {
    std::string out = "\"";
    for (char ch : s) {
        const auto c = uint8_t(ch);
        if (c == '"') out += "\\\"";
        else if (c == '\\') out += "\\\\";
        else if (c == '\n') out += "\\n";
        else if (c == '\r') out += "\\r";
        else if (c == '\t') out += "\\t";
        else if (c < 0x20) out += cp_escape(c);
        else out += ch;
    }
    return out + "\"";
}

std::string gbnf_builder::fresh_name(std::string_view name_hint) {
    std::string base;
    for (char ch : name_hint) {
        char c = ch >= 'A' && ch <= 'Z' ? char(ch - 'A' + 'a') : ch;
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) c = '-';
        if (c == '-' && (base.empty() || base.back() == '-')) continue;
        base += c;
        if (base.size() >= 40) break;
    }
    while (!base.empty() && base.back() == '-') base.pop_back();
    if (base.empty()) base = "r";
    std::string name = base;
    size_t & next = name_next_[base];
    while (name == "root" || rules_.count(name)) name = base + "-" + std::to_string(++next);
    rules_[name] = std::string();
    bytes_ += name.size() + 6;  // "name ::= \n"
    return name;
}

void gbnf_builder::set_rule(const std::string & name, const std::string & body) {
    std::string & slot = rules_[name];
    bytes_ += body.size() - std::min(body.size(), slot.size());
    slot = body;
    by_body_.emplace(body, name);
}

std::string gbnf_builder::add_rule(std::string_view name_hint, const std::string & body) {
    if (auto it = by_body_.find(body); it != by_body_.end()) return it->second;
    const std::string name = fresh_name(name_hint);
    set_rule(name, body);
    return name;
}

std::string gbnf_builder::shared_rule(const std::string & kind) {
    if (auto it = shared_.find(kind); it != shared_.end()) return it->second;
    std::string name;
    if (kind == "ws") name = add_rule("ws", "[ \\n]?");
    else if (kind == "hex") name = add_rule("hex", "[0-9a-fA-F]");
    else if (kind == "plain-char") name = add_rule("plain-char", "[^\"\\\\\\x00-\\x1F]");
    else if (kind == "char") {
        const std::string h = shared_rule("hex");
        name = add_rule("char", shared_rule("plain-char") + " | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" ([0-9a-cA-Ce-fE-F] " +
                                    h + "{3} | [dD] [0-7] " + h + "{2}))");
    } else if (kind == "string") name = add_rule("string", "\"\\\"\" " + shared_rule("char") + "* \"\\\"\"");
    else if (kind == "integer") name = add_rule("integer", "\"-\"? (\"0\" | [1-9] [0-9]{0,14})");
    else if (kind == "number")
        name = add_rule("number", shared_rule("integer") + " (\".\" [0-9]{1,15})? ([eE] [-+]? [0-9]{1,3})?");
    else if (kind == "format-date") name = add_rule("date", "\"\\\"\" " + shared_rule("date-raw") + " \"\\\"\"");
    else if (kind == "date-raw") {
        // Years 0001..9999; February 29 only in leap years (divisible by 4, centuries only by 400).
        const std::string year =
            add_rule("year", "[1-9] [0-9]{3} | \"0\" [1-9] [0-9]{2} | \"00\" [1-9] [0-9] | \"000\" [1-9]");
        const std::string leap = add_rule(
            "leap-year",
            "[0-9]{2} (\"0\" [48] | [2468] [048] | [13579] [26]) | (\"0\" [48] | [2468] [048] | [13579] [26]) \"00\"");
        name =
            add_rule("date-raw", year + " \"-\" (\"0\" [13578] \"-\" " + shared_rule("day31") + " | \"1\" [02] \"-\" " +
                                     shared_rule("day31") + " | \"0\" [469] \"-\" " + shared_rule("day30") +
                                     " | \"11-\" " + shared_rule("day30") +
                                     " | \"02-\" (\"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8])) | " + leap + " \"-02-29\"");
    } else if (kind == "day31") name = add_rule("day31", "\"0\" [1-9] | [12] [0-9] | \"3\" [01]");
    else if (kind == "day30") name = add_rule("day30", "\"0\" [1-9] | [12] [0-9] | \"30\"");
    else if (kind == "time-raw") {
        const std::string hh = add_rule("hour", "[01] [0-9] | \"2\" [0-3]");
        const std::string mm = add_rule("minute", "[0-5] [0-9]");
        name = add_rule("time-raw", hh + " \":\" " + mm + " \":\" " + mm + " (\".\" [0-9]{1,9})? (\"Z\" | [-+] " + hh +
                                        " \":\" " + mm + ")");
    } else if (kind == "format-time") name = add_rule("time", "\"\\\"\" " + shared_rule("time-raw") + " \"\\\"\"");
    else if (kind == "format-date-time")
        name = add_rule("date-time",
                        "\"\\\"\" " + shared_rule("date-raw") + " \"T\" " + shared_rule("time-raw") + " \"\\\"\"");
    else if (kind == "format-uuid") {
        const std::string h = shared_rule("hex");
        name = add_rule("uuid", "\"\\\"\" " + h + "{8} \"-\" " + h + "{4} \"-\" " + h + "{4} \"-\" " + h +
                                    "{4} \"-\" " + h + "{12} \"\\\"\"");
    } else if (kind == "value" || kind == "object") {
        // any JSON value: value, object, array and member refer to each other, so reserve the names first.
        const std::string value = fresh_name("value"), object = fresh_name("object"), array = fresh_name("array"),
                          member = fresh_name("member");
        shared_["value"] = value;
        shared_["object"] = object;
        const std::string w = shared_rule("ws"), str = shared_rule("string"), num = shared_rule("number");
        const std::string sep = w + " \",\" " + w + " ";
        set_rule(value, object + " | " + array + " | " + str + " | " + num + " | \"true\" | \"false\" | \"null\"");
        set_rule(object, "\"{\" " + w + " (" + member + " (" + sep + member + ")* " + w + ")? \"}\"");
        set_rule(member, str + " " + w + " \":\" " + w + " " + value);
        set_rule(array, "\"[\" " + w + " (" + value + " (" + sep + value + ")* " + w + ")? \"]\"");
        return shared_[kind];
    }
    shared_[kind] = name;
    return name;
}

std::string gbnf_builder::grammar(std::string_view root_rule) const {
    std::string out = "root ::= " + std::string(root_rule) + "\n";
    for (const auto & [name, body] : rules_) out += name + " ::= " + body + "\n";
    return out;
}

Result<std::string> gbnf_builder::add_schema(const nlohmann::ordered_json & schema, std::string_view name_hint) {
    json_schema_converter c(*this, schema);
    return c.convert_root(name_hint);
}

Result<std::string> json_schema_to_gbnf(const nlohmann::ordered_json & schema) {
    gbnf_builder b;
    auto root = b.add_schema(schema, "schema");
    if (!root.ok()) return root.status();
    std::string g = b.grammar(root.value());
    if (g.size() > json_schema_grammar_bytes_max)
        return refuse("", "the grammar would be larger than " + std::to_string(json_schema_grammar_bytes_max >> 20) +
                              " MiB");
    return g;
}

std::string json_object_gbnf() {
    gbnf_builder b;
    return b.grammar(json_schema_converter::any_object(b));
}

}  // namespace baton
