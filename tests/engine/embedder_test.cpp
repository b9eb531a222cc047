// embedder_test.cpp — embeddings without a process: an input's vector does not depend on what it is batched
// with (inputs are packed into one decode), normalization follows --embd-normalize's rules, and the
// refusals name the input.
#include <gtest/gtest.h>

#include <cmath>

#include "baton/embedder.h"
#include "engine_fixture.h"

namespace baton {
namespace {

using test::model_for;

double norm_p(const std::vector<float> & v, double p) {
    double s = 0;
    for (float x : v) s += std::pow(std::fabs(double(x)), p);
    return std::pow(s, 1.0 / p);
}

TEST(Embedder, AVectorIsTheSameAloneOrBatchedWithOthers) {
    auto m = model_for("llama");
    for (pooling_kind pk : {pooling_kind::mean, pooling_kind::last, pooling_kind::cls}) {
        embedder_config c;
        c.pooling = pk;
        c.n_batch = 64;
        c.n_seq_max = 4;
        auto e = embedder::create(*m, c);
        ASSERT_TRUE(e.ok()) << e.status().to_string();
        EXPECT_EQ(e.value()->pooling(), pk);
        const std::vector<std::vector<token_id>> inputs = {{1, 5, 9},           {1, 7},
                                                           {1, 30, 31, 32, 33}, {1, 8, 8, 8},
                                                           {1, 2, 3, 4, 5, 6},  {1, 11}};  // 6 inputs: two batches
        auto all = e.value()->embed(inputs, 2);
        ASSERT_TRUE(all.ok()) << all.status().to_string();
        ASSERT_EQ(all->size(), inputs.size());
        for (size_t i = 0; i < inputs.size(); ++i) {
            auto one = e.value()->embed({inputs[i]}, 2);
            ASSERT_TRUE(one.ok());
            ASSERT_EQ(one->at(0).vectors.size(), 1u);
            const auto & a = one->at(0).vectors[0];
            const auto & b = all->at(i).vectors[0];
            ASSERT_EQ(a.size(), size_t(e.value()->n_embd()));
            for (size_t k = 0; k < a.size(); ++k) EXPECT_NEAR(a[k], b[k], 1e-5) << pooling_kind_name(pk) << " " << i;
            EXPECT_NEAR(norm_p(a, 2), 1.0, 1e-4);
            EXPECT_EQ(all->at(i).n_tokens, inputs[i].size());
        }
    }
}

TEST(Embedder, PoolingNoneGivesEveryTokensVectorUnnormalized) {
    auto m = model_for("llama");
    embedder_config c;
    c.pooling = pooling_kind::none;
    c.n_batch = 64;
    auto e = embedder::create(*m, c);
    ASSERT_TRUE(e.ok()) << e.status().to_string();
    auto r = e.value()->embed({{1, 5, 9, 12}}, 2);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->at(0).vectors.size(), 4u);
    EXPECT_GT(std::fabs(norm_p(r->at(0).vectors[0], 2) - 1.0), 1e-3);  // (not normalized)
}

TEST(Embedder, NormalizationModes) {
    const std::vector<float> v = {3, -4, 0, 1};
    auto n = [&](int32_t mode) {
        std::vector<float> x = v;
        embedding_normalize(x, mode);
        return x;
    };
    EXPECT_EQ(n(-1), v);
    EXPECT_NEAR(norm_p(n(1), 1), 1.0, 1e-6);
    EXPECT_NEAR(norm_p(n(2), 2), 1.0, 1e-6);
    EXPECT_NEAR(norm_p(n(3), 3), 1.0, 1e-6);
    EXPECT_NEAR(n(0)[1], -32760.0f, 1e-2);  // the largest magnitude scaled to int16's range
    std::vector<float> zero = {0, 0};
    embedding_normalize(zero, 2);
    EXPECT_EQ(zero, (std::vector<float>{0, 0}));
}

TEST(Embedder, InputsThatCannotBeEmbeddedAreRefusedByIndex) {
    auto m = model_for("llama");
    embedder_config c;
    c.n_batch = 8;  // (fewer tokens than the default 32 sequences: the sequences are capped at the tokens)
    auto e = embedder::create(*m, c);
    ASSERT_TRUE(e.ok()) << e.status().to_string();
    EXPECT_EQ(e.value()->config().n_seq_max, 8u);
    auto big = e.value()->embed({{1, 2}, std::vector<token_id>(9, 5)}, 2);
    ASSERT_FALSE(big.ok());
    EXPECT_EQ(big.status().code(), status_code::invalid_argument);
    EXPECT_NE(big.status().message().find("input[1]"), std::string::npos);
    auto empty = e.value()->embed({{}}, 2);
    ASSERT_FALSE(empty.ok());
    EXPECT_NE(empty.status().message().find("input[0]"), std::string::npos);
    EXPECT_FALSE(pooling_kind_parse("max").ok());
    EXPECT_EQ(pooling_kind_parse("last").value(), pooling_kind::last);
}

}  // namespace
}  // namespace baton
