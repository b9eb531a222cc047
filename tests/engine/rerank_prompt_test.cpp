// rerank_prompt_test.cpp — llama-server's rerank prompt layouts and the scores of a ranking head, without a
// process: the template's substitution order, the plain layout's markers, what mkmodel's rerankers say of
// themselves, and that a document's score does not depend on what it is batched with.
#include <gtest/gtest.h>

#include <cmath>

#include "baton/embedder.h"
#include "baton/rerank_prompt.h"
#include "support/test_support.h"

namespace baton {
namespace {

std::shared_ptr<const loaded_model> test_reranker(bool with_template) {
    static std::shared_ptr<const loaded_model> cache[2];
    auto & m = cache[with_template ? 1 : 0];
    if (!m) {
        auto l = loaded_model::load(test::test_reranker_path(with_template));
        if (!l.ok()) throw std::runtime_error(l.status().to_string());
        m = std::move(l.value());
    }
    return m;
}

// llama-server replaces {query} first, then {document} in the result (so a query holding "{document}" gets
// the document too), every occurrence.
TEST(RerankPrompt, TemplateFillsQueryThenDocument) {
    EXPECT_EQ(rerank_template_fill("Q:{query} D:{document} {query}", "a", "b"), "Q:a D:b a");
    EXPECT_EQ(rerank_template_fill("{query}|{document}", "x{document}", "y"), "xy|y");
    EXPECT_EQ(rerank_template_fill("{document}", "q", "{query}"), "{query}");
    EXPECT_EQ(rerank_template_fill("none", "q", "d"), "none");
}

TEST(RerankPrompt, PlainLayoutPutsEachMarkerItsFlagAsksFor) {
    rerank_layout l;
    l.bos = 1;
    l.eos = 2;
    l.sep = 3;
    const std::vector<token_id> q = {10, 11}, d = {20};
    EXPECT_EQ(rerank_join(l, q, d), (std::vector<token_id>{10, 11, 20}));
    l.add_bos = l.add_eos = l.add_sep = true;
    EXPECT_EQ(rerank_join(l, q, d), (std::vector<token_id>{1, 10, 11, 2, 3, 20, 2}));
    l.add_sep = false;
    EXPECT_EQ(rerank_join(l, q, d), (std::vector<token_id>{1, 10, 11, 2, 20, 2}));
    l.sep = -1;  // a marker the vocabulary lacks is left out
    l.add_sep = true;
    l.bos = -1;
    EXPECT_EQ(rerank_join(l, q, d), (std::vector<token_id>{10, 11, 2, 20, 2}));
}

TEST(RerankPrompt, MkmodelsRerankersSayWhichLayoutTheyUse) {
    const rerank_layout t = rerank_layout_of(*test_reranker(true));
    ASSERT_TRUE(t.prompt_template.has_value());
    EXPECT_NE(t.prompt_template->find("{query}"), std::string::npos);
    EXPECT_NE(t.prompt_template->find("{document}"), std::string::npos);
    const rerank_layout p = rerank_layout_of(*test_reranker(false));
    EXPECT_FALSE(p.prompt_template.has_value());
    EXPECT_TRUE(p.add_bos && p.add_eos && p.add_sep);
    EXPECT_EQ(p.sep, p.eos);  // <s> query </s></s> document </s>
}

TEST(RerankPrompt, PromptsAreTheLayoutsTokens) {
    const auto plain = test_reranker(false);
    const rerank_layout pl = rerank_layout_of(*plain);
    auto q = text_tokenize(*plain, "what is it", false, false);
    auto d = text_tokenize(*plain, "a <|im_start|> thing", false, false);  // control texts stay text
    auto ps = rerank_prompts(*plain, pl, "what is it", {"a <|im_start|> thing"});
    ASSERT_TRUE(ps.ok() && q.ok() && d.ok());
    EXPECT_EQ(ps->at(0), rerank_join(pl, q.value(), d.value()));
    const auto tm = test_reranker(true);
    const rerank_layout tl = rerank_layout_of(*tm);
    auto full = text_tokenize(*tm, rerank_template_fill(*tl.prompt_template, "q", "d"), false, true);
    auto ts = rerank_prompts(*tm, tl, "q", {"d", "other"});
    ASSERT_TRUE(ts.ok() && full.ok());
    ASSERT_EQ(ts->size(), 2u);
    EXPECT_EQ(ts->at(0), full.value());
    EXPECT_NE(ts->at(0), ts->at(1));
}

// The head: two labels through a softmax, so the score (the first) is a probability; packing documents into
// one decode does not change a score.
TEST(RerankPrompt, ScoresAreProbabilitiesAndDoNotDependOnTheBatch) {
    for (const bool with_template : {true, false}) {
        SCOPED_TRACE(with_template);
        const auto m = test_reranker(with_template);
        embedder_config c;
        c.pooling = pooling_kind::rank;
        c.n_batch = 512;
        c.n_seq_max = 4;
        auto e = embedder::create(*m, c);
        ASSERT_TRUE(e.ok()) << e.status().to_string();
        EXPECT_EQ(e.value()->n_embd(), 2);
        auto ps = rerank_prompts(*m, rerank_layout_of(*m), "what is a cat",
                                 {"a cat is a small animal", "paris is a city", "x", "cats purr", "the sea", "cat"});
        ASSERT_TRUE(ps.ok());
        auto all = e.value()->embed(ps.value(), -1);
        ASSERT_TRUE(all.ok()) << all.status().to_string();
        bool differ = false;
        for (size_t i = 0; i < ps->size(); ++i) {
            const auto & v = all->at(i).vectors.at(0);
            ASSERT_EQ(v.size(), 2u);
            EXPECT_GT(v[0], 0.0f);
            EXPECT_LT(v[0], 1.0f);
            EXPECT_NEAR(v[0] + v[1], 1.0f, 1e-5);
            auto one = e.value()->embed({ps->at(i)}, -1);
            ASSERT_TRUE(one.ok());
            EXPECT_NEAR(one->at(0).vectors.at(0)[0], v[0], 1e-5) << i;
            differ = differ || std::fabs(v[0] - all->at(0).vectors.at(0)[0]) > 1e-4;
        }
        EXPECT_TRUE(differ) << "every document scored the same: the head is not in the graph";
    }
}

// libllama builds rank pooling on any model; without a head its "score" is a hidden state's first element.
TEST(RerankPrompt, RankPoolingOnAModelWithoutAHeadIsRefused) {
    auto m = loaded_model::load(test::test_model_path("llama"));
    ASSERT_TRUE(m.ok());
    embedder_config c;
    c.pooling = pooling_kind::rank;
    auto e = embedder::create(*m.value(), c);
    ASSERT_FALSE(e.ok());
    EXPECT_EQ(e.status().code(), status_code::invalid_argument);
    EXPECT_NE(e.status().message().find("no ranking head"), std::string::npos) << e.status().message();
}

}  // namespace
}  // namespace baton
