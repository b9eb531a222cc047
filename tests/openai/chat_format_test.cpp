// chat_format_test.cpp — chat_formatter without a model: the model is a hand-made model_info (its BOS/EOS
// texts, whether its tokenizer adds them, its own template), so every choice the formatter makes is tabled
// here: which template (--chat-template source or built-in name, the model's, the ChatML fallback), what a
// Jinja template renders, the BOS/EOS the tokenizer would add twice, what --no-jinja refuses, a broken
// model template (chat off) against a broken --chat-template (no start), --max-prompt-mb, and the reasoning
// split. Tokenizing the rendered text (render_request) needs a vocabulary: one case loads the test model's.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "baton/model.h"
#include "baton/openai/chat_format.h"
#include "baton/openai/chat_template.h"
#include "baton/text.h"
#include "support/test_support.h"

namespace baton::test {
namespace {

using nlohmann::json;

// bos_token first, one line per turn, eos_token after a final assistant turn, the generation prompt.
constexpr const char * k_jinja = "{{- bos_token -}}"
                                 "{%- for m in messages -%}{{- '[' + m.role + '] ' + m.content + '\\n' -}}"
                                 "{%- if loop.last and m.role == 'assistant' -%}{{- eos_token -}}{%- endif -%}"
                                 "{%- endfor -%}"
                                 "{%- if add_generation_prompt -%}{{- '[assistant] ' -}}{%- endif -%}";

// A Qwen3-style template: the generation prompt opens the thought unless enable_thinking is false.
constexpr const char * k_thinking = "{%- for m in messages -%}{{- m.role + ': ' + m.content + '\\n' -}}{%- endfor -%}"
                                    "{%- if add_generation_prompt -%}{{- 'assistant: ' -}}"
                                    "{%- if enable_thinking is defined and not enable_thinking -%}"
                                    "{{- '<think></think>' -}}{%- else -%}{{- '<think>\\n' -}}{%- endif -%}"
                                    "{%- endif -%}";

constexpr const char * k_unparsable = "{% for m in messages %}{{ m.content }";

model_info info_of(std::optional<std::string> tmpl = std::nullopt, bool add_bos = false, bool add_eos = false) {
    model_info m;
    m.bos_text = "<s>";
    m.eos_text = "</s>";
    m.add_bos = add_bos;
    m.add_eos = add_eos;
    m.chat_template = std::move(tmpl);
    m.n_ctx_train = 4096;
    return m;
}

chat_format_config flag(std::string text, bool jinja = true) {
    chat_format_config c;
    c.jinja = jinja;
    c.template_text = std::move(text);
    return c;
}

openai_chat chat_of(std::vector<chat_message> messages, bool add_generation_prompt = true) {
    openai_chat c;
    c.messages = std::move(messages);
    c.add_generation_prompt = add_generation_prompt;
    return c;
}

const std::vector<chat_message> k_hello = {{"system", "Be brief."}, {"user", "Hello"}};

chat_formatter make(const model_info & m, const chat_format_config & c = {}) {
    auto f = chat_formatter::create(m, c);
    EXPECT_TRUE(f.ok()) << f.status().to_string();
    return f.ok() ? std::move(f.value()) : chat_formatter::create(info_of(), {}).value();
}

std::string rendered(const chat_formatter & f, const openai_chat & c) {
    auto p = f.render(c);
    EXPECT_TRUE(p.ok()) << p.status().to_string();
    return p.ok() ? p->text : "";
}

TEST(ChatFormatter, TemplateFromFlagSourceOverModelTemplate) {
    const chat_formatter f = make(info_of("{{ 'model template' }}"), flag(k_jinja));
    EXPECT_EQ(f.source(), k_jinja);
    EXPECT_EQ(f.origin(), "--chat-template");
    EXPECT_TRUE(f.jinja());
    EXPECT_TRUE(f.usable().ok());
    EXPECT_EQ(rendered(f, chat_of(k_hello)), "<s>[system] Be brief.\n[user] Hello\n[assistant] ");

    chat_format_config file = flag(k_jinja);
    file.template_origin = "--chat-template-file t.jinja";
    EXPECT_EQ(make(info_of("{{ 'model' }}"), file).origin(), "--chat-template-file t.jinja");
}

TEST(ChatFormatter, TemplateFromFlagBuiltinNameGoesToLibllamaFormatter) {
    const chat_formatter f = make(info_of(k_jinja), flag("chatml"));
    EXPECT_EQ(f.source(), "chatml");
    EXPECT_FALSE(f.jinja());  // a built-in name is never Jinja, even under --jinja
    EXPECT_EQ(rendered(f, chat_of(k_hello)),
              "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatFormatter, TemplateFromModelWithoutFlag) {
    const chat_formatter f = make(info_of(k_jinja));
    EXPECT_EQ(f.source(), k_jinja);
    EXPECT_EQ(f.origin(), "model");
    EXPECT_TRUE(f.jinja());
    EXPECT_EQ(rendered(f, chat_of(k_hello, false)), "<s>[system] Be brief.\n[user] Hello\n");
}

TEST(ChatFormatter, ChatmlFallbackWithoutModelTemplate) {
    for (const auto & tmpl : {std::optional<std::string>{}, std::optional<std::string>{""}}) {
        const chat_formatter f = make(info_of(tmpl));
        EXPECT_EQ(f.source(), chat_template_chatml_source());
        EXPECT_EQ(f.origin(), "chatml fallback");
        EXPECT_EQ(rendered(f, chat_of({{"user", "Hi"}})), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    }
}

TEST(ChatFormatter, JinjaRendersGenerationPromptBosAndEos) {
    const chat_formatter f = make(info_of(k_jinja));
    const std::vector<chat_message> answered = {{"user", "Hi"}, {"assistant", "Hello!"}};
    EXPECT_EQ(rendered(f, chat_of(answered, false)), "<s>[user] Hi\n[assistant] Hello!\n</s>");
    EXPECT_EQ(rendered(f, chat_of({{"user", "Hi"}}, true)), "<s>[user] Hi\n[assistant] ");
    EXPECT_EQ(rendered(f, chat_of({{"user", "Hi"}}, false)), "<s>[user] Hi\n");
}

// The rendered text is tokenized with BOS added as the vocabulary asks: a BOS the template wrote is removed
// when the tokenizer adds one anyway (likewise a trailing EOS), so the prompt never holds two.
TEST(ChatFormatter, BosAndEosRemovedWhenTheTokenizerAddsThem) {
    const std::vector<chat_message> answered = {{"user", "Hi"}, {"assistant", "Hello!"}};
    EXPECT_EQ(rendered(make(info_of(k_jinja, true, false)), chat_of(answered, false)),
              "[user] Hi\n[assistant] Hello!\n</s>");
    EXPECT_EQ(rendered(make(info_of(k_jinja, false, true)), chat_of(answered, false)),
              "<s>[user] Hi\n[assistant] Hello!\n");
    EXPECT_EQ(rendered(make(info_of(k_jinja, true, true)), chat_of(answered, false)),
              "[user] Hi\n[assistant] Hello!\n");
    // Only at the very start: a BOS text elsewhere is the template's business.
    EXPECT_EQ(rendered(make(info_of("{{ 'x<s>' }}", true)), chat_of({{"user", "Hi"}})), "x<s>");
    // A vocabulary without a BOS text removes nothing.
    model_info none = info_of("{{ '<s>x' }}", true);
    none.bos_text.clear();
    EXPECT_EQ(rendered(make(none), chat_of({{"user", "Hi"}})), "<s>x");
}

TEST(ChatFormatter, KwargsFromNodeOverriddenByRequest) {
    chat_format_config c;
    c.kwargs = json{{"enable_thinking", false}};
    const chat_formatter f = make(info_of(k_thinking), c);
    EXPECT_EQ(rendered(f, chat_of({{"user", "Hi"}})), "user: Hi\nassistant: <think></think>");
    openai_chat on = chat_of({{"user", "Hi"}});
    on.template_kwargs = json{{"enable_thinking", true}};
    EXPECT_EQ(rendered(f, on), "user: Hi\nassistant: <think>\n");
}

TEST(ChatFormatter, KwargsRefusedByTheBuiltinFormatter) {
    chat_format_config no_jinja = flag("chatml", false);
    no_jinja.kwargs = json{{"enable_thinking", false}};
    auto f = chat_formatter::create(info_of(), no_jinja);
    ASSERT_FALSE(f.ok());
    EXPECT_EQ(f.status().code(), status_code::invalid_argument);
    EXPECT_NE(f.status().message().find("--chat-template-kwargs"), std::string::npos) << f.status().to_string();

    chat_format_config builtin_name = flag("chatml");  // --jinja, but a built-in name
    builtin_name.kwargs = json{{"x", 1}};
    EXPECT_FALSE(chat_formatter::create(info_of(), builtin_name).ok());

    chat_format_config not_object = flag(k_jinja);
    not_object.kwargs = json::array();
    EXPECT_FALSE(chat_formatter::create(info_of(), not_object).ok());

    // The request's own kwargs, tools and tool calls, under --no-jinja.
    const chat_formatter builtin = make(info_of(), flag("chatml", false));
    openai_chat kw = chat_of({{"user", "Hi"}});
    kw.template_kwargs = json{{"enable_thinking", false}};
    auto r = builtin.render(kw);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), status_code::invalid_argument);
    EXPECT_TRUE(r.status().message().starts_with("chat_template_kwargs:")) << r.status().to_string();
    openai_chat tools = chat_of({{"user", "Hi"}});
    tools.tools = nlohmann::ordered_json::array();
    EXPECT_TRUE(builtin.render(tools).status().message().starts_with("tools:"));
    openai_chat call = chat_of({{"user", "Hi"}, {"assistant", "", {{"c1", "f", "{}"}}}});
    EXPECT_TRUE(builtin.render(call).status().message().starts_with("messages: tool calls need a Jinja"));
}

// The model's own template that does not parse leaves the node serving completions (chat off, with the
// reason); a template the operator passed that does not parse stops the node from starting.
TEST(ChatFormatter, BrokenModelTemplateDisablesChatBrokenFlagFailsCreate) {
    auto f = chat_formatter::create(info_of(k_unparsable), {});
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    EXPECT_FALSE(f->usable().ok());
    EXPECT_EQ(f->usable().code(), status_code::invalid_argument);
    EXPECT_NE(f->usable().message().find("the model's template"), std::string::npos) << f->usable().to_string();
    auto r = f->render(chat_of({{"user", "Hi"}}));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().to_string(), f->usable().to_string());

    auto g = chat_formatter::create(info_of(k_jinja), flag(k_unparsable));
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().code(), status_code::invalid_argument);
    EXPECT_TRUE(g.status().message().starts_with("--chat-template: chat template:")) << g.status().to_string();
}

// --no-jinja: libllama's formatter must know the template, checked at create.
TEST(ChatFormatter, NoJinjaTemplateLibllamaDoesNotKnow) {
    auto g = chat_formatter::create(info_of(), flag("no such format", false));
    ASSERT_FALSE(g.ok());
    EXPECT_NE(g.status().message().find("is not a template libllama's formatter knows"), std::string::npos);

    auto f = chat_formatter::create(info_of("{{ 'unknown' }}"), flag("", false));
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    EXPECT_FALSE(f->jinja());
    EXPECT_FALSE(f->usable().ok());

    // The model's template libllama recognizes (ChatML's markers): rendered by the built-in formatter.
    const chat_formatter chatml = make(info_of(std::string(chat_template_chatml_source())), flag("", false));
    EXPECT_EQ(rendered(chatml, chat_of({{"user", "Hi"}})), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatFormatter, RenderedChatOverMaxPromptBytesIsTooLarge) {
    chat_format_config c;
    c.max_prompt_bytes = 64;
    const chat_formatter f = make(info_of(k_jinja), c);
    EXPECT_TRUE(f.render(chat_of({{"user", std::string(10, 'a')}})).ok());
    // The messages are small; the template's own text pushes the prompt over.
    auto r = f.render(chat_of({{"user", std::string(50, 'a')}}));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), status_code::too_large);
    EXPECT_NE(r.status().message().find("--max-prompt-mb"), std::string::npos) << r.status().to_string();
}

TEST(ChatFormatter, ReasoningSplitDecidedAtRender) {
    const chat_formatter f = make(info_of(k_thinking));
    auto open = f.render(chat_of({{"user", "Hi"}}));
    ASSERT_TRUE(open.ok()) << open.status().to_string();
    EXPECT_EQ(open->reasoning.format, reasoning_format::deepseek);  // the node's default
    EXPECT_EQ(open->reasoning.tags, (reasoning_tags{"<think>", "</think>"}));
    EXPECT_TRUE(open->reasoning.starts_open);  // the prompt ends inside <think>

    openai_chat closed = chat_of({{"user", "Hi"}});
    closed.template_kwargs = json{{"enable_thinking", false}};
    closed.reasoning = reasoning_format::none;  // the request's choice over the node's
    auto c = f.render(closed);
    ASSERT_TRUE(c.ok());
    EXPECT_FALSE(c->reasoning.starts_open);
    EXPECT_EQ(c->reasoning.format, reasoning_format::none);

    // No generation prompt: the prompt opens nothing, whatever its end.
    auto no_gen = f.render(chat_of({{"user", "<think>"}}, false));
    ASSERT_TRUE(no_gen.ok());
    EXPECT_FALSE(no_gen->reasoning.starts_open);

    // The markers of the template's family, and the node's --reasoning-format.
    chat_format_config magistral;
    magistral.reasoning = reasoning_format::none;
    const chat_formatter m =
        make(info_of("{{- '[THINK]' -}}{%- for m in messages -%}{{ m.content }}{%- endfor -%}"), magistral);
    auto mp = m.render(chat_of({{"user", "Hi"}}));
    ASSERT_TRUE(mp.ok());
    EXPECT_EQ(mp->reasoning.tags, (reasoning_tags{"[THINK]", "[/THINK]"}));
    EXPECT_EQ(mp->reasoning.format, reasoning_format::none);
    EXPECT_FALSE(mp->reasoning.starts_open);
}

// With a model: loaded_model::info() is what the formatter needs, and render_request tokenizes the
// rendered text with the model's vocabulary, control tokens parsed. Other inputs pass through untouched.
TEST(ChatFormatter, RenderRequestTokenizesWithTheModelsVocabulary) {
    model_load_params p;
    p.vocab_only = true;
    auto m = loaded_model::load(test_model_path("llama"), p);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    const loaded_model & model = *m.value();
    ASSERT_TRUE(model.info().chat_template.has_value());  // mkmodel writes a ChatML template
    const chat_formatter f = make(model.info());
    EXPECT_EQ(f.origin(), "model");

    openai_request r;
    r.input = chat_of({{"user", "Hi"}});
    auto out = f.render_request(r, model);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    const auto * rendered_chat = std::get_if<openai_chat_rendered>(&out->input);
    ASSERT_NE(rendered_chat, nullptr);
    const std::string text = rendered(f, chat_of({{"user", "Hi"}}));
    auto want = text_tokenize(model, text, true, true);
    ASSERT_TRUE(want.ok());
    EXPECT_EQ(rendered_chat->tokens, want.value());
    // The vocabulary adds BOS (the template wrote none), then "<|im_start|>" is one control token.
    const size_t first = model.info().add_bos ? 1 : 0;
    ASSERT_GT(rendered_chat->tokens.size(), first);
    EXPECT_EQ(text_token_piece(model, rendered_chat->tokens[first], true), "<|im_start|>");

    openai_request plain;
    plain.input = openai_prompt_text{"Hello"};
    auto same = f.render_request(plain, model);
    ASSERT_TRUE(same.ok());
    const auto * text_input = std::get_if<openai_prompt_text>(&same->input);
    ASSERT_NE(text_input, nullptr);
    EXPECT_EQ(text_input->text, "Hello");
}

}  // namespace
}  // namespace baton::test
