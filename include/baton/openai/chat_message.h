// chat_message.h — one turn of an OpenAI chat, as the chat template renders it.
// Thread-safety: a plain value.
#pragma once

#include <string>
#include <vector>

namespace baton {

// A tool call an assistant turn made (OpenAI's message.tool_calls[i]); arguments is the compact JSON text of
// an object (checked when the request is parsed; the template sees it as an object).
struct chat_tool_call {
    std::string id{};
    std::string name{};
    std::string arguments{};
    bool operator==(const chat_tool_call &) const = default;
};

struct chat_message {
    std::string role{};     // system | user | assistant | tool (any other role goes to the template as is)
    std::string content{};  // "" when the client sent null (an assistant turn that only calls tools)
    std::vector<chat_tool_call> tool_calls{};  // assistant turns
    std::string tool_call_id{};                // tool turns: the call this answers ("" if not given)
    std::string name{};  // tool turns: the function's name; others: the author's ("" if not given)
    // assistant turns: the thought that preceded the answer (Anthropic's thinking blocks), given to the
    // template as message.reasoning_content when not empty, as llama-server does
    std::string reasoning_content{};

    bool operator==(const chat_message &) const = default;
};

}  // namespace baton
