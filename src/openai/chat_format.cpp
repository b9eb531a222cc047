// chat_format.cpp — choosing the chat template, rendering a chat and deciding its reasoning split.
#include "baton/openai/chat_format.h"

#include <algorithm>

#include <optional>
#include <string_view>

#include "baton/chat_builtin.h"
#include "baton/openai/chat_template.h"

namespace baton {

using json = nlohmann::json;

struct chat_formatter::state {
    std::string source;  // Jinja source, or the template string / name libllama's formatter gets
    std::string origin;
    bool jinja = true;
    std::optional<chat_template> tmpl;  // jinja: the parsed template
    Status broken;                      // the model's template did not parse: chat is off
    json kwargs;                        // the node's defaults
    reasoning_format reasoning = reasoning_format::deepseek;
    reasoning_tags tags;
    uint64_t max_prompt_bytes = 0;  // --max-prompt-mb
    std::string bos, eos;           // token texts
    bool add_bos = false, add_eos = false;
};

namespace {

// builtin_render applies libllama's formatter (a built-in name, or a template string it recognizes).
Result<std::string> builtin_render(const std::string & tmpl, const std::vector<chat_message> & messages, bool add_ass) {
    std::vector<chat_builtin_message> msgs;
    msgs.reserve(messages.size());
    for (const auto & m : messages) msgs.push_back({m.role, m.content});
    return chat_builtin_apply(tmpl, msgs, add_ass);
}

}  // namespace

Result<chat_formatter> chat_formatter::create(const model_info & model, const chat_format_config & cfg) {
    auto st = std::make_shared<state>();
    st->bos = model.bos_text;
    st->eos = model.eos_text;
    st->add_bos = model.add_bos;
    st->add_eos = model.add_eos;
    st->reasoning = cfg.reasoning;
    st->max_prompt_bytes = cfg.max_prompt_bytes;
    if (!cfg.kwargs.is_null() && !cfg.kwargs.is_object())
        return invalid_input("--chat-template-kwargs: must be a JSON object");
    st->kwargs = cfg.kwargs;
    const bool from_flag = !cfg.template_text.empty();
    if (from_flag) {
        st->source = cfg.template_text;
        st->origin = cfg.template_origin.empty() ? "--chat-template" : cfg.template_origin;
    } else if (model.chat_template && !model.chat_template->empty()) {
        st->source = *model.chat_template;
        st->origin = "model";
    } else {
        st->source = std::string(chat_template_chatml_source());
        st->origin = "chatml fallback";
    }
    // A built-in name always goes to libllama's formatter; so does everything under --no-jinja.
    st->jinja = cfg.jinja && !(from_flag && chat_builtin_is_name(st->source));
    if (!st->jinja && !st->kwargs.is_null() && !st->kwargs.empty())
        return invalid_input(
            "--chat-template-kwargs: the template is rendered by libllama's built-in formatter, which takes no "
            "variables (use --jinja)");
    if (st->jinja) {
        auto t = chat_template::parse(st->source, st->bos, st->eos);
        if (!t.ok()) {
            if (from_flag) return invalid_input(st->origin + ": " + t.status().message());
            st->broken = invalid_input(t.status().message() +
                                       " (the model's template; pass --chat-template or --chat-template-file)");
        } else {
            st->tmpl = std::move(t.value());
        }
    } else {
        // Check now that libllama knows it, so a wrong --no-jinja setup fails at start, not per request.
        auto probe = builtin_render(st->source, {{"user", "x"}}, true);
        if (!probe.ok()) {
            if (from_flag)
                return invalid_input(st->origin + ": \"" + st->source.substr(0, 64) +
                                     "\" is not a template libllama's formatter knows");
            st->broken = invalid_input(probe.status().message());
        }
    }
    st->tags = reasoning_tags_for_template(st->source);
    chat_formatter f;
    f.s_ = std::move(st);
    return f;
}

Result<chat_prompt> chat_formatter::render(const openai_chat & in) const {
    const state & st = *s_;
    if (!st.broken.ok()) return st.broken;
    chat_prompt out;
    // An assistant message last (without tool calls, with the generation prompt asked for): prefill it.
    const bool prefill = in.add_generation_prompt && in.messages.size() > 1 && in.messages.back().role == "assistant" &&
                         in.messages.back().tool_calls.empty();
    openai_chat trimmed;
    if (prefill) {
        trimmed = in;
        out.prefill = std::move(trimmed.messages.back().content);
        trimmed.messages.pop_back();
    }
    const openai_chat & chat = prefill ? trimmed : in;
    if (st.jinja) {
        chat_template_options o;
        o.add_generation_prompt = chat.add_generation_prompt;
        json kwargs = st.kwargs.is_object() ? st.kwargs : json::object();
        if (chat.template_kwargs.is_object())
            for (const auto & [k, v] : chat.template_kwargs.items()) kwargs[k] = v;
        if (!kwargs.empty()) o.kwargs = std::move(kwargs);
        o.tools = chat.tools;
        auto text = st.tmpl->render(chat.messages, o);
        if (!text.ok()) return text.status();
        out.text = std::move(text.value());
    } else {
        if (chat.template_kwargs.is_object() && !chat.template_kwargs.empty())
            return invalid_input(
                "chat_template_kwargs: the node renders chats with libllama's built-in formatter, which takes "
                "no variables");
        if (!chat.tools.is_null())
            return invalid_input(
                "tools: the node renders chats with libllama's built-in formatter, which cannot show tools "
                "(use --jinja)");
        for (const auto & m : chat.messages)
            if (!m.tool_calls.empty() || !m.tool_call_id.empty())
                return invalid_input(
                    "messages: tool calls need a Jinja chat template (the node uses libllama's built-in "
                    "formatter; use --jinja)");
        auto text = builtin_render(st.source, chat.messages, chat.add_generation_prompt);
        if (!text.ok()) return text.status();
        out.text = std::move(text.value());
    }
    if (out.text.size() > st.max_prompt_bytes)
        return Status(status_code::too_large, "messages: the rendered chat is " + std::to_string(out.text.size()) +
                                                  " bytes, more than --max-prompt-mb allows (" +
                                                  std::to_string(st.max_prompt_bytes) + " bytes)");
    if (st.add_bos && !st.bos.empty() && out.text.starts_with(st.bos)) out.text.erase(0, st.bos.size());
    if (st.add_eos && !st.eos.empty() && out.text.ends_with(st.eos)) out.text.resize(out.text.size() - st.eos.size());
    out.reasoning.format = chat.reasoning.value_or(st.reasoning);
    out.reasoning.tags = st.tags;
    out.reasoning.starts_open = chat.add_generation_prompt && reasoning_prompt_opens(out.text, st.tags);
    out.text += out.prefill;  // (the reasoning split reads the prefill as the answer's start: see chat_prompt)
    return out;
}

Result<openai_request> chat_formatter::render_request(openai_request r, const loaded_model & model, uint32_t n_ctx,
                                                      const media_encoder * media) const {
    const auto * chat = std::get_if<openai_chat>(&r.input);
    if (!chat) return r;
    const bool audio = std::any_of(chat->images.begin(), chat->images.end(), media_looks_like_audio);
    if (audio && !(media && media->audio()))
        return invalid_input("messages: audio input is not supported by this server (start it with --mmproj and a "
                             "projector that reads audio)");
    if (!chat->images.empty() && !media)
        return invalid_input("messages: image input is not supported by this server (start it with --mmproj, the "
                             "model's multimodal projector)");
    if (!chat->image_urls.empty())  // (the node fetches them first when it may: node/image_fetch.h)
        return invalid_input(chat->image_urls.front().where +
                             ": http(s) image URLs are not fetched by this server (send the image inline as "
                             "data:image/png;base64,..., or start the server with --image-urls)");
    auto p = render(*chat);
    if (!p.ok()) return p.status();
    openai_chat_rendered rendered{{}, p->reasoning, std::nullopt, std::move(p->prefill), {}};
    if (!chat->images.empty()) {
        auto mp = media->encode(p->text, chat->images, true, true, n_ctx);
        if (!mp.ok()) return mp.status();
        rendered.tokens = std::move(mp->tokens);
        rendered.media = std::move(mp->spans);
    } else {
        auto toks = text_tokenize(model, p->text, true, true, n_ctx);
        if (!toks.ok()) return toks.status();
        rendered.tokens = std::move(toks.value());
    }
    if (rendered.tokens.empty()) return invalid_input("messages: the rendered prompt is empty");
    if (chat->tools.is_array() && !std::holds_alternative<tool_choice_none>(chat->choice)) {
        const tool_call_format f = tool_call_format_detect(s_->source);
        auto g = tool_calls_grammar(f, chat->tools, chat->choice, chat->parallel_tool_calls);
        if (!g.ok()) return g.status();
        if (!g->gbnf.empty()) {
            if (!r.sampling.grammar.gbnf.empty())
                return invalid_input(
                    "tools: cannot be combined with grammar, json_schema or response_format here (tool_choice " +
                    std::string(std::holds_alternative<tool_choice_auto>(chat->choice) ? "auto" : "required") +
                    " constrains the output with a grammar of its own)");
            r.sampling.grammar = {std::move(g->gbnf), g->lazy, std::move(g->trigger_patterns)};
        }
        rendered.tools = f;
    }
    r.input = std::move(rendered);
    return r;
}

const std::string & chat_formatter::source() const { return s_->source; }
bool chat_formatter::jinja() const { return s_->jinja; }
const std::string & chat_formatter::origin() const { return s_->origin; }
Status chat_formatter::usable() const { return s_->broken; }

}  // namespace baton
