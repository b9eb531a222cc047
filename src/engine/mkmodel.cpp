// mkmodel.cpp — writes Baton's deterministic GGUF test models through gguf.h.
//
// Layout of a model (ggml `ne` order, inner dimension first; E = n_embd, V = n_vocab, F = n_ff, D = head dim,
// H/Hkv = query/kv heads, X = n_expert, Fx = expert FFN width):
//   token_embd [E,V], output_norm [E] (lfm2: token_embd_norm [E]), output [E,V] (always untied);
//   attention layer: attn_norm, attn_q [E,H*D] (qwen3next: [E,2*H*D], query and gate), attn_k/attn_v
//   [E,Hkv*D], attn_output [H*D,E]; lfm2, gemma3, qwen3moe and qwen3next add attn_q_norm/attn_k_norm [D];
//   gemma3 adds post_attention_norm [E] after attention and post_ffw_norm [E] after the FFN;
//   mamba2 layer: attn_norm, ssm_in, ssm_conv1d (+bias), ssm_dt.bias, ssm_a, ssm_d, ssm_norm, ssm_out;
//   lfm2 conv layer: attn_norm, shortconv.conv [3,E], shortconv.in_proj [E,3E], shortconv.out_proj [E,E];
//   qwen3next gated delta-net layer (Kh key heads, Vh value heads, head size S = 16, K = Kh*S, W = Vh*S):
//   attn_norm, ssm_in [E,2K+2W], ssm_conv1d [4,2K+W], ssm_dt.bias [Vh], ssm_a [Vh], ssm_ba [E,2Vh],
//   ssm_norm [S], ssm_out [W,E]; every qwen3next layer has post_attention_norm [E] before its FFN;
//   dense feed-forward (llama, granitehybrid, lfm2, gemma3): ffn_norm, ffn_gate/ffn_up [E,F], ffn_down [F,E];
//   MoE feed-forward: qwen3moe ffn_norm, and both: ffn_gate_inp [E,X], ffn_gate_exps/ffn_up_exps [E,Fx,X],
//   ffn_down_exps [Fx,E,X]; qwen3next adds the shared expert ffn_gate_inp_shexp [E],
//   ffn_gate_shexp/ffn_up_shexp [E,Fx], ffn_down_shexp [Fx,E].
// Hybrids put attention on every odd layer (1, 3, ...), the recurrent/conv kind on even layers (qwen3next
// through full_attention_interval = 2). gemma3 writes attention.sliding_window = 32 and a per-layer
// attention.sliding_window_pattern: even layers sliding-window, odd layers global (gemma3_layer_is_global).
// Weights are drawn as f32 in file order from one stream, then stored in the tensor's type (mkmodel.h's
// rule); the draws never depend on the type, so an f32 model's bytes are what they always were.
#include "baton/mkmodel.h"

#include <ggml.h>
#include <gguf.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <map>
#include <memory>
#include <sys/stat.h>
#include <unistd.h>

namespace baton {
namespace {

constexpr int k_ssm_state = 16;
constexpr int k_ssm_conv = 4;
constexpr int k_ssm_head_dim = 16;
constexpr int k_lfm2_cache = 3;
constexpr int k_gemma3_swa = 32;  // sliding window, in tokens
constexpr int k_n_expert = 8;
constexpr int k_n_expert_used = 2;
constexpr int k_gdn_head_dim = 16;  // qwen3next delta-net key/value head size
constexpr int k_bpe_max_merges = 1024;

// splitmix64: small, fast, and fully specified, so the bytes never depend on the platform's <random>.
struct rng {
    uint64_t s = 0;
    uint64_t next() {
        uint64_t z = (s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    // uniform in [-1, 1) from the top 24 bits, exactly representable in f32.
    float uniform() { return float(int64_t(next() >> 40) - (1 << 23)) / float(1 << 23); }
};

struct arch_shape {
    int n_embd = 0, n_layer = 0, n_ff = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_vocab = 0;
    int ssm_inner = 0, ssm_heads = 0;
    int n_expert = 0, n_expert_used = 0, n_ff_exp = 0;  // MoE archs
    int gdn_k_heads = 0, gdn_v_heads = 0;               // qwen3next delta-net heads
};

bool is_moe(const std::string & arch) { return arch == "qwen3moe" || arch == "qwen3next"; }
bool is_hybrid_arch(const std::string & arch) {
    return arch == "granitehybrid" || arch == "lfm2" || arch == "qwen3next";
}
// Archs whose attention.head_count_kv is one number (the others write a per-layer array).
bool scalar_head_count_kv(const std::string & arch) {
    return arch == "llama" || arch == "gemma3" || arch == "qwen3moe" || arch == "qwen3next";
}

// gemma3: even layers use the sliding window, odd layers attend globally.
bool gemma3_layer_is_global(int il) { return il % 2 == 1; }

bool layer_is_attention(const std::string & arch, int il) {
    if (arch == "mamba2") return false;
    if (is_hybrid_arch(arch)) return il % 2 == 1;
    return true;
}

// ---- vocabulary ----

struct vocab_entry {
    std::string text;
    float score = 0.0f;
    int32_t type = 1;  // 1 normal, 2 unknown, 3 control, 6 byte
};

struct vocab_data {
    std::vector<vocab_entry> tokens;
    std::vector<std::string> merges;  // bpe only: "left right", in rank order
};

// The words both vocabularies are built from (SentencePiece pieces; the BPE merge list's training set).
const char * const k_words[] = {
    "the",   "and",   "to",    "of",     "a",     "in",    "is",     "it",      "you",  "that",      "he",
    "was",   "for",   "on",    "are",    "with",  "as",    "I",      "his",     "they", "be",        "at",
    "one",   "have",  "this",  "from",   "or",    "had",   "by",     "word",    "but",  "what",      "some",
    "we",    "can",   "out",   "other",  "were",  "all",   "there",  "when",    "up",   "use",       "your",
    "how",   "said",  "an",    "each",   "she",   "which", "do",     "their",   "time", "if",        "will",
    "way",   "about", "many",  "then",   "them",  "write", "would",  "like",    "so",   "these",     "her",
    "long",  "make",  "thing", "see",    "him",   "two",   "has",    "look",    "more", "day",       "could",
    "go",    "come",  "did",   "number", "sound", "no",    "most",   "people",  "my",   "over",      "know",
    "water", "than",  "call",  "first",  "who",   "may",   "down",   "side",    "been", "now",       "find",
    "Hello", "world", "model", "token",  "state", "node",  "decode", "prefill", "user", "assistant", "system"};

// SentencePiece style with byte fallback.
vocab_data build_spm_vocab() {
    vocab_data vd;
    auto & v = vd.tokens;
    v.push_back({"<unk>", 0.0f, 2});
    v.push_back({"<s>", 0.0f, 3});
    v.push_back({"</s>", 0.0f, 3});
    v.push_back({"<|im_start|>", 0.0f, 3});
    v.push_back({"<|im_end|>", 0.0f, 3});
    for (int b = 0; b < 256; ++b) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "<0x%02X>", b);
        v.push_back({buf, 0.0f, 6});
    }
    const std::string sp = "\xe2\x96\x81";  // U+2581, SentencePiece's space marker
    static const char * pieces[] = {"th", "he", "in", "er", "an", "re", "on", "at", "en", "nd", "ti", "es",
                                    "or", "te", "of", "ed", "is", "it", "al", "ar", "st", "to", "nt", "ng",
                                    "se", "ha", "as", "ou", "io", "le", "ve", "co", "me", "de", "hi", "ri",
                                    "ro", "ic", "ne", "ea", "ra", "ce", "ing", "ion", "ent", "tion", "ed"};
    float score = -1.0f;
    for (const char * w : k_words) v.push_back({sp + w, score -= 0.01f, 1});
    for (const char * p : pieces) {
        bool dup = false;
        for (const auto & e : v) dup = dup || e.text == p;
        if (!dup) v.push_back({p, score -= 0.01f, 1});
    }
    v.push_back({sp, score -= 0.01f, 1});
    for (int c = 33; c < 127; ++c) v.push_back({std::string(1, char(c)), score -= 0.01f, 1});
    return vd;
}

std::string utf8_encode(uint32_t cp) {
    std::string s;
    if (cp < 0x80) {
        s += char(cp);
    } else if (cp < 0x800) {
        s += char(0xC0 | (cp >> 6));
        s += char(0x80 | (cp & 0x3F));
    } else {
        s += char(0xE0 | (cp >> 12));
        s += char(0x80 | ((cp >> 6) & 0x3F));
        s += char(0x80 | (cp & 0x3F));
    }
    return s;
}

// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the other 68 bytes (controls,
// space, DEL, NBSP, soft hyphen...) map to U+0100.. in byte order. So a space is "Ġ" (U+0120).
std::array<std::string, 256> gpt2_byte_symbols() {
    std::array<std::string, 256> out;
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
        const bool self = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
        out[b] = utf8_encode(self ? b : next++);
    }
    return out;
}

// Byte-level BPE. The merge list is learned, deterministically, from k_words (each word with a leading
// space, weight 2, and bare, weight 1): repeatedly merge the most frequent adjacent pair (ties: the pair of
// smallest token ids) until every word is one token or k_bpe_max_merges. A merge's parts are existing tokens
// and its result is added as a token, so the list is consistent by construction, and libllama's BPE, which
// applies merges by rank, turns those words back into single tokens.
vocab_data build_bpe_vocab() {
    vocab_data vd;
    const auto sym = gpt2_byte_symbols();
    std::map<std::string, int32_t> id_of;
    for (int b = 0; b < 256; ++b) {
        vd.tokens.push_back({sym[b], 0.0f, 1});
        id_of[sym[b]] = b;
    }
    struct word {
        std::vector<int32_t> ids;
        int weight = 0;
    };
    std::vector<word> corpus;
    for (const char * w : k_words) {
        for (int spaced = 1; spaced >= 0; --spaced) {
            word cw;
            cw.weight = spaced ? 2 : 1;
            if (spaced) cw.ids.push_back(' ');
            for (const char * c = w; *c; ++c) cw.ids.push_back(static_cast<unsigned char>(*c));
            corpus.push_back(std::move(cw));
        }
    }
    for (int m = 0; m < k_bpe_max_merges; ++m) {
        std::map<std::pair<int32_t, int32_t>, int> counts;
        for (const auto & w : corpus)
            for (size_t i = 0; i + 1 < w.ids.size(); ++i) counts[{w.ids[i], w.ids[i + 1]}] += w.weight;
        if (counts.empty()) break;
        auto best = counts.begin();
        for (auto it = counts.begin(); it != counts.end(); ++it)
            if (it->second > best->second) best = it;
        const auto [a, b] = best->first;
        const std::string merged = vd.tokens[size_t(a)].text + vd.tokens[size_t(b)].text;
        auto found = id_of.find(merged);
        int32_t id = 0;
        if (found != id_of.end()) {
            id = found->second;
        } else {
            id = int32_t(vd.tokens.size());
            vd.tokens.push_back({merged, 0.0f, 1});
            id_of[merged] = id;
        }
        vd.merges.push_back(vd.tokens[size_t(a)].text + " " + vd.tokens[size_t(b)].text);
        for (auto & w : corpus) {
            std::vector<int32_t> out;
            for (size_t i = 0; i < w.ids.size(); ++i) {
                if (i + 1 < w.ids.size() && w.ids[i] == a && w.ids[i + 1] == b) {
                    out.push_back(id);
                    ++i;
                } else {
                    out.push_back(w.ids[i]);
                }
            }
            w.ids = std::move(out);
        }
    }
    vd.tokens.push_back({"<|endoftext|>", 0.0f, 3});
    vd.tokens.push_back({"<|im_start|>", 0.0f, 3});
    vd.tokens.push_back({"<|im_end|>", 0.0f, 3});
    return vd;
}

const char * k_chat_template =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

// ---- tensors ----

ggml_type wtype_of(const std::string & w) {
    if (w == "f16") return GGML_TYPE_F16;
    if (w == "q8_0") return GGML_TYPE_Q8_0;
    if (w == "q4_K") return GGML_TYPE_Q4_K;
    return GGML_TYPE_F32;
}

uint32_t ftype_of(const std::string & w) {
    if (w == "f16") return 1;    // LLAMA_FTYPE_MOSTLY_F16
    if (w == "q8_0") return 7;   // LLAMA_FTYPE_MOSTLY_Q8_0
    if (w == "q4_K") return 15;  // LLAMA_FTYPE_MOSTLY_Q4_K_M
    return 0;                    // LLAMA_FTYPE_ALL_F32
}

bool ends_with(const std::string & s, const char * suffix) {
    const size_t n = std::strlen(suffix);
    return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// quantizable: a weight matrix (2-D or 3-D, more than one row) that llama-quantize would convert.
bool quantizable(const std::string & name, const std::vector<int64_t> & ne) {
    if (ne.size() < 2 || ne[1] <= 1 || !ends_with(name, ".weight")) return false;
    if (ends_with(name, "_norm.weight")) return false;
    for (const char * keep : {"ssm_conv1d", "shortconv.conv.", "ffn_gate_inp"})
        if (name.find(keep) != std::string::npos) return false;
    return true;
}

// fitting_type applies mkmodel.h's fallback rule for a row of ne0 elements.
ggml_type fitting_type(ggml_type want, int64_t ne0) {
    if (ggml_quantize_requires_imatrix(want)) return GGML_TYPE_F16;  // none of mkmodel's types; no imatrix here
    if (ne0 % ggml_blck_size(want) == 0) return want;
    if (want == GGML_TYPE_Q4_K && ne0 % ggml_blck_size(GGML_TYPE_Q5_0) == 0) return GGML_TYPE_Q5_0;
    return GGML_TYPE_F16;
}

struct tensor_maker {
    ggml_context * ctx = nullptr;
    gguf_context * gctx = nullptr;
    rng r{};
    ggml_type wtype = GGML_TYPE_F32;
    std::deque<std::vector<uint8_t>> data;  // tensor bytes, alive until the file is written
    std::vector<float> f;                   // scratch: the f32 values of the current tensor

    // fill: 'w' random in [-scale, scale), 'o' ones, 'z' zeros, 'a' negative (ssm_a), 'd' dt bias
    void add(const std::string & name, std::vector<int64_t> ne, char fill, float scale = 0.0f) {
        int64_t n = 1;
        for (int64_t d : ne) n *= d;
        f.resize(size_t(n));
        for (int64_t i = 0; i < n; ++i) {
            switch (fill) {
                case 'o': f[i] = 1.0f; break;
                case 'z': f[i] = 0.0f; break;
                case 'a': f[i] = -(0.5f + 0.5f * (r.uniform() + 1.0f)); break;  // [-1.5, -0.5)
                case 'd': f[i] = -2.0f + r.uniform(); break;                    // [-3, -1)
                default: f[i] = scale * r.uniform(); break;
            }
        }
        const ggml_type type =
            wtype != GGML_TYPE_F32 && quantizable(name, ne) ? fitting_type(wtype, ne[0]) : GGML_TYPE_F32;
        ggml_tensor * t = ggml_new_tensor(ctx, type, int(ne.size()), ne.data());
        ggml_set_name(t, name.c_str());
        const int64_t nrows = n / ne[0];
        auto & bytes = data.emplace_back(size_t(nrows) * ggml_row_size(type, ne[0]));
        if (type == GGML_TYPE_F32) {
            std::memcpy(bytes.data(), f.data(), bytes.size());
        } else if (type == GGML_TYPE_F16) {
            ggml_fp32_to_fp16_row(f.data(), reinterpret_cast<ggml_fp16_t *>(bytes.data()), n);
        } else {
            ggml_quantize_chunk(type, f.data(), bytes.data(), 0, nrows, ne[0], nullptr);
        }
        gguf_add_tensor(gctx, t);
        gguf_set_tensor_data(gctx, name.c_str(), bytes.data());
    }
};

void add_attention(tensor_maker & tm, const std::string & arch, const std::string & p, const arch_shape & s) {
    const int64_t E = s.n_embd, D = s.head_dim;
    const float sc = 1.0f / std::sqrt(float(E));
    const int64_t q_rows = arch == "qwen3next" ? 2 * s.n_head * D : s.n_head * D;  // qwen3next: query + gate
    tm.add(p + "attn_q.weight", {E, q_rows}, 'w', sc);
    tm.add(p + "attn_k.weight", {E, s.n_head_kv * D}, 'w', sc);
    tm.add(p + "attn_v.weight", {E, s.n_head_kv * D}, 'w', sc);
    tm.add(p + "attn_output.weight", {s.n_head * D, E}, 'w', sc);
    if (arch != "llama" && arch != "granitehybrid") {
        tm.add(p + "attn_q_norm.weight", {D}, 'o');
        tm.add(p + "attn_k_norm.weight", {D}, 'o');
    }
    if (arch == "gemma3") tm.add(p + "post_attention_norm.weight", {E}, 'o');
}

void add_mamba2(tensor_maker & tm, const std::string & p, const arch_shape & s) {
    const int64_t E = s.n_embd, DI = s.ssm_inner, NH = s.ssm_heads, S = k_ssm_state;
    const float sc = 1.0f / std::sqrt(float(E));
    tm.add(p + "ssm_in.weight", {E, 2 * DI + 2 * S + NH}, 'w', sc);
    tm.add(p + "ssm_conv1d.weight", {k_ssm_conv, DI + 2 * S}, 'w', 0.5f);
    tm.add(p + "ssm_conv1d.bias", {DI + 2 * S}, 'w', 0.1f);
    tm.add(p + "ssm_dt.bias", {NH}, 'd');
    tm.add(p + "ssm_a", {1, NH}, 'a');
    tm.add(p + "ssm_d", {1, NH}, 'o');
    tm.add(p + "ssm_norm.weight", {DI, 1}, 'o');
    tm.add(p + "ssm_out.weight", {DI, E}, 'w', 1.0f / std::sqrt(float(DI)));
}

void add_shortconv(tensor_maker & tm, const std::string & p, const arch_shape & s) {
    const int64_t E = s.n_embd;
    const float sc = 1.0f / std::sqrt(float(E));
    tm.add(p + "shortconv.conv.weight", {k_lfm2_cache, E}, 'w', 0.5f);
    tm.add(p + "shortconv.in_proj.weight", {E, 3 * E}, 'w', sc);
    tm.add(p + "shortconv.out_proj.weight", {E, E}, 'w', sc);
}

// qwen3next's gated delta-net ("linear attention") layer, in the ssm_in (fused q/k/v/z) form.
void add_delta_net(tensor_maker & tm, const std::string & p, const arch_shape & s) {
    const int64_t E = s.n_embd, S = k_gdn_head_dim;
    const int64_t K = s.gdn_k_heads * S, W = s.gdn_v_heads * S, VH = s.gdn_v_heads;
    const float sc = 1.0f / std::sqrt(float(E));
    tm.add(p + "ssm_in.weight", {E, 2 * K + 2 * W}, 'w', sc);
    tm.add(p + "ssm_conv1d.weight", {k_ssm_conv, 2 * K + W}, 'w', 0.5f);
    tm.add(p + "ssm_dt.bias", {VH}, 'd');
    tm.add(p + "ssm_a", {VH}, 'a');
    tm.add(p + "ssm_ba.weight", {E, 2 * VH}, 'w', sc);
    tm.add(p + "ssm_norm.weight", {S}, 'o');
    tm.add(p + "ssm_out.weight", {W, E}, 'w', 1.0f / std::sqrt(float(W)));
}

void add_ffn(tensor_maker & tm, const std::string & arch, const std::string & p, const arch_shape & s) {
    const int64_t E = s.n_embd, F = s.n_ff;
    tm.add(p + "ffn_norm.weight", {E}, 'o');
    tm.add(p + "ffn_gate.weight", {E, F}, 'w', 1.0f / std::sqrt(float(E)));
    tm.add(p + "ffn_up.weight", {E, F}, 'w', 1.0f / std::sqrt(float(E)));
    tm.add(p + "ffn_down.weight", {F, E}, 'w', 1.0f / std::sqrt(float(F)));
    if (arch == "gemma3") tm.add(p + "post_ffw_norm.weight", {E}, 'o');
}

void add_moe(tensor_maker & tm, const std::string & arch, const std::string & p, const arch_shape & s) {
    const int64_t E = s.n_embd, FX = s.n_ff_exp, X = s.n_expert;
    const float se = 1.0f / std::sqrt(float(E)), sf = 1.0f / std::sqrt(float(FX));
    if (arch == "qwen3next") tm.add(p + "post_attention_norm.weight", {E}, 'o');
    else tm.add(p + "ffn_norm.weight", {E}, 'o');
    tm.add(p + "ffn_gate_inp.weight", {E, X}, 'w', 1.0f);
    tm.add(p + "ffn_gate_exps.weight", {E, FX, X}, 'w', se);
    tm.add(p + "ffn_up_exps.weight", {E, FX, X}, 'w', se);
    tm.add(p + "ffn_down_exps.weight", {FX, E, X}, 'w', sf);
    if (arch == "qwen3next") {
        tm.add(p + "ffn_gate_inp_shexp.weight", {E}, 'w', se);
        tm.add(p + "ffn_gate_shexp.weight", {E, FX}, 'w', se);
        tm.add(p + "ffn_up_shexp.weight", {E, FX}, 'w', se);
        tm.add(p + "ffn_down_shexp.weight", {FX, E}, 'w', sf);
    }
}

void set_hparams(gguf_context * g, const mkmodel_params & mp, const arch_shape & s) {
    const std::string a = mp.arch;
    auto key = [&](const char * k) { return a + "." + k; };
    gguf_set_val_u32(g, key("context_length").c_str(), uint32_t(mp.n_ctx));
    gguf_set_val_u32(g, key("embedding_length").c_str(), uint32_t(s.n_embd));
    gguf_set_val_u32(g, key("block_count").c_str(), uint32_t(s.n_layer));
    gguf_set_val_u32(g, key("vocab_size").c_str(), uint32_t(s.n_vocab));
    gguf_set_val_f32(g, key("attention.layer_norm_rms_epsilon").c_str(), 1e-5f);
    if (a != "mamba2") {
        gguf_set_val_u32(g, key("feed_forward_length").c_str(), uint32_t(s.n_ff));
        gguf_set_val_u32(g, key("attention.head_count").c_str(), uint32_t(s.n_head));
        gguf_set_val_u32(g, key("rope.dimension_count").c_str(), uint32_t(s.head_dim));
        gguf_set_val_f32(g, key("rope.freq_base").c_str(), 10000.0f);
    }
    if (scalar_head_count_kv(a)) {
        gguf_set_val_u32(g, key("attention.head_count_kv").c_str(), uint32_t(s.n_head_kv));
    } else if (a != "mamba2") {
        std::vector<int32_t> kv(s.n_layer);
        for (int il = 0; il < s.n_layer; ++il) kv[il] = layer_is_attention(a, il) ? s.n_head_kv : 0;
        gguf_set_arr_data(g, key("attention.head_count_kv").c_str(), GGUF_TYPE_INT32, kv.data(), kv.size());
    }
    if (a == "mamba2" || a == "granitehybrid") {
        gguf_set_val_u32(g, key("ssm.conv_kernel").c_str(), k_ssm_conv);
        gguf_set_val_u32(g, key("ssm.inner_size").c_str(), uint32_t(s.ssm_inner));
        gguf_set_val_u32(g, key("ssm.state_size").c_str(), k_ssm_state);
        gguf_set_val_u32(g, key("ssm.time_step_rank").c_str(), uint32_t(s.ssm_heads));
        gguf_set_val_u32(g, key("ssm.group_count").c_str(), 1);
    }
    if (a == "lfm2") gguf_set_val_u32(g, key("shortconv.l_cache").c_str(), k_lfm2_cache);
    if (a == "gemma3") {
        gguf_set_val_u32(g, key("attention.sliding_window").c_str(), k_gemma3_swa);
        // Per-layer SWA flags (libllama's default pattern, 5 SWA : 1 global, would make a 4-layer model all SWA).
        std::vector<uint8_t> pat(size_t(s.n_layer));
        for (int il = 0; il < s.n_layer; ++il) pat[size_t(il)] = !gemma3_layer_is_global(il);
        gguf_set_arr_data(g, key("attention.sliding_window_pattern").c_str(), GGUF_TYPE_BOOL, pat.data(), pat.size());
    }
    if (is_moe(a)) {
        gguf_set_val_u32(g, key("expert_count").c_str(), uint32_t(s.n_expert));
        gguf_set_val_u32(g, key("expert_used_count").c_str(), uint32_t(s.n_expert_used));
        gguf_set_val_u32(g, key("expert_feed_forward_length").c_str(), uint32_t(s.n_ff_exp));
    }
    if (a == "qwen3next") {
        gguf_set_val_u32(g, key("expert_shared_feed_forward_length").c_str(), uint32_t(s.n_ff_exp));
        gguf_set_val_u32(g, key("ssm.conv_kernel").c_str(), k_ssm_conv);
        gguf_set_val_u32(g, key("ssm.inner_size").c_str(), uint32_t(s.gdn_v_heads * k_gdn_head_dim));
        gguf_set_val_u32(g, key("ssm.state_size").c_str(), k_gdn_head_dim);
        gguf_set_val_u32(g, key("ssm.time_step_rank").c_str(), uint32_t(s.gdn_v_heads));
        gguf_set_val_u32(g, key("ssm.group_count").c_str(), uint32_t(s.gdn_k_heads));
        gguf_set_val_u32(g, key("full_attention_interval").c_str(), 2);
    }
}

void set_tokens(gguf_context * g, const vocab_data & vd, bool with_scores) {
    std::vector<const char *> texts;
    std::vector<float> scores;
    std::vector<int32_t> types;
    for (const auto & e : vd.tokens) {
        texts.push_back(e.text.c_str());
        scores.push_back(e.score);
        types.push_back(e.type);
    }
    gguf_set_arr_str(g, "tokenizer.ggml.tokens", texts.data(), texts.size());
    if (with_scores) gguf_set_arr_data(g, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores.data(), scores.size());
    gguf_set_arr_data(g, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types.data(), types.size());
}

void set_spm_vocab(gguf_context * g, const vocab_data & vd, bool chat_template) {
    gguf_set_val_str(g, "tokenizer.ggml.model", "llama");
    set_tokens(g, vd, true);
    gguf_set_val_u32(g, "tokenizer.ggml.unknown_token_id", 0);
    gguf_set_val_u32(g, "tokenizer.ggml.bos_token_id", 1);
    gguf_set_val_u32(g, "tokenizer.ggml.eos_token_id", 2);
    gguf_set_val_u32(g, "tokenizer.ggml.eot_token_id", 4);
    gguf_set_val_bool(g, "tokenizer.ggml.add_bos_token", true);
    gguf_set_val_bool(g, "tokenizer.ggml.add_eos_token", false);
    // No SentencePiece space prefix: detokenize(tokenize(text)) == text byte for byte.
    gguf_set_val_bool(g, "tokenizer.ggml.add_space_prefix", false);
    if (chat_template) gguf_set_val_str(g, "tokenizer.chat_template", k_chat_template);
}

void set_bpe_vocab(gguf_context * g, const vocab_data & vd, bool chat_template) {
    const uint32_t n = uint32_t(vd.tokens.size());  // ..., <|endoftext|>, <|im_start|>, <|im_end|>
    gguf_set_val_str(g, "tokenizer.ggml.model", "gpt2");
    // qwen2: the GPT-2/Llama-3 style regex (contractions, letter runs with one leading non-letter, single
    // digits, punctuation runs, newline and whitespace runs), no space cleanup on decode.
    gguf_set_val_str(g, "tokenizer.ggml.pre", "qwen2");
    set_tokens(g, vd, false);
    std::vector<const char *> merges;
    for (const auto & m : vd.merges) merges.push_back(m.c_str());
    gguf_set_arr_str(g, "tokenizer.ggml.merges", merges.data(), merges.size());
    gguf_set_val_u32(g, "tokenizer.ggml.bos_token_id", n - 3);
    gguf_set_val_u32(g, "tokenizer.ggml.eos_token_id", n - 1);
    gguf_set_val_u32(g, "tokenizer.ggml.eot_token_id", n - 1);
    gguf_set_val_u32(g, "tokenizer.ggml.padding_token_id", n - 3);
    gguf_set_val_bool(g, "tokenizer.ggml.add_bos_token", false);
    gguf_set_val_bool(g, "tokenizer.ggml.add_eos_token", false);
    if (chat_template) gguf_set_val_str(g, "tokenizer.chat_template", k_chat_template);
}

arch_shape shape_of(const mkmodel_params & p, int n_vocab) {
    arch_shape s{};
    s.n_embd = p.n_embd;
    s.n_layer = p.n_layer;
    s.n_vocab = n_vocab;
    s.head_dim = p.n_embd >= 256 ? 64 : 16;
    s.n_head = p.n_embd / s.head_dim;
    s.n_head_kv = s.n_head >= 2 ? s.n_head / 2 : 1;
    s.n_ff = ((p.n_embd * 8 / 3) + 31) / 32 * 32;
    s.ssm_inner = 2 * p.n_embd;
    s.ssm_heads = s.ssm_inner / k_ssm_head_dim;
    if (is_moe(p.arch)) {
        s.n_expert = k_n_expert;
        s.n_expert_used = k_n_expert_used;
        s.n_ff_exp = p.n_embd;
    }
    if (p.arch == "qwen3next") {
        s.gdn_k_heads = std::max(1, p.n_embd / 32);
        s.gdn_v_heads = 2 * s.gdn_k_heads;
    }
    return s;
}

bool one_of(const std::string & v, const std::vector<std::string> & allowed) {
    return std::find(allowed.begin(), allowed.end(), v) != allowed.end();
}

std::string list_of(const std::vector<std::string> & v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i == 0 ? "" : i + 1 == v.size() ? " or " : ", ") + v[i];
    return s;
}

}  // namespace

const std::vector<std::string> & mkmodel_archs() {
    static const std::vector<std::string> archs = {"llama",  "mamba2",   "granitehybrid", "lfm2",
                                                   "gemma3", "qwen3moe", "qwen3next"};
    return archs;
}

const std::vector<std::string> & mkmodel_wtypes() {
    static const std::vector<std::string> w = {"f32", "f16", "q8_0", "q4_K"};
    return w;
}

const std::vector<std::string> & mkmodel_vocabs() {
    static const std::vector<std::string> v = {"spm", "bpe"};
    return v;
}

Status mkmodel_check_params(const mkmodel_params & p) {
    if (!one_of(p.arch, mkmodel_archs()))
        return {status_code::invalid_argument,
                "arch: unknown architecture '" + p.arch + "' (expected " + list_of(mkmodel_archs()) + ")"};
    if (!one_of(p.wtype, mkmodel_wtypes()))
        return {status_code::invalid_argument,
                "wtype: unknown weight type '" + p.wtype + "' (expected " + list_of(mkmodel_wtypes()) + ")"};
    if (!one_of(p.vocab, mkmodel_vocabs()))
        return {status_code::invalid_argument,
                "vocab: unknown vocabulary '" + p.vocab + "' (expected " + list_of(mkmodel_vocabs()) + ")"};
    if (p.n_embd < 32 || p.n_embd > 8192 || p.n_embd % 32 != 0)
        return {status_code::invalid_argument,
                "n-embd: " + std::to_string(p.n_embd) + " is not a multiple of 32 in 32..8192"};
    if (p.n_layer < 1 || p.n_layer > 256)
        return {status_code::invalid_argument, "n-layer: " + std::to_string(p.n_layer) + " is not in 1..256"};
    if (is_hybrid_arch(p.arch) && p.n_layer < 2)
        return {status_code::invalid_argument, "n-layer: hybrid architecture '" + p.arch + "' needs at least 2 layers"};
    if (p.arch == "gemma3" && p.n_layer < 2)
        return {status_code::invalid_argument,
                "n-layer: gemma3 needs at least 2 layers (a sliding-window and a global one)"};
    if (p.n_ctx < 16 || p.n_ctx > (1 << 20))
        return {status_code::invalid_argument, "n-ctx: " + std::to_string(p.n_ctx) + " is not in 16..1048576"};
    return {};
}

Status mkmodel_ensure(const mkmodel_params & params, const std::string & path) {
    struct stat st;
    if (::stat(path.c_str(), &st) == 0) return {};
    return mkmodel_write(params, path);
}

Status mkmodel_write(const mkmodel_params & mp, const std::string & path) {
    BATON_RETURN_IF_ERROR(mkmodel_check_params(mp));
    const vocab_data vocab = mp.vocab == "bpe" ? build_bpe_vocab() : build_spm_vocab();
    const arch_shape s = shape_of(mp, int(vocab.tokens.size()));

    // Open the temporary file first so an unwritable path fails before any work, with the OS reason.
    const std::string tmp = path + ".tmp." + std::to_string(::getpid());
    int fd = ::open(tmp.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) return {status_code::io_error, "cannot write '" + path + "': " + std::strerror(errno)};
    ::close(fd);

    // The ggml context holds only tensor descriptions (at most 32 per layer plus the 4 global ones); the
    // data lives in tensor_maker::data, exactly as large as each tensor's type needs.
    ggml_init_params ip = {size_t(s.n_layer * 32 + 8) * ggml_tensor_overhead(), nullptr, true};
    std::unique_ptr<ggml_context, decltype(&ggml_free)> ctx(ggml_init(ip), ggml_free);
    std::unique_ptr<gguf_context, decltype(&gguf_free)> g(gguf_init_empty(), gguf_free);
    if (!ctx || !g) {
        ::unlink(tmp.c_str());
        return {status_code::internal, "mkmodel: out of memory for the model tensors"};
    }
    gguf_set_val_str(g.get(), "general.architecture", mp.arch.c_str());
    gguf_set_val_str(g.get(), "general.name", ("baton-test-" + mp.arch).c_str());
    gguf_set_val_u32(g.get(), "general.file_type", ftype_of(mp.wtype));
    set_hparams(g.get(), mp, s);
    if (mp.vocab == "bpe") set_bpe_vocab(g.get(), vocab, mp.chat_template);
    else set_spm_vocab(g.get(), vocab, mp.chat_template);

    tensor_maker tm;
    tm.ctx = ctx.get();
    tm.gctx = g.get();
    tm.r = rng{mp.seed};
    tm.wtype = wtype_of(mp.wtype);
    const int64_t E = s.n_embd, V = s.n_vocab;
    // gemma3 scales the embeddings by sqrt(E) on input: draw them 1/sqrt(E) as large so the residual
    // stream does not drown the layers' outputs.
    tm.add("token_embd.weight", {E, V}, 'w', mp.arch == "gemma3" ? 1.0f / std::sqrt(float(E)) : 1.0f);
    for (int il = 0; il < s.n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        tm.add(p + "attn_norm.weight", {E}, 'o');
        if (layer_is_attention(mp.arch, il)) add_attention(tm, mp.arch, p, s);
        else if (mp.arch == "lfm2") add_shortconv(tm, p, s);
        else if (mp.arch == "qwen3next") add_delta_net(tm, p, s);
        else add_mamba2(tm, p, s);
        if (is_moe(mp.arch)) add_moe(tm, mp.arch, p, s);
        else if (mp.arch != "mamba2") add_ffn(tm, mp.arch, p, s);
    }
    // lfm2 names its final norm token_embd_norm; an untied output matrix keeps the random model from
    // echoing its input token (with tied embeddings the residual stream predicts itself).
    tm.add(mp.arch == "lfm2" ? "token_embd_norm.weight" : "output_norm.weight", {E}, 'o');
    tm.add("output.weight", {E, V}, 'w', 4.0f / std::sqrt(float(E)));

    if (!gguf_write_to_file(g.get(), tmp.c_str(), false)) {
        ::unlink(tmp.c_str());
        return {status_code::io_error, "cannot write '" + path + "': writing the GGUF data failed"};
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        const int e = errno;
        ::unlink(tmp.c_str());
        return {status_code::io_error, "cannot write '" + path + "': " + std::strerror(e)};
    }
    return {};
}

}  // namespace baton
