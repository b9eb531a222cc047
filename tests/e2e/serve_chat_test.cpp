// serve_chat_test.cpp — chat templates on a node: --chat-template-file, --chat-template NAME, --no-jinja,
// chat_template_kwargs (request and --chat-template-kwargs), a template that raises, the reasoning split
// (--reasoning-format and the request's reasoning_format), and PD with a template only the prefill node has.
#include <fstream>

#include "serve_test_util.h"

namespace baton::test {
namespace {

// A ChatML template that opens the thought in the generation prompt unless enable_thinking is false, as
// Qwen3's does, and refuses a role it does not know.
const char * k_think_template =
    "{%- for m in messages -%}"
    "{%- if m.role not in ['system', 'user', 'assistant'] -%}{{ raise_exception('unknown role ' + m.role) }}{%- endif "
    "-%}"
    "{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is not defined or enable_thinking -%}{{ '<think>\\n' }}{%- endif -%}"
    "{%- endif -%}";

std::string write_template(const std::string & text) {
    const std::string path = temp_dir() + "/think.jinja";
    std::ofstream(path) << text;
    return path;
}

json chat_body(int max_tokens = 8) {
    return {{"messages", {{{"role", "user"}, {"content", "Think about the state blob"}}}},
            {"max_tokens", max_tokens},
            {"temperature", 0}};
}

TEST(ServeChat, TemplateFileRendersAndForcedThoughtGoesToReasoningContent) {
    const std::string tmpl = write_template(k_think_template);
    auto n = node_process::start(serve_args("llama", {"--chat-template-file", tmpl}));
    const json prompt = post(*n, "/apply-template", chat_body().dump()).j();
    EXPECT_EQ(prompt["prompt"],
              "<|im_start|>user\nThink about the state blob<|im_end|>\n<|im_start|>assistant\n<think>\n");
    EXPECT_EQ(get(*n, "/props").j()["baton"]["chat_template_origin"], "--chat-template-file " + tmpl);

    // The prompt opened the thought and the model never closes it: everything is reasoning.
    const json split = post(*n, "/v1/chat/completions", chat_body().dump()).j();
    json none_body = chat_body();
    none_body["reasoning_format"] = "none";
    const json whole = post(*n, "/v1/chat/completions", none_body.dump()).j();
    const std::string text = whole["choices"][0]["message"]["content"];
    ASSERT_FALSE(text.empty()) << whole.dump();
    EXPECT_EQ(split["choices"][0]["message"]["content"], "") << split.dump();
    std::string trimmed = text;
    trimmed.erase(0, trimmed.find_first_not_of(" \t\n\r\f\v"));
    trimmed.erase(trimmed.find_last_not_of(" \t\n\r\f\v") + 1);
    EXPECT_EQ(split["choices"][0]["message"]["reasoning_content"], trimmed) << split.dump();
    EXPECT_FALSE(whole["choices"][0]["message"].contains("reasoning_content")) << "none: no reasoning_content";

    // Streamed: the reasoning arrives in delta.reasoning_content and adds up to the same text.
    json stream_body = chat_body();
    stream_body["stream"] = true;
    const http_reply s = post(*n, "/v1/chat/completions", stream_body.dump());
    ASSERT_EQ(s.status, 200) << s.body;
    std::string streamed_reasoning, streamed_content;
    for (const auto & c : normalized_stream(s.body)) {
        if (!c.is_object()) continue;
        const json & d = c["choices"][0]["delta"];
        if (d.contains("reasoning_content")) streamed_reasoning += d["reasoning_content"].get<std::string>();
        if (d.contains("content") && d["content"].is_string()) streamed_content += d["content"].get<std::string>();
    }
    EXPECT_EQ(streamed_reasoning, trimmed);
    EXPECT_EQ(streamed_content, "");

    // enable_thinking false (the request's kwargs): the prompt does not open the thought, all is content.
    json off = chat_body();
    off["chat_template_kwargs"] = {{"enable_thinking", false}};
    const json plain = post(*n, "/v1/chat/completions", off.dump()).j();
    EXPECT_FALSE(plain["choices"][0]["message"].contains("reasoning_content")) << plain.dump();
    EXPECT_EQ(post(*n, "/apply-template", off.dump()).j()["prompt"],
              "<|im_start|>user\nThink about the state blob<|im_end|>\n<|im_start|>assistant\n");

    // The template's own error is a 400 that says what the template said.
    json bad = chat_body();
    bad["messages"] = {{{"role", "wizard"}, {"content", "x"}}};
    const http_reply e = post(*n, "/v1/chat/completions", bad.dump());
    EXPECT_EQ(e.status, 400) << e.body;
    EXPECT_NE(e.body.find("unknown role wizard"), std::string::npos) << e.body;
}

TEST(ServeChat, NodeKwargsAreDefaultsTheRequestOverrides) {
    const std::string tmpl = write_template(k_think_template);
    auto n = node_process::start(
        serve_args("llama", {"--chat-template-file", tmpl, "--chat-template-kwargs", R"({"enable_thinking":false})"}));
    const std::string closed = "<|im_start|>user\nThink about the state blob<|im_end|>\n<|im_start|>assistant\n";
    EXPECT_EQ(post(*n, "/apply-template", chat_body().dump()).j()["prompt"], closed);
    json on = chat_body();
    on["chat_template_kwargs"] = {{"enable_thinking", true}};
    EXPECT_EQ(post(*n, "/apply-template", on.dump()).j()["prompt"], closed + "<think>\n");
    // --reasoning-format none on the node: the thought stays in content.
    auto none = node_process::start(serve_args("llama", {"--chat-template-file", tmpl, "--reasoning-format", "none"}));
    const json r = post(*none, "/v1/chat/completions", chat_body().dump()).j();
    EXPECT_FALSE(r["choices"][0]["message"].contains("reasoning_content")) << r.dump();
    EXPECT_FALSE(r["choices"][0]["message"]["content"].get<std::string>().empty());
}

TEST(ServeChat, BuiltinNamesAndNoJinjaGoThroughLibllamasFormatter) {
    // --no-jinja: the model's ChatML goes through libllama's formatter; same prompt, same answer.
    auto jinja = node_process::start(serve_args("llama"));
    auto builtin = node_process::start(serve_args("llama", {"--no-jinja"}));
    const json a = post(*jinja, "/v1/chat/completions", chat_body().dump()).j();
    const json b = post(*builtin, "/v1/chat/completions", chat_body().dump()).j();
    EXPECT_EQ(normalized(a), normalized(b));
    EXPECT_EQ(get(*builtin, "/props").j()["baton"]["jinja"], false);
    json kw = chat_body();
    kw["chat_template_kwargs"] = {{"enable_thinking", false}};
    const http_reply refused = post(*builtin, "/v1/chat/completions", kw.dump());
    EXPECT_EQ(refused.status, 400) << "kwargs a formatter cannot use are refused, not dropped: " << refused.body;
    EXPECT_NE(refused.body.find("chat_template_kwargs"), std::string::npos) << refused.body;
    // --chat-template llama3 (a built-in name).
    auto llama3 = node_process::start(serve_args("llama", {"--chat-template", "llama3"}));
    const json p = post(*llama3, "/apply-template", R"({"messages":[{"role":"user","content":"Hi"}]})").j();
    EXPECT_EQ(
        p["prompt"],
        "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")
        << p.dump();
}

// A GGUF without tokenizer.chat_template: ChatML, as llama-server falls back (libllama's formatter alone
// would refuse the chat).
TEST(ServeChat, ModelWithoutTemplateFallsBackToChatml) {
    const std::string model = temp_dir() + "/no-template.gguf";
    const proc_result mk =
        run_process({baton_bin(), "mkmodel", "--arch", "llama", "-o", model, "--no-chat-template"}, 120);
    ASSERT_EQ(mk.exit_code, 0) << mk.err;
    auto n = node_process::start({"serve", "-m", model, "-c", "2048", "-t", "2"});
    EXPECT_EQ(get(*n, "/props").j()["baton"]["chat_template_origin"], "chatml fallback");
    EXPECT_EQ(post(*n, "/apply-template", R"({"messages":[{"role":"user","content":"Hi"}]})").j()["prompt"],
              "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    // Same weights and vocabulary as the test model with its (ChatML) template: the same answer.
    auto with = node_process::start(serve_args("llama"));
    EXPECT_EQ(normalized(post(*n, "/v1/chat/completions", chat_body().dump()).j())["choices"],
              normalized(post(*with, "/v1/chat/completions", chat_body().dump()).j())["choices"]);
}

// The prefill node renders with its template and embeds the rendered prompt and the reasoning split: a
// decode node without the template answers what a single node with it answers.
TEST(ServeChat, PdWithTemplateAndReasoningMatchesSingleNode) {
    const std::string tmpl = write_template(k_think_template);
    auto both = node_process::start(serve_args("llama", {"-np", "1", "--chat-template-file", tmpl}));
    auto pre =
        node_process::start(serve_args("llama", {"-np", "1", "--role", "prefill", "--chat-template-file", tmpl}));
    auto dec = node_process::start(serve_args("llama", {"-np", "1", "--role", "decode", "--reasoning-format", "none"}));
    for (bool stream : {false, true})
        for (bool thinking : {true, false}) {
            SCOPED_TRACE(std::string(stream ? "stream" : "whole") + (thinking ? " thinking" : " not thinking"));
            json body = chat_body(10);
            body["stream"] = stream;
            body["chat_template_kwargs"] = {{"enable_thinking", thinking}};
            const http_reply single = post(*both, "/v1/chat/completions", body.dump());
            ASSERT_EQ(single.status, 200) << single.body;
            const http_reply pd = via_pd(*pre, *dec, "chat", body.dump());
            ASSERT_EQ(pd.status, 200) << pd.body;
            if (stream) {
                EXPECT_EQ(normalized_stream(single.body), normalized_stream(pd.body));
            } else {
                EXPECT_EQ(normalized(single.j()), normalized(pd.j()));
            }
            if (!stream && thinking) {
                EXPECT_TRUE(single.j()["choices"][0]["message"].contains("reasoning_content")) << single.body;
            }
        }
}

}  // namespace
}  // namespace baton::test
