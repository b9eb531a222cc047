// mkmodel_test.cpp — mkmodel's architectures, weight types and vocabularies: every model loads through
// libllama and computes (finite, varying logits, non-constant greedy output), files are deterministic and
// the default f32/spm bytes never change, quantized files hold the types mkmodel.h promises, and the BPE
// vocabulary round-trips bytes and actually merges.
#include <ggml.h>
#include <gguf.h>
#include <gtest/gtest.h>
#include <llama.h>

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include "baton/generate.h"
#include "baton/model.h"
#include "baton/testmodel/mkmodel.h"
#include "baton/text.h"
#include "support/test_support.h"

namespace baton {
namespace {

std::string read_bytes(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::string hex(const std::array<uint8_t, 16> & d) {
    std::string s;
    char b[3];
    for (uint8_t c : d) {
        std::snprintf(b, sizeof b, "%02x", c);
        s += b;
    }
    return s;
}

// write_model writes p to test::scratch_dir()/name.gguf.
std::string write_model(const mkmodel_params & p, const std::string & name) {
    const std::string path = test::scratch_dir() + "/" + name + ".gguf";
    Status st = mkmodel_write(p, path);
    if (!st.ok()) throw std::runtime_error(st.to_string());
    return path;
}

// gguf_file reads a GGUF's metadata and tensor descriptions (no data).
struct gguf_file {
    gguf_context * g = nullptr;
    explicit gguf_file(const std::string & path) {
        gguf_init_params ip{};
        ip.no_alloc = true;
        ip.ctx = nullptr;
        g = gguf_init_from_file(path.c_str(), ip);
    }
    ~gguf_file() {
        if (g) gguf_free(g);
    }
    gguf_file(const gguf_file &) = delete;
    gguf_file & operator=(const gguf_file &) = delete;

    std::map<std::string, ggml_type> tensor_types() const {
        std::map<std::string, ggml_type> m;
        for (int64_t i = 0; i < gguf_get_n_tensors(g); ++i) m[gguf_get_tensor_name(g, i)] = gguf_get_tensor_type(g, i);
        return m;
    }
    std::vector<std::string> strings(const char * key) const {
        std::vector<std::string> v;
        const int64_t k = gguf_find_key(g, key);
        if (k < 0) return v;
        for (size_t i = 0; i < gguf_get_arr_n(g, k); ++i) v.emplace_back(gguf_get_arr_str(g, k, i));
        return v;
    }
    uint32_t u32(const char * key) const {
        const int64_t k = gguf_find_key(g, key);
        return k < 0 ? UINT32_MAX : gguf_get_val_u32(g, k);
    }
};

// A prompt of about 100 tokens, so gemma3's 32-token sliding window is crossed.
std::string long_prompt() {
    std::string s;
    for (int i = 0; i < 12; ++i) s += "the model and the state of the node " + std::to_string(i) + ". ";
    return s;
}

// check_generates: greedy generation from a ~100-token prompt; every step's logits are finite and spread,
// the logits change between steps, and the greedy tokens are not all one token.
void check_generates(const std::string & path, bool expect_recurrent, bool expect_hybrid) {
    auto m = loaded_model::load(path);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    EXPECT_EQ(m.value()->is_recurrent(), expect_recurrent);
    EXPECT_EQ(m.value()->is_hybrid(), expect_hybrid);
    generate_params p;
    p.prompt = long_prompt();
    p.n_predict = 12;
    p.sampling.temperature = 0;
    p.record_logits = true;
    p.ctx.n_ctx = 512;
    auto a = generate_run(*m.value(), p);
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    EXPECT_GT(a->prompt_tokens.size(), 64u);
    ASSERT_GE(a->logits.size(), 2u) << "stopped after " << a->tokens.size() << " tokens";
    for (const auto & step : a->logits) {
        float mn = step[0], mx = step[0];
        for (float v : step) {
            ASSERT_TRUE(std::isfinite(v));
            mn = std::min(mn, v);
            mx = std::max(mx, v);
        }
        EXPECT_GT(mx - mn, 0.1f) << "logits are flat: the model computes nothing";
    }
    EXPECT_NE(a->logits[0], a->logits[1]);
    ASSERT_GE(a->tokens.size(), 2u);
    EXPECT_NE(std::set<token_id>(a->tokens.begin(), a->tokens.end()).size(), 1u) << "greedy output is one token";
}

struct arch_case {
    const char * arch;
    bool recurrent;
    bool hybrid;
};

const arch_case k_archs[] = {{"llama", false, false},   {"mamba2", true, false},  {"granitehybrid", false, true},
                             {"lfm2", false, true},     {"gemma3", false, false}, {"qwen3moe", false, false},
                             {"qwen3next", false, true}};

class MkmodelArch : public ::testing::TestWithParam<std::tuple<arch_case, const char *>> {};

TEST_P(MkmodelArch, LoadsAndGeneratesFiniteVaryingLogits) {
    const auto & [c, wtype] = GetParam();
    check_generates(test::test_model_path(c.arch, 1, 64, 4, wtype), c.recurrent, c.hybrid);
}

INSTANTIATE_TEST_SUITE_P(AllArchsF32AndQ8, MkmodelArch,
                         ::testing::Combine(::testing::ValuesIn(k_archs), ::testing::Values("f32", "q8_0")),
                         [](const auto & info) {
                             return std::string(std::get<0>(info.param).arch) + "_" + std::get<1>(info.param);
                         });

TEST(Mkmodel, ArchListHasTheNewArchitectures) {
    const auto & a = mkmodel_archs();
    for (const char * name : {"llama", "mamba2", "granitehybrid", "lfm2", "gemma3", "qwen3moe", "qwen3next"})
        EXPECT_NE(std::find(a.begin(), a.end(), name), a.end()) << name;
}

// Pinned from the code as it was BEFORE wtype/vocab and the new architectures were added (baton mkmodel
// --arch llama / --arch granitehybrid with default params, hashed with model_fingerprint_file's XXH3-128):
// the default f32/spm files must stay byte-identical, or every cached model and fingerprint changes.
TEST(Mkmodel, DefaultF32SpmBytesAreUnchanged) {
    struct pin {
        const char * arch;
        off_t size;
        const char * xxh3_128;
    };
    for (const pin & p : {pin{"llama", 1065120, "a66ed1581671458b3385beccced54e3e"},
                          pin{"granitehybrid", 1192288, "b18efbc2f1a68b619222f2b33a6f3d69"}}) {
        mkmodel_params mp;
        mp.arch = p.arch;
        const std::string path = write_model(mp, std::string("pinned-") + p.arch);
        struct stat st{};
        ASSERT_EQ(::stat(path.c_str(), &st), 0);
        EXPECT_EQ(st.st_size, p.size) << p.arch;
        auto fp = model_fingerprint_file(path);
        ASSERT_TRUE(fp.ok());
        EXPECT_EQ(hex(fp.value()), p.xxh3_128) << p.arch;
    }
}

TEST(Mkmodel, SameParamsGiveIdenticalBytes) {
    struct variant {
        const char * arch;
        const char * wtype;
        const char * vocab;
        int n_embd = 64;
    };
    for (const variant & v : {variant{"gemma3", "q8_0", "spm"}, variant{"qwen3moe", "q4_K", "bpe"},
                              variant{"qwen3next", "f16", "bpe"}, variant{"llama", "q4_K", "spm", 256}}) {
        mkmodel_params p;
        p.arch = v.arch;
        p.wtype = v.wtype;
        p.vocab = v.vocab;
        p.n_embd = v.n_embd;
        p.n_layer = 2;
        p.seed = 5;
        const std::string tag = std::string(v.arch) + "-" + v.wtype + "-" + v.vocab + "-" + std::to_string(v.n_embd);
        const std::string a = read_bytes(write_model(p, tag + "-a"));
        const std::string b = read_bytes(write_model(p, tag + "-b"));
        ASSERT_GT(a.size(), 1000u);
        EXPECT_TRUE(a == b) << tag;
        p.seed = 6;
        EXPECT_FALSE(read_bytes(write_model(p, tag + "-c")) == a) << tag << ": the seed changes nothing";
    }
}

TEST(Mkmodel, EveryWtypeLoadsWithItsTypesAndFileType) {
    struct want {
        const char * wtype;
        ggml_type matrix;  // what a 64-wide model's weight matrices get (q4_K falls back to q5_0)
        llama_ftype ftype;
    };
    for (const want & w :
         {want{"f32", GGML_TYPE_F32, LLAMA_FTYPE_ALL_F32}, want{"f16", GGML_TYPE_F16, LLAMA_FTYPE_MOSTLY_F16},
          want{"q8_0", GGML_TYPE_Q8_0, LLAMA_FTYPE_MOSTLY_Q8_0},
          want{"q4_K", GGML_TYPE_Q5_0, LLAMA_FTYPE_MOSTLY_Q4_K_M}}) {
        SCOPED_TRACE(w.wtype);
        const std::string path = test::test_model_path("llama", 1, 64, 4, w.wtype);
        {
            gguf_file f(path);
            ASSERT_NE(f.g, nullptr);
            EXPECT_EQ(f.u32("general.file_type"), uint32_t(w.ftype));
            for (const auto & [name, type] : f.tensor_types()) {
                const bool vec = name.find("norm") != std::string::npos;
                EXPECT_EQ(type, vec ? GGML_TYPE_F32 : w.matrix) << name;
            }
        }
        auto m = loaded_model::load(path);
        ASSERT_TRUE(m.ok()) << m.status().to_string();
        EXPECT_EQ(llama_model_ftype(m.value()->get()), w.ftype);
        check_generates(path, false, false);
    }
}

TEST(Mkmodel, Q4KOnA256WideModelUsesRealQ4KBlocks) {
    const std::string path = test::test_model_path("llama", 1, 256, 2, "q4_K");
    std::map<ggml_type, int> count;
    {
        gguf_file f(path);
        ASSERT_NE(f.g, nullptr);
        for (const auto & [name, type] : f.tensor_types()) {
            ++count[type];
            if (name.find("ffn_down") != std::string::npos) {
                EXPECT_EQ(type, GGML_TYPE_Q5_0) << name << " (rows of 704)";
            }
            if (name.find("attn_q.") != std::string::npos) {
                EXPECT_EQ(type, GGML_TYPE_Q4_K) << name;
            }
        }
    }
    EXPECT_GT(count[GGML_TYPE_Q4_K], 0);
    check_generates(path, false, false);
}

TEST(Mkmodel, QuantizedFilesKeepNormsConvsAndRouterF32) {
    for (const char * arch : {"mamba2", "lfm2", "qwen3moe", "qwen3next", "gemma3"}) {
        gguf_file f(test::test_model_path(arch, 1, 64, 4, "q8_0"));
        ASSERT_NE(f.g, nullptr);
        int quantized = 0;
        for (const auto & [name, type] : f.tensor_types()) {
            const bool keep = name.find("norm") != std::string::npos || name.find("conv") != std::string::npos ||
                              name.find("ffn_gate_inp") != std::string::npos ||
                              name.find("ssm_a") != std::string::npos || name.find("ssm_d") != std::string::npos ||
                              name.find(".bias") != std::string::npos;
            if (keep && name.find("shortconv.in_proj") == std::string::npos &&
                name.find("shortconv.out_proj") == std::string::npos) {
                EXPECT_EQ(type, GGML_TYPE_F32) << arch << " " << name;
            }
            if (type == GGML_TYPE_Q8_0) ++quantized;
        }
        EXPECT_GT(quantized, 4) << arch;
    }
}

TEST(Mkmodel, QuantizedExpertStacksAre3D) {
    gguf_file f(test::test_model_path("qwen3moe", 1, 64, 4, "q8_0"));
    ASSERT_NE(f.g, nullptr);
    const auto types = f.tensor_types();
    EXPECT_EQ(types.at("blk.0.ffn_gate_exps.weight"), GGML_TYPE_Q8_0);
    EXPECT_EQ(types.at("blk.0.ffn_down_exps.weight"), GGML_TYPE_Q8_0);
    EXPECT_EQ(types.at("blk.0.ffn_gate_inp.weight"), GGML_TYPE_F32);
}

TEST(Mkmodel, Gemma3HasASlidingWindowAndGlobalLayers) {
    auto m = loaded_model::load(test::test_model_path("gemma3"));
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    EXPECT_EQ(llama_model_n_swa(m.value()->get()), 32);
    gguf_file f(test::test_model_path("gemma3"));
    const int64_t k = gguf_find_key(f.g, "gemma3.attention.sliding_window_pattern");
    ASSERT_GE(k, 0);
    ASSERT_EQ(gguf_get_arr_n(f.g, k), 4u);
    const auto * pat = static_cast<const uint8_t *>(gguf_get_arr_data(f.g, k));
    int swa = 0;
    for (int i = 0; i < 4; ++i) swa += pat[i] != 0 ? 1 : 0;
    EXPECT_GT(swa, 0);
    EXPECT_LT(swa, 4);
}

TEST(Mkmodel, MoeModelsReportTheirExperts) {
    for (const char * arch : {"qwen3moe", "qwen3next"}) {
        auto m = loaded_model::load(test::test_model_path(arch));
        ASSERT_TRUE(m.ok()) << m.status().to_string();
        char buf[32];
        ASSERT_GT(
            llama_model_meta_val_str(m.value()->get(), (std::string(arch) + ".expert_count").c_str(), buf, sizeof buf),
            0);
        EXPECT_STREQ(buf, "8");
        ASSERT_GT(llama_model_meta_val_str(m.value()->get(), (std::string(arch) + ".expert_used_count").c_str(), buf,
                                           sizeof buf),
                  0);
        EXPECT_STREQ(buf, "2");
        EXPECT_EQ(llama_model_n_swa(m.value()->get()), 0);
    }
}

TEST(Mkmodel, Qwen3NextIsAHybrid) {
    auto m = loaded_model::load(test::test_model_path("qwen3next"));
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    EXPECT_TRUE(llama_model_is_hybrid(m.value()->get()));
    EXPECT_FALSE(llama_model_is_recurrent(m.value()->get()));
}

// ---- BPE vocabulary ----

TEST(Mkmodel, BpeVocabularyIsConsistent) {
    gguf_file f(test::test_model_path("llama", 1, 64, 4, "f32", "bpe"));
    ASSERT_NE(f.g, nullptr);
    const int64_t km = gguf_find_key(f.g, "tokenizer.ggml.model");
    const int64_t kp = gguf_find_key(f.g, "tokenizer.ggml.pre");
    ASSERT_GE(km, 0);
    ASSERT_GE(kp, 0);
    EXPECT_STREQ(gguf_get_val_str(f.g, km), "gpt2");
    EXPECT_STREQ(gguf_get_val_str(f.g, kp), "qwen2");
    const auto tokens = f.strings("tokenizer.ggml.tokens");
    const auto merges = f.strings("tokenizer.ggml.merges");
    ASSERT_GT(tokens.size(), 256u + 3u);
    ASSERT_GT(merges.size(), 100u);
    const std::set<std::string> set(tokens.begin(), tokens.end());
    EXPECT_EQ(set.size(), tokens.size()) << "duplicate tokens";
    EXPECT_EQ(tokens[' '], "\xc4\xa0");  // "Ġ", GPT-2's space
    EXPECT_EQ(tokens['A'], "A");
    for (const auto & m : merges) {
        const size_t sp = m.find(' ');
        ASSERT_NE(sp, std::string::npos) << m;
        const std::string a = m.substr(0, sp), b = m.substr(sp + 1);
        EXPECT_TRUE(set.count(a) && set.count(b) && set.count(a + b)) << "merge '" << m << "'";
    }
    const size_t n = tokens.size();
    EXPECT_EQ(tokens[n - 3], "<|endoftext|>");
    EXPECT_EQ(tokens[n - 2], "<|im_start|>");
    EXPECT_EQ(tokens[n - 1], "<|im_end|>");
    EXPECT_EQ(f.u32("tokenizer.ggml.eot_token_id"), n - 1);
    EXPECT_EQ(f.u32("tokenizer.ggml.eos_token_id"), n - 1);
    EXPECT_EQ(f.u32("tokenizer.ggml.bos_token_id"), n - 3);
}

uint64_t splitmix(uint64_t & s) {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// libllama_utf8_view is text as libllama 0.7's BPE pre-tokenizer sees it (measured): a lead byte followed
// by enough continuation bytes is one code point unless it is an overlong form or above U+10FFFF
// (surrogates pass); every other byte, one at a time, becomes U+FFFD. Byte-level BPE round-trips that.
std::string libllama_utf8_view(const std::string & t) {
    std::string out;
    size_t i = 0;
    auto cont = [&](size_t k) {
        if (i + k >= t.size()) return false;
        for (size_t j = 1; j <= k; ++j)
            if ((static_cast<unsigned char>(t[i + j]) & 0xC0) != 0x80) return false;
        return true;
    };
    while (i < t.size()) {
        const unsigned char c = static_cast<unsigned char>(t[i]);
        size_t len = 0;
        if (c < 0x80) len = 1;
        else if ((c & 0xE0) == 0xC0 && cont(1)) len = 2;
        else if ((c & 0xF0) == 0xE0 && cont(2)) len = 3;
        else if ((c & 0xF8) == 0xF0 && cont(3)) len = 4;
        if (len > 1) {
            uint32_t cp = c & (0x7F >> len);
            for (size_t j = 1; j < len; ++j) cp = (cp << 6) | (static_cast<unsigned char>(t[i + j]) & 0x3F);
            const uint32_t min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
            if (cp < min_cp[len] || cp > 0x10FFFF) len = 0;
        }
        if (len == 0) {
            out += "\xEF\xBF\xBD";
            ++i;
        } else {
            out.append(t, i, len);
            i += len;
        }
    }
    return out;
}

TEST(Mkmodel, BpeRoundTripsArbitraryBytes) {
    auto m = loaded_model::load(test::test_model_path("llama", 1, 64, 4, "f32", "bpe"));
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    const llama_vocab * v = m.value()->vocab();
    EXPECT_EQ(llama_vocab_type(v), LLAMA_VOCAB_TYPE_BPE);
    const int32_t n_vocab = llama_vocab_n_tokens(v);
    uint64_t s = 42;
    // Valid UTF-8 (any code point, emoji, CJK, controls, NUL): byte-exact round trip.
    std::vector<std::string> valid = {"Hello world",
                                      "the model and the state",
                                      "  leading spaces",
                                      "emoji \xF0\x9F\x98\x80 and \xE2\x9C\x93",
                                      "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7 family",
                                      "日本語のテキスト",
                                      "tab\tnew\nline\r\n\n\n   \t",
                                      std::string("nul\0byte", 8),
                                      "don't 12345 x+y=z; <tag> <|im_end|>",
                                      ""};
    for (int i = 0; i < 16; ++i) {
        std::string t;
        for (int j = 0; j < 30; ++j) {
            const uint64_t r = splitmix(s);
            uint32_t cp = uint32_t(r % 4 == 0 ? r % 0x80 : r % 0x110000);
            if (cp >= 0xD800 && cp < 0xE000) cp -= 0x1000;
            if (cp < 0x80) t += char(cp);
            else if (cp < 0x800) t += {char(0xC0 | (cp >> 6)), char(0x80 | (cp & 0x3F))};
            else if (cp < 0x10000)
                t += {char(0xE0 | (cp >> 12)), char(0x80 | ((cp >> 6) & 0x3F)), char(0x80 | (cp & 0x3F))};
            else
                t += {char(0xF0 | (cp >> 18)), char(0x80 | ((cp >> 12) & 0x3F)), char(0x80 | ((cp >> 6) & 0x3F)),
                      char(0x80 | (cp & 0x3F))};
        }
        valid.push_back(t);
    }
    for (const auto & t : valid) {
        auto toks = text_tokenize(v, t, true, false);
        ASSERT_TRUE(toks.ok());
        for (token_id id : toks.value()) ASSERT_TRUE(id >= 0 && id < n_vocab);
        EXPECT_EQ(text_detokenize(v, toks.value()), t) << "text: " << testing::PrintToString(t);
    }
    // Invalid UTF-8 and random bytes: libllama 0.7's BPE pre-tokenizer turns every byte that does not start a
    // well-formed sequence into U+FFFD before the vocabulary is consulted, so no vocabulary can give those
    // bytes back; what is checked is everything else round-tripping (libllama_utf8_view) and totality.
    std::vector<std::string> invalid = {"invalid \xFF\xFE bytes \xC3",
                                        "\xC3",
                                        "\xF0\x9F\x98",
                                        "\x80\x80\x80",
                                        "a\xED\xA0\x80"
                                        "b",
                                        "\xC0\xAF",
                                        "\xF8\x88\x80\x80\x80"};
    for (int i = 0; i < 16; ++i) {
        std::string t;
        for (int j = 0; j < 40; ++j) t += char(splitmix(s) & 0xFF);
        invalid.push_back(t);
    }
    for (const auto & t : invalid) {
        auto toks = text_tokenize(v, t, true, false);
        ASSERT_TRUE(toks.ok());
        ASSERT_FALSE(toks->empty());
        for (token_id id : toks.value()) ASSERT_TRUE(id >= 0 && id < n_vocab);
        const std::string back = text_detokenize(v, toks.value());
        EXPECT_TRUE(back == t || back == libllama_utf8_view(t))
            << "text: " << testing::PrintToString(t) << "\nback: " << testing::PrintToString(back);
    }
}

TEST(Mkmodel, BpeTokenizesLongRunsQuickly) {
    // The qwen2 pre-tokenizer has a hand-written splitter in libllama (no std::regex, whose recursion
    // overflows the stack on long matches): long letter, digit and whitespace runs tokenize and round-trip.
    auto m = loaded_model::load(test::test_model_path("llama", 1, 64, 4, "f32", "bpe"));
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    for (const std::string & t : {std::string(200000, 'a'), std::string(200000, ' '), std::string(100000, '7'),
                                  std::string(100000, '\n') + "x", long_prompt() + std::string(50000, '!')}) {
        auto toks = text_tokenize(m.value()->vocab(), t, false, false);
        ASSERT_TRUE(toks.ok());
        EXPECT_EQ(text_detokenize(m.value()->vocab(), toks.value()), t);
    }
}

TEST(Mkmodel, BpeMergesCompressCommonWords) {
    auto m = loaded_model::load(test::test_model_path("llama", 1, 64, 4, "f32", "bpe"));
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    const std::string text = "Hello world, the model and the state of the node";
    auto toks = text_tokenize(m.value()->vocab(), text, true, false);
    ASSERT_TRUE(toks.ok());
    EXPECT_LE(toks->size(), 12u) << "merges do not apply";  // 10 words and a comma: one token each
    EXPECT_LT(toks->size() * 3, text.size());
    // add_bos is false, as Qwen does: no BOS even with add_special.
    EXPECT_FALSE(llama_vocab_get_add_bos(m.value()->vocab()));
    // Control tokens parse as one token only when asked to.
    auto special = text_tokenize(m.value()->vocab(), "<|im_start|>user", false, true);
    ASSERT_TRUE(special.ok());
    ASSERT_GE(special->size(), 2u);
    EXPECT_EQ(text_token_piece(m.value()->vocab(), special->front(), true), "<|im_start|>");
    const int32_t n = llama_vocab_n_tokens(m.value()->vocab());
    EXPECT_TRUE(llama_vocab_is_eog(m.value()->vocab(), n - 1));
    EXPECT_EQ(llama_vocab_eot(m.value()->vocab()), n - 1);
}

TEST(Mkmodel, BpeModelsGenerate) {
    check_generates(test::test_model_path("llama", 1, 64, 4, "f32", "bpe"), false, false);
    check_generates(test::test_model_path("qwen3next", 1, 64, 4, "q8_0", "bpe"), false, true);
}

// ---- validation ----

TEST(Mkmodel, RejectsBadParamsNamingTheField) {
    struct bad {
        mkmodel_params p;
        std::string needle;
    };
    std::vector<bad> cases;
    auto with = [&](auto change, const std::string & needle) {
        mkmodel_params p;
        change(p);
        cases.push_back({p, needle});
    };
    with([](mkmodel_params & p) { p.wtype = "q4_0"; },
         "wtype: unknown weight type 'q4_0' (expected f32, f16, q8_0 or q4_K)");
    with([](mkmodel_params & p) { p.wtype = "Q8_0"; }, "wtype:");
    with([](mkmodel_params & p) { p.vocab = "wordpiece"; },
         "vocab: unknown vocabulary 'wordpiece' (expected spm or bpe)");
    with([](mkmodel_params & p) { p.arch = "gpt2"; }, "arch: unknown architecture 'gpt2'");
    with([](mkmodel_params & p) { p.arch = "gpt2"; }, "gemma3, qwen3moe or qwen3next");
    with(
        [](mkmodel_params & p) {
            p.arch = "qwen3next";
            p.n_layer = 1;
        },
        "at least 2 layers");
    with(
        [](mkmodel_params & p) {
            p.arch = "gemma3";
            p.n_layer = 1;
        },
        "n-layer: gemma3 needs at least 2 layers");
    with([](mkmodel_params & p) { p.rerank = true; }, "rerank: a ranking head is written for qwen3 only");
    for (const auto & c : cases) {
        Status st = mkmodel_check_params(c.p);
        EXPECT_EQ(st.code(), status_code::invalid_argument) << c.needle;
        EXPECT_NE(st.message().find(c.needle), std::string::npos) << "want '" << c.needle << "' in: " << st.message();
        const std::string path = test::scratch_dir() + "/rejected.gguf";
        EXPECT_EQ(mkmodel_write(c.p, path).code(), status_code::invalid_argument);
        struct stat st2{};
        EXPECT_NE(::stat(path.c_str(), &st2), 0) << "a rejected model left a file";
    }
    for (const auto & w : mkmodel_wtypes()) {
        mkmodel_params p;
        p.wtype = w;
        EXPECT_TRUE(mkmodel_check_params(p).ok()) << w;
    }
}

// A reranker: the head's labels are the classifier outputs libllama reports, and its pooling is rank.
TEST(Mkmodel, Qwen3RerankerHasARankingHead) {
    mkmodel_params p;
    p.arch = "qwen3";
    p.rerank = true;
    const std::string path = test::scratch_dir() + "/qwen3-rerank.gguf";
    ASSERT_TRUE(mkmodel_write(p, path).ok());
    gguf_init_params gp = {true, nullptr};
    gguf_context * g = gguf_init_from_file(path.c_str(), gp);
    ASSERT_NE(g, nullptr);
    EXPECT_GE(gguf_find_tensor(g, "cls.output.weight"), 0);
    EXPECT_GE(gguf_find_key(g, "tokenizer.chat_template.rerank"), 0);
    EXPECT_EQ(gguf_get_val_u32(g, gguf_find_key(g, "qwen3.pooling_type")), 4u);
    gguf_free(g);
    auto m = loaded_model::load(path);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    ASSERT_EQ(llama_model_n_cls_out(m.value()->get()), 2u);
    EXPECT_STREQ(llama_model_cls_label(m.value()->get(), 0), "yes");
    EXPECT_STREQ(llama_model_cls_label(m.value()->get(), 1), "no");
}

TEST(Mkmodel, CliTakesWtypeAndVocab) {
    const std::string & d = test::scratch_dir();
    auto r = test::run_process({test::baton_bin(), "mkmodel", "--arch", "qwen3moe", "--wtype", "q8_0", "--vocab", "bpe",
                                "-o", d + "/cli.gguf"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    mkmodel_params p;
    p.arch = "qwen3moe";
    p.wtype = "q8_0";
    p.vocab = "bpe";
    EXPECT_TRUE(read_bytes(d + "/cli.gguf") == read_bytes(write_model(p, "cli-same")));
    r = test::run_process({test::baton_bin(), "mkmodel", "--arch", "llama", "--wtype", "q3", "-o", d + "/x.gguf"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("wtype: unknown weight type 'q3'"), std::string::npos) << r.err;
    r = test::run_process({test::baton_bin(), "mkmodel", "--arch", "llama", "--vocab", "sp", "-o", d + "/x.gguf"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("vocab: unknown vocabulary 'sp'"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace baton
