// chat_template_test.cpp — Jinja chat templates through minja. Small hand-written templates use what real
// chat templates use (a loop with loop.first/loop.last, namespace() across the loop, a macro, tojson of the
// tools, a system-prompt branch, raise_exception, strftime_now, an enable_thinking kwarg, bos/eos); each
// expected prompt below is read off its template by hand, byte for byte. The ChatML fallback and
// Llama-3/Gemma-style templates are also checked against libllama's built-in formatters. Errors come back
// as invalid_argument with minja's message; concurrent renders agree.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "baton/chat_builtin.h"
#include "baton/openai/chat_template.h"
#include "openai/test_templates.h"

namespace baton::test {
namespace {

using nlohmann::json;

// A system-prompt branch (a first system message becomes the preamble, else a default one), a macro for
// every turn, the preamble at loop.first, eos_token after a final assistant turn (loop.last),
// namespace() carrying the last role out of the loop, and raise_exception on a role it does not know.
constexpr std::string_view k_preamble_template = R"({{- bos_token -}}
{%- macro turn(role, text) -%}
    {{- '<|' + role + '|>\n' + text + '<|end|>\n' -}}
{%- endmacro -%}
{%- if messages and messages[0]['role'] == 'system' -%}
    {%- set system = messages[0]['content'] | trim -%}
    {%- set rest = messages[1:] -%}
{%- else -%}
    {%- set system = 'You are a helpful assistant.' -%}
    {%- set rest = messages -%}
{%- endif -%}
{%- set ns = namespace(last_role='') -%}
{%- for message in rest -%}
    {%- if message['role'] not in ['user', 'assistant'] -%}
        {{- raise_exception('no such role: ' + message['role']) -}}
    {%- endif -%}
    {%- if loop.first -%}
        {{- turn('system', system) -}}
    {%- endif -%}
    {{- turn(message['role'], message['content'] | trim) -}}
    {%- if loop.last and message['role'] == 'assistant' -%}
        {{- eos_token -}}
    {%- endif -%}
    {%- set ns.last_role = message['role'] -%}
{%- endfor -%}
{%- if add_generation_prompt and ns.last_role != 'assistant' -%}
    {{- '<|assistant|>\n' -}}
{%- endif -%}
)";

// Tools as JSON lines (tojson), today's date (strftime_now), and a Qwen3-style enable_thinking switch.
constexpr std::string_view k_tools_template = R"({%- if tools -%}
    {{- '<|tools|>\n' -}}
    {%- for tool in tools -%}
        {{- tool | tojson -}}
        {{- '\n' -}}
    {%- endfor -%}
    {{- '<|/tools|>\n' -}}
{%- endif -%}
{{- 'Date: ' + strftime_now('%d %b %Y') + '\n' -}}
{%- for message in messages -%}
    {{- '<|' + message.role + '|>' + message.content + '\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{- '<|assistant|>' -}}
    {%- if enable_thinking is defined and not enable_thinking -%}
        {{- '<think></think>' -}}
    {%- else -%}
        {{- '<think>' -}}
    {%- endif -%}
{%- endif -%}
)";

// Filters: selectattr/rejectattr with a test, list, trim, upper, and an inline if without else.
constexpr std::string_view k_filters_template = R"(
{%- set systems = messages | selectattr('role', 'equalto', 'system') | list -%}
{%- if systems -%}
    {{- '[SYS] ' + systems[0]['content'] | trim + '\n' -}}
{%- endif -%}
{%- for message in messages | rejectattr('role', 'equalto', 'system') -%}
    {{- message['role'] | upper + ': ' + message['content'] -}}
    {{- '\n' if not loop.last -}}
{%- endfor -%}
)";

// Gemma style: no system turn (system text, trimmed, opens the next user turn), "model" for the assistant.
constexpr std::string_view k_gemma_template = R"(
{%- set ns = namespace(system='') -%}
{%- for message in messages -%}
    {%- if message['role'] == 'system' -%}
        {%- set ns.system = ns.system + message['content'] | trim -%}
    {%- else -%}
        {%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}
        {{- '<start_of_turn>' + role + '\n' -}}
        {%- if ns.system and role != 'model' -%}
            {{- ns.system + '\n\n' -}}
            {%- set ns.system = '' -%}
        {%- endif -%}
        {{- message['content'] | trim + '<end_of_turn>\n' -}}
    {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{- '<start_of_turn>model\n' -}}
{%- endif -%}
)";

const std::vector<chat_message> k_three = {
    {"system", "You are helpful."}, {"user", "Hello"}, {"assistant", "Hi! How can I help?"}};

// 2024-07-26 12:00 UTC: the same calendar day in every time zone within 11 hours of UTC (strftime_now
// formats local time).
std::chrono::system_clock::time_point fixed_now() {
    using namespace std::chrono;
    return sys_days{year{2024} / July / 26} + hours{12};
}

json weather_tool() {
    return json::parse(R"({"type": "function", "function": {"name": "get_weather", "description":
        "Weather for a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
        "required": ["city"]}}})");
}

chat_template parse_ok(std::string_view source, std::string bos = "", std::string eos = "") {
    auto t = chat_template::parse(std::string(source), std::move(bos), std::move(eos));
    if (!t.ok()) ADD_FAILURE() << t.status().to_string();
    return t.ok() ? t.value() : chat_template::parse("", "", "").value();
}

std::string render_ok(const chat_template & t, const std::vector<chat_message> & messages,
                      const chat_template_options & opts = {}) {
    auto r = t.render(messages, opts);
    if (!r.ok()) ADD_FAILURE() << r.status().to_string();
    return r.ok() ? r.value() : std::string();
}

// Llama 3.x templates fall back to their own date ("26 Jul 2024") when date_string is undefined; llama-server
// gives them today's, and so does Baton; a chat_template_kwargs date_string wins.
TEST(ChatTemplate, DateStringIsTodayUnlessAKwargGivesOne) {
    const chat_template t =
        parse_ok("{%- if not date_string is defined %}{%- set date_string = \"26 Jul 2024\" %}{%- endif %}"
                 "Today Date: {{ date_string }}|{{ messages[0]['content'] }}");
    using namespace std::chrono;
    chat_template_options o;
    o.now = sys_days{year{2026} / December / 5} + hours{12};
    EXPECT_EQ(render_ok(t, {{"user", "Hi"}}, o), "Today Date: 05 Dec 2026|Hi");
    o.kwargs = {{"date_string", "01 Jan 2000"}};
    EXPECT_EQ(render_ok(t, {{"user", "Hi"}}, o), "Today Date: 01 Jan 2000|Hi");
}

// llama_builtin renders messages with one of libllama's built-in formatters, named ("chatml", "llama3").
std::string llama_builtin(const char * name, const std::vector<chat_message> & messages, bool add_ass) {
    std::vector<chat_builtin_message> msgs;
    for (const chat_message & m : messages) msgs.push_back({m.role, m.content});
    auto r = chat_builtin_apply(name, msgs, add_ass);
    if (!r.ok()) ADD_FAILURE() << r.status().to_string();
    return r.ok() ? r.value() : std::string();
}

json nested_arrays(int depth) {
    json j = "leaf";
    for (int i = 0; i < depth; ++i) j = json::array({j});
    return j;
}

TEST(ChatTemplate, SystemMessageBecomesPreamble) {
    const chat_template t = parse_ok(k_preamble_template, "<s>", "</s>");
    const std::vector<chat_message> msgs = {
        {"system", "  Be terse.\n"}, {"user", " Hi "}, {"assistant", "Hello!"}, {"user", "Bye"}};
    EXPECT_EQ(render_ok(t, msgs), "<s>"
                                  "<|system|>\nBe terse.<|end|>\n"
                                  "<|user|>\nHi<|end|>\n"
                                  "<|assistant|>\nHello!<|end|>\n"
                                  "<|user|>\nBye<|end|>\n"
                                  "<|assistant|>\n");
}

TEST(ChatTemplate, DefaultPreambleAndEosAfterFinalAssistantTurn) {
    const chat_template t = parse_ok(k_preamble_template, "<s>", "</s>");
    EXPECT_EQ(render_ok(t, {{"user", "Hi"}, {"assistant", "Hello"}}),
              "<s>"
              "<|system|>\nYou are a helpful assistant.<|end|>\n"
              "<|user|>\nHi<|end|>\n"
              "<|assistant|>\nHello<|end|>\n"
              "</s>");
}

TEST(ChatTemplate, AddGenerationPromptFalseOmitsThePrompt) {
    const chat_template t = parse_ok(k_preamble_template, "<s>", "</s>");
    chat_template_options opts;
    opts.add_generation_prompt = false;
    EXPECT_EQ(render_ok(t, {{"user", "Hi"}}, opts), "<s><|system|>\nYou are a helpful assistant.<|end|>\n"
                                                    "<|user|>\nHi<|end|>\n");
}

TEST(ChatTemplate, RaiseExceptionIsInvalidArgumentWithItsMessage) {
    const chat_template t = parse_ok(k_preamble_template);
    auto r = t.render({{"user", "Hi"}, {"moderator", "stop"}}, {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), status_code::invalid_argument);
    EXPECT_EQ(r.status().message().rfind("chat template: no such role: moderator at row ", 0), 0)
        << r.status().message();
}

TEST(ChatTemplate, ToolsAsJsonDateAndThinkingOff) {
    const chat_template t = parse_ok(k_tools_template);
    chat_template_options opts;
    opts.tools = json::array({weather_tool()});
    opts.kwargs = {{"enable_thinking", false}};
    opts.now = fixed_now();
    // nlohmann::json keeps object keys sorted, so tojson prints them in that order.
    EXPECT_EQ(render_ok(t, {{"user", "Weather in Paris?"}}, opts),
              "<|tools|>\n"
              R"({"function": {"description": "Weather for a city.", "name": "get_weather", "parameters": )"
              R"({"properties": {"city": {"type": "string"}}, "required": ["city"], "type": "object"}}, )"
              R"("type": "function"})"
              "\n<|/tools|>\n"
              "Date: 26 Jul 2024\n"
              "<|user|>Weather in Paris?\n"
              "<|assistant|><think></think>");
}

TEST(ChatTemplate, NoToolsAndThinkingByDefault) {
    const chat_template t = parse_ok(k_tools_template);
    chat_template_options opts;
    opts.now = fixed_now();
    const std::string expected = "Date: 26 Jul 2024\n<|user|>Hi\n<|assistant|><think>";
    EXPECT_EQ(render_ok(t, {{"user", "Hi"}}, opts), expected);
    opts.tools = json::array();  // defined but empty: `if tools` is false
    opts.kwargs = {{"enable_thinking", true}};
    EXPECT_EQ(render_ok(t, {{"user", "Hi"}}, opts), expected);
}

TEST(ChatTemplate, ToolsIsDefinedOnlyWhenNotNull) {
    const chat_template t = parse_ok("{{ 'defined' if tools is defined else 'undefined' }}");
    chat_template_options opts;
    EXPECT_EQ(render_ok(t, {}, opts), "undefined");
    opts.tools = json::array();
    EXPECT_EQ(render_ok(t, {}, opts), "defined");
}

TEST(ChatTemplate, SelectattrRejectattrAndStringFilters) {
    const chat_template t = parse_ok(k_filters_template);
    EXPECT_EQ(render_ok(t, {{"system", " rules "}, {"user", "a"}, {"assistant", "b"}}),
              "[SYS] rules\nUSER: a\nASSISTANT: b");
}

// minja parses with trim_blocks and lstrip_blocks and drops the source's last newline. Unlike Jinja, its
// lstrip_blocks strips the indentation before {{ ... }} too (Jinja would render "  </s>" on the last line).
TEST(ChatTemplate, WhitespaceFollowsMinjaTrimAndLstripBlocks) {
    const chat_template t = parse_ok("{% for message in messages %}\n    <{{ message.role }}>\n{% endfor %}\n"
                                     "  {{ eos_token }}\n",
                                     "", "</s>");
    EXPECT_EQ(render_ok(t, {{"user", "a"}, {"assistant", "b"}}), "    <user>\n    <assistant>\n</s>");
}

TEST(ChatTemplate, ChatmlFallbackMatchesHandWrittenAndLibllama) {
    const chat_template t = parse_ok(chat_template_chatml_source());
    const std::string expected = "<|im_start|>system\nYou are helpful.<|im_end|>\n"
                                 "<|im_start|>user\nHello<|im_end|>\n"
                                 "<|im_start|>assistant\nHi! How can I help?<|im_end|>\n"
                                 "<|im_start|>assistant\n";
    EXPECT_EQ(render_ok(t, k_three), expected);
    EXPECT_EQ(llama_builtin("chatml", k_three, true), expected);
    chat_template_options opts;
    opts.add_generation_prompt = false;
    EXPECT_EQ(render_ok(t, k_three, opts), llama_builtin("chatml", k_three, false));
}

// Where a template does not show a "tool" message (the preamble template raises on any role but user and
// assistant), it becomes a user message holding {"tool_response": ...}, as llama-server's polyfill does; a
// template that shows it (ChatML renders any role) gets it as it is.
TEST(ChatTemplate, ToolMessageBecomesUserMessageWhereTemplateLacksToolSupport) {
    EXPECT_EQ(render_ok(parse_ok(k_preamble_template), {{"user", "2+2?"}, {"tool", "4"}}),
              "<|system|>\nYou are a helpful assistant.<|end|>\n"
              "<|user|>\n2+2?<|end|>\n"
              "<|user|>\n{\n"
              "  \"tool_response\": {\n"
              "    \"content\": \"4\"\n"
              "  }\n"
              "}<|end|>\n"
              "<|assistant|>\n");
    EXPECT_EQ(render_ok(parse_ok(chat_template_chatml_source()), {{"user", "2+2?"}, {"tool", "4"}}),
              "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>tool\n4<|im_end|>\n<|im_start|>assistant\n");
}

// A template without a system role (it raises on one): the system text opens the next user message.
TEST(ChatTemplate, SystemTextOpensTheUserMessageWhereTheTemplateHasNoSystemRole) {
    const chat_template t = parse_ok(
        "{%- for m in messages -%}{%- if m.role == 'system' -%}{{ raise_exception('no system role') }}{%- endif -%}"
        "[{{ m.role }}:{{ m.content }}]{%- endfor -%}");
    EXPECT_EQ(render_ok(t, {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello"}}),
              "[user:Be brief.\nHi][assistant:Hello]");
    EXPECT_EQ(render_ok(t, {{"system", "Only this."}}), "[user:Only this.]");
}

TEST(ChatTemplate, Llama3StyleMatchesHandWrittenAndLibllama) {
    const std::vector<chat_message> msgs = {
        {"system", "You are terse."}, {"user", " Hi there "}, {"assistant", "Hello."}};
    const std::string turns = "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
                              "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
                              "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
                              "<|start_header_id|>assistant<|end_header_id|>\n\n";
    EXPECT_EQ(render_ok(parse_ok(test_templates::k_llama3_template, "<|begin_of_text|>"), msgs),
              "<|begin_of_text|>" + turns);
    // libllama's formatter leaves BOS to the tokenizer.
    EXPECT_EQ(render_ok(parse_ok(test_templates::k_llama3_template), msgs), turns);
    EXPECT_EQ(llama_builtin("llama3", msgs, true), turns);
}

TEST(ChatTemplate, GemmaStyleMatchesHandWrittenAndLibllama) {
    const chat_template t = parse_ok(k_gemma_template);
    const std::vector<chat_message> msgs = {
        {"system", "Be brief. "}, {"user", "Hi"}, {"assistant", "Hello"}, {"user", "Bye"}};
    const std::string expected = "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n"
                                 "<start_of_turn>model\nHello<end_of_turn>\n"
                                 "<start_of_turn>user\nBye<end_of_turn>\n"
                                 "<start_of_turn>model\n";
    EXPECT_EQ(render_ok(t, msgs), expected);
    EXPECT_EQ(llama_builtin("gemma", msgs, true), expected);
}

TEST(ChatTemplate, SyntaxErrorIsInvalidArgumentWithMinjaMessage) {
    auto t = chat_template::parse("{% if messages %}", "", "");
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.status().code(), status_code::invalid_argument);
    EXPECT_EQ(t.status().message(), "chat template: Unterminated if at row 1, column 1");

    t = chat_template::parse("{{ messages[0].role }", "", "");
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.status().code(), status_code::invalid_argument);
    EXPECT_EQ(t.status().message().rfind("chat template: Expected closing expression tag at row 1, column ", 0), 0)
        << t.status().message();
}

TEST(ChatTemplate, TypeErrorAndUndefinedCallAreInvalidArgument) {
    auto r = parse_ok("{{ messages[0]['content'] - 1 }}").render({{"user", "x"}}, {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), status_code::invalid_argument);
    EXPECT_NE(r.status().message().find("type must be number"), std::string::npos) << r.status().message();

    r = parse_ok("{{ no_such_function() }}").render({{"user", "x"}}, {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), status_code::invalid_argument);
    EXPECT_EQ(r.status().message().rfind("chat template: ", 0), 0) << r.status().message();
}

TEST(ChatTemplate, ToolsOrKwargsTooDeepAreRejected) {
    const chat_template t = parse_ok(k_tools_template);
    chat_template_options opts;
    opts.tools = nested_arrays(chat_template_json_depth_max);
    EXPECT_TRUE(t.render({{"user", "x"}}, opts).ok());
    opts.tools = nested_arrays(chat_template_json_depth_max + 1);
    auto r = t.render({{"user", "x"}}, opts);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), status_code::invalid_argument);
    EXPECT_EQ(r.status().message(), "tools: nested deeper than 32 levels");

    opts.tools = nullptr;
    opts.kwargs = {{"x", nested_arrays(chat_template_json_depth_max)}};  // the object is one more level
    r = t.render({{"user", "x"}}, opts);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message(), "kwargs: nested deeper than 32 levels");
}

TEST(ChatTemplate, MalformedInputsAreRejectedNamingTheField) {
    const chat_template t = parse_ok(chat_template_chatml_source());
    auto r = t.render({{"user", "ok"}, {"user", "bad \xC3\x28 byte"}}, {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), status_code::invalid_argument);
    EXPECT_EQ(r.status().message(), "messages[1].content: not valid UTF-8");

    r = t.render({{"\xFF", "x"}}, {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message(), "messages[0].role: not valid UTF-8");

    chat_template_options opts;
    opts.tools = {{"type", "function"}};
    r = t.render({{"user", "x"}}, opts);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message(), "tools: must be null or an array");

    opts = {};
    opts.kwargs = json::array();
    r = t.render({{"user", "x"}}, opts);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message(), "kwargs: must be null or an object");

    opts.kwargs = {{"messages", json::array()}};
    r = t.render({{"user", "x"}}, opts);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message(), "kwargs.messages: reserved template variable");

    opts.kwargs = {{"note", "bad \xC3\x28 byte"}};
    r = t.render({{"user", "x"}}, opts);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message(), "kwargs: not valid UTF-8");
}

TEST(ChatTemplate, ConcurrentRendersAgree) {
    const chat_template t = parse_ok(k_tools_template);
    chat_template_options opts;
    opts.tools = json::array({weather_tool()});
    opts.now = fixed_now();
    const std::vector<chat_message> msgs = {{"user", "Weather in Paris?"}, {"assistant", "Sunny."}, {"user", "Rome?"}};
    const std::string expected = render_ok(t, msgs, opts);
    ASSERT_FALSE(expected.empty());
    constexpr int n_threads = 4, n_renders = 50;
    std::vector<std::string> mismatch(n_threads);
    std::vector<std::thread> threads;
    for (int i = 0; i < n_threads; ++i) {
        threads.emplace_back([&, i, copy = t] {  // a copy shares the parsed template
            for (int k = 0; k < n_renders && mismatch[i].empty(); ++k) {
                auto r = copy.render(msgs, opts);
                if (!r.ok()) mismatch[i] = r.status().to_string();
                else if (r.value() != expected) mismatch[i] = r.value();
            }
        });
    }
    for (auto & th : threads) th.join();
    for (int i = 0; i < n_threads; ++i) EXPECT_EQ(mismatch[i], "") << "thread " << i;
}

TEST(ChatTemplate, KeepsSourceAndTokens) {
    const chat_template t = parse_ok(test_templates::k_llama3_template, "<s>", "</s>");
    EXPECT_EQ(t.source(), test_templates::k_llama3_template);
    EXPECT_EQ(t.bos_token(), "<s>");
    EXPECT_EQ(t.eos_token(), "</s>");
}

// minja's macros hold the context they were defined in (a reference cycle); chat_template appends a release
// of every macro to the source. The output must be exactly what the template says, at the end of the source
// too (trailing whitespace, a trailing newline or none), and source() stays as given. The release itself is
// checked by LeakSanitizer in the ASan suite: without it this test leaks every render's context.
TEST(ChatTemplate, MacroTemplatesRenderAsWrittenAndSourceStaysAsGiven) {
    const std::string def = "{% macro wrap(x) %}[{{ x }}]{% endmacro %}";
    const std::vector<std::pair<std::string, std::string>> cases = {
        {def + "{{ wrap(messages[0].content) }}", "[hi]"},
        {def + "{{ wrap(messages[0].content) }}\n", "[hi]"},
        {def + "{{ wrap(messages[0].content) }}\n\n", "[hi]\n"},
        {def + "{{ wrap(messages[0].content) }}\n   \n", "[hi]\n   "},
        {def + "{{ wrap(messages[0].content) }}   ", "[hi]   "},
        {"{%- macro a() -%}A{%- endmacro -%}{%- macro b() -%}B{%- endmacro -%}{{ a() }}{{ b() }}", "AB"},
    };
    for (const auto & [source, expected] : cases) {
        const chat_template t = parse_ok(source);
        EXPECT_EQ(t.source(), source);
        for (int i = 0; i < 3; ++i) EXPECT_EQ(render_ok(t, {{"user", "hi"}}), expected) << source;
    }
}

}  // namespace
}  // namespace baton::test
