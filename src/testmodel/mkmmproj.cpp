// mkmmproj.cpp — writes the random-weight projector of mkmmproj.h through gguf.h, with mkmodel's tensor maker
// (its generator and its f32 tensors) and atomic write.
#include "baton/testmodel/mkmmproj.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <memory>

#include "testmodel_arch.h"

namespace baton {

namespace {

// CLIP's normalization of an image's channels (what LLaVA-1.5's preprocessing uses).
constexpr float k_image_mean[3] = {0.48145466f, 0.4578275f, 0.40821073f};
constexpr float k_image_std[3] = {0.26862954f, 0.26130258f, 0.27577711f};

int vision_heads(const mkmmproj_params & p) { return p.n_embd >= 64 ? p.n_embd / 32 : 2; }

// add_blocks: n_layer pre-norm transformer blocks under prefix ("v": vision, "a": audio): two biased norms,
// q/k/v/out projections with biases filled by bias_fill ('z' zeros, 'w' random; K's left out without k_bias, as
// Whisper's) and a biased two-layer FFN of width F.
void add_blocks(testmodel::tensor_maker & tm, const std::string & prefix, int n_layer, int64_t E, int64_t F,
                char bias_fill, bool k_bias) {
    const float wE = 1.0f / std::sqrt(float(E)), wF = 1.0f / std::sqrt(float(F));
    for (int il = 0; il < n_layer; ++il) {
        const std::string b = prefix + ".blk." + std::to_string(il) + ".";
        tm.add(b + "ln1.weight", {E}, 'o');
        tm.add(b + "ln1.bias", {E}, 'z');
        for (const char * w : {"attn_q", "attn_k", "attn_v", "attn_out"}) {
            tm.add(b + w + ".weight", {E, E}, 'w', wE);
            if (k_bias || std::string(w) != "attn_k") tm.add(b + w + ".bias", {E}, bias_fill, 0.1f);
        }
        tm.add(b + "ln2.weight", {E}, 'o');
        tm.add(b + "ln2.bias", {E}, 'z');
        tm.add(b + "ffn_up.weight", {E, F}, 'w', wE);
        tm.add(b + "ffn_up.bias", {F}, 'z');
        tm.add(b + "ffn_down.weight", {F, E}, 'w', wF);
        tm.add(b + "ffn_down.bias", {E}, 'z');
    }
}

// The audio encoder's input: Whisper's mel bins, and its learned positions (30 s of 10 ms frames, halved by the
// second convolution's stride).
constexpr int64_t k_mel_bins = 80, k_audio_positions = 1500;

}  // namespace

Status mkmmproj_check_params(const mkmmproj_params & p) {
    if (p.projector != "mlp" && p.projector != "qwen2vl_merger" && p.projector != "gemma3" && p.projector != "qwen2a")
        return {status_code::invalid_argument,
                "projector: unknown projector '" + p.projector + "' (expected mlp, qwen2vl_merger, gemma3 or qwen2a)"};
    if (p.text_n_embd < 32 || p.text_n_embd > 8192 || p.text_n_embd % 32 != 0)
        return {status_code::invalid_argument,
                "text-n-embd: " + std::to_string(p.text_n_embd) + " is not a multiple of 32 in 32..8192"};
    if (p.n_embd < 32 || p.n_embd > 1024 || p.n_embd % 32 != 0)
        return {status_code::invalid_argument,
                "mmproj n-embd: " + std::to_string(p.n_embd) + " is not a multiple of 32 in 32..1024"};
    if (p.n_layer < 2 || p.n_layer > 32)
        return {status_code::invalid_argument, "mmproj n-layer: " + std::to_string(p.n_layer) + " is not in 2..32"};
    if (p.patch_size < 2 || p.patch_size > 32)
        return {status_code::invalid_argument, "patch-size: " + std::to_string(p.patch_size) + " is not in 2..32"};
    // qwen2vl merges 2x2 patches; gemma3 pools 2x2 patches into one embedding
    const int unit = p.projector == "mlp" ? p.patch_size : 2 * p.patch_size;
    if (p.image_size < 16 || p.image_size > 448 || p.image_size % unit != 0)
        return {status_code::invalid_argument,
                "image-size: " + std::to_string(p.image_size) + " is not a multiple of " + std::to_string(unit) +
                    (p.projector == "mlp" ? " (the patch size)" : " (twice the patch size)") + " in 16..448"};
    return {};
}

Status mkmmproj_ensure(const mkmmproj_params & p, const std::string & path) {
    if (!testmodel::gguf_file_absent(path)) return {};
    return mkmmproj_write(p, path);
}

Status mkmmproj_write(const mkmmproj_params & p, const std::string & path) {
    BATON_RETURN_IF_ERROR(mkmmproj_check_params(p));
    auto started = testmodel::gguf_file_start(path);
    if (!started.ok()) return started.status();
    const std::string tmp = std::move(started.value());

    const int64_t E = p.n_embd, F = 2 * int64_t(p.n_embd), T = p.text_n_embd, P = p.patch_size;
    const int64_t side = p.image_size / p.patch_size;
    const int64_t n_pos = side * side + 1;  // the patches and the class embedding
    ggml_init_params ip = {size_t(p.n_layer * 16 + 16) * ggml_tensor_overhead(), nullptr, true};
    std::unique_ptr<ggml_context, decltype(&ggml_free)> ctx(ggml_init(ip), ggml_free);
    std::unique_ptr<gguf_context, decltype(&gguf_free)> g(gguf_init_empty(), gguf_free);
    if (!ctx || !g) {
        ::unlink(tmp.c_str());
        return {status_code::internal, "mkmmproj: out of memory for the projector tensors"};
    }
    gguf_context * gc = g.get();
    gguf_set_val_str(gc, "general.architecture", "clip");
    gguf_set_val_str(gc, "general.type", "mmproj");
    gguf_set_val_str(gc, "general.name", ("baton-test-mmproj-" + p.projector).c_str());
    gguf_set_val_u32(gc, "general.file_type", 0);  // all f32
    testmodel::tensor_maker tm;
    tm.ctx = ctx.get();
    tm.gctx = gc;
    tm.r = testmodel::rng{p.seed};
    tm.wtype = GGML_TYPE_F32;
    const float wE = 1.0f / std::sqrt(float(E)), wT = 1.0f / std::sqrt(float(T));
    if (p.projector == "qwen2a") {
        // Qwen2-Audio's: a Whisper encoder (two 1-D convolutions over the log-mel frames, the second with stride
        // 2, learned positions, pre-norm blocks whose K has no bias, a final norm) and one linear layer into the
        // text width. libmtmd computes the mel spectrogram (16 kHz, 80 bins, 10 ms hop) from the decoded audio.
        gguf_set_val_bool(gc, "clip.has_vision_encoder", false);
        gguf_set_val_bool(gc, "clip.has_audio_encoder", true);
        gguf_set_val_bool(gc, "clip.has_text_encoder", false);
        gguf_set_val_str(gc, "clip.projector_type", "qwen2a");
        gguf_set_val_u32(gc, "clip.audio.num_mel_bins", uint32_t(k_mel_bins));
        gguf_set_val_u32(gc, "clip.audio.embedding_length", uint32_t(E));
        gguf_set_val_u32(gc, "clip.audio.feed_forward_length", uint32_t(F));
        gguf_set_val_u32(gc, "clip.audio.block_count", uint32_t(p.n_layer));
        gguf_set_val_u32(gc, "clip.audio.attention.head_count", uint32_t(vision_heads(p)));
        gguf_set_val_f32(gc, "clip.audio.attention.layer_norm_epsilon", 1e-5f);
        gguf_set_val_u32(gc, "clip.audio.projection_dim", uint32_t(T));
        tm.add("a.conv1d.1.weight", {3, k_mel_bins, E}, 'w', 1.0f / std::sqrt(float(3 * k_mel_bins)));
        tm.add("a.conv1d.1.bias", {1, E}, 'w', 0.1f);
        tm.add("a.conv1d.2.weight", {3, E, E}, 'w', 1.0f / std::sqrt(float(3 * E)));
        tm.add("a.conv1d.2.bias", {1, E}, 'w', 0.1f);
        tm.add("a.position_embd.weight", {E, k_audio_positions}, 'w', 0.5f);
        add_blocks(tm, "a", p.n_layer, E, F, 'w', false);  // (Whisper's K has no bias)
        tm.add("a.post_ln.weight", {E}, 'o');
        tm.add("a.post_ln.bias", {E}, 'z');
        tm.add("mm.a.fc.weight", {E, T}, 'w', wE);
        tm.add("mm.a.fc.bias", {T}, 'z');
        return testmodel::gguf_file_finish(gc, tmp, path);
    }
    const bool mlp = p.projector == "mlp", gemma3 = p.projector == "gemma3";
    gguf_set_val_bool(gc, "clip.has_vision_encoder", true);
    gguf_set_val_bool(gc, "clip.has_text_encoder", false);
    gguf_set_val_bool(gc, "clip.has_llava_projector", mlp);
    gguf_set_val_str(gc, "clip.projector_type", p.projector.c_str());
    if (mlp) gguf_set_val_bool(gc, "clip.use_gelu", false);  // quick GELU, as CLIP (qwen2vl: absent, the same)
    else if (gemma3) {
        gguf_set_val_bool(gc, "clip.use_gelu", true);                   // SigLIP's GELU
        gguf_set_val_u32(gc, "clip.vision.projector.scale_factor", 2);  // 2x2 patches pooled (Gemma 3's own: 4)
    } else gguf_set_val_u32(gc, "clip.vision.spatial_merge_size", 2);
    gguf_set_val_u32(gc, "clip.vision.image_size", uint32_t(p.image_size));
    gguf_set_val_u32(gc, "clip.vision.patch_size", uint32_t(p.patch_size));
    gguf_set_val_u32(gc, "clip.vision.embedding_length", uint32_t(E));
    gguf_set_val_u32(gc, "clip.vision.feed_forward_length", uint32_t(F));  // != E (see mkmmproj.h)
    gguf_set_val_u32(gc, "clip.vision.block_count", uint32_t(p.n_layer));
    gguf_set_val_u32(gc, "clip.vision.attention.head_count", uint32_t(vision_heads(p)));
    gguf_set_val_f32(gc, "clip.vision.attention.layer_norm_epsilon", 1e-5f);
    gguf_set_val_u32(gc, "clip.vision.projection_dim", uint32_t(T));
    gguf_set_arr_data(gc, "clip.vision.image_mean", GGUF_TYPE_FLOAT32, k_image_mean, 3);
    gguf_set_arr_data(gc, "clip.vision.image_std", GGUF_TYPE_FLOAT32, k_image_std, 3);

    tm.add("v.patch_embd.weight", {P, P, 3, E}, 'w', 1.0f / std::sqrt(float(P * P * 3)));
    if (mlp) {
        tm.add("v.class_embd", {E}, 'w', 0.5f);
        tm.add("v.position_embd.weight", {E, n_pos}, 'w', 0.5f);
        tm.add("v.pre_ln.weight", {E}, 'o');
        tm.add("v.pre_ln.bias", {E}, 'z');
    } else if (gemma3) {
        // SigLIP: a biased patch convolution and learned positions, one per patch (no class embedding, no pre-norm).
        tm.add("v.patch_embd.bias", {E}, 'w', 0.1f);
        tm.add("v.position_embd.weight", {E, n_pos - 1}, 'w', 0.5f);
    } else {
        // Qwen2-VL's patch embedding is a 3-D convolution over two frames, stored as two 2-D kernels; positions
        // come from the vision blocks' 2-D rotary embedding, so there is no class or position embedding.
        tm.add("v.patch_embd.weight.1", {P, P, 3, E}, 'w', 1.0f / std::sqrt(float(P * P * 3)));
    }
    add_blocks(tm, "v", p.n_layer, E, F, mlp ? 'z' : 'w', true);  // (qwen2vl, gemma3: biased attention)
    if (mlp) {
        // The projector: mm.0 [E -> T], GELU, mm.2 [T -> T] (its output width is the text model's).
        tm.add("mm.0.weight", {E, T}, 'w', wE);
        tm.add("mm.0.bias", {T}, 'z');
        tm.add("mm.2.weight", {T, T}, 'w', wT);
        tm.add("mm.2.bias", {T}, 'z');
    } else if (gemma3) {
        // A final norm, then (in libmtmd's graph) 2x2 average pooling, an RMS norm scaled by soft_emb_norm and the
        // input projection [E -> T], stored as Gemma 3's is: T x E, transposed by the graph.
        tm.add("v.post_ln.weight", {E}, 'o');
        tm.add("v.post_ln.bias", {E}, 'z');
        tm.add("mm.soft_emb_norm.weight", {E}, 'o');
        tm.add("mm.input_projection.weight", {T, E}, 'w', wE);
    } else {
        // The merger: a norm, then 2x2 neighbouring patches concatenated (4E) through mm.0 [4E -> 4E], GELU,
        // mm.2 [4E -> T].
        tm.add("v.post_ln.weight", {E}, 'o');
        tm.add("v.post_ln.bias", {E}, 'z');
        const float w4 = 1.0f / std::sqrt(float(4 * E));
        tm.add("mm.0.weight", {4 * E, 4 * E}, 'w', w4);
        tm.add("mm.0.bias", {4 * E}, 'z');
        tm.add("mm.2.weight", {4 * E, T}, 'w', w4);
        tm.add("mm.2.bias", {T}, 'z');
    }

    return testmodel::gguf_file_finish(gc, tmp, path);
}

}  // namespace baton
