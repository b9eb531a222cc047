// chat_format.h — how a node turns a chat into a prompt: which template, and how the answer is split.
//
// The template is, in order: --chat-template NAME|SOURCE or --chat-template-file FILE, else the model's
// tokenizer.chat_template, else ChatML (as llama-server falls back). With --jinja (the default) a template
// is rendered by the Jinja engine (chat_template.h) with messages, add_generation_prompt, bos_token,
// eos_token and chat_template_kwargs (the node's --chat-template-kwargs, overridden key by key by the
// request's); a --chat-template value that names one of libllama's built-in formats (llama3, chatml, ...)
// and every template under --no-jinja go through libllama's formatter, which takes no variables (a request
// with chat_template_kwargs is then refused). A model template the Jinja engine cannot parse leaves the node
// serving completions: chat requests get a 400 naming the template error.
//
// The rendered text is what the node tokenizes (control tokens parsed, BOS added as the vocabulary asks):
// a BOS (EOS) the template wrote at the start (end) is removed when the tokenizer adds one anyway, so a
// prompt never holds two. The reasoning split of the answer is decided here too: the node's
// --reasoning-format or the request's reasoning_format, the markers of the template's family, and whether
// the prompt opened the thought.
// The formatter knows the model only as a model_info (model.h: plain values), so a test can stand one up
// without a model; tokenizing the rendered text (render_request) takes the loaded_model.
// Thread-safety: a chat_formatter is immutable after create(); render is safe from any thread.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "baton/base/status.h"
#include "baton/model.h"
#include "baton/openai/openai.h"

namespace baton {

struct chat_format_config {
    bool jinja = true;            // --jinja / --no-jinja
    std::string template_text;    // --chat-template (a built-in name or a Jinja source) or the file's text
    std::string template_origin;  // for messages: "--chat-template", "--chat-template-file PATH", or ""
    nlohmann::json kwargs;        // --chat-template-kwargs: null or an object
    reasoning_format reasoning = reasoning_format::deepseek;  // --reasoning-format (auto = deepseek)
    // --max-prompt-mb: the largest rendered chat (bytes); a template can make more text than the messages'
    // own (which openai_parse bounded by the same limit), so the rendered text is checked before tokenizing.
    uint64_t max_prompt_bytes = prompt_limits{}.max_prompt_bytes;
};

// The prompt of a chat and the split of its answer.
struct chat_prompt {
    std::string text;  // what is tokenized (a leading BOS / trailing EOS removed when the tokenizer adds one)
    openai_reasoning reasoning;
    // A chat that ends with an assistant message is continued, as llama-server does (its --prefill-assistant,
    // on by default): the other messages are rendered with the generation prompt, then that message's text
    // follows; the answer's content starts with it (prefill).
    std::string prefill;
};

class chat_formatter {
  public:
    // create picks and prepares the template. A template given on the command line that does not parse is
    // invalid_argument (the node refuses to start); the model's own one only disables chat (see above).
    // model: the model's BOS/EOS texts, whether its tokenizer adds them, and its own template
    // (loaded_model::info()).
    static Result<chat_formatter> create(const model_info & model, const chat_format_config & cfg);

    // render renders a chat (invalid_argument naming the template error, or a refused field).
    Result<chat_prompt> render(const openai_chat & chat) const;
    // render_request turns an openai_chat input into openai_chat_rendered (the prompt tokenized with
    // model's vocabulary, control tokens parsed); any other input is returned as it is. A rendered text over
    // max_prompt_bytes is too_large; n_ctx > 0 (the slot's context): a prompt that cannot come to fewer
    // tokens is refused before it is tokenized whole. A chat with images is encoded by media (the node's
    // projector, whose marker must be openai_media_marker()): its media spans go with the tokens; without one it
    // is refused (invalid_argument). REQUIRES: model is the one whose info() made this.
    Result<openai_request> render_request(openai_request r, const loaded_model & model, uint32_t n_ctx = 0,
                                          const media_encoder * media = nullptr) const;

    // The template for /props: its source (or libllama's built-in name), whether Jinja renders it, where
    // it came from ("model", "--chat-template", "--chat-template-file PATH", "chatml fallback").
    const std::string & source() const;
    bool jinja() const;
    const std::string & origin() const;
    // Why chat is disabled (the model's template did not parse), or ok.
    Status usable() const;

    struct state;

  private:
    std::shared_ptr<const state> s_;
};

}  // namespace baton
