// testmodel_arch.cpp — the architectures' shapes, hyperparameters and tensors.
//
// Layout of a model (ggml `ne` order, inner dimension first; E = n_embd, V = n_vocab, F = n_ff, D = head dim,
// H/Hkv = query/kv heads, X = n_expert, Fx = expert FFN width):
//   token_embd [E,V], output_norm [E] (lfm2: token_embd_norm [E]), output [E,V] (always untied);
//   attention layer: attn_norm, attn_q [E,H*D] (qwen3next: [E,2*H*D], query and gate), attn_k/attn_v
//   [E,Hkv*D], attn_output [H*D,E]; qwen3, lfm2, gemma3, qwen3moe and qwen3next add attn_q_norm/attn_k_norm [D];
//   qwen2vl (llama's layout with M-RoPE: rope.dimension_sections) adds attn_q.bias [H*D], attn_k/v.bias [Hkv*D];
//   gemma3 adds post_attention_norm [E] after attention and post_ffw_norm [E] after the FFN;
//   mamba2 layer: attn_norm, ssm_in, ssm_conv1d (+bias), ssm_dt.bias, ssm_a, ssm_d, ssm_norm, ssm_out;
//   lfm2 conv layer: attn_norm, shortconv.conv [3,E], shortconv.in_proj [E,3E], shortconv.out_proj [E,E];
//   qwen3next gated delta-net layer (Kh key heads, Vh value heads, head size S = 16, K = Kh*S, W = Vh*S):
//   attn_norm, ssm_in [E,2K+2W], ssm_conv1d [4,2K+W], ssm_dt.bias [Vh], ssm_a [Vh], ssm_ba [E,2Vh],
//   ssm_norm [S], ssm_out [W,E]; every qwen3next layer has post_attention_norm [E] before its FFN;
//   dense feed-forward (llama, qwen3, granitehybrid, lfm2, gemma3): ffn_norm, ffn_gate/ffn_up [E,F], ffn_down [F,E];
//   MoE feed-forward: qwen3moe ffn_norm, and both: ffn_gate_inp [E,X], ffn_gate_exps/ffn_up_exps [E,Fx,X],
//   ffn_down_exps [Fx,E,X]; qwen3next adds the shared expert ffn_gate_inp_shexp [E],
//   ffn_gate_shexp/ffn_up_shexp [E,Fx], ffn_down_shexp [Fx,E].
// Hybrids put attention on every odd layer (1, 3, ...), the recurrent/conv kind on even layers (qwen3next
// through full_attention_interval = 2). gemma3 writes attention.sliding_window = 32 and a per-layer
// attention.sliding_window_pattern: even layers sliding-window, odd layers global (gemma3_layer_is_global).
// Weights are drawn as f32 in file order from one stream, then stored in the tensor's type (mkmodel.h's
// rule); the draws never depend on the type, so an f32 model's bytes are what they always were.
#include "testmodel_arch.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace baton::testmodel {
namespace {

constexpr int k_ssm_state = 16;
constexpr int k_ssm_conv = 4;
constexpr int k_ssm_head_dim = 16;
constexpr int k_lfm2_cache = 3;
constexpr int k_gemma3_swa = 32;  // sliding window, in tokens
constexpr int k_n_expert = 8;
constexpr int k_n_expert_used = 2;
constexpr int k_gdn_head_dim = 16;  // qwen3next delta-net key/value head size

// Archs whose attention.head_count_kv is one number (the others write a per-layer array).
bool scalar_head_count_kv(const std::string & arch) {
    return arch == "llama" || arch == "qwen3" || arch == "gemma3" || arch == "qwen3moe" || arch == "qwen3next" ||
           arch == "qwen2vl";
}

// gemma3: even layers use the sliding window, odd layers attend globally.
bool gemma3_layer_is_global(int il) { return il % 2 == 1; }

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

void add_attention(tensor_maker & tm, const std::string & arch, const std::string & p, const arch_shape & s) {
    const int64_t E = s.n_embd, D = s.head_dim;
    const float sc = 1.0f / std::sqrt(float(E));
    const int64_t q_rows = arch == "qwen3next" ? 2 * s.n_head * D : s.n_head * D;  // qwen3next: query + gate
    tm.add(p + "attn_q.weight", {E, q_rows}, 'w', sc);
    tm.add(p + "attn_k.weight", {E, s.n_head_kv * D}, 'w', sc);
    tm.add(p + "attn_v.weight", {E, s.n_head_kv * D}, 'w', sc);
    tm.add(p + "attn_output.weight", {s.n_head * D, E}, 'w', sc);
    if (arch == "qwen2vl") {  // Qwen2's query/key/value biases, no norms
        tm.add(p + "attn_q.bias", {s.n_head * D}, 'w', 0.1f);
        tm.add(p + "attn_k.bias", {s.n_head_kv * D}, 'w', 0.1f);
        tm.add(p + "attn_v.bias", {s.n_head_kv * D}, 'w', 0.1f);
        return;
    }
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

}  // namespace

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

void tensor_maker::add(const std::string & name, std::vector<int64_t> ne, char fill, float scale) {
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
    const ggml_type type = wtype != GGML_TYPE_F32 && quantizable(name, ne) ? fitting_type(wtype, ne[0]) : GGML_TYPE_F32;
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

Result<std::string> gguf_file_start(const std::string & path) {
    std::string tmp = path + ".tmp." + std::to_string(::getpid());
    const int fd = ::open(tmp.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) return Status(status_code::io_error, "cannot write '" + path + "': " + std::strerror(errno));
    ::close(fd);
    return tmp;
}

Status gguf_file_finish(gguf_context * g, const std::string & tmp, const std::string & path) {
    if (!g || !gguf_write_to_file(g, tmp.c_str(), false)) {
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

bool gguf_file_absent(const std::string & path) {
    struct stat st;
    return ::stat(path.c_str(), &st) != 0;
}

bool is_moe(const std::string & arch) { return arch == "qwen3moe" || arch == "qwen3next"; }
bool is_hybrid_arch(const std::string & arch) {
    return arch == "granitehybrid" || arch == "lfm2" || arch == "qwen3next";
}
bool layer_is_attention(const std::string & arch, int il) {
    if (arch == "mamba2") return false;
    if (is_hybrid_arch(arch)) return il % 2 == 1;
    return true;
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
    if (a == "qwen2vl") {
        // M-RoPE: the rotary pairs of a head (D/2) split into time, height, width (and an unused fourth) sections,
        // as Qwen2-VL's [16, 24, 24, 0] of 64 pairs.
        const int32_t pairs = s.head_dim / 2, t = pairs / 4;
        const int32_t sections[4] = {t, (pairs - t) / 2, pairs - t - (pairs - t) / 2, 0};
        gguf_set_arr_data(g, key("rope.dimension_sections").c_str(), GGUF_TYPE_INT32, sections, 4);
    }
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

void add_layer(tensor_maker & tm, const std::string & arch, int il, const arch_shape & s) {
    const std::string p = "blk." + std::to_string(il) + ".";
    tm.add(p + "attn_norm.weight", {int64_t(s.n_embd)}, 'o');
    if (layer_is_attention(arch, il)) add_attention(tm, arch, p, s);
    else if (arch == "lfm2") add_shortconv(tm, p, s);
    else if (arch == "qwen3next") add_delta_net(tm, p, s);
    else add_mamba2(tm, p, s);
    if (is_moe(arch)) add_moe(tm, arch, p, s);
    else if (arch != "mamba2") add_ffn(tm, arch, p, s);
}

}  // namespace baton::testmodel
