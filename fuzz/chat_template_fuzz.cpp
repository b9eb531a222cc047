// chat_template_fuzz.cpp — libFuzzer target for chat templates (src/openai/chat_template.cpp on minja):
// client messages, tools and chat_template_kwargs rendered by three fixed templates.
//
// Input layout: byte 0 is the selector, the rest is fields separated by 0x1e (so seeds stay readable):
//   selector bits 0..1: the template (0 and 3: the ChatML fallback, 1: Llama-3 style, 2: tojson of the
//            tools, raise_exception on an unknown role, enable_thinking, strftime_now);
//   selector bit 2: add_generation_prompt off; bits 3..7 ignored.
//   field 0: tools, field 1: kwargs: JSON text (empty: null); text that does not parse is passed on as
//            ["<raw bytes>"] / {"raw": "<raw bytes>"}, so invalid UTF-8 reaches the checks on tools/kwargs;
//   then (role, content) pairs: a role of "0".."3" is system/user/assistant/tool, anything else is itself;
//   contents are arbitrary bytes (invalid UTF-8 and NUL included).
//
// Properties besides "no crash, hang or sanitizer report": a failure carries a message that names the
// field or starts with "chat template: "; a role or content that is not valid UTF-8 always fails, naming
// the first such field; the ChatML template never raises, and for what libllama's own "chatml" formatter
// can express (no tools, no "tool" message, which minja's polyfills rewrite, no NUL bytes, which a C string
// cuts) the two agree byte for byte.
#include <llama.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "baton/openai/chat_template.h"
#include "openai/test_templates.h"

namespace {

using namespace baton;
using nlohmann::json;

constexpr std::string_view k_tools = R"({%- if tools -%}
    {{- '<tools>' + tools | tojson + '</tools>\n' -}}
{%- endif -%}
{%- set ns = namespace(n=0) -%}
{%- for message in messages -%}
    {%- if message.role not in ['system', 'user', 'assistant', 'tool'] -%}
        {{- raise_exception('unknown role: ' + message.role) -}}
    {%- endif -%}
    {%- set ns.n = ns.n + 1 -%}
    {{- '[' + message.role + '] ' + message.content | trim + '\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{- '[assistant #' ~ ns.n ~ ']' -}}
    {%- if enable_thinking -%}{{- ' <think>' -}}{%- endif -%}
{%- endif -%}
{%- if date is defined -%}{{- ' ' + strftime_now('%Y-%m-%d') -}}{%- endif -%}
)";

[[noreturn]] void fail(const char * what, std::string_view a = {}, std::string_view b = {}) {
    std::fprintf(stderr, "chat_template_fuzz: %s\n", what);
    if (!a.empty()) std::fprintf(stderr, "  first:  %.*s\n", int(a.size()), a.data());
    if (!b.empty()) std::fprintf(stderr, "  second: %.*s\n", int(b.size()), b.data());
    __builtin_trap();
}

const chat_template & template_for(unsigned which) {
    static const chat_template chatml =
        chat_template::parse(std::string(chat_template_chatml_source()), "", "").value();
    static const chat_template llama3 =
        chat_template::parse(std::string(test_templates::k_llama3_template), "<|begin_of_text|>", "").value();
    static const chat_template tools = chat_template::parse(std::string(k_tools), "<s>", "</s>").value();
    return which == 1 ? llama3 : which == 2 ? tools : chatml;
}

std::vector<std::string_view> split_fields(std::string_view s) {
    std::vector<std::string_view> out;
    for (;;) {
        const size_t at = s.find('\x1e');
        out.push_back(s.substr(0, at));
        if (at == std::string_view::npos) return out;
        s.remove_prefix(at + 1);
    }
}

// json_field: empty -> null; JSON text -> its value; anything else -> the raw bytes, wrapped in an object
// (as_object) or an array.
json json_field(std::string_view text, bool as_object) {
    if (text.empty()) return nullptr;
    json j = json::parse(text, nullptr, false);
    if (!j.is_discarded()) return j;
    return as_object ? json{{"raw", std::string(text)}} : json::array({std::string(text)});
}

std::string role_of(std::string_view r) {
    if (r == "0") return "system";
    if (r == "1") return "user";
    if (r == "2") return "assistant";
    if (r == "3") return "tool";
    return std::string(r);
}

bool utf8_ok(const std::string & s) {
    try {
        (void)json(s).dump();
        return true;
    } catch (const json::exception &) {
        return false;
    }
}

std::string llama_chatml(const std::vector<chat_message> & messages, bool add_ass) {
    std::vector<llama_chat_message> msgs;
    for (const chat_message & m : messages) msgs.push_back({m.role.c_str(), m.content.c_str()});
    std::vector<char> buf(1024);
    int32_t n = llama_chat_apply_template("chatml", msgs.data(), msgs.size(), add_ass, buf.data(), int32_t(buf.size()));
    if (n > int32_t(buf.size())) {
        buf.resize(size_t(n));
        n = llama_chat_apply_template("chatml", msgs.data(), msgs.size(), add_ass, buf.data(), int32_t(buf.size()));
    }
    if (n < 0) fail("libllama refused its own chatml template");
    return std::string(buf.data(), size_t(n));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    if (size == 0) return 0;
    const unsigned which = data[0] & 3;
    const std::vector<std::string_view> fields =
        split_fields(std::string_view(reinterpret_cast<const char *>(data) + 1, size - 1));

    chat_template_options opts;
    opts.add_generation_prompt = (data[0] & 4) == 0;
    opts.tools = json_field(fields[0], false);
    if (fields.size() > 1) opts.kwargs = json_field(fields[1], true);
    opts.now = std::chrono::sys_days{std::chrono::year{2024} / 7 / 26} + std::chrono::hours{12};
    std::vector<chat_message> messages;
    for (size_t i = 2; i + 1 < fields.size(); i += 2)
        messages.push_back({role_of(fields[i]), std::string(fields[i + 1])});

    // The first role or content that is not valid UTF-8 must be the field the error names.
    std::string bad_field;
    for (size_t i = 0; i < messages.size() && bad_field.empty(); ++i) {
        if (!utf8_ok(messages[i].role)) bad_field = "messages[" + std::to_string(i) + "].role: ";
        else if (!utf8_ok(messages[i].content)) bad_field = "messages[" + std::to_string(i) + "].content: ";
    }

    const auto r = template_for(which).render(messages, opts);
    if (!r.ok()) {
        const Status st = r.status();
        const std::string & m = st.message();
        if (m.empty()) fail("error without a message");
        if (st.code() != status_code::invalid_argument) fail("error is not invalid_argument", m);
        if (!bad_field.empty() && m.rfind(bad_field, 0) != 0) fail("invalid UTF-8 not reported first", m, bad_field);
        const bool named = m.starts_with("chat template: ") || m.starts_with("messages[") || m.starts_with("tools: ") ||
                           m.starts_with("kwargs");
        if (!named) fail("error names no field", m);
        if ((which == 0 || which == 3) && m.starts_with("chat template: ")) fail("the ChatML template raised", m);
        return 0;
    }
    if (!bad_field.empty()) fail("invalid UTF-8 rendered", bad_field);

    if (which == 0 || which == 3) {
        const bool plain_tools = opts.tools.is_null() || (opts.tools.is_array() && opts.tools.empty());
        bool expressible = plain_tools;
        for (const chat_message & m : messages) {
            if (m.role == "tool" || m.role.find('\0') != std::string::npos || m.content.find('\0') != std::string::npos)
                expressible = false;
        }
        if (expressible) {
            const std::string ref = llama_chatml(messages, opts.add_generation_prompt);
            if (r.value() != ref) fail("ChatML differs from libllama's chatml", r.value(), ref);
        }
    }
    return 0;
}
