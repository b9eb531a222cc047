// serve_compat_test.cpp — what a llama-server client finds on a node: the unprefixed aliases, /tokenize and
// /detokenize, the streamed chat shape (role with null content first), system_fingerprint, seed -1.
#include "baton/blob.h"
#include "serve_test_util.h"

namespace baton::test {
namespace {

const std::string k_completion = R"({"prompt":"Hello there","max_tokens":6,"temperature":0})";
const std::string k_chat = R"({"messages":[{"role":"user","content":"Hello there"}],"max_tokens":6,"temperature":0})";

// /completions is llama-server's native /completion (its shape: content, no choices); /chat/completions and
// /models are the /v1 routes.
TEST(ServeCompat, UnprefixedAliasesAnswerLikeLlamaServers) {
    auto n = node_process::start(serve_args("llama"));
    const json native = post(*n, "/completions", k_completion).j();
    ASSERT_TRUE(native.contains("content") && !native.contains("choices")) << native;
    EXPECT_EQ(native["content"], post(*n, "/completion", k_completion).j()["content"]);
    EXPECT_EQ(native["content"], post(*n, "/v1/completions", k_completion).j()["choices"][0]["text"]);
    EXPECT_EQ(normalized(post(*n, "/chat/completions", k_chat).j()),
              normalized(post(*n, "/v1/chat/completions", k_chat).j()));
    const http_reply models = get(*n, "/models");
    EXPECT_EQ(models.status, 200);
    EXPECT_EQ(models.j(), get(*n, "/v1/models").j());
}

TEST(ServeCompat, TokenizeAndDetokenizeRoundTrip) {
    auto n = node_process::start(serve_args("llama"));
    const http_reply t = post(*n, "/tokenize", R"({"content":"Hello world, the model decodes"})");
    ASSERT_EQ(t.status, 200) << t.body;
    const json tokens = t.j()["tokens"];
    ASSERT_TRUE(tokens.is_array() && tokens.size() > 1) << t.body;
    const http_reply d = post(*n, "/detokenize", json{{"tokens", tokens}}.dump());
    ASSERT_EQ(d.status, 200) << d.body;
    const std::string text = d.j()["content"].get<std::string>();
    EXPECT_NE(text.find("Hello world, the model decodes"), std::string::npos) << text;
    // add_special puts the BOS first; with_pieces gives each token's text, which concatenates to the same text.
    const json with_bos =
        post(*n, "/tokenize", R"({"content":"Hello world, the model decodes","add_special":true})").j()["tokens"];
    ASSERT_EQ(with_bos.size(), tokens.size() + 1);
    EXPECT_EQ(json(std::vector<json>(with_bos.begin() + 1, with_bos.end())), tokens);
    const json pieces =
        post(*n, "/tokenize", R"({"content":"Hello world, the model decodes","with_pieces":true})").j()["tokens"];
    ASSERT_EQ(pieces.size(), tokens.size());
    std::string joined;
    for (size_t i = 0; i < pieces.size(); ++i) {
        EXPECT_EQ(pieces[i]["id"], tokens[i]);
        if (pieces[i]["piece"].is_string()) joined += pieces[i]["piece"].get<std::string>();
    }
    EXPECT_EQ(joined, text);
    // Errors are typed 400s.
    EXPECT_EQ(post(*n, "/tokenize", R"({"text":"x"})").status, 400);
    EXPECT_EQ(post(*n, "/tokenize", R"({"content":"x","with_pieces":"yes"})").status, 400);
    const http_reply bad = post(*n, "/detokenize", R"({"tokens":[1, 99999999]})");
    EXPECT_EQ(bad.status, 400);
    EXPECT_NE(bad.body.find("tokens[1]"), std::string::npos) << bad.body;
}

TEST(ServeCompat, StreamedChatStartsWithRoleAndNullContentAndCarriesAFingerprint) {
    auto n = node_process::start(serve_args("llama"));
    json body = json::parse(k_chat);
    body["stream"] = true;
    const http_reply r = post(*n, "/v1/chat/completions", body.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    const auto chunks = sse_payloads(r.body);
    ASSERT_GE(chunks.size(), 3u) << r.body;
    const json first = json::parse(chunks[0]);
    EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant") << chunks[0];
    EXPECT_TRUE(first["choices"][0]["delta"].contains("content") && first["choices"][0]["delta"]["content"].is_null())
        << "OpenAI and llama-server send content null with the role: " << chunks[0];
    const std::string fp = first.value("system_fingerprint", "");
    EXPECT_EQ(fp.size(), 15u) << chunks[0];
    EXPECT_EQ(fp.rfind("fp_", 0), 0u) << chunks[0];
    for (const auto & c : chunks) {
        if (c != "[DONE]") {
            EXPECT_EQ(json::parse(c).value("system_fingerprint", ""), fp) << c;
        }
    }
    EXPECT_EQ(post(*n, "/v1/completions", k_completion).j().value("system_fingerprint", ""), fp);
}

TEST(ServeCompat, SeedMinusOneMeansRandomAsInLlamaServer) {
    auto n = node_process::start(serve_args("llama"));
    const http_reply r =
        post(*n, "/v1/completions", R"({"prompt":"Hello","max_tokens":4,"temperature":0.8,"seed":-1})");
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(post(*n, "/v1/completions", R"({"prompt":"Hello","max_tokens":4,"seed":-2})").status, 400);
}

}  // namespace
}  // namespace baton::test

namespace baton::test {
namespace {

// llama-server's device and KV flags start a node that says where things went; the KV layout the flags chose
// is what the node's blobs record (and what a decode node must match).
TEST(ServeCompat, DeviceAndKvFlagsAreTakenAndTheNodeLogsThePlacement) {
    auto n =
        node_process::start(serve_args("llama", {"-ngl", "all", "-dev", "none", "-fa", "on", "-ctk", "bf16", "-ctv",
                                                 "bf16", "-ub", "256", "-tb", "2", "--no-mmap", "-sm", "layer"}));
    const std::string err = n->stderr_text();
    EXPECT_NE(err.find(" info serve: devices: "), std::string::npos) << err;
    EXPECT_NE(err.find("every layer and the KV cache on the CPU"), std::string::npos) << err;
    const http_reply r = post(*n, "/v1/completions", k_completion);
    ASSERT_EQ(r.status, 200) << r.body;
    const http_reply blob = post(*n, "/v1/prefill", R"({"prompt":"Hello there","max_tokens":4})");
    ASSERT_EQ(blob.status, 200) << blob.body;
    auto view =
        blob_parse(std::span<const uint8_t>(reinterpret_cast<const uint8_t *>(blob.body.data()), blob.body.size()));
    ASSERT_TRUE(view.ok()) << view.status().to_string();
    EXPECT_EQ(identity_kv_type_name(view->context.type_k), "bf16");
    EXPECT_EQ(identity_kv_type_name(view->context.type_v), "bf16");
    EXPECT_TRUE(view->context.flash_attn);
}

}  // namespace
}  // namespace baton::test
