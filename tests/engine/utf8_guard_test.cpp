// utf8_guard_test.cpp — the UTF-8 guard of grammar chains (src/engine/utf8_guard.h): the validator, and the
// sampler on a byte-fallback vocabulary. Regression: a json_schema answer held "\x7f\xe4a…" — a lead byte
// followed by ASCII, which libllama's grammar sampler folds into one code point — so a string passed the
// grammar's maxLength and was not valid UTF-8 (python3-jsonschema counted more characters).
#include <llama.h>

#include <cmath>

#include "engine_fixture.h"
#include "utf8_guard.h"

namespace baton {
namespace {

using namespace baton::test;

bool valid(const std::string & s) {
    utf8_state st;
    return utf8_advance(st, s) && st.need == 0;
}

TEST(Utf8Guard, ValidatorFollowsRfc3629) {
    for (const char * ok :
         {"", "a", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xed\x9f\xbf", "\xf4\x8f\xbf\xbf"})
        EXPECT_TRUE(valid(ok)) << ok;
    for (const char * bad : {"\x80", "\xc0\xaf", "\xc1\xbf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf0\x80\x80\x80",
                             "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xff",
                             "\xe4"
                             "a"})
        EXPECT_FALSE(valid(bad)) << testing::PrintToString(std::string(bad));
    utf8_state st;  // split over pieces, as byte tokens split a character
    EXPECT_TRUE(utf8_advance(st, "\xe2"));
    EXPECT_EQ(st.need, 2);
    EXPECT_TRUE(utf8_advance(st, "\x82"));
    EXPECT_TRUE(utf8_advance(st, "\xac"
                                 "b"));
    EXPECT_EQ(st.need, 0);
}

TEST(Utf8Guard, SamplerRemovesCandidatesThatBreakUtf8) {
    const auto m = model_for("llama");
    const llama_vocab * vocab = m->vocab();
    const token_pieces pieces = sampling_token_pieces(vocab);
    llama_sampler * g = utf8_guard_make(pieces);
    auto allowed = [&] {
        std::vector<llama_token_data> cur;
        for (size_t i = 0; i < pieces->size(); ++i) cur.push_back({llama_token(i), 0.0f, 0.0f});
        llama_token_data_array arr = {cur.data(), cur.size(), -1, false};
        llama_sampler_apply(g, &arr);
        std::vector<bool> ok(cur.size());
        for (size_t i = 0; i < cur.size(); ++i) ok[size_t(cur[i].id)] = cur[i].logit != -INFINITY;
        return ok;
    };
    auto byte_token = [&](unsigned b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        for (size_t i = 0; i < pieces->size(); ++i)
            if (std::string(llama_vocab_get_text(vocab, llama_token(i))) == name) return llama_token(i);
        return llama_token(-1);
    };
    const llama_token e2 = byte_token(0xE2), x82 = byte_token(0x82), x80 = byte_token(0x80);
    ASSERT_GE(e2, 0);
    ASSERT_GE(x82, 0);
    std::vector<bool> ok = allowed();
    EXPECT_FALSE(ok[size_t(x80)]) << "a lone continuation byte";
    EXPECT_TRUE(ok[size_t(e2)]);
    EXPECT_TRUE(ok[size_t(llama_vocab_eos(vocab))]) << "end of generation between characters";
    llama_sampler_accept(g, e2);
    ok = allowed();
    EXPECT_TRUE(ok[size_t(x82)]);
    EXPECT_FALSE(ok[size_t(e2)]) << "a lead byte inside a character";
    EXPECT_FALSE(ok[size_t(llama_vocab_eos(vocab))]) << "end of generation inside a character";
    size_t ascii_allowed = 0;
    for (size_t i = 0; i < pieces->size(); ++i)
        if (!(*pieces)[i].empty() && (unsigned char)(*pieces)[i][0] < 0x80 && ok[i]) ++ascii_allowed;
    EXPECT_EQ(ascii_allowed, 0u) << "ASCII after a lead byte";
    llama_sampler_accept(g, x82);
    llama_sampler_accept(g, x80);  // € complete
    ok = allowed();
    EXPECT_TRUE(ok[size_t(llama_vocab_eos(vocab))]);
    EXPECT_FALSE(ok[size_t(x80)]);
    llama_sampler * copy = llama_sampler_clone(g);
    llama_sampler_accept(g, e2);
    llama_sampler_reset(g);
    EXPECT_TRUE(allowed()[size_t(llama_vocab_eos(vocab))]);
    llama_sampler_free(copy);
    llama_sampler_free(g);
}

}  // namespace
}  // namespace baton
