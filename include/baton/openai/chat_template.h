// chat_template.h — a model's Jinja chat template (tokenizer.chat_template), parsed once, rendered per request.
//
// A chat template turns an OpenAI message list, the request's tools and its chat_template_kwargs into the
// prompt text the model continues. Underneath is Debian's libminja-dev (kept out of this header): the
// template is parsed by minja::Parser with Hugging Face's settings (trim_blocks and lstrip_blocks on, one
// trailing newline of the source dropped), and probed once at parse with dummy conversations to learn what
// it shows (a system message, a tool message, tools, plain or typed content). render then applies llama-server's polyfills itself — for a
// template without a system role, system text opens the next user message (or becomes one); without tool
// responses, a "tool" message becomes a user message holding {"tool_response": ...}; typed content where the
// template requires it — and renders in a context of its own that it empties afterwards, whatever the
// outcome: minja's macros capture the context they are defined in and are stored in it, a reference cycle
// that would otherwise keep every render's context (the client's messages included) alive, and every
// failed render's too. Tools for a template that does not render them are refused (invalid_argument).
//
// Variables a template sees: messages ([{role, content}]), add_generation_prompt, bos_token, eos_token,
// strftime_now(format) (local time of `now`), date_string (that day as "%d %b %Y", as llama-server gives Llama 3.x
// templates; a kwarg may replace it), tools (only when non-null: minja, unlike Jinja, cannot tell an
// undefined variable from none), every key of kwargs, and minja's builtins (raise_exception, namespace,
// tojson, trim, selectattr, ...). Inputs come from clients and are checked before minja sees them: a string
// that is not valid UTF-8, tools or kwargs nested deeper than chat_template_json_depth_max, or a kwargs key
// that would replace one of the variables above is invalid_argument naming the field. Every exception minja
// throws is caught and returned as invalid_argument "chat template: <minja's message>".
//
// Thread-safety: a chat_template is an immutable value; copies share the parsed template. render is safe
// from any thread on one const object: minja's rendering never writes to the parsed tree (each render gets
// its own context and builtins) and strftime_now uses localtime_r. minja itself promises nothing about
// threads, so parse and render still hold one process-wide mutex around their calls into it
// (chat_template.cpp): renders are serialized (they take microseconds to a millisecond).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "baton/base/status.h"
#include "baton/openai/chat_message.h"
#include "baton/text.h"

namespace baton {

// chat_template_json_depth_max: how deeply tools and kwargs may nest (arrays and objects; [] is depth 1).
// minja converts and prints JSON recursively, so unbounded client nesting would overflow the stack.
inline constexpr int chat_template_json_depth_max = 32;

struct chat_template_options {
    bool add_generation_prompt = true;
    nlohmann::ordered_json
        tools;              // null (no tools) or an array of OpenAI tool objects, passed to the template as `tools`
    nlohmann::json kwargs;  // null or an object: extra template variables (chat_template_kwargs, e.g. enable_thinking)
    std::optional<std::chrono::system_clock::time_point> now;  // for strftime_now; default: the current time
};

class chat_template {
  public:
    // parse compiles a Jinja template source. bos_token/eos_token are the texts the template sees as
    // bos_token / eos_token. A syntax error is invalid_argument "chat template: <minja's message>" (its
    // first line: the error and its row and column).
    static Result<chat_template> parse(std::string source, std::string bos_token, std::string eos_token);

    // render renders messages with the options. Errors: invalid_argument naming the field for input that is
    // rejected before rendering ("messages[2].content: not valid UTF-8", "tools: nested deeper than 32
    // levels", "kwargs.messages: reserved template variable"); invalid_argument "chat template: <message>"
    // for any error the template raises (raise_exception, an undefined operation, a type error).
    Result<std::string> render(const std::vector<chat_message> & messages, const chat_template_options & opts) const;

    const std::string & source() const;
    const std::string & bos_token() const;
    const std::string & eos_token() const;

  private:
    struct impl;  // the parsed minja template (chat_template.cpp)
    explicit chat_template(std::shared_ptr<const impl> p) : impl_(std::move(p)) {}

    std::shared_ptr<const impl> impl_;  // never null
};

// chat_template_chatml_source returns the Jinja source of plain ChatML ("<|im_start|>role\ncontent<|im_end|>\n"
// per message, "<|im_start|>assistant\n" as the generation prompt): the template for a model without one, as
// llama-server falls back to it.
std::string_view chat_template_chatml_source();

}  // namespace baton
