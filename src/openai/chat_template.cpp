// chat_template.cpp — chat_template on minja: the checks on client input, the polyfills, a render context
// that cannot leak, the lock around minja, and minja's exceptions turned into Status (see chat_template.h).
#include "baton/openai/chat_template.h"

#include <minja/minja.hpp>

#include <array>
#include <cstddef>
#include <ctime>
#include <exception>
#include <iomanip>
#include <sstream>
#include <utility>

#include "baton/base/thread_annotations.h"

namespace baton {

// What a template does with what it is given, probed once at parse (template_caps_probe).
struct template_caps {
    bool system_role = false;     // a system message's text reaches the prompt
    bool tool_responses = false;  // a "tool" message's text reaches the prompt
    bool tools = false;           // a tool's name reaches the prompt when tools are given
    bool typed_content = false;   // content only reaches the prompt as [{"type":"text","text":...}]
};

struct chat_template::impl {
    std::string source, bos, eos;
    std::shared_ptr<minja::TemplateNode> root;
    template_caps caps;
};

namespace {

using ojson = nlohmann::ordered_json;

// An error message is minja's first line, cut to this many bytes: a type error prints the offending value,
// which may be a whole client message.
constexpr size_t error_bytes_max = 1024;

// The variables render sets itself; a kwargs key may not replace them (minja would let it).
constexpr std::array<std::string_view, 6> reserved_names = {"messages",  "tools",     "add_generation_prompt",
                                                            "bos_token", "eos_token", "strftime_now"};

// minja_mu serializes every call into minja (parse, the probes, renders): minja makes no promise about
// threads. The functions below that require it are the only way this file calls minja.
mutex minja_mu;

std::shared_ptr<minja::TemplateNode> minja_parse(const std::string & source) BATON_REQUIRES(minja_mu) {
    return minja::Parser::parse(source, {/* .trim_blocks = */ true, /* .lstrip_blocks = */ true,
                                         /* .keep_trailing_newline = */ false});
}

// releasing_context is the context a render runs in. minja has a reference cycle: a macro's callable
// captures the context it was defined in and is stored in that context, so a render of a template that
// defines a macro would keep its whole context (the client's messages included) alive forever — on success
// and, worse, whenever the template raises. release() drops the values after the render, whatever its
// outcome, which breaks the cycle. (A macro defined inside a for loop lives in the loop's own context and
// keeps that one, and so this one's empty shell, alive: a few hundred bytes per render of such a template.)
// This is also why Baton does not use minja::chat_template (its apply and its probes make contexts of
// their own).
class releasing_context : public minja::Context {
  public:
    explicit releasing_context(minja::Value values) : minja::Context(std::move(values), minja::Context::builtins()) {}
    void release() { values_ = minja::Value::object(); }
};

std::string minja_render(const minja::TemplateNode & root, const std::shared_ptr<releasing_context> & ctx)
    BATON_REQUIRES(minja_mu) {
    struct release_at_exit {
        releasing_context & c;
        ~release_at_exit() { c.release(); }
    } at_exit{*ctx};
    return root.render(ctx);
}

// strftime_now formats `now` in local time (localtime_r: no shared buffer).
minja::Value strftime_now(std::chrono::system_clock::time_point now) {
    return minja::Value::callable([now](const std::shared_ptr<minja::Context> &, minja::ArgumentsValue & args) {
        args.expectArgs("strftime_now", {1, 1}, {0, 0});
        const std::time_t t = std::chrono::system_clock::to_time_t(now);
        std::tm local{};
        localtime_r(&t, &local);
        std::ostringstream out;
        out << std::put_time(&local, args.args[0].get<std::string>().c_str());
        return minja::Value(out.str());
    });
}

// polyfilled_messages gives the messages as the template can take them, as llama-server does for a
// template without a system role (system text opens the next user turn, or becomes a user turn of its own)
// or without tool responses (a "tool" message becomes a user message holding {"tool_response": ...}), and
// with content as typed parts where the template requires them.
ojson polyfilled_messages(const std::vector<chat_message> & messages, const template_caps & caps) {
    ojson out = ojson::array();
    auto add = [&](const std::string & role, const std::string & content, const chat_message * extra) {
        ojson m = {{"role", role}};
        if (caps.typed_content) m["content"] = ojson::array({{{"type", "text"}, {"text", content}}});
        else m["content"] = content;
        if (extra && !extra->tool_calls.empty()) {
            // An assistant turn's calls, arguments as objects (what the templates of the tool-calling families
            // iterate over or pass to tojson); content null when the client sent none, as OpenAI's own form.
            ojson calls = ojson::array();
            for (const chat_tool_call & c : extra->tool_calls) {
                ojson args = ojson::parse(c.arguments, nullptr, false);
                if (args.is_discarded()) args = ojson::object();
                ojson call = {{"type", "function"}, {"function", {{"name", c.name}, {"arguments", std::move(args)}}}};
                if (!c.id.empty()) call["id"] = c.id;
                calls.push_back(std::move(call));
            }
            m["tool_calls"] = std::move(calls);
            if (content.empty()) m["content"] = nullptr;
        }
        if (extra && !extra->tool_call_id.empty()) m["tool_call_id"] = extra->tool_call_id;
        if (extra && !extra->name.empty()) m["name"] = extra->name;
        if (extra && !extra->reasoning_content.empty()) m["reasoning_content"] = extra->reasoning_content;
        out.push_back(std::move(m));
    };
    std::string pending_system;
    auto flush_system = [&] {
        if (!pending_system.empty()) add("user", pending_system, nullptr);
        pending_system.clear();
    };
    for (const chat_message & m : messages) {
        std::string role = m.role, content = m.content;
        const chat_message * extra = &m;
        if (role == "tool" && !caps.tool_responses) {
            role = "user";
            ojson response = {{"content", m.content}};
            if (!m.tool_call_id.empty()) response["tool_call_id"] = m.tool_call_id;
            if (!m.name.empty()) response["name"] = m.name;
            content = ojson{{"tool_response", std::move(response)}}.dump(2);
            extra = nullptr;
        }
        if (!caps.system_role) {
            if (role == "system") {
                pending_system += (pending_system.empty() ? "" : "\n") + content;
                continue;
            }
            if (role == "user" && !pending_system.empty()) {
                content = pending_system + (content.empty() ? "" : "\n" + content);
                pending_system.clear();
            } else {
                flush_system();
            }
        }
        add(role, content, extra);
    }
    flush_system();
    return out;
}

// context_values: the variables a render sees (see chat_template.h).
minja::Value context_values(const ojson & messages, const chat_template_options & opts, const std::string & bos,
                            const std::string & eos) {
    auto values = minja::Value::object();
    values.set("messages", minja::Value(messages));
    values.set("add_generation_prompt", minja::Value(opts.add_generation_prompt));
    values.set("bos_token", minja::Value(bos));
    values.set("eos_token", minja::Value(eos));
    const auto now = opts.now.value_or(std::chrono::system_clock::now());
    values.set("strftime_now", strftime_now(now));
    // Llama 3.x templates print "Today Date: {{ date_string }}", their own date when it is undefined; as
    // llama-server, it is today's ("05 Dec 2026", local time). A kwarg of that name replaces it.
    {
        const std::time_t t = std::chrono::system_clock::to_time_t(now);
        std::tm local{};
        localtime_r(&t, &local);
        char buf[32];
        values.set("date_string", minja::Value(std::string(buf, std::strftime(buf, sizeof buf, "%d %b %Y", &local))));
    }
    if (!opts.tools.is_null()) values.set("tools", minja::Value(ojson(opts.tools)));
    if (opts.kwargs.is_object())
        for (const auto & [key, value] : opts.kwargs.items()) values.set(key, minja::Value(ojson(value)));
    return values;
}

// probe_renders: whether rendering messages (with tools) shows `needle`; a template that raises on them
// does not.
bool probe_renders(const minja::TemplateNode & root, const ojson & messages, const nlohmann::json & tools,
                   const std::string & needle) BATON_REQUIRES(minja_mu) {
    chat_template_options o;
    o.tools = tools;
    o.now = std::chrono::system_clock::time_point{};
    try {
        return minja_render(root, std::make_shared<releasing_context>(context_values(messages, o, "", "")))
                   .find(needle) != std::string::npos;
    } catch (...) {
        return false;
    }
}

// template_caps_probe renders dummy conversations to learn what the template shows (as llama-server's
// polyfills decide; Baton's own probes).
template_caps template_caps_probe(const minja::TemplateNode & root) BATON_REQUIRES(minja_mu) {
    template_caps c;
    const std::string user = "baton-probe-user-7f3a", sys = "baton-probe-system-7f3a", tool = "baton-probe-tool-7f3a";
    const ojson plain = ojson::array({{{"role", "user"}, {"content", user}}});
    const ojson typed =
        ojson::array({{{"role", "user"}, {"content", ojson::array({{{"type", "text"}, {"text", user}}})}}});
    c.typed_content = !probe_renders(root, plain, nullptr, user) && probe_renders(root, typed, nullptr, user);
    auto msg = [&](const std::string & role, const std::string & text) {
        return c.typed_content ? ojson{{"role", role}, {"content", ojson::array({{{"type", "text"}, {"text", text}}})}}
                               : ojson{{"role", role}, {"content", text}};
    };
    c.system_role = probe_renders(root, ojson::array({msg("system", sys), msg("user", user)}), nullptr, sys);
    c.tool_responses = probe_renders(
        root, ojson::array({msg("user", user), msg("assistant", "ok"), msg("tool", tool), msg("user", user)}), nullptr,
        tool);
    const nlohmann::json tools = nlohmann::json::array(
        {{{"type", "function"},
          {"function", {{"name", "baton_probe_tool_7f3a"}, {"parameters", {{"type", "object"}}}}}}});
    c.tools = probe_renders(root, ojson::array({msg("user", user)}), tools, "baton_probe_tool_7f3a");
    return c;
}

// minja_error returns "chat template: " + the first line of what minja threw. minja appends the source lines
// around the error once per enclosing node, so the first line (the error, then " at row R, column C") is
// the part worth returning.
Status minja_error(const char * what) {
    std::string_view w = what ? what : "";
    w = w.substr(0, w.find('\n'));
    if (w.ends_with(':')) w.remove_suffix(1);
    if (w.size() > error_bytes_max) w = w.substr(0, utf8_complete_prefix(w.substr(0, error_bytes_max)));
    if (w.empty()) w = "unknown error";
    return invalid_input("chat template: " + std::string(w));
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
template <typename J>
bool json_too_deep(const J & j, int depth_left) {
    if (!j.is_structured()) return false;
    if (depth_left == 0) return true;
    for (const auto & v : j)
        if (json_too_deep(v, depth_left - 1)) return true;
    return false;
}

// check_json validates tools or kwargs: the depth first (dump, like minja, recurses), then the UTF-8.
template <typename J>
Status check_json(const J & j, const std::string & field) {
    if (json_too_deep(j, chat_template_json_depth_max))
        return invalid_input(field + ": nested deeper than " + std::to_string(chat_template_json_depth_max) +
                             " levels");
    try {
        (void)j.dump();
    } catch (const nlohmann::json::type_error &) {
        return invalid_input(field + ": not valid UTF-8");
    }
    return Status();
}

Status check_inputs(const std::vector<chat_message> & messages, const chat_template_options & opts) {
    for (size_t i = 0; i < messages.size(); ++i) {
        const std::string at = "messages[" + std::to_string(i) + "]";
        if (!utf8_valid(messages[i].role)) return invalid_input(at + ".role: not valid UTF-8");
        if (!utf8_valid(messages[i].content)) return invalid_input(at + ".content: not valid UTF-8");
        if (!utf8_valid(messages[i].tool_call_id)) return invalid_input(at + ".tool_call_id: not valid UTF-8");
        if (!utf8_valid(messages[i].name)) return invalid_input(at + ".name: not valid UTF-8");
        if (!utf8_valid(messages[i].reasoning_content))
            return invalid_input(at + ".reasoning_content: not valid UTF-8");
        for (size_t k = 0; k < messages[i].tool_calls.size(); ++k) {
            const chat_tool_call & c = messages[i].tool_calls[k];
            const std::string call = at + ".tool_calls[" + std::to_string(k) + "]";
            if (!utf8_valid(c.id) || !utf8_valid(c.name) || !utf8_valid(c.arguments))
                return invalid_input(call + ": not valid UTF-8");
            const ojson args = ojson::parse(c.arguments, nullptr, false);
            if (args.is_discarded() || !args.is_object())
                return invalid_input(call + ".function.arguments: not a JSON object");
            if (json_too_deep(args, chat_template_json_depth_max))
                return invalid_input(call + ".function.arguments: nested deeper than " +
                                     std::to_string(chat_template_json_depth_max) + " levels");
        }
    }
    if (!opts.tools.is_null() && !opts.tools.is_array()) return invalid_input("tools: must be null or an array");
    if (!opts.kwargs.is_null() && !opts.kwargs.is_object()) return invalid_input("kwargs: must be null or an object");
    BATON_RETURN_IF_ERROR(check_json(opts.tools, "tools"));
    BATON_RETURN_IF_ERROR(check_json(opts.kwargs, "kwargs"));
    if (opts.kwargs.is_object()) {
        for (const auto & [key, value] : opts.kwargs.items()) {
            for (std::string_view name : reserved_names)
                if (key == name) return invalid_input("kwargs." + key + ": reserved template variable");
        }
    }
    return Status();
}

}  // namespace

Result<chat_template> chat_template::parse(std::string source, std::string bos_token, std::string eos_token) {
    try {
        lock_guard lock(minja_mu);
        auto root = minja_parse(source);
        const template_caps caps = template_caps_probe(*root);
        auto p = std::make_shared<const impl>(
            impl{std::move(source), std::move(bos_token), std::move(eos_token), std::move(root), caps});
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
        if (opts.tools.is_array() && !opts.tools.empty() && !impl_->caps.tools)
            return invalid_input("tools: this chat template does not render tools");
        auto ctx = std::make_shared<releasing_context>(
            context_values(polyfilled_messages(messages, impl_->caps), opts, impl_->bos, impl_->eos));
        lock_guard lock(minja_mu);
        return minja_render(*impl_->root, ctx);
    } catch (const std::exception & e) {
        return minja_error(e.what());
    } catch (...) {
        return minja_error(nullptr);
    }
}

const std::string & chat_template::source() const { return impl_->source; }
const std::string & chat_template::bos_token() const { return impl_->bos; }
const std::string & chat_template::eos_token() const { return impl_->eos; }

std::string_view chat_template_chatml_source() {
    return "{%- for message in messages -%}"
           "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
           "{%- endfor -%}"
           "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}";
}

}  // namespace baton
