// infill_test.cpp — /infill's fields as the parser takes them, and the prompt layout infill_tokens builds
// (token by token against the vocabulary's FIM tokens), with llama-server's truncation rules.
#include <gtest/gtest.h>

#include "baton/model.h"
#include "baton/openai/infill.h"
#include "baton/openai/openai.h"
#include "support/test_support.h"

namespace baton {
namespace {

using test::test_model_path;

std::unique_ptr<loaded_model> load(bool fim) {
    model_load_params p;
    p.vocab_only = true;
    auto m = loaded_model::load(test_model_path("llama", 1, 64, 4, "f32", "spm", fim), p);
    if (!m.ok()) ADD_FAILURE() << m.status().to_string();
    return m.ok() ? std::move(m.value()) : nullptr;
}

std::vector<token_id> toks(const loaded_model & m, const std::string & text, bool special = false) {
    return text_tokenize(m, text, false, special).value();
}

std::vector<token_id> cat(std::initializer_list<std::vector<token_id>> parts) {
    std::vector<token_id> out;
    for (const auto & p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
}

TEST(Infill, FieldsParseAndBadOnesAreRefusedByName) {
    auto r = openai_parse(
        R"({"input_prefix":"a","input_suffix":"b","prompt":"c","input_extra":[{"filename":"f.py","text":"x"},{"text":"y"}],"n_predict":3})",
        openai_endpoint::infill);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->endpoint, openai_endpoint::infill);
    EXPECT_EQ(r->max_tokens, 3);
    const auto & in = std::get<openai_infill>(r->input);
    EXPECT_EQ(in.prefix, "a");
    EXPECT_EQ(in.suffix, "b");
    EXPECT_EQ(in.prompt, "c");
    ASSERT_EQ(in.extra.size(), 2u);
    EXPECT_EQ(in.extra[0], (openai_infill_chunk{"f.py", "x"}));
    EXPECT_EQ(in.extra[1], (openai_infill_chunk{"tmp", "y"}));  // llama-server's name for an unnamed chunk
    EXPECT_TRUE(std::get<openai_infill>(openai_parse("{}", openai_endpoint::infill)->input) == openai_infill{});
    for (const auto & [body, field] :
         std::vector<std::pair<std::string, std::string>>{{R"({"input_prefix":1})", "input_prefix"},
                                                          {R"({"input_suffix":[]})", "input_suffix"},
                                                          {R"({"prompt":[1,2]})", "prompt"},
                                                          {R"({"input_extra":{}})", "input_extra"},
                                                          {R"({"input_extra":[1]})", "input_extra[0]"},
                                                          {R"({"input_extra":[{"text":3}]})", "input_extra[0].text"},
                                                          {R"({"n":2})", "n:"}}) {
        auto bad = openai_parse(body, openai_endpoint::infill);
        ASSERT_FALSE(bad.ok()) << body;
        EXPECT_NE(bad.status().message().find(field), std::string::npos) << bad.status().message();
    }
}

TEST(Infill, LayoutIsExtraThenBosPrefixPromptSuffixMiddle) {
    auto m = load(true);
    ASSERT_TRUE(m);
    const text_special sp = text_special_tokens(*m);
    ASSERT_GE(sp.fim_pre, 0);
    ASSERT_GE(sp.fim_sep, 0);
    ASSERT_GE(sp.bos_added, 0);
    openai_infill in{"def f(", "):\n", "x", {{"u.py", "y = 1\n"}}};
    auto got = infill_tokens(in, *m, 512, -1, 4096);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    const std::vector<token_id> extra = cat({{sp.fim_rep},
                                             toks(*m, "myproject\n"),
                                             {sp.fim_sep},
                                             toks(*m, "u.py\n"),
                                             toks(*m, "y = 1\n"),
                                             {sp.fim_sep},
                                             toks(*m, "filename\n")});
    EXPECT_EQ(got.value(), cat({extra,
                                {sp.bos_added, sp.fim_pre},
                                toks(*m, "def f("),
                                toks(*m, "x", true),
                                {sp.fim_suf},
                                toks(*m, "):\n"),
                                {sp.fim_mid}}));
    // No room for other files (n_ctx - n_batch - 2 n_predict <= 0): none of them.
    auto tight = infill_tokens(in, *m, 512, 8, 512);
    ASSERT_TRUE(tight.ok());
    EXPECT_EQ(tight->front(), sp.bos_added);
}

TEST(Infill, LongPrefixAndSuffixAreCutAsLlamaServerCutsThem) {
    auto m = load(true);
    ASSERT_TRUE(m);
    std::string prefix, suffix;
    for (int i = 0; i < 200; ++i) prefix += "the quick brown fox ";
    for (int i = 0; i < 200; ++i) suffix += " jumps over the lazy dog";
    const std::vector<token_id> p = toks(*m, prefix), s = toks(*m, suffix), pr = toks(*m, "and", true);
    const uint32_t n_batch = 256;
    ASSERT_GT(p.size(), 192u);
    ASSERT_GT(s.size(), 64u);
    auto got = infill_tokens(openai_infill{prefix, suffix, "and", {}}, *m, n_batch, -1, 4096);
    ASSERT_TRUE(got.ok());
    const text_special sp = text_special_tokens(*m);
    const size_t keep_p = 3 * (n_batch / 4), keep_s = n_batch / 4 - (2 + pr.size());
    const std::vector<token_id> want = cat({{sp.fim_rep},
                                            toks(*m, "myproject\n"),
                                            {sp.fim_sep},
                                            toks(*m, "filename\n"),
                                            {sp.bos_added, sp.fim_pre},
                                            std::vector<token_id>(p.end() - ptrdiff_t(keep_p), p.end()),
                                            pr,
                                            {sp.fim_suf},
                                            std::vector<token_id>(s.begin(), s.begin() + ptrdiff_t(keep_s)),
                                            {sp.fim_mid}});
    EXPECT_EQ(got.value(), want);
}

TEST(Infill, AModelWithoutFimTokensIsNotImplemented) {
    auto m = load(false);
    ASSERT_TRUE(m);
    auto got = infill_tokens(openai_infill{"a", "b", "", {}}, *m, 512, -1, 4096);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), status_code::not_implemented);
    EXPECT_NE(got.status().message().find("FIM prefix"), std::string::npos);
}

}  // namespace
}  // namespace baton
