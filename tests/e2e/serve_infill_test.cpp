// serve_infill_test.cpp — llama-server's /infill on a node: the same answer as llama-server's on the same
// GGUF (its prompt layout, truncation and other-file context), PD == single node, and its refusals.
#include "serve_test_util.h"

namespace baton::test {
namespace {

std::string fim_model() { return test_model_path("llama", 1, 64, 4, "f32", "spm", true); }

std::string repeat(const std::string & s, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += s;
    return out;
}

// The cases: a plain middle, a prompt the middle starts with, other files as context, a prefix and suffix
// long enough to be cut (-b 256: 192 prefix tokens, 64 - 2 - |prompt| suffix tokens), streamed.
std::vector<json> infill_cases() {
    const json base = {{"n_predict", 8}, {"temperature", 0}, {"cache_prompt", false}, {"return_tokens", true}};
    std::vector<json> out;
    json a = base;
    a["input_prefix"] = "def add(a, b):\n    ";
    a["input_suffix"] = "\n\nprint(add(1, 2))\n";
    out.push_back(a);
    json b = a;
    b["prompt"] = "return";
    out.push_back(b);
    json c = a;
    c["input_extra"] = {{{"filename", "util.py"}, {"text", "def sub(a, b):\n    return a - b\n"}},
                        {{"text", "# no name\n"}}};
    out.push_back(c);
    json d = base;
    d["input_prefix"] = repeat("the quick brown fox ", 120);
    d["input_suffix"] = repeat(" jumps over the lazy dog", 60);
    d["prompt"] = "and";
    out.push_back(d);
    json e = c;
    e["stream"] = true;
    out.push_back(e);
    return out;
}

std::string content_of(const http_reply & r, const json & body) {
    if (!body.value("stream", false)) return r.j()["content"].get<std::string>();
    return stream_text(normalized_stream(r.body));
}

TEST(ServeInfill, AnswersAsLlamaServerDoesOnTheSameGguf) {
    const std::vector<std::string> flags = {"-m",  fim_model(), "-c",  "2048", "-np", "1",   "-b",
                                            "256", "-ub",       "256", "-t",   "2",   "-fa", "off"};
    auto llama = node_process::start_llama_server(flags);
    if (!llama) GTEST_SKIP() << "no /usr/bin/llama-server";
    std::vector<std::string> b = {"serve"};
    b.insert(b.end(), flags.begin(), flags.end());
    auto baton = node_process::start(b);
    for (const json & body : infill_cases()) {
        SCOPED_TRACE(body.dump().substr(0, 200));
        const http_reply l = post(*llama, "/infill", body.dump()), r = post(*baton, "/infill", body.dump());
        ASSERT_EQ(l.status, 200) << l.body;
        ASSERT_EQ(r.status, 200) << r.body;
        EXPECT_EQ(content_of(r, body), content_of(l, body));
        if (!body.value("stream", false)) {
            EXPECT_EQ(r.j()["tokens_evaluated"], l.j()["tokens_evaluated"]);
            EXPECT_EQ(r.j()["prompt"], l.j()["prompt"]);  // the layout itself, special tokens written out
            EXPECT_EQ(r.j()["tokens"], l.j()["tokens"]);
            EXPECT_EQ(r.j()["tokens"].size(), 8u);
        }
    }
    // Refusals: a field of the wrong type is llama-server's 400 on both.
    for (const json & bad : {json{{"input_prefix", 3}}, json{{"input_extra", "x"}}, json{{"input_extra", {3}}}}) {
        const http_reply l = post(*llama, "/infill", bad.dump()), r = post(*baton, "/infill", bad.dump());
        EXPECT_EQ(r.status, 400) << r.body;
        EXPECT_EQ(r.status, l.status) << bad << ": " << l.body;
        EXPECT_EQ(r.j()["error"]["type"], l.j()["error"]["type"]) << bad;
    }
}

TEST(ServeInfill, AModelWithoutFimTokensIs501AsInLlamaServer) {
    auto n = node_process::start(serve_args("llama"));
    const http_reply r = post(*n, "/infill", R"({"input_prefix":"a","input_suffix":"b"})");
    EXPECT_EQ(r.status, 501) << r.body;
    EXPECT_EQ(r.j()["error"]["type"], "not_supported_error");
    EXPECT_NE(r.j()["error"]["message"].get<std::string>().find("Infill is not supported by this model"),
              std::string::npos);
}

// PD: the prefill node builds the infill prompt and embeds the /completion it became; the decode node answers
// exactly what a single node does (greedy and seeded, streamed and not).
TEST(ServeInfill, PrefillThenDecodeMatchesSingleNode) {
    auto single = node_process::start({"serve", "-m", fim_model(), "-c", "2048", "-t", "2"});
    auto pre = node_process::start({"serve", "-m", fim_model(), "-c", "2048", "-t", "2", "--role", "prefill"});
    auto dec = node_process::start({"serve", "-m", fim_model(), "-c", "2048", "-t", "2", "--role", "decode"});
    for (json body : infill_cases()) {
        for (const bool seeded : {false, true}) {
            if (seeded) {
                body["temperature"] = 0.9;
                body["seed"] = 42;
            }
            SCOPED_TRACE(body.dump().substr(0, 200));
            const http_reply want = post(*single, "/infill", body.dump());
            ASSERT_EQ(want.status, 200) << want.body;
            const http_reply got = via_pd(*pre, *dec, "infill", body.dump());
            ASSERT_EQ(got.status, 200) << got.body;
            EXPECT_EQ(content_of(got, body), content_of(want, body));
            if (!body.value("stream", false)) {
                EXPECT_EQ(got.j()["tokens"], want.j()["tokens"]);
            }
        }
    }
}

}  // namespace
}  // namespace baton::test
