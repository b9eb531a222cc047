// serve_prompt_limits_test.cpp — `baton serve` bounds the work a prompt asks of its chat template and
// tokenizer (--max-messages, --max-prompt-mb, linear tokenization), through a real process.
//
// Regressions named after issue 22's finding 4: "<|im_start|>a" x 32,000 (406 KB) took seconds to tokenize
// (quadratic in the special tokens) and a 150,000-message chat never finished; two of them held both
// bridge-pool threads, every other request on the node timed out, and SIGTERM did not stop it.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "serve_test_util.h"

namespace baton::test {
namespace {

std::string special_flood_prompt() {
    std::string p;
    for (int i = 0; i < 32000; ++i) p += "<|im_start|>a";
    return json({{"prompt", p}, {"max_tokens", 1}}).dump();
}

// chat_body: n messages, each with content.
std::string chat_body(size_t n, const std::string & content) {
    json msgs = json::array();
    for (size_t i = 0; i < n; ++i) msgs.push_back({{"role", i % 2 ? "assistant" : "user"}, {"content", content}});
    return json({{"messages", msgs}, {"max_tokens", 1}}).dump();
}

std::string special_flood_chat() {  // within --max-messages: 4,000 messages of 10 control tokens each
    std::string c;
    for (int i = 0; i < 10; ++i) c += "<|im_start|>";
    return chat_body(4000, c);
}

TEST(ServeRegression, SpecialTokenFloodIsRefusedOrFastAndOtherRequestsAreServed) {
    auto n = node_process::start(serve_args("llama"));
    const std::string flood = special_flood_prompt(), flood_chat = special_flood_chat();
    const std::string huge_chat = chat_body(150000, "hi");  // ~5 MB, under --max-json-mb
    std::vector<http_reply> replies(4);
    std::vector<std::thread> floods;
    floods.emplace_back([&] { replies[0] = post(*n, "/v1/completions", flood, "application/json", "", 60); });
    floods.emplace_back([&] { replies[1] = post(*n, "/v1/completions", flood, "application/json", "", 60); });
    floods.emplace_back([&] { replies[2] = post(*n, "/v1/chat/completions", flood_chat, "application/json", "", 60); });
    floods.emplace_back([&] { replies[3] = post(*n, "/v1/chat/completions", huge_chat, "application/json", "", 60); });
    // Another client is served meanwhile, within a bound far below the floods' old cost (minutes).
    const http_reply ok =
        post(*n, "/v1/completions", R"({"prompt":"Hello world","max_tokens":4})", "application/json", "", 30);
    EXPECT_EQ(ok.status, 200) << ok.body;
    for (auto & t : floods) t.join();
    // The floods do not fit the 2048-token context: each is refused, by the tokenizer or the engine.
    for (int i : {0, 1, 2}) {
        EXPECT_EQ(replies[size_t(i)].status, 400) << i << ": " << replies[size_t(i)].body;
        EXPECT_NE(replies[size_t(i)].body.find("exceed_context_size_error"), std::string::npos)
            << replies[size_t(i)].body;
    }
    EXPECT_EQ(replies[3].status, 413) << replies[3].body;
    EXPECT_NE(replies[3].body.find("--max-messages 4096"), std::string::npos) << replies[3].body;
    EXPECT_EQ(post(*n, "/v1/completions", R"({"prompt":"Hello world","max_tokens":4})").status, 200);

    // SIGTERM with floods in flight: the node ends promptly (its shutdown joins the bridge pool).
    std::vector<std::thread> more;
    for (int i = 0; i < 4; ++i)
        more.emplace_back([&, i] {
            post(*n, i % 2 ? "/v1/chat/completions" : "/v1/completions", i % 2 ? flood_chat : flood, "application/json",
                 "", 30);
        });
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(n->terminate(20), 0) << n->stderr_text();
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 20.0);
    for (auto & t : more) t.join();
}

TEST(ServePromptLimits, MessagesAndPromptBytesOverTheFlagsAre413) {
    auto n = node_process::start(serve_args("llama", {"--max-messages", "3", "--max-prompt-mb", "0.001"}));
    // 0.001 MiB = 1048 bytes.
    auto expect_413 = [&](const std::string & path, const std::string & body, const std::string & words) {
        const http_reply r = post(*n, path, body);
        EXPECT_EQ(r.status, 413) << path << ": " << r.body;
        EXPECT_EQ(r.j()["error"]["status"], "too_large") << r.body;
        EXPECT_NE(r.body.find(words), std::string::npos) << r.body;
    };
    expect_413("/v1/chat/completions", chat_body(4, "hi"), "4 messages, more than --max-messages 3");
    expect_413("/v1/chat/completions", chat_body(2, std::string(600, 'a')), "--max-prompt-mb");
    // The messages' texts fit (1,040 bytes), the rendered chat (template markers added) does not.
    expect_413("/v1/chat/completions", chat_body(1, std::string(1030, 'a')), "the rendered chat is");
    expect_413("/v1/completions", json({{"prompt", std::string(2000, 'a')}}).dump(), "prompt: 2000 bytes");
    expect_413("/v1/completions", json({{"prompt", {std::string(2000, 'a')}}}).dump(), "prompt: 2000 bytes");
    expect_413("/apply-template", chat_body(4, "hi"), "--max-messages");
    expect_413("/tokenize", json({{"content", std::string(2000, 'a')}}).dump(), "content: 2000 bytes");
    // Within the limits everything is served.
    EXPECT_EQ(post(*n, "/v1/chat/completions", chat_body(3, "hi")).status, 200);
    EXPECT_EQ(post(*n, "/v1/completions", json({{"prompt", std::string(1000, 'a')}, {"max_tokens", 2}}).dump()).status,
              200);
    EXPECT_EQ(post(*n, "/tokenize", json({{"content", std::string(1000, 'a')}}).dump()).status, 200);
}

TEST(ServePromptLimits, BadLimitFlagsExit2) {
    for (const std::vector<std::string> & extra :
         {std::vector<std::string>{"--max-prompt-mb", "0"}, std::vector<std::string>{"--max-messages", "0"}}) {
        auto args = serve_args("llama", extra);
        args.insert(args.begin(), baton_bin());
        const proc_result r = run_process(args, 60);
        EXPECT_EQ(r.exit_code, 2) << r.err;
        EXPECT_NE(r.err.find(extra[0]), std::string::npos) << r.err;
    }
}

}  // namespace
}  // namespace baton::test
