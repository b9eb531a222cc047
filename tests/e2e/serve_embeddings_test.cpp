// serve_embeddings_test.cpp — embeddings (--embedding): the same vectors as Debian's llama-server on the same
// GGUF for every input shape, pooling and normalization, OpenAI's and llama-server's response shapes, the
// refusals, and the same answer through the router.
#include <cmath>

#include "baton/base/base64.h"
#include "serve_test_util.h"

namespace baton::test {
namespace {

std::vector<std::string> embed_flags(const std::string & pooling) {
    return {
        "-m",   test_model_path("llama"), "-c", "512", "-np", "1", "-t", "2", "-fa", "off", "--embedding", "--pooling",
        pooling};
}

// expect_close: two vectors of the same length, equal within a float tolerance.
void expect_close(const json & a, const json & b, const std::string & what) {
    ASSERT_TRUE(a.is_array() && b.is_array()) << what;
    ASSERT_EQ(a.size(), b.size()) << what;
    ASSERT_GT(a.size(), 0u) << what;
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i].get<double>() - b[i].get<double>()));
    EXPECT_LT(worst, 1e-4) << what;
}

std::vector<float> from_base64(const std::string & s) {
    const std::optional<std::string> bytes = ::baton::base64_decode(s);
    EXPECT_TRUE(bytes.has_value());
    std::vector<float> v(bytes ? bytes->size() / sizeof(float) : 0);
    if (bytes) std::memcpy(v.data(), bytes->data(), v.size() * sizeof(float));
    return v;
}

TEST(ServeEmbeddings, VectorsAreLlamaServersForEveryInputShapeAndPooling) {
    for (const std::string pooling : {"mean", "last", "cls"}) {
        SCOPED_TRACE(pooling);
        auto llama = node_process::start_llama_server(embed_flags(pooling));
        if (!llama) GTEST_SKIP() << "no /usr/bin/llama-server";
        std::vector<std::string> b = {"serve"};
        for (const auto & f : embed_flags(pooling)) b.push_back(f);
        auto baton = node_process::start(b);
        const std::vector<json> bodies = {
            {{"input", "hello world"}},
            {{"input", {"hello", "the quick brown fox", "x"}}},
            {{"input", {1, 17, 42, 99}}},
            {{"input", {{1, 2, 3}, {5, 6}}}},
            {{"input", "hello world"}, {"embd_normalize", 1}},
            {{"input", "hello world"}, {"embd_normalize", -1}},
            {{"input", ""}},
        };
        for (const json & body : bodies) {
            const http_reply l = post(*llama, "/v1/embeddings", body.dump()),
                             r = post(*baton, "/v1/embeddings", body.dump());
            ASSERT_EQ(l.status, 200) << l.body;
            ASSERT_EQ(r.status, 200) << body << ": " << r.body;
            EXPECT_EQ(r.j()["object"], "list");
            EXPECT_EQ(r.j()["usage"], l.j()["usage"]) << body;
            ASSERT_EQ(r.j()["data"].size(), l.j()["data"].size()) << body;
            for (size_t i = 0; i < r.j()["data"].size(); ++i) {
                EXPECT_EQ(r.j()["data"][i]["index"], i);
                EXPECT_EQ(r.j()["data"][i]["object"], "embedding");
                expect_close(r.j()["data"][i]["embedding"], l.j()["data"][i]["embedding"], body.dump());
            }
            // llama-server's own endpoint: [{"index","embedding":[[...]]}], the same vectors.
            const http_reply n = post(*baton, "/embedding", json{{"content", body["input"]}}.dump());
            ASSERT_EQ(n.status, 200) << n.body;
            const http_reply ln = post(*llama, "/embedding", json{{"content", body["input"]}}.dump());
            ASSERT_EQ(n.j().size(), ln.j().size());
            if (!body.contains("embd_normalize"))
                for (size_t i = 0; i < n.j().size(); ++i)
                    expect_close(n.j()[i]["embedding"][0], ln.j()[i]["embedding"][0], "native " + body.dump());
        }
        // base64: the float32 bytes of the same vector.
        const json f = post(*baton, "/v1/embeddings", R"({"input":"hello"})").j();
        const json e = post(*baton, "/v1/embeddings", R"({"input":"hello","encoding_format":"base64"})").j();
        const std::vector<float> dec = from_base64(e["data"][0]["embedding"].get<std::string>());
        expect_close(json(dec), f["data"][0]["embedding"], "base64");
    }
}

TEST(ServeEmbeddings, PoolingNoneGivesOneVectorPerTokenAndIsNotOpenAisShape) {
    auto llama = node_process::start_llama_server(embed_flags("none"));
    if (!llama) GTEST_SKIP() << "no /usr/bin/llama-server";
    std::vector<std::string> b = {"serve"};
    for (const auto & f : embed_flags("none")) b.push_back(f);
    auto baton = node_process::start(b);
    const std::string body = R"({"content":"hello world"})";
    const http_reply l = post(*llama, "/embedding", body), r = post(*baton, "/embedding", body);
    ASSERT_EQ(r.status, 200) << r.body;
    ASSERT_EQ(r.j()[0]["embedding"].size(), l.j()[0]["embedding"].size());
    EXPECT_GT(r.j()[0]["embedding"].size(), 1u);
    for (size_t t = 0; t < r.j()[0]["embedding"].size(); ++t)
        expect_close(r.j()[0]["embedding"][t], l.j()[0]["embedding"][t], "token " + std::to_string(t));
    const http_reply lo = post(*llama, "/v1/embeddings", R"({"input":"x"})");
    const http_reply ro = post(*baton, "/v1/embeddings", R"({"input":"x"})");
    EXPECT_EQ(ro.status, 400) << ro.body;
    EXPECT_EQ(ro.status, lo.status) << lo.body;
}

TEST(ServeEmbeddings, RefusalsAreLlamaServersAndTyped) {
    auto plain = node_process::start(serve_args("llama"));
    const http_reply off = post(*plain, "/v1/embeddings", R"({"input":"x"})");
    EXPECT_EQ(off.status, 501) << off.body;
    EXPECT_EQ(off.j()["error"]["type"], "not_supported_error");
    std::vector<std::string> b = {"serve"};
    for (const auto & f : embed_flags("mean")) b.push_back(f);
    b.insert(b.end(), {"-b", "16", "-ub", "16"});
    auto n = node_process::start(b);
    for (const auto & [body, field] : std::vector<std::pair<std::string, std::string>>{
             {"{}", "input"},
             {R"({"input":3})", "input"},
             {R"({"input":[]})", "input"},
             {R"({"input":[[1,2],"x",{}]})", "input[2]"},
             {R"({"input":[1,-2]})", "input"},
             {R"({"input":"x","encoding_format":"hex"})", "encoding_format"},
             {R"({"input":"x","dimensions":8})", "dimensions"},
             {R"({"input":[99999999]})", "input[0]"},
         }) {
        const http_reply r = post(*n, "/v1/embeddings", body);
        EXPECT_EQ(r.status, 400) << body << ": " << r.body;
        EXPECT_NE(r.body.find(field), std::string::npos) << body << ": " << r.body;
    }
    // An input over -b tokens cannot be embedded (a sequence must fit one batch): a 400 naming it and -b.
    const http_reply big = post(*n, "/v1/embeddings", json{{"input", {"hi", std::string(200, 'a')}}}.dump());
    EXPECT_EQ(big.status, 400) << big.body;
    EXPECT_NE(big.body.find("input[1]"), std::string::npos) << big.body;
    EXPECT_EQ(post(*n, "/v1/embeddings", R"({"input":"hi"})").status, 200);
    // Completions still work on an embedding node (as llama-server's).
    EXPECT_EQ(post(*n, "/completion", R"({"prompt":"hi","n_predict":2})").status, 200);
}

TEST(ServeEmbeddings, ThroughTheRouterTheNodesAnswer) {
    std::vector<std::string> b = {"serve"};
    for (const auto & f : embed_flags("mean")) b.push_back(f);
    b.insert(b.end(), {"--role", "decode"});
    auto n = node_process::start(b);
    auto router = node_process::start(
        {"route", "--decode", n->url(), "-m", test_model_path("llama"), "--health-interval", "0.2"});
    const std::string body = R"({"input":["hello","world"]})";
    const http_reply via = post(*router, "/v1/embeddings", body, "application/json", "", 60);
    ASSERT_EQ(via.status, 200) << via.body;
    EXPECT_EQ(via.j(), post(*n, "/v1/embeddings", body).j());
}

}  // namespace
}  // namespace baton::test
