// mkmodel.cpp — writes Baton's deterministic GGUF test models through gguf.h.
//
// Layout of a model (ggml `ne` order, inner dimension first; E = n_embd, V = n_vocab, F = n_ff):
//   token_embd [E,V], output_norm [E] (lfm2: token_embd_norm [E]), output [E,V];
//   attention layer: attn_norm, attn_q [E,H*D], attn_k/attn_v [E,Hkv*D], attn_output [H*D,E]
//   (lfm2 adds attn_q_norm/attn_k_norm [D]);
//   mamba2 layer: attn_norm, ssm_in, ssm_conv1d (+bias), ssm_dt.bias, ssm_a, ssm_d, ssm_norm, ssm_out;
//   lfm2 conv layer: attn_norm, shortconv.conv [3,E], shortconv.in_proj [E,3E], shortconv.out_proj [E,E];
//   feed-forward (all but mamba2): ffn_norm, ffn_gate/ffn_up [E,F], ffn_down [F,E].
// Hybrids put attention on every odd layer (1, 3, ...), the recurrent/conv kind on even layers.
#include "baton/mkmodel.h"

#include <ggml.h>
#include <gguf.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <memory>
#include <unistd.h>

namespace baton {
namespace {

constexpr int k_ssm_state = 16;
constexpr int k_ssm_conv = 4;
constexpr int k_ssm_head_dim = 16;
constexpr int k_lfm2_cache = 3;

// splitmix64: small, fast, and fully specified, so the bytes never depend on the platform's <random>.
struct rng {
    uint64_t s;
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
    int n_embd, n_layer, n_ff, n_head, n_head_kv, head_dim, n_vocab;
    int ssm_inner, ssm_heads;
    bool hybrid, recurrent;
};

bool layer_is_attention(const std::string & arch, int il) {
    if (arch == "llama") return true;
    if (arch == "mamba2") return false;
    return il % 2 == 1;
}

// ---- vocabulary: SentencePiece style with byte fallback ----

struct vocab_entry {
    std::string text;
    float score;
    int32_t type;  // 1 normal, 2 unknown, 3 control, 6 byte
};

std::vector<vocab_entry> build_vocab() {
    std::vector<vocab_entry> v;
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
    static const char * words[] = {
        "the", "and", "to", "of", "a", "in", "is", "it", "you", "that", "he", "was", "for", "on", "are", "with",
        "as", "I", "his", "they", "be", "at", "one", "have", "this", "from", "or", "had", "by", "word", "but",
        "what", "some", "we", "can", "out", "other", "were", "all", "there", "when", "up", "use", "your", "how",
        "said", "an", "each", "she", "which", "do", "their", "time", "if", "will", "way", "about", "many",
        "then", "them", "write", "would", "like", "so", "these", "her", "long", "make", "thing", "see", "him",
        "two", "has", "look", "more", "day", "could", "go", "come", "did", "number", "sound", "no", "most",
        "people", "my", "over", "know", "water", "than", "call", "first", "who", "may", "down", "side", "been",
        "now", "find", "Hello", "world", "model", "token", "state", "node", "decode", "prefill", "user",
        "assistant", "system"};
    static const char * pieces[] = {"th", "he", "in", "er", "an", "re", "on", "at", "en", "nd", "ti", "es",
                                    "or", "te", "of", "ed", "is", "it", "al", "ar", "st", "to", "nt", "ng",
                                    "se", "ha", "as", "ou", "io", "le", "ve", "co", "me", "de", "hi", "ri",
                                    "ro", "ic", "ne", "ea", "ra", "ce", "ing", "ion", "ent", "tion", "ed"};
    float score = -1.0f;
    for (const char * w : words) v.push_back({sp + w, score -= 0.01f, 1});
    for (const char * p : pieces) {
        bool dup = false;
        for (const auto & e : v) dup = dup || e.text == p;
        if (!dup) v.push_back({p, score -= 0.01f, 1});
    }
    v.push_back({sp, score -= 0.01f, 1});
    for (int c = 33; c < 127; ++c) v.push_back({std::string(1, char(c)), score -= 0.01f, 1});
    return v;
}

const char * k_chat_template =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

// ---- tensors ----

struct tensor_maker {
    ggml_context * ctx;
    gguf_context * gctx;
    rng r;

    // fill: 'w' random in [-scale, scale), 'o' ones, 'z' zeros, 'a' negative (ssm_a), 'd' dt bias
    void add(const std::string & name, std::vector<int64_t> ne, char fill, float scale = 0.0f) {
        ggml_tensor * t = nullptr;
        if (ne.size() == 1) t = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, ne[0]);
        else t = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, ne[0], ne[1]);
        ggml_set_name(t, name.c_str());
        float * d = static_cast<float *>(t->data);
        const int64_t n = ggml_nelements(t);
        for (int64_t i = 0; i < n; ++i) {
            switch (fill) {
                case 'o': d[i] = 1.0f; break;
                case 'z': d[i] = 0.0f; break;
                case 'a': d[i] = -(0.5f + 0.5f * (r.uniform() + 1.0f)); break;  // [-1.5, -0.5)
                case 'd': d[i] = -2.0f + r.uniform(); break;                      // [-3, -1)
                default: d[i] = scale * r.uniform(); break;
            }
        }
        gguf_add_tensor(gctx, t);
    }
};

size_t tensor_bytes_upper_bound(const arch_shape & s) {
    const size_t E = s.n_embd, V = s.n_vocab, F = s.n_ff, DI = s.ssm_inner;
    size_t per_layer = 4 * E * E + 3 * E * F + E * (2 * DI + 2 * k_ssm_state + s.ssm_heads) +
                       (DI + 2 * k_ssm_state) * (k_ssm_conv + 1) + 3 * E * 3 * E + DI * E + 64 * E + 1024;
    return (2 * E * V + 4 * E + s.n_layer * per_layer) * sizeof(float) +
           (s.n_layer * 24 + 8) * ggml_tensor_overhead() + (1 << 20);
}

void add_attention(tensor_maker & tm, const std::string & arch, const std::string & p, const arch_shape & s) {
    const int64_t E = s.n_embd, D = s.head_dim;
    const float sc = 1.0f / std::sqrt(float(E));
    tm.add(p + "attn_q.weight", {E, s.n_head * D}, 'w', sc);
    tm.add(p + "attn_k.weight", {E, s.n_head_kv * D}, 'w', sc);
    tm.add(p + "attn_v.weight", {E, s.n_head_kv * D}, 'w', sc);
    tm.add(p + "attn_output.weight", {s.n_head * D, E}, 'w', sc);
    if (arch == "lfm2") {
        tm.add(p + "attn_q_norm.weight", {D}, 'o');
        tm.add(p + "attn_k_norm.weight", {D}, 'o');
    }
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

void add_ffn(tensor_maker & tm, const std::string & p, const arch_shape & s) {
    const int64_t E = s.n_embd, F = s.n_ff;
    tm.add(p + "ffn_norm.weight", {E}, 'o');
    tm.add(p + "ffn_gate.weight", {E, F}, 'w', 1.0f / std::sqrt(float(E)));
    tm.add(p + "ffn_up.weight", {E, F}, 'w', 1.0f / std::sqrt(float(E)));
    tm.add(p + "ffn_down.weight", {F, E}, 'w', 1.0f / std::sqrt(float(F)));
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
    if (a == "llama") {
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
}

void set_vocab(gguf_context * g, const std::vector<vocab_entry> & vocab, bool chat_template) {
    std::vector<const char *> texts;
    std::vector<float> scores;
    std::vector<int32_t> types;
    for (const auto & e : vocab) {
        texts.push_back(e.text.c_str());
        scores.push_back(e.score);
        types.push_back(e.type);
    }
    gguf_set_val_str(g, "tokenizer.ggml.model", "llama");
    gguf_set_arr_str(g, "tokenizer.ggml.tokens", texts.data(), texts.size());
    gguf_set_arr_data(g, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores.data(), scores.size());
    gguf_set_arr_data(g, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types.data(), types.size());
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
    return s;
}

}  // namespace

const std::vector<std::string> & mkmodel_archs() {
    static const std::vector<std::string> archs = {"llama", "mamba2", "granitehybrid", "lfm2"};
    return archs;
}

Status mkmodel_check_params(const mkmodel_params & p) {
    bool known = false;
    for (const auto & a : mkmodel_archs()) known = known || a == p.arch;
    if (!known) return {status_code::invalid_argument, "arch: unknown architecture '" + p.arch +
                                                           "' (expected llama, mamba2, granitehybrid or lfm2)"};
    if (p.n_embd < 32 || p.n_embd > 8192 || p.n_embd % 32 != 0)
        return {status_code::invalid_argument,
                "n-embd: " + std::to_string(p.n_embd) + " is not a multiple of 32 in 32..8192"};
    if (p.n_layer < 1 || p.n_layer > 256)
        return {status_code::invalid_argument, "n-layer: " + std::to_string(p.n_layer) + " is not in 1..256"};
    if ((p.arch == "granitehybrid" || p.arch == "lfm2") && p.n_layer < 2)
        return {status_code::invalid_argument, "n-layer: hybrid architecture '" + p.arch + "' needs at least 2 layers"};
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
    const auto vocab = build_vocab();
    const arch_shape s = shape_of(mp, int(vocab.size()));

    // Open the temporary file first so an unwritable path fails before any work, with the OS reason.
    const std::string tmp = path + ".tmp." + std::to_string(::getpid());
    int fd = ::open(tmp.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) return {status_code::io_error, "cannot write '" + path + "': " + std::strerror(errno)};
    ::close(fd);

    ggml_init_params ip = {tensor_bytes_upper_bound(s), nullptr, false};
    std::unique_ptr<ggml_context, decltype(&ggml_free)> ctx(ggml_init(ip), ggml_free);
    std::unique_ptr<gguf_context, decltype(&gguf_free)> g(gguf_init_empty(), gguf_free);
    if (!ctx || !g) {
        ::unlink(tmp.c_str());
        return {status_code::internal, "mkmodel: out of memory for the model tensors"};
    }
    gguf_set_val_str(g.get(), "general.architecture", mp.arch.c_str());
    gguf_set_val_str(g.get(), "general.name", ("baton-test-" + mp.arch).c_str());
    gguf_set_val_u32(g.get(), "general.file_type", 0);  // all F32
    set_hparams(g.get(), mp, s);
    set_vocab(g.get(), vocab, mp.chat_template);

    tensor_maker tm{ctx.get(), g.get(), rng{mp.seed}};
    const int64_t E = s.n_embd, V = s.n_vocab;
    tm.add("token_embd.weight", {E, V}, 'w', 1.0f);
    for (int il = 0; il < s.n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        tm.add(p + "attn_norm.weight", {E}, 'o');
        if (layer_is_attention(mp.arch, il)) add_attention(tm, mp.arch, p, s);
        else if (mp.arch == "lfm2") add_shortconv(tm, p, s);
        else add_mamba2(tm, p, s);
        if (mp.arch != "mamba2") add_ffn(tm, p, s);
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
