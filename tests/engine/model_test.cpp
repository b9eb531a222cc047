// model_test.cpp — test models load through libllama with the expected kind of memory; generation is
// deterministic; tokenization round-trips arbitrary bytes.
#include <gtest/gtest.h>
#include <llama.h>

#include <cmath>

#include "baton/generate.h"
#include "baton/model.h"
#include "baton/testmodel/mkmodel.h"
#include "baton/text.h"
#include "support/test_support.h"

namespace baton {
namespace {

struct model_arch_case {
    const char * arch;
    bool recurrent;
    bool hybrid;
};

class ArchTest : public ::testing::TestWithParam<model_arch_case> {};

TEST_P(ArchTest, LoadsWithExpectedMemoryKind) {
    auto m = loaded_model::load(test::test_model_path(GetParam().arch));
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    EXPECT_EQ(m.value()->is_recurrent(), GetParam().recurrent);
    EXPECT_EQ(m.value()->is_hybrid(), GetParam().hybrid);
    EXPECT_EQ(m.value()->identity().arch, GetParam().arch);
    EXPECT_EQ(m.value()->identity().n_layer, 4u);
    EXPECT_EQ(m.value()->identity().n_embd, 64u);
}

TEST_P(ArchTest, SameSeedGeneratesSameTokens) {
    auto m = loaded_model::load(test::test_model_path(GetParam().arch));
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    generate_params p;
    p.prompt = "Hello world, the model decodes";
    p.n_predict = 32;
    p.sampling.temperature = 0.8f;
    p.sampling.seed = 1234;
    p.ctx.n_ctx = 256;
    auto a = generate_run(*m.value(), p);
    auto b = generate_run(*m.value(), p);
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    EXPECT_FALSE(a->tokens.empty());
    EXPECT_EQ(a->tokens, b->tokens);
    // A different seed must be able to change the outcome (not a constant sampler).
    p.sampling.seed = 99;
    p.sampling.temperature = 5.0f;
    p.sampling.top_k = 0;
    p.sampling.top_p = 1.0f;
    p.sampling.min_p = 0.0f;
    auto c = generate_run(*m.value(), p);
    ASSERT_TRUE(c.ok());
    EXPECT_NE(a->tokens, c->tokens);
}

TEST_P(ArchTest, GreedyLogitsAreFiniteAndVary) {
    auto m = loaded_model::load(test::test_model_path(GetParam().arch));
    ASSERT_TRUE(m.ok());
    generate_params p;
    p.prompt = "the state of the node";
    p.n_predict = 4;
    p.sampling.temperature = 0;
    p.record_logits = true;
    p.ctx.n_ctx = 128;
    auto a = generate_run(*m.value(), p);
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    ASSERT_FALSE(a->logits.empty());
    float mn = a->logits[0][0], mx = mn;
    for (float v : a->logits[0]) {
        ASSERT_TRUE(std::isfinite(v));
        mn = std::min(mn, v);
        mx = std::max(mx, v);
    }
    EXPECT_GT(mx - mn, 0.1f) << "logits are flat: the model computes nothing";
}

INSTANTIATE_TEST_SUITE_P(
    AllArchs, ArchTest,
    ::testing::Values(model_arch_case{"llama", false, false}, model_arch_case{"mamba2", true, false},
                      model_arch_case{"granitehybrid", false, true}, model_arch_case{"lfm2", false, true},
                      model_arch_case{"gemma3", false, false}, model_arch_case{"qwen3moe", false, false},
                      model_arch_case{"qwen3next", false, true}),
    [](const auto & info) { return std::string(info.param.arch); });

TEST(Tokenize, RoundTripsUtf8AndInvalidBytes) {
    auto m = loaded_model::load(test::test_model_path("llama"));
    ASSERT_TRUE(m.ok());
    const std::vector<std::string> texts = {
        "Hello world", "the model and the state", "  leading spaces", "emoji \xF0\x9F\x98\x80 and \xE2\x9C\x93",
        "日本語のテキスト", "tab\tnew\nline", std::string("nul\0byte", 8)};
    for (const auto & t : texts) {
        auto toks = text_tokenize(m.value()->vocab(), t, false, false);
        ASSERT_TRUE(toks.ok());
        EXPECT_EQ(text_detokenize(m.value()->vocab(), toks.value()), t) << "text: " << t;
    }
}

TEST(Tokenize, InvalidUtf8IsHandledWithoutCrashing) {
    // libllama's SentencePiece splitter is lossy on invalid UTF-8 (bytes after a bad lead byte become byte
    // tokens of the escaped text), so only totality is required: valid ids, non-empty output, no crash.
    auto m = loaded_model::load(test::test_model_path("llama"));
    ASSERT_TRUE(m.ok());
    const int32_t n_vocab = int32_t(m.value()->identity().n_vocab);
    for (const std::string t : {"invalid \xFF\xFE bytes \xC3", "\xC3", "\xF0\x9F\x98", "\x80\x80\x80", "a\xED\xA0\x80" "b"}) {
        auto toks = text_tokenize(m.value()->vocab(), t, true, false);
        ASSERT_TRUE(toks.ok());
        ASSERT_FALSE(toks->empty());
        for (token_id id : toks.value()) EXPECT_TRUE(id >= 0 && id < n_vocab);
        EXPECT_FALSE(text_detokenize(m.value()->vocab(), toks.value()).empty());
    }
}

TEST(Tokenize, Utf8CompletePrefixHoldsBackPartialCharacters) {
    EXPECT_EQ(utf8_complete_prefix("abc"), 3u);
    EXPECT_EQ(utf8_complete_prefix("ab\xF0\x9F"), 2u);
    EXPECT_EQ(utf8_complete_prefix("ab\xF0\x9F\x98\x80"), 6u);
    EXPECT_EQ(utf8_complete_prefix("\xE2\x9C"), 0u);
    EXPECT_EQ(utf8_complete_prefix("a\xFF"), 2u);
}

// model_info: what the modules above the engine read of a model, from the GGUF's tokenizer and metadata.
TEST(ModelInfo, ReadsSpecialTokenTextsTemplateAndTrainingContext) {
    model_load_params vocab_only;
    vocab_only.vocab_only = true;
    auto spm = loaded_model::load(test::test_model_path("llama"));
    ASSERT_TRUE(spm.ok()) << spm.status().to_string();
    const model_info & s = spm.value()->info();
    EXPECT_EQ(s.bos_text, "<s>");
    EXPECT_EQ(s.eos_text, "</s>");
    EXPECT_TRUE(s.add_bos);
    EXPECT_FALSE(s.add_eos);
    ASSERT_TRUE(s.chat_template.has_value());
    EXPECT_NE(s.chat_template->find("<|im_start|>"), std::string::npos);
    EXPECT_EQ(s.n_ctx_train, 4096u);

    auto bpe = loaded_model::load(test::test_model_path("llama", 1, 64, 4, "f32", "bpe"), vocab_only);
    ASSERT_TRUE(bpe.ok()) << bpe.status().to_string();
    const model_info & b = bpe.value()->info();
    EXPECT_EQ(b.bos_text, "<|endoftext|>");
    EXPECT_EQ(b.eos_text, "<|im_end|>");
    EXPECT_FALSE(b.add_bos);
    EXPECT_EQ(b.n_ctx_train, 0u);  // a vocab_only load reads no hyperparameters

    mkmodel_params p;
    p.chat_template = false;
    p.n_ctx = 512;
    const std::string path = test::scratch_dir() + "/model-info-no-template.gguf";
    ASSERT_TRUE(mkmodel_ensure(p, path).ok());
    auto bare = loaded_model::load(path);
    ASSERT_TRUE(bare.ok()) << bare.status().to_string();
    EXPECT_FALSE(bare.value()->info().chat_template.has_value());
    EXPECT_EQ(bare.value()->info().n_ctx_train, 512u);
}

TEST(Fingerprint, DiffersBetweenSeeds) {
    auto a = model_fingerprint_file(test::test_model_path("llama", 1));
    auto b = model_fingerprint_file(test::test_model_path("llama", 2));
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_NE(a.value(), b.value());
}

}  // namespace
}  // namespace baton
