// tool_calls.cpp — tool calls out of generated text, tool definitions, and the grammar that forces calls
// (see tool_calls.h).
//
// Parsing is one resumable scanner (tool_call_stream); tool_calls_parse is that scanner fed the whole
// output at once, so streaming and the final message cannot disagree by construction, and the tests check
// that the scanner's decisions do not depend on where the pieces were cut. The scanner never decides on a
// byte it has not seen: every decision is either forced by bytes already there (a mismatch, a complete
// block) or made at the end. A JSON value's extent is found by counting brackets outside strings; only a
// complete value is handed to nlohmann's parser. A failed block resumes the search at the first byte that
// broke its shape (or after it, for a complete but invalid one), so every byte is scanned a bounded number
// of times and the work is linear in the output.
#include "baton/openai/tool_calls.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <optional>
#include <set>
#include <utility>

#include "ascii_space.h"
#include "baton/openai/json_schema_grammar.h"
#include "message_quote.h"

namespace baton {

namespace {

using ojson = nlohmann::ordered_json;  // tools keep the client's key order (the template shows them)
// The model's calls keep their key order: arguments come back as the model wrote them, only compacted.
using ojson = nlohmann::ordered_json;

constexpr std::string_view k_hermes_open = "<tool_call>";
constexpr std::string_view k_hermes_close = "</tool_call>";
constexpr std::string_view k_mistral_open = "[TOOL_CALLS]";
constexpr std::string_view k_python_tag = "<|python_tag|>";
constexpr size_t k_tool_name_max = 64;

bool all_ws(std::string_view s) { return std::all_of(s.begin(), s.end(), is_ascii_space); }

std::string_view marker_of(tool_call_format f) {
    return f == tool_call_format::mistral ? k_mistral_open : k_hermes_open;
}

// partial_marker_suffix: the length of the longest proper prefix of marker that s ends with.
size_t partial_marker_suffix(std::string_view s, std::string_view marker) {
    for (size_t n = std::min(s.size(), marker.size() - 1); n > 0; --n)
        if (s.substr(s.size() - n) == marker.substr(0, n)) return n;
    return 0;
}

// call_from_json: a call object {"name": non-empty string, "arguments": object} (llama3 also "parameters";
// mistral also "id": string), or nothing.
std::optional<tool_call> call_from_json(const ojson & j, tool_call_format f) {
    if (!j.is_object()) return std::nullopt;
    const auto name = j.find("name");
    if (name == j.end() || !name->is_string() || name->get_ref<const std::string &>().empty()) return std::nullopt;
    auto args = j.find("arguments");
    if (args == j.end() && f == tool_call_format::llama3) args = j.find("parameters");
    if (args == j.end() || !args->is_object()) return std::nullopt;
    tool_call c;
    if (f == tool_call_format::mistral) {
        const auto id = j.find("id");
        if (id != j.end()) {
            if (!id->is_string()) return std::nullopt;
            c.id = id->get<std::string>();
        }
    }
    c.name = name->get<std::string>();
    c.arguments = args->dump(-1, ' ', false, ojson::error_handler_t::replace);
    return c;
}

// calls_from_array: every element a call, at least one.
std::optional<std::vector<tool_call>> calls_from_array(const ojson & j, tool_call_format f) {
    if (!j.is_array() || j.empty()) return std::nullopt;
    std::vector<tool_call> calls;
    for (const auto & e : j) {
        auto c = call_from_json(e, f);
        if (!c) return std::nullopt;
        calls.push_back(std::move(*c));
    }
    return calls;
}

ojson parse_ojson(std::string_view s) { return ojson::parse(s.begin(), s.end(), nullptr, false); }

Status invalid(const std::string & path, const std::string & what) {
    return Status(status_code::invalid_argument, path + ": " + what);
}

bool tool_name_ok(const std::string & name) {
    if (name.empty() || name.size() > k_tool_name_max) return false;
    return std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
               c == '-';
    });
}

}  // namespace

const char * tool_call_format_name(tool_call_format f) {
    switch (f) {
        case tool_call_format::generic: return "generic";
        case tool_call_format::hermes: return "hermes";
        case tool_call_format::llama3: return "llama3";
        case tool_call_format::mistral: return "mistral";
    }
    return "generic";
}

tool_call_format tool_call_format_detect(std::string_view src) {
    const auto has = [src](std::string_view s) { return src.find(s) != std::string_view::npos; };
    if (has(k_hermes_open)) return tool_call_format::hermes;
    if (has(k_mistral_open)) return tool_call_format::mistral;
    if (has(k_python_tag) || (has("ipython") && has("<|start_header_id|>"))) return tool_call_format::llama3;
    return tool_call_format::generic;
}

// ---- the scanner ----

tool_call_stream::tool_call_stream(tool_call_format f)
    : format_(f), phase_(f == tool_call_format::hermes || f == tool_call_format::mistral ? phase::text : phase::whole) {
}

tool_call_stream::value_step tool_call_stream::scan_value(char c) {
    if (in_string_) {
        if (escape_) escape_ = false;
        else if (c == '\\') escape_ = true;
        else if (c == '"') in_string_ = false;
        return value_step::more;
    }
    if (c == '"') in_string_ = true;
    else if (c == '{' || c == '[') return ++depth_ > tool_call_depth_max ? value_step::too_deep : value_step::more;
    else if (c == '}' || c == ']') return --depth_ == 0 ? value_step::closed : value_step::more;
    return value_step::more;
}

tool_stream_piece tool_call_stream::push(std::string_view text) {
    tool_stream_piece out;
    if (phase_ == phase::content) {
        out.content.assign(text);
        return out;
    }
    pending_.append(text);
    step(false, out);
    return out;
}

tool_stream_piece tool_call_stream::finish() {
    tool_stream_piece out;
    if (phase_ != phase::content) step(true, out);
    phase_ = phase::content;  // anything pushed after the end passes through
    pending_.clear();
    held_ws_.clear();
    whole_calls_.clear();
    return out;
}

void tool_call_stream::scan_reset() {
    stage_ = stage::lead;
    pos_ = 0;
    value_start_ = 0;
    depth_ = 0;
    in_string_ = false;
    escape_ = false;
    tag_matched_ = 0;
}

void tool_call_stream::step(bool at_end, tool_stream_piece & out) {
    if (phase_ == phase::whole) {
        step_whole(at_end, out);
        return;
    }
    for (;;) {
        if (phase_ == phase::text) {
            step_text(at_end, out);
            if (phase_ != phase::block) break;
        } else if (phase_ == phase::block) {
            if (!step_block(at_end, out)) break;
        } else {
            break;
        }
    }
    pending_.erase(0, base_);  // once per step: erasing per block would be quadratic in a long output
    base_ = 0;
    if (at_end && stretch_ws_only_ && !held_ws_.empty()) {
        if (n_calls_ == 0) out.content += held_ws_;  // no call: the output is content verbatim
        held_ws_.clear();
    }
}

void tool_call_stream::emit_text(std::string_view s, tool_stream_piece & out) {
    if (s.empty()) return;
    if (stretch_ws_only_) {
        if (all_ws(s)) {
            held_ws_.append(s);  // dropped if a call follows (or came before and the end follows)
            return;
        }
        out.content += held_ws_;
        held_ws_.clear();
        stretch_ws_only_ = false;
    }
    out.content.append(s);
}

void tool_call_stream::emit_call(tool_call c, tool_stream_piece & out) {
    tool_call_delta d;
    d.index = n_calls_++;
    d.id = std::move(c.id);
    d.name = std::move(c.name);
    d.arguments = std::move(c.arguments);
    out.calls.push_back(std::move(d));
}

void tool_call_stream::step_text(bool at_end, tool_stream_piece & out) {
    const std::string_view marker = marker_of(format_);
    const std::string_view rest = std::string_view(pending_).substr(base_);
    const size_t p = rest.find(marker);
    if (p != std::string::npos) {
        emit_text(rest.substr(0, p), out);
        base_ += p;
        scan_reset();
        pos_ = marker.size();
        phase_ = phase::block;
        return;
    }
    const size_t keep = at_end ? 0 : partial_marker_suffix(rest, marker);
    emit_text(rest.substr(0, rest.size() - keep), out);
    base_ += rest.size() - keep;
}

bool tool_call_stream::step_block(bool at_end, tool_stream_piece & out) {
    const bool hermes = format_ == tool_call_format::hermes;
    const char open = hermes ? '{' : '[';
    const std::string_view rest = std::string_view(pending_).substr(base_);  // starts with the marker
    // fail: the block is not a call; its bytes before resume are content, the search goes on from resume.
    const auto fail = [&](size_t resume) {
        emit_text(rest.substr(0, resume), out);
        base_ += resume;
        phase_ = phase::text;
        return true;
    };
    // done: the block is complete and ends at end; it is a call (or calls) if its value is.
    const auto done = [&](size_t end) {
        const ojson j = parse_ojson(rest.substr(value_start_, pos_value_end_ - value_start_));
        std::vector<tool_call> calls;
        if (hermes) {
            if (auto c = call_from_json(j, format_)) calls.push_back(std::move(*c));
        } else if (auto cs = calls_from_array(j, format_)) {
            calls = std::move(*cs);
        }
        if (calls.empty()) return fail(end);
        if (stretch_ws_only_) held_ws_.clear();  // whitespace that only separated blocks
        for (auto & c : calls) emit_call(std::move(c), out);
        stretch_ws_only_ = true;
        held_ws_.clear();
        base_ += end;
        phase_ = phase::text;
        return true;
    };
    while (pos_ < rest.size()) {
        const char c = rest[pos_];
        switch (stage_) {
            case stage::lead:
                if (is_ascii_space(c)) {
                    ++pos_;
                } else if (c == open) {
                    value_start_ = pos_;
                    stage_ = stage::value;
                } else {
                    return fail(pos_);
                }
                break;
            case stage::value:
                if (const value_step v = scan_value(c); v == value_step::too_deep) {
                    return fail(pos_);
                } else if (v == value_step::closed) {
                    pos_value_end_ = pos_ + 1;
                    if (!hermes) {
                        ++pos_;
                        return done(pos_);
                    }
                    stage_ = stage::after;
                }
                ++pos_;
                break;
            case stage::after:
                if (is_ascii_space(c)) {
                    ++pos_;
                } else if (c == k_hermes_close[0]) {
                    stage_ = stage::close_tag;
                    tag_start_ = pos_;
                    tag_matched_ = 0;
                } else {
                    return fail(pos_);
                }
                break;
            case stage::close_tag:
                if (c != k_hermes_close[tag_matched_]) return fail(tag_start_);
                ++pos_;
                if (++tag_matched_ == k_hermes_close.size()) return done(pos_);
                break;
        }
    }
    if (!at_end) return false;
    return fail(rest.size());  // unterminated: the generation stopped inside the block
}

void tool_call_stream::fail_whole(tool_stream_piece & out) {
    out.content += pending_;
    pending_.clear();
    whole_calls_.clear();
    phase_ = phase::content;
}

void tool_call_stream::step_whole(bool at_end, tool_stream_piece & out) {
    const bool llama3 = format_ == tool_call_format::llama3;
    while (pos_ < pending_.size()) {
        const char c = pending_[pos_];
        switch (stage_) {
            case stage::lead:
                if (tag_matched_ > 0 && tag_matched_ < k_python_tag.size()) {
                    if (c != k_python_tag[tag_matched_]) return fail_whole(out);
                    ++tag_matched_;
                    ++pos_;
                } else if (is_ascii_space(c)) {
                    ++pos_;
                } else if (c == '{') {
                    value_start_ = pos_;
                    stage_ = stage::value;
                } else if (llama3 && c == k_python_tag[0] && tag_matched_ == 0 && whole_calls_.empty()) {
                    tag_matched_ = 1;
                    ++pos_;
                } else {
                    return fail_whole(out);
                }
                break;
            case stage::value:
                if (const value_step v = scan_value(c); v == value_step::too_deep) {
                    return fail_whole(out);
                } else if (v == value_step::closed) {
                    {
                        const ojson j =
                            parse_ojson(std::string_view(pending_).substr(value_start_, pos_ + 1 - value_start_));
                        if (llama3) {
                            auto call = call_from_json(j, format_);
                            if (!call) return fail_whole(out);
                            whole_calls_.push_back(std::move(*call));
                        } else {
                            std::optional<std::vector<tool_call>> calls;
                            const auto tc = j.is_object() ? j.find("tool_calls") : j.end();
                            const auto one = j.is_object() ? j.find("tool_call") : j.end();
                            const auto resp = j.is_object() ? j.find("response") : j.end();
                            if (tc != j.end()) {
                                calls = calls_from_array(*tc, format_);
                            } else if (one != j.end()) {
                                if (auto c1 = call_from_json(*one, format_)) calls.emplace(1, std::move(*c1));
                            } else if (resp != j.end() && resp->is_string()) {
                                whole_is_response_ = true;
                                whole_content_ = resp->get<std::string>();
                                calls.emplace();
                            }
                            if (!calls) return fail_whole(out);
                            whole_calls_ = std::move(*calls);
                        }
                        stage_ = stage::after;
                    }
                }
                ++pos_;
                break;
            case stage::after:
                if (is_ascii_space(c)) {
                    ++pos_;
                } else if (llama3 && c == ';') {
                    ++pos_;
                    stage_ = stage::lead;
                    tag_matched_ = k_python_tag.size();  // the tag may only come first
                } else {
                    return fail_whole(out);
                }
                break;
            case stage::close_tag: return fail_whole(out);  // not used by whole outputs
        }
    }
    if (!at_end) return;
    if (stage_ != stage::after) return fail_whole(out);
    if (whole_is_response_) out.content += whole_content_;
    for (auto & c : whole_calls_) emit_call(std::move(c), out);
    whole_calls_.clear();
    pending_.clear();
    phase_ = phase::content;
}

tool_output tool_calls_parse(tool_call_format f, std::string_view output) {
    tool_call_stream st(f);
    tool_stream_piece a = st.push(output);
    tool_stream_piece b = st.finish();
    tool_output r;
    r.content = std::move(a.content);
    r.content += b.content;
    for (auto * p : {&a, &b})
        for (auto & d : p->calls) r.calls.push_back({std::move(d.id), std::move(d.name), std::move(d.arguments)});
    return r;
}

// ---- tool definitions and choice ----

Status tools_check(const ojson & tools) {
    if (!tools.is_array()) return invalid("tools", "must be an array");
    std::set<std::string> names;
    for (size_t i = 0; i < tools.size(); ++i) {
        const std::string at = "tools[" + std::to_string(i) + "]";
        const ojson & t = tools[i];
        if (!t.is_object()) return invalid(at, "must be an object");
        const auto type = t.find("type");
        if (type == t.end() || !type->is_string() || *type != "function")
            return invalid(at + ".type", "must be \"function\"");
        const auto fn = t.find("function");
        if (fn == t.end() || !fn->is_object()) return invalid(at + ".function", "must be an object");
        const auto name = fn->find("name");
        if (name == fn->end() || !name->is_string()) return invalid(at + ".function.name", "must be a string");
        const auto & n = name->get_ref<const std::string &>();
        if (!tool_name_ok(n))
            return invalid(at + ".function.name",
                           quoted_for_message(n) + " must be 1 to 64 of the characters a-z, A-Z, 0-9, _, . and -");
        if (!names.insert(n).second)
            return invalid(at + ".function.name", quoted_for_message(n) + " is declared twice");
        const auto desc = fn->find("description");
        if (desc != fn->end() && !desc->is_string() && !desc->is_null())
            return invalid(at + ".function.description", "must be a string");
        const auto params = fn->find("parameters");
        if (params != fn->end() && !params->is_object() && !params->is_null())
            return invalid(at + ".function.parameters", "must be a JSON Schema object");
        const auto strict = fn->find("strict");
        if (strict != fn->end() && !strict->is_boolean() && !strict->is_null())
            return invalid(at + ".function.strict", "must be a boolean");
    }
    return {};
}

namespace {

// tool_index: the position of the function named name in tools, or nothing.
std::optional<size_t> tool_index(const ojson & tools, std::string_view name) {
    if (!tools.is_array()) return std::nullopt;
    for (size_t i = 0; i < tools.size(); ++i) {
        const ojson & t = tools[i];
        if (!t.is_object()) continue;
        const auto fn = t.find("function");
        if (fn == t.end() || !fn->is_object()) continue;
        const auto n = fn->find("name");
        if (n != fn->end() && n->is_string() && n->get_ref<const std::string &>() == name) return i;
    }
    return std::nullopt;
}

bool has_tools(const ojson & tools) { return tools.is_array() && !tools.empty(); }

}  // namespace

Result<tool_choice> tool_choice_parse(const ojson & v, const ojson & tools) {
    if (v.is_string()) {
        const auto & s = v.get_ref<const std::string &>();
        if (s == "auto") return tool_choice{tool_choice_auto{}};
        if (s == "none") return tool_choice{tool_choice_none{}};
        if (s == "required") {
            if (!has_tools(tools)) return invalid("tool_choice", "\"required\" needs tools");
            return tool_choice{tool_choice_required{}};
        }
        return invalid("tool_choice", quoted_for_message(s) + " must be \"auto\", \"none\", \"required\" or an object");
    }
    if (!v.is_object()) return invalid("tool_choice", "must be a string or an object");
    const auto type = v.find("type");
    if (type == v.end() || !type->is_string() || *type != "function")
        return invalid("tool_choice.type", "must be \"function\"");
    const auto fn = v.find("function");
    if (fn == v.end() || !fn->is_object()) return invalid("tool_choice.function", "must be an object");
    const auto name = fn->find("name");
    if (name == fn->end() || !name->is_string()) return invalid("tool_choice.function.name", "must be a string");
    const auto & n = name->get_ref<const std::string &>();
    if (!tool_index(tools, n))
        return invalid("tool_choice.function.name", quoted_for_message(n) + " is not a declared tool");
    return tool_choice{tool_choice_named{n}};
}

Status tool_calls_history_check(const ojson & tool_calls, std::string_view path) {
    const std::string p(path);
    if (!tool_calls.is_array()) return invalid(p, "must be an array");
    for (size_t i = 0; i < tool_calls.size(); ++i) {
        const std::string at = p + "[" + std::to_string(i) + "]";
        const ojson & c = tool_calls[i];
        if (!c.is_object()) return invalid(at, "must be an object");
        const auto id = c.find("id");
        if (id == c.end() || !id->is_string()) return invalid(at + ".id", "must be a string");
        const auto type = c.find("type");
        if (type != c.end() && (!type->is_string() || *type != "function"))
            return invalid(at + ".type", "must be \"function\"");
        const auto fn = c.find("function");
        if (fn == c.end() || !fn->is_object()) return invalid(at + ".function", "must be an object");
        const auto name = fn->find("name");
        if (name == fn->end() || !name->is_string() || name->get_ref<const std::string &>().empty())
            return invalid(at + ".function.name", "must be a non-empty string");
        const auto args = fn->find("arguments");
        if (args == fn->end() || !args->is_string()) return invalid(at + ".function.arguments", "must be a string");
        if (!parse_ojson(args->get_ref<const std::string &>()).is_object())
            return invalid(at + ".function.arguments", "not a JSON object");
    }
    return {};
}

// ---- the grammar ----

namespace {

// call_rule adds the rule of one call of tools[i] in format f and returns its name.
Result<std::string> call_rule(gbnf_builder & b, tool_call_format f, const ojson & tools, size_t i) {
    const ojson & fn = tools[i]["function"];
    const std::string name = fn["name"].get<std::string>();
    const auto params = fn.find("parameters");
    const ojson schema = params != fn.end() && params->is_object() ? *params : ojson{{"type", "object"}};
    Result<std::string> args = b.add_schema(schema, "args");
    if (!args.ok()) return invalid("tools[" + std::to_string(i) + "].function.parameters", args.status().message());
    const char * args_key = f == tool_call_format::llama3 ? "parameters" : "arguments";
    // Names passed tools_check: [A-Za-z0-9_.-], nothing to escape in JSON.
    std::string body = gbnf_builder::literal("{\"name\": \"" + name + "\", \"" + args_key + "\": ") + " " + *args;
    if (f == tool_call_format::mistral) {
        const std::string id_char = b.add_rule("call-id-char", "[a-zA-Z0-9]");
        body +=
            " (" + gbnf_builder::literal(", \"id\": \"") + " " + id_char + "{9} " + gbnf_builder::literal("\"") + ")?";
    }
    body += " " + gbnf_builder::literal("}");
    return b.add_rule("call", body);
}

}  // namespace

Result<tool_grammar> tool_calls_grammar(tool_call_format f, const ojson & tools, const tool_choice & choice,
                                        bool parallel) {
    if (std::holds_alternative<tool_choice_none>(choice)) return tool_grammar{};
    const bool lazy = std::holds_alternative<tool_choice_auto>(choice);
    if (lazy && (f == tool_call_format::generic || f == tool_call_format::llama3)) return tool_grammar{};
    if (!tools.is_array()) return invalid("tools", "must be an array");

    std::vector<size_t> which;
    if (const auto * named = std::get_if<tool_choice_named>(&choice)) {
        const auto i = tool_index(tools, named->name);
        if (!i)
            return invalid("tool_choice.function.name", quoted_for_message(named->name) + " is not a declared tool");
        which.push_back(*i);
    } else {
        for (size_t i = 0; i < tools.size(); ++i) which.push_back(i);
    }
    if (which.empty()) return invalid("tools", "tool_choice needs at least one tool");

    gbnf_builder b;
    std::string any_call;
    for (const size_t i : which) {
        if (!tools[i].is_object() || !tools[i].contains("function") || !tools[i]["function"].is_object() ||
            !tools[i]["function"].contains("name") || !tools[i]["function"]["name"].is_string())
            return invalid("tools[" + std::to_string(i) + "]", "not a function tool");
        Result<std::string> r = call_rule(b, f, tools, i);
        if (!r.ok()) {
            if (lazy) return tool_grammar{};  // auto: no grammar rather than a looser one
            return r.status();
        }
        if (!any_call.empty()) any_call += " | ";
        any_call += *r;
    }
    const std::string call = which.size() == 1 ? any_call : b.add_rule("any-call", any_call);
    const auto lit = gbnf_builder::literal;
    std::string body;
    switch (f) {
        case tool_call_format::hermes: {
            const std::string one =
                b.add_rule("tool-call", lit("<tool_call>\n") + " " + call + " " + lit("\n</tool_call>"));
            body = parallel ? one + " (" + lit("\n") + " " + one + ")*" : one;
            break;
        }
        case tool_call_format::mistral:
            body = lit("[TOOL_CALLS][") + " " + call + (parallel ? " (" + lit(", ") + " " + call + ")*" : "") + " " +
                   lit("]");
            break;
        case tool_call_format::llama3: body = call + (parallel ? " (" + lit("; ") + " " + call + ")*" : ""); break;
        case tool_call_format::generic:
            body = parallel ? lit("{\"tool_calls\": [") + " " + call + " (" + lit(", ") + " " + call + ")* " + lit("]}")
                            : lit("{\"tool_call\": ") + " " + call + " " + lit("}");
            break;
    }
    tool_grammar g;
    g.gbnf = b.grammar(b.add_rule("tool-calls", body));
    if (lazy) {
        g.lazy = true;
        g.trigger_patterns.push_back(f == tool_call_format::hermes ? "[\\s\\S]*?(<tool_call>[\\s\\S]*)"
                                                                   : "[\\s\\S]*?(\\[TOOL_CALLS\\][\\s\\S]*)");
    }
    return g;
}

}  // namespace baton
