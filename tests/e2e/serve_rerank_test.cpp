// serve_rerank_test.cpp — rerank (--rerank): the same scores as Debian's llama-server on the same GGUF for
// both prompt layouts (a rerank template, and <s> query </s></s> document </s>), Jina's and TEI's shapes on
// every path, top_n, the refusals, and the same answer through the router. One process per model serves
// every case.
#include <cmath>
#include <map>

#include "serve_test_util.h"

namespace baton::test {
namespace {

std::vector<std::string> rerank_flags(bool with_template) {
    return {"-m", test_reranker_path(with_template), "-c", "1024", "-np", "2", "-t", "2", "-fa", "off", "--rerank"};
}

std::vector<std::string> baton_args(const std::vector<std::string> & flags, std::vector<std::string> extra = {}) {
    std::vector<std::string> b = {"serve"};
    b.insert(b.end(), flags.begin(), flags.end());
    b.insert(b.end(), extra.begin(), extra.end());
    return b;
}

const std::vector<std::string> k_docs = {
    "A cat is a small domesticated carnivorous mammal.",
    "Paris is the capital of France.",
    "x",
    "Cats purr when they are content, and sometimes when they are not.",
    "",
    "The sea is salty <|im_start|> and wide.",
};

// scores_by_index: a Jina answer's relevance_score per document index.
std::map<int, double> scores_by_index(const json & results, const char * key = "relevance_score") {
    std::map<int, double> out;
    for (const auto & r : results) out[r["index"].get<int>()] = r[key].get<double>();
    return out;
}

TEST(ServeRerank, ScoresAreLlamaServersForBothLayouts) {
    for (const bool with_template : {true, false}) {
        SCOPED_TRACE(with_template ? "rerank template" : "plain layout");
        auto llama = node_process::start_llama_server(rerank_flags(with_template));
        if (!llama) GTEST_SKIP() << "no /usr/bin/llama-server";
        auto baton = node_process::start(baton_args(rerank_flags(with_template)));
        const std::vector<json> bodies = {
            {{"query", "what is a cat?"}, {"documents", k_docs}},
            {{"query", "capital"}, {"documents", {"Paris is the capital of France."}}},
            {{"query", ""}, {"documents", {"a", "b c"}}},
            {{"query", "q {document}"}, {"documents", {"d1", "d2"}}},
            {{"query", "what is a cat?"}, {"documents", k_docs}, {"top_n", 3}},
        };
        for (const json & body : bodies) {
            const http_reply l = post(*llama, "/rerank", body.dump()), r = post(*baton, "/rerank", body.dump());
            ASSERT_EQ(l.status, 200) << l.body;
            ASSERT_EQ(r.status, 200) << body << ": " << r.body;
            EXPECT_EQ(r.j()["object"], "list");
            EXPECT_EQ(r.j()["usage"], l.j()["usage"]) << body;
            ASSERT_EQ(r.j()["results"].size(), l.j()["results"].size()) << body;
            const auto rs = scores_by_index(r.j()["results"]), ls = scores_by_index(l.j()["results"]);
            if (!body.contains("top_n")) {
                ASSERT_EQ(rs.size(), body["documents"].size());
            }
            for (const auto & [i, s] : ls) {
                ASSERT_TRUE(rs.count(i)) << body << ": index " << i << " missing: " << r.body;
                EXPECT_NEAR(rs.at(i), s, 1e-4) << body << ": document " << i;
            }
            // Highest first.
            for (size_t i = 1; i < r.j()["results"].size(); ++i)
                EXPECT_GE(r.j()["results"][i - 1]["relevance_score"].get<double>(),
                          r.j()["results"][i]["relevance_score"].get<double>());
        }
        // TEI's shape ("texts"): a bare array with "score", and "text" with return_text — as llama-server's.
        const json tei = {{"query", "what is a cat?"}, {"texts", {"a cat", "a dog"}}, {"return_text", true}};
        const http_reply lt = post(*llama, "/rerank", tei.dump()), rt = post(*baton, "/rerank", tei.dump());
        ASSERT_EQ(rt.status, 200) << rt.body;
        ASSERT_TRUE(rt.j().is_array());
        ASSERT_EQ(rt.j().size(), lt.j().size());
        for (size_t i = 0; i < rt.j().size(); ++i) {
            EXPECT_EQ(rt.j()[i]["index"], lt.j()[i]["index"]);
            EXPECT_EQ(rt.j()[i]["text"], lt.j()[i]["text"]);
            EXPECT_NEAR(rt.j()[i]["score"].get<double>(), lt.j()[i]["score"].get<double>(), 1e-4);
        }
    }
}

TEST(ServeRerank, EveryPathAnswersAndRefusalsAreTyped) {
    auto n = node_process::start(baton_args(rerank_flags(false), {"-b", "32", "-ub", "32"}));
    const std::string body = R"({"query":"q","documents":["a","b"],"model":"asked"})";
    const json first = post(*n, "/rerank", body).j();
    for (const char * path : {"/reranking", "/v1/rerank", "/v1/reranking"}) {
        const http_reply r = post(*n, path, body);
        ASSERT_EQ(r.status, 200) << path << ": " << r.body;
        EXPECT_EQ(r.j(), first) << path;
    }
    EXPECT_EQ(first["model"], "asked");
    EXPECT_EQ(post(*n, "/rerank", R"({"query":"q","documents":["a","b"],"top_n":0})").j()["results"].size(), 0u);
    for (const auto & [b, message] : std::vector<std::pair<std::string, std::string>>{
             {R"({"documents":["a"]})", "\"query\" must be provided"},
             {R"({"query":1,"documents":["a"]})", "\"query\" must be a string"},
             {R"({"query":"q","documents":[]})", "\"documents\" must be a non-empty string array"},
             {R"({"query":"q","documents":[1]})", "\"documents\" must be a non-empty string array"},
             {R"({"query":"q","documents":["a"],"top_n":-2})", "top_n"},
         }) {
        const http_reply r = post(*n, "/v1/rerank", b);
        EXPECT_EQ(r.status, 400) << b << ": " << r.body;
        EXPECT_EQ(r.j()["error"]["type"], "invalid_request_error") << b;
        EXPECT_NE(r.j()["error"]["message"].get<std::string>().find(message), std::string::npos) << b << ": " << r.body;
    }
    // A document that with the query does not fit -b tokens: a 400 naming it and -b.
    const http_reply big =
        post(*n, "/rerank", json{{"query", "q"}, {"documents", {"a", std::string(200, 'a')}}}.dump());
    EXPECT_EQ(big.status, 400) << big.body;
    EXPECT_NE(big.body.find("input[1]"), std::string::npos) << big.body;
    // A node without --rerank: 501, llama-server's words.
    auto plain = node_process::start(serve_args("llama", {"--embedding"}));
    const http_reply off = post(*plain, "/rerank", body);
    EXPECT_EQ(off.status, 501) << off.body;
    EXPECT_EQ(off.j()["error"]["type"], "not_supported_error");
    EXPECT_NE(off.body.find("--reranking"), std::string::npos) << off.body;
}

// At start: a model without a ranking head (exit 1, saying so) and a pooling that is not rank (exit 2).
TEST(ServeRerank, ANodeRefusesToStartWithoutARankingHead) {
    const proc_result no_head =
        run_process({baton_bin(), "serve", "-m", test_model_path("llama"), "--port", "0", "--rerank"}, 60);
    EXPECT_EQ(no_head.exit_code, 1) << no_head.err;
    EXPECT_NE(no_head.err.find("no ranking head"), std::string::npos) << no_head.err;
    const proc_result pooling = run_process(
        {baton_bin(), "serve", "-m", test_reranker_path(false), "--port", "0", "--rerank", "--pooling", "mean"}, 60);
    EXPECT_EQ(pooling.exit_code, 2) << pooling.err;
    EXPECT_NE(pooling.err.find("pooling"), std::string::npos) << pooling.err;
}

TEST(ServeRerank, ThroughTheRouterTheNodesAnswer) {
    auto n = node_process::start(baton_args(rerank_flags(true), {"--role", "decode"}));
    auto router = node_process::start(
        {"route", "--decode", n->url(), "-m", test_reranker_path(true), "--health-interval", "0.2"});
    const std::string body = R"({"query":"what is a cat?","documents":["a cat","a dog","paris"],"top_n":2})";
    for (const char * path : {"/rerank", "/v1/rerank"}) {
        const http_reply via = post(*router, path, body, "application/json", "", 60);
        ASSERT_EQ(via.status, 200) << path << ": " << via.body;
        EXPECT_EQ(via.j(), post(*n, path, body).j()) << path;
    }
}

}  // namespace
}  // namespace baton::test
