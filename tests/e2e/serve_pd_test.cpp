// serve_pd_test.cpp — the PD reference test over HTTP: for every test architecture, a `both` node is the
// oracle, and a prefill node + a decode node joined by /v1/prefill then /v1/decode must return the same
// response (everything but "id" and "created"), for completions and chat, streamed and not, greedy and
// seeded sampling.
#include "baton/testmodel/mkmodel.h"
#include "serve_test_util.h"

namespace baton::test {
namespace {

class ServePdTest : public ::testing::TestWithParam<std::string> {};

struct pd_case {
    bool chat = false;
    bool stream = false;
    bool sampled = false;
};

json case_body(const pd_case & c, int i) {
    json b;
    const std::string text = "Case " + std::to_string(i) + ": the quick brown fox jumps over";
    if (c.chat)
        b["messages"] =
            json::array({{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", text}}});
    else b["prompt"] = text;
    b["max_tokens"] = 24;
    b["stream"] = c.stream;
    if (c.stream) b["stream_options"] = {{"include_usage", true}};
    if (c.sampled) {
        b["temperature"] = 0.9;
        b["seed"] = 1234 + i;
    } else {
        b["temperature"] = 0;
    }
    return b;
}

TEST_P(ServePdTest, PrefillThenDecodeMatchesSingleNode) {
    const std::string arch = GetParam();
    auto both = node_process::start(serve_args(arch, {"-np", "1"}));
    auto pre = node_process::start(serve_args(arch, {"-np", "1", "--role", "prefill"}));
    // A unified blob restores into a node with another slot count.
    auto dec = node_process::start(serve_args(arch, {"-np", "2", "--role", "decode"}));
    int i = 0;
    for (bool chat : {false, true})
        for (bool stream : {false, true})
            for (bool sampled : {false, true}) {
                const pd_case c{chat, stream, sampled};
                SCOPED_TRACE(arch + (chat ? " chat" : " completions") + (stream ? " stream" : "") +
                             (sampled ? " sampled" : " greedy"));
                json body = case_body(c, i++);
                const std::string path = chat ? "/v1/chat/completions" : "/v1/completions";
                const http_reply single = post(*both, path, body.dump());
                ASSERT_EQ(single.status, 200) << single.body;

                json pbody = body;
                const http_reply blob = post_prefill(*pre, chat ? "chat" : "completions", pbody.dump());
                ASSERT_EQ(blob.status, 200) << blob.body;
                EXPECT_EQ(blob.content_type, "application/octet-stream");
                const http_reply pd = post(*dec, "/v1/decode", blob.body, "application/octet-stream");
                ASSERT_EQ(pd.status, 200) << pd.body;

                if (!stream) {
                    const json a = normalized(single.j()), b = normalized(pd.j());
                    EXPECT_EQ(a, b);
                    EXPECT_GT(a["usage"]["prompt_tokens"].get<int>(), 0);
                    EXPECT_EQ(a["usage"]["total_tokens"].get<int>(),
                              a["usage"]["prompt_tokens"].get<int>() + a["usage"]["completion_tokens"].get<int>());
                } else {
                    EXPECT_EQ(single.content_type.rfind("text/event-stream", 0), 0u) << single.content_type;
                    const auto a = normalized_stream(single.body), b = normalized_stream(pd.body);
                    EXPECT_EQ(a, b);
                    ASSERT_GE(a.size(), 3u);
                    EXPECT_EQ(a.back(), json("[DONE]"));
                    const json & usage_chunk = a[a.size() - 2];
                    EXPECT_TRUE(usage_chunk.contains("usage")) << usage_chunk.dump();
                }
            }
}

INSTANTIATE_TEST_SUITE_P(Archs, ServePdTest, ::testing::ValuesIn(mkmodel_archs()),
                         [](const auto & info) { return info.param; });

}  // namespace
}  // namespace baton::test
