// rerank_test.cpp — the rerank dialect without a model or a process: llama-server's request fields and
// refusals (its messages), Jina's and TEI's response shapes, the order of the results and top_n.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "baton/openai/rerank.h"

namespace baton {
namespace {

using json = nlohmann::json;

Result<openai_rerank_request> rerank_parse(const std::string & body, prompt_limits lim = {}) {
    return openai_rerank_parse(body, lim);
}

TEST(RerankParse, TakesTheQueryDocumentsTopNAndModel) {
    auto r = rerank_parse(R"({"query":"q","documents":["a","bb"],"top_n":1,"model":"m"})");
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->query, "q");
    EXPECT_EQ(r->documents, (std::vector<std::string>{"a", "bb"}));
    EXPECT_EQ(r->top_n, 1u);
    EXPECT_EQ(r->model, "m");
    EXPECT_FALSE(r->tei);
    EXPECT_FALSE(r->top_n == std::nullopt);
    auto all = rerank_parse(R"({"query":"q","documents":["a"]})");
    ASSERT_TRUE(all.ok());
    EXPECT_EQ(all->top_n, std::nullopt);
}

TEST(RerankParse, TextsSelectTeisShapeAndReturnText) {
    auto r = rerank_parse(R"({"query":"q","texts":["a","b"],"return_text":true})");
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_TRUE(r->tei);
    EXPECT_TRUE(r->return_text);
    EXPECT_EQ(r->documents.size(), 2u);
}

// llama-server reads "documents" with json_value: one that is not an array of strings falls back to "texts".
TEST(RerankParse, DocumentsThatAreNotStringsFallBackToTexts) {
    auto r = rerank_parse(R"({"query":"q","documents":[1,2],"texts":["t"]})");
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->documents, std::vector<std::string>{"t"});
    EXPECT_TRUE(r->tei);
}

TEST(RerankParse, RefusalsAreLlamaServersMessages) {
    for (const auto & [body, message] : std::vector<std::pair<std::string, std::string>>{
             {R"({"documents":["a"]})", "\"query\" must be provided"},
             {R"({"query":7,"documents":["a"]})", "\"query\" must be a string"},
             {R"({"query":null,"documents":["a"]})", "\"query\" must be a string"},
             {R"({"query":"q"})", "\"documents\" must be a non-empty string array"},
             {R"({"query":"q","documents":[]})", "\"documents\" must be a non-empty string array"},
             {R"({"query":"q","documents":null})", "\"documents\" must be a non-empty string array"},
             {R"({"query":"q","documents":123})", "\"documents\" must be a non-empty string array"},
             {R"({"query":"q","documents":[1,2,3]})", "\"documents\" must be a non-empty string array"},
             {R"({"query":"q","texts":[]})", "\"documents\" must be a non-empty string array"},
             {R"({"query":"q","documents":["a"],"top_n":-1})", "top_n"},
             {R"({"query":"q","documents":["a"],"top_n":"2"})", "top_n"},
             {R"({"query":"q","documents":["a"],"top_n":1.5})", "top_n"},
             {R"({"query":"q","texts":["a"],"return_text":"yes"})", "return_text"},
             {R"([1])", "body"},
             {R"({"query":)", "body"},
         }) {
        auto r = rerank_parse(body);
        ASSERT_FALSE(r.ok()) << body;
        EXPECT_EQ(r.status().code(), status_code::invalid_argument) << body;
        EXPECT_NE(r.status().message().find(message), std::string::npos) << body << " -> " << r.status().message();
    }
}

TEST(RerankParse, TheTextsToTokenizeAreBounded) {
    prompt_limits lim;
    lim.max_prompt_bytes = 100;
    // Each document is tokenized with the query: 3 x (30 + 10) bytes > 100.
    auto r = rerank_parse(
        json{{"query", std::string(30, 'q')}, {"documents", {"0123456789", "0123456789", "0123456789"}}}.dump(), lim);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), status_code::too_large);
    EXPECT_NE(r.status().message().find("--max-prompt-mb"), std::string::npos) << r.status().message();
    json many = {{"query", "q"}, {"documents", json::array()}};
    for (size_t i = 0; i <= openai_rerank_documents_max; ++i) many["documents"].push_back("d");
    auto m = rerank_parse(many.dump());
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), status_code::too_large);
}

TEST(RerankOrder, HighestScoreFirstTiesInDocumentOrderCutToTopN) {
    const std::vector<rerank_score> s = {{0.2f, 1}, {0.9f, 1}, {0.2f, 1}, {0.5f, 1}};
    EXPECT_EQ(openai_rerank_order(s, std::nullopt), (std::vector<size_t>{1, 3, 0, 2}));
    EXPECT_EQ(openai_rerank_order(s, 2), (std::vector<size_t>{1, 3}));
    EXPECT_EQ(openai_rerank_order(s, 0), std::vector<size_t>{});
    EXPECT_EQ(openai_rerank_order(s, 99), (std::vector<size_t>{1, 3, 0, 2}));
}

TEST(RerankJson, JinasShapeWithUsageOfEveryDocument) {
    auto r = rerank_parse(R"({"query":"q","documents":["a","b","c"],"top_n":2})");
    ASSERT_TRUE(r.ok());
    const json j = json::parse(openai_rerank_json(r.value(), {{0.1f, 3}, {0.7f, 4}, {0.4f, 5}}, "node-model"));
    EXPECT_EQ(j["model"], "node-model");
    EXPECT_EQ(j["object"], "list");
    EXPECT_EQ(j["usage"], (json{{"prompt_tokens", 12}, {"total_tokens", 12}}));
    ASSERT_EQ(j["results"].size(), 2u);
    EXPECT_EQ(j["results"][0]["index"], 1);
    EXPECT_NEAR(j["results"][0]["relevance_score"].get<double>(), 0.7, 1e-6);
    EXPECT_EQ(j["results"][1]["index"], 2);
    EXPECT_FALSE(j["results"][0].contains("text"));
    // The model the request names is echoed, as llama-server does.
    auto named = rerank_parse(R"({"query":"q","documents":["a"],"model":"asked"})");
    EXPECT_EQ(json::parse(openai_rerank_json(named.value(), {{0.5f, 1}}, "node-model"))["model"], "asked");
}

TEST(RerankJson, TeisShapeIsAnArrayWithScoresAndTexts) {
    auto r = rerank_parse(R"({"query":"q","texts":["a","b"],"return_text":true})");
    ASSERT_TRUE(r.ok());
    const json j = json::parse(openai_rerank_json(r.value(), {{0.1f, 3}, {0.7f, 4}}, "m"));
    ASSERT_TRUE(j.is_array());
    ASSERT_EQ(j.size(), 2u);
    EXPECT_EQ(j[0], (json{{"index", 1}, {"score", j[0]["score"]}, {"text", "b"}}));
    EXPECT_NEAR(j[0]["score"].get<double>(), 0.7, 1e-6);
    EXPECT_EQ(j[1]["text"], "a");
    auto plain = rerank_parse(R"({"query":"q","texts":["a"]})");
    EXPECT_FALSE(json::parse(openai_rerank_json(plain.value(), {{0.5f, 1}}, "m"))[0].contains("text"));
}

}  // namespace
}  // namespace baton
