// chat_builtin_test.cpp — libllama's built-in chat formatter through chat_builtin.h: the names it lists, a
// format applied by name and recognized from a template's source, and the refusal of one it does not know.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "baton/chat_builtin.h"

namespace baton {
namespace {

const std::vector<chat_builtin_message> k_chat = {{"system", "Be brief."}, {"user", "Hello"}};

TEST(ChatBuiltin, ListsItsFormats) {
    const auto names = chat_builtin_templates();
    for (const char * n : {"chatml", "llama3", "gemma"})
        EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
    EXPECT_TRUE(chat_builtin_is_name("chatml"));
    EXPECT_FALSE(chat_builtin_is_name("chatml2"));
    EXPECT_FALSE(chat_builtin_is_name(""));
}

TEST(ChatBuiltin, AppliesByNameAndBySource) {
    const std::string chatml =
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n";
    auto by_name = chat_builtin_apply("chatml", k_chat, true);
    ASSERT_TRUE(by_name.ok()) << by_name.status().to_string();
    EXPECT_EQ(by_name.value(), chatml);
    auto no_assistant = chat_builtin_apply("chatml", k_chat, false);
    ASSERT_TRUE(no_assistant.ok());
    EXPECT_EQ(no_assistant.value(), chatml.substr(0, chatml.size() - std::string("<|im_start|>assistant\n").size()));
    // A Jinja source with ChatML's markers is recognized as ChatML.
    auto by_source = chat_builtin_apply("{{ '<|im_start|>' + message['role'] }}", k_chat, true);
    ASSERT_TRUE(by_source.ok()) << by_source.status().to_string();
    EXPECT_EQ(by_source.value(), chatml);
    auto llama3 = chat_builtin_apply("llama3", k_chat, true);
    ASSERT_TRUE(llama3.ok());
    EXPECT_EQ(llama3.value(), "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
                              "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
                              "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatBuiltin, RefusesATemplateItDoesNotKnow) {
    auto r = chat_builtin_apply("{{ 'nothing libllama recognizes' }}", k_chat, true);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), status_code::invalid_argument);
    EXPECT_NE(r.status().message().find("libllama's formatter does not know this template"), std::string::npos);
}

}  // namespace
}  // namespace baton
