// chat_builtin.h — libllama's built-in chat formatter (llama_chat_apply_template) behind plain types.
//
// libllama formats a chat with one of its built-in formats, named ("chatml", "llama3", ...) or recognized
// from a template's source by the markers it contains; it takes no variables (no tools, no kwargs). The
// OpenAI dialect (openai/chat_format.h) uses it for --no-jinja and for --chat-template NAME; Jinja
// templates are the dialect's own (openai/chat_template.h). Thread-safety: pure functions.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "baton/base/status.h"

namespace baton {

struct chat_builtin_message {
    std::string_view role;  // "system", "user", "assistant", ...
    std::string_view content;
};

// chat_builtin_templates: the names of libllama's built-in formats ("chatml", "llama3", ...).
std::vector<std::string> chat_builtin_templates();

// chat_builtin_is_name: whether name is one of chat_builtin_templates().
bool chat_builtin_is_name(std::string_view name);

// chat_builtin_apply formats messages with tmpl (a built-in name, or a template source libllama recognizes);
// add_assistant ends the text with the opening of the assistant's turn. invalid_argument when libllama
// does not know the template, too_large when the messages pass 512 MiB.
Result<std::string> chat_builtin_apply(const std::string & tmpl, std::span<const chat_builtin_message> messages,
                                       bool add_assistant);

}  // namespace baton
