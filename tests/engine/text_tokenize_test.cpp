// text_tokenize_test.cpp — text_tokenize is llama_tokenize, token for token, at linear cost.
//
// The oracle is llama_tokenize itself. The vocabularies: mkmodel's SentencePiece and byte-level BPE ones
// as they are, and the same with special tokens added that exercise every rule of libllama's special-token
// split — user-defined and control tokens whose texts overlap, nest, share a length (libllama's unstable
// sort decides their order) or hold whitespace and multi-byte characters, and the strip attributes libllama
// sets by name (a "phi3" model: RSTRIP on every special token; a "jina-v2" tokenizer: LSTRIP on <mask>).
// The texts: random mixes of those special texts, pieces of them, whitespace, words and stray bytes, long
// enough (> 1 KiB) that text_tokenize does the split itself. Regressions named after issue 22's finding:
// a flood of special tokens tokenizes in linear time and is refused early when it cannot fit a context.
#include <gguf.h>
#include <gtest/gtest.h>
#include <llama.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "baton/model.h"
#include "baton/text.h"
#include "engine/tokenize_oracle.h"
#include "support/test_support.h"

namespace baton {
namespace {

constexpr int32_t k_type_control = 3, k_type_user_defined = 4;  // tokenizer.ggml.token_type values

std::vector<token_id> oracle(const llama_vocab * v, const std::string & s, bool add_special, bool parse_special) {
    return llama_tokenize_all(v, s, add_special, parse_special);
}

struct extra_token {
    std::string text;
    int32_t type;
};

// The special tokens added to a base vocabulary (names only need to be absent from it).
std::vector<extra_token> extra_tokens() {
    return {{"<|im", k_type_user_defined},
            {"im_start|>", k_type_user_defined},
            {"_start", k_type_user_defined},
            {"  ", k_type_user_defined},
            {"   ", k_type_user_defined},
            {"\n\n", k_type_user_defined},
            {"ab", k_type_user_defined},
            {"ba", k_type_user_defined},
            {"aba", k_type_user_defined},
            {"[A]", k_type_user_defined},
            {"[B]", k_type_user_defined},
            {"<a>", k_type_control},
            {"a><", k_type_user_defined},
            {"<mask>", k_type_user_defined},
            {"<tool>", k_type_control},
            {"</tool>", k_type_control},
            {" x", k_type_user_defined},
            {"y ", k_type_user_defined},
            {"\xc3\xa9t\xc3\xa9", k_type_user_defined},
            {"\t", k_type_control},
            {"<|im_start|>user", k_type_control},
            {"x", k_type_control}};
}

// derive_vocab writes a metadata-only GGUF: base's keys with extra tokens appended to the vocabulary (and
// the tokens libllama's "phi3" rule names, when missing), general.name and tokenizer.ggml.pre set.
std::string derive_vocab(const std::string & base, const std::string & name, const std::string & model_name,
                         const std::string & pre) {
    gguf_init_params ip{true, nullptr};
    gguf_context * src = gguf_init_from_file(base.c_str(), ip);
    if (!src) return {};
    gguf_context * dst = gguf_init_empty();
    gguf_set_kv(dst, src);
    const int64_t kt = gguf_find_key(src, "tokenizer.ggml.tokens");
    const int64_t ks = gguf_find_key(src, "tokenizer.ggml.scores");
    const int64_t ky = gguf_find_key(src, "tokenizer.ggml.token_type");
    std::vector<std::string> texts;
    for (size_t i = 0; i < gguf_get_arr_n(src, kt); ++i) texts.push_back(gguf_get_arr_str(src, kt, i));
    std::vector<float> scores(texts.size(), 0.0f);
    if (ks >= 0) std::memcpy(scores.data(), gguf_get_arr_data(src, ks), scores.size() * sizeof(float));
    std::vector<int32_t> types(texts.size(), 1);
    std::memcpy(types.data(), gguf_get_arr_data(src, ky), types.size() * sizeof(int32_t));
    std::vector<extra_token> extra = extra_tokens();
    for (const char * t : {"<unk>", "<s>", "</s>", "<|endoftext|>"}) extra.push_back({t, k_type_control});
    for (const extra_token & e : extra) {
        if (std::find(texts.begin(), texts.end(), e.text) != texts.end()) continue;
        texts.push_back(e.text);
        scores.push_back(0.0f);
        types.push_back(e.type);
    }
    std::vector<const char *> ptrs;
    for (const auto & t : texts) ptrs.push_back(t.c_str());
    gguf_set_arr_str(dst, "tokenizer.ggml.tokens", ptrs.data(), ptrs.size());
    gguf_set_arr_data(dst, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores.data(), scores.size());
    gguf_set_arr_data(dst, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types.data(), types.size());
    gguf_set_val_str(dst, "general.name", model_name.c_str());
    if (!pre.empty()) gguf_set_val_str(dst, "tokenizer.ggml.pre", pre.c_str());
    const std::string path = test::scratch_dir() + "/" + name + ".gguf";
    const bool ok = gguf_write_to_file(dst, path.c_str(), true);
    gguf_free(dst);
    gguf_free(src);
    return ok ? path : std::string();
}

struct vocab_case {
    std::string name;
    std::unique_ptr<loaded_model> model;
    const llama_vocab * vocab() const { return model->vocab(); }
};

// The vocabularies under test (loaded once per process).
const std::vector<vocab_case> & vocab_cases() {
    static const std::vector<vocab_case> cases = [] {
        std::vector<vocab_case> out;
        model_load_params p;
        p.vocab_only = true;
        for (const char * kind : {"spm", "bpe"}) {
            const std::string base = test::test_model_path("llama", 1, 64, 4, "f32", kind);
            const std::string k = kind;
            const std::vector<std::pair<std::string, std::string>> variants = {
                {"", ""}, {"test-extra", ""}, {"phi3-test", ""}, {"test-extra-jina", "jina-v2-de"}};
            for (const auto & [model_name, pre] : variants) {
                std::string path = base, name = k;
                if (!model_name.empty()) {
                    name = k + "-" + model_name;
                    path = derive_vocab(base, name, model_name, pre);
                }
                if (path.empty()) throw std::runtime_error("cannot write vocabulary " + name);
                auto m = loaded_model::load(path, p);
                if (!m.ok()) throw std::runtime_error(name + ": " + m.status().message());
                out.push_back({name, std::move(m.value())});
            }
        }
        return out;
    }();
    return cases;
}

std::vector<std::string> special_texts(const llama_vocab * v) {
    std::vector<std::string> out;
    for (int32_t id = 0; id < llama_vocab_n_tokens(v); ++id)
        if (llama_vocab_get_attr(v, id) &
            (LLAMA_TOKEN_ATTR_CONTROL | LLAMA_TOKEN_ATTR_USER_DEFINED | LLAMA_TOKEN_ATTR_UNKNOWN))
            out.push_back(llama_vocab_get_text(v, id));
    return out;
}

// random_text mixes special texts, their halves, whitespace, words and stray bytes up to min_bytes or more.
std::string random_text(std::mt19937 & rng, const std::vector<std::string> & specials, size_t min_bytes) {
    static const char * const plain[] = {" ", "  ", "\n", "\t", "\r\n", "the", " model",       "a",  "b",  "<",
                                         "|", ">",  "[",  "]",  "_",    "é",   "\xe2\x96\x81", "12", "xy", " y"};
    std::string s;
    while (s.size() < min_bytes) {
        const uint32_t r = rng() % 10;
        const std::string & sp = specials[rng() % specials.size()];
        if (r < 4) s += sp;
        else if (r < 5) s += sp.substr(0, rng() % (sp.size() + 1));
        else if (r < 6) s += sp.substr(rng() % (sp.size() + 1));
        else if (r < 9) s += plain[rng() % std::size(plain)];
        else s += char(rng() % 256);
    }
    return s;
}

std::string shown(const std::string & s) {
    std::string o;
    for (unsigned char c : s.substr(0, 200)) {
        if (c >= 0x20 && c < 0x7f) o += char(c);
        else o += "\\x" + std::string(1, "0123456789abcdef"[c >> 4]) + "0123456789abcdef"[c & 15];
    }
    return o + (s.size() > 200 ? "..." : "");
}

TEST(TextTokenize, DerivedVocabulariesHaveTheSpecialTokensAndStripsUnderTest) {
    // The test vocabularies really hold what the identity test relies on (else it would test less).
    int n_lstrip = 0, n_rstrip = 0, n_user = 0;
    for (const auto & c : vocab_cases()) {
        const llama_vocab * v = c.vocab();
        for (int32_t id = 0; id < llama_vocab_n_tokens(v); ++id) {
            const auto a = llama_vocab_get_attr(v, id);
            n_lstrip += (a & LLAMA_TOKEN_ATTR_LSTRIP) != 0;
            n_rstrip += (a & LLAMA_TOKEN_ATTR_RSTRIP) != 0;
            n_user += (a & LLAMA_TOKEN_ATTR_USER_DEFINED) != 0;
        }
        EXPECT_TRUE(text_tokenize_linear(v)) << c.name << ": the self-check failed, so text_tokenize is libllama's";
    }
    EXPECT_GT(n_lstrip, 0);
    EXPECT_GT(n_rstrip, 10);
    EXPECT_GT(n_user, 20);
}

TEST(TextTokenize, IdenticalToLlamaTokenizeOnRandomTextsOfSpecialTokens) {
    for (const auto & c : vocab_cases()) {
        const llama_vocab * v = c.vocab();
        const std::vector<std::string> specials = special_texts(v);
        ASSERT_FALSE(specials.empty()) << c.name;
        std::mt19937 rng(22);
        // 150 texts of 600-3000 bytes per vocabulary (was 250 of 1100-4100: 51 s under ASan in CI for no
        // case the shorter texts miss: what matters is how specials and plain runs meet, not the length).
        for (int i = 0; i < 150; ++i) {
            const std::string text = random_text(rng, specials, 600 + rng() % 2400);
            for (bool add : {false, true})
                for (bool parse : {false, true}) {
                    const std::vector<token_id> want = oracle(v, text, add, parse);
                    auto got = text_tokenize(v, text, add, parse);
                    ASSERT_TRUE(got.ok()) << got.status().message();
                    ASSERT_EQ(got.value(), want) << c.name << " add_special=" << add << " parse_special=" << parse
                                                 << " text(" << text.size() << ")=" << shown(text);
                    ASSERT_LE(text_tokens_min(v, text, add, parse), want.size())
                        << c.name << ": the lower bound is above the count, text=" << shown(text);
                }
        }
    }
}

TEST(TextTokenize, LowerBoundCountsEverySpecialTokenAndPlainBytes) {
    const llama_vocab * v = vocab_cases()[0].vocab();  // mkmodel's SentencePiece vocabulary
    std::string flood;
    for (int i = 0; i < 1000; ++i) flood += "<|im_start|>a";
    const size_t n = oracle(v, flood, true, true).size();
    const size_t lb = text_tokens_min(v, flood, true, true);
    EXPECT_GE(lb, 2000u);  // 1000 special tokens + 1000 non-empty fragments, + BOS
    EXPECT_LE(lb, n);
    const std::string plain(40000, 'a');
    EXPECT_GT(text_tokens_min(v, plain, false, false), 1000u);  // bytes / the longest token text
    EXPECT_LE(text_tokens_min(v, plain, false, false), oracle(v, plain, false, false).size());
}

TEST(TextTokenize, ContextBoundRefusesOnlyWhatCannotFit) {
    for (const auto & c : vocab_cases()) {
        const llama_vocab * v = c.vocab();
        std::string text;
        for (int i = 0; i < 300; ++i) text += "<|im_start|>user\nhello world<|im_end|>\n";
        const std::vector<token_id> want = oracle(v, text, true, true);
        const uint32_t n = uint32_t(want.size());
        auto fits = text_tokenize(v, text, true, true, n + 1);  // n tokens fit a context of n + 1
        ASSERT_TRUE(fits.ok()) << c.name << ": " << fits.status().message();
        EXPECT_EQ(fits.value(), want);
        auto full = text_tokenize(v, text, true, true, n);  // as the engine: n tokens do not fit n
        ASSERT_FALSE(full.ok()) << c.name;
        EXPECT_EQ(full.status().code(), status_code::context_exceeded);
        EXPECT_NE(full.status().message().find("exceeds the available context size (" + std::to_string(n) + " tokens)"),
                  std::string::npos)
            << full.status().message();
        const Status refused = full.status();
        const auto * over = std::get_if<context_overflow>(&refused.detail());
        ASSERT_NE(over, nullptr) << c.name;
        EXPECT_EQ(over->n_ctx, n);
        EXPECT_GE(over->n_prompt_tokens, n);  // a count the tokenizer reached, at most the whole prompt
        EXPECT_LE(over->n_prompt_tokens, want.size());
        auto small = text_tokenize(v, "short", true, true, 64);
        EXPECT_TRUE(small.ok());
        auto tiny_ctx = text_tokenize(v, text, true, true, 16);
        ASSERT_FALSE(tiny_ctx.ok());
        // Under 1 MiB the count is exact, as llama-server's; over it a lower bound ends the work early.
        EXPECT_EQ(tiny_ctx.status().message(),
                  "request (" + std::to_string(want.size()) +
                      " tokens) exceeds the available context size (16 tokens), try increasing it");
        std::string huge;
        while (huge.size() <= (size_t(1) << 20)) huge += text;
        auto bound = text_tokenize(v, huge, true, true, 16);
        ASSERT_FALSE(bound.ok());
        EXPECT_NE(bound.status().message().find("request (at least "), std::string::npos) << bound.status().message();
    }
}

// Issue 22, finding 4: "<|im_start|>a" x 32,000 took 6.2 s (quadratic in the special tokens) and a 150,000
// message chat never finished. Liveness bounds, generous: the old cost of these texts is minutes.
TEST(TextTokenize, SpecialTokenFloodIsLinearAndRefusedEarlyOverTheContext) {
    for (const auto & c : vocab_cases()) {
        const llama_vocab * v = c.vocab();
        std::string flood;
        for (int i = 0; i < 150000; ++i) flood += "<|im_start|>a";  // 1.95 MB, 300,000 tokens
        const auto t0 = std::chrono::steady_clock::now();
        auto all = text_tokenize(v, flood, true, true);
        const double s_all = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        ASSERT_TRUE(all.ok()) << all.status().message();
        EXPECT_GE(all->size(), 300000u);
        const auto t1 = std::chrono::steady_clock::now();
        auto refused = text_tokenize(v, flood, true, true, 4096);
        const double s_refused = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
        ASSERT_FALSE(refused.ok());
        EXPECT_NE(refused.status().message().find("at least 30"), std::string::npos) << refused.status().message();
        if (!test::k_sanitized) {
            EXPECT_LT(s_all, 20.0) << c.name;
            EXPECT_LT(s_refused, 10.0) << c.name;
        }
    }
}

}  // namespace
}  // namespace baton
