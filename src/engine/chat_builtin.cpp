// chat_builtin.cpp — llama_chat_builtin_templates and llama_chat_apply_template (see chat_builtin.h).
#include "baton/chat_builtin.h"

#include <llama.h>

#include <climits>

namespace baton {

std::vector<std::string> chat_builtin_templates() {
    std::vector<const char *> names(256);
    const int32_t n = llama_chat_builtin_templates(names.data(), names.size());
    std::vector<std::string> out;
    for (int32_t i = 0; i < n && i < int32_t(names.size()); ++i) out.emplace_back(names[size_t(i)]);
    return out;
}

bool chat_builtin_is_name(std::string_view name) {
    for (const auto & n : chat_builtin_templates())
        if (name == n) return true;
    return false;
}

Result<std::string> chat_builtin_apply(const std::string & tmpl, std::span<const chat_builtin_message> messages,
                                       bool add_assistant) {
    // libllama reads C strings: the views are copied once, NUL-terminated.
    std::vector<std::string> texts;
    texts.reserve(messages.size() * 2);
    size_t total = 0;
    for (const auto & m : messages) {
        total += m.role.size() + m.content.size();
        if (total > size_t(INT32_MAX / 4)) return Status(status_code::too_large, "messages: too long");
        texts.emplace_back(m.role);
        texts.emplace_back(m.content);
    }
    std::vector<llama_chat_message> msgs;
    msgs.reserve(messages.size());
    for (size_t i = 0; i < messages.size(); ++i) msgs.push_back({texts[2 * i].c_str(), texts[2 * i + 1].c_str()});
    std::string buf(total * 2 + 256, '\0');
    int32_t n = llama_chat_apply_template(tmpl.c_str(), msgs.data(), msgs.size(), add_assistant, buf.data(),
                                          int32_t(buf.size()));
    if (n > int32_t(buf.size())) {
        buf.resize(size_t(n));
        n = llama_chat_apply_template(tmpl.c_str(), msgs.data(), msgs.size(), add_assistant, buf.data(),
                                      int32_t(buf.size()));
    }
    if (n < 0)
        return Status(status_code::invalid_argument, "chat template: libllama's formatter does not know this template "
                                                     "(use --jinja or --chat-template NAME)");
    buf.resize(size_t(n));
    return buf;
}

}  // namespace baton
