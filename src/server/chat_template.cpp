// chat_template.cpp — chat_template on minja::chat_template: the checks on client input, the lock around
// minja, and minja's exceptions turned into Status (see chat_template.h for the contract).
#include "baton/server/chat_template.h"

#include <minja/chat-template.hpp>

#include <array>
#include <cstddef>
#include <exception>
#include <utility>

#include "baton/thread_annotations.h"

namespace baton {

struct chat_template::impl {
    minja::chat_template tmpl;
};

namespace {

using ojson = nlohmann::ordered_json;

// An error message is minja's first line, cut to this many bytes: a type error prints the offending value,
// which may be a whole client message.
constexpr size_t error_bytes_max = 1024;

// The variables render sets itself; a kwargs key may not replace them (minja would let it).
constexpr std::array<std::string_view, 6> reserved_names = {"messages",  "tools",     "add_generation_prompt",
                                                            "bos_token", "eos_token", "strftime_now"};

// minja_mu serializes every call into minja that may reach its strftime_now, which formats the time with
// std::localtime: one result buffer for the whole process. parse runs the template too (minja probes it
// with dummy conversations). The buffer is libc's, so the analysis cannot guard a variable; the two
// functions below require the lock instead, and they are the only way this file calls minja.
mutex minja_mu;

minja::chat_template minja_parse(const std::string & source, const std::string & bos, const std::string & eos)
    BATON_REQUIRES(minja_mu) {
    return minja::chat_template(source, bos, eos);
}

std::string minja_apply(const minja::chat_template & t, const minja::chat_template_inputs & in)
    BATON_REQUIRES(minja_mu) {
    return t.apply(in);
}

Status bad(std::string message) { return Status(status_code::invalid_argument, std::move(message)); }

// minja_error returns "chat template: " + the first line of what minja threw. minja appends the source lines
// around the error once per enclosing node, so the first line (the error, then " at row R, column C") is
// the part worth returning.
Status minja_error(const char * what) {
    std::string_view w = what ? what : "";
    w = w.substr(0, w.find('\n'));
    if (w.ends_with(':')) w.remove_suffix(1);
    if (w.size() > error_bytes_max) w = w.substr(0, utf8_complete_prefix(w.substr(0, error_bytes_max)));
    if (w.empty()) w = "unknown error";
    return bad("chat template: " + std::string(w));
}

// utf8_valid: s is UTF-8 that nlohmann's serializer accepts; minja prints JSON (tojson, error messages)
// through it, and it throws on anything else. Asking it keeps both judgements the same.
bool utf8_valid(const std::string & s) {
    try {
        (void)nlohmann::json(s).dump();
        return true;
    } catch (const nlohmann::json::type_error &) {
        return false;
    }
}

// json_too_deep: j nests arrays and objects more than depth_left levels deep. Descends at most
// depth_left + 1 levels, so its own recursion is bounded too.
bool json_too_deep(const nlohmann::json & j, int depth_left) {
    if (!j.is_structured()) return false;
    if (depth_left == 0) return true;
    for (const auto & v : j)
        if (json_too_deep(v, depth_left - 1)) return true;
    return false;
}

// check_json validates tools or kwargs: the depth first (dump, like minja, recurses), then the UTF-8.
Status check_json(const nlohmann::json & j, const std::string & field) {
    if (json_too_deep(j, chat_template_json_depth_max))
        return bad(field + ": nested deeper than " + std::to_string(chat_template_json_depth_max) + " levels");
    try {
        (void)j.dump();
    } catch (const nlohmann::json::type_error &) {
        return bad(field + ": not valid UTF-8");
    }
    return Status();
}

Status check_inputs(const std::vector<chat_message> & messages, const chat_template_options & opts) {
    for (size_t i = 0; i < messages.size(); ++i) {
        const std::string at = "messages[" + std::to_string(i) + "]";
        if (!utf8_valid(messages[i].role)) return bad(at + ".role: not valid UTF-8");
        if (!utf8_valid(messages[i].content)) return bad(at + ".content: not valid UTF-8");
    }
    if (!opts.tools.is_null() && !opts.tools.is_array()) return bad("tools: must be null or an array");
    if (!opts.kwargs.is_null() && !opts.kwargs.is_object()) return bad("kwargs: must be null or an object");
    BATON_RETURN_IF_ERROR(check_json(opts.tools, "tools"));
    BATON_RETURN_IF_ERROR(check_json(opts.kwargs, "kwargs"));
    if (opts.kwargs.is_object()) {
        for (const auto & [key, value] : opts.kwargs.items()) {
            for (std::string_view name : reserved_names)
                if (key == name) return bad("kwargs." + key + ": reserved template variable");
        }
    }
    return Status();
}

}  // namespace

Result<chat_template> chat_template::parse(std::string source, std::string bos_token, std::string eos_token) {
    try {
        lock_guard lock(minja_mu);
        auto p = std::make_shared<const impl>(impl{minja_parse(source, bos_token, eos_token)});
        return chat_template(std::move(p));
    } catch (const std::exception & e) {
        return minja_error(e.what());
    } catch (...) {
        return minja_error(nullptr);
    }
}

Result<std::string> chat_template::render(const std::vector<chat_message> & messages,
                                          const chat_template_options & opts) const {
    try {
        BATON_RETURN_IF_ERROR(check_inputs(messages, opts));
        minja::chat_template_inputs in;
        in.messages = ojson::array();
        for (const chat_message & m : messages) in.messages.push_back({{"role", m.role}, {"content", m.content}});
        in.tools = ojson(opts.tools);
        in.add_generation_prompt = opts.add_generation_prompt;
        in.extra_context = ojson(opts.kwargs);
        in.now = opts.now.value_or(std::chrono::system_clock::now());
        lock_guard lock(minja_mu);
        return minja_apply(impl_->tmpl, in);
    } catch (const std::exception & e) {
        return minja_error(e.what());
    } catch (...) {
        return minja_error(nullptr);
    }
}

const std::string & chat_template::source() const { return impl_->tmpl.source(); }
const std::string & chat_template::bos_token() const { return impl_->tmpl.bos_token(); }
const std::string & chat_template::eos_token() const { return impl_->tmpl.eos_token(); }

std::string_view chat_template_chatml_source() {
    return "{%- for message in messages -%}"
           "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
           "{%- endfor -%}"
           "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}";
}

}  // namespace baton
