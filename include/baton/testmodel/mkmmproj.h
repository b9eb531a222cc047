// mkmmproj.h — generate a small deterministic multimodal projector GGUF ("mmproj", what llama-server's --mmproj
// and libmtmd's mtmd_init_from_file load) with random weights, to go with a mkmodel text model, so image prompts
// are tested without downloads (issue 28's first piece: nothing serves images yet).
//
// Two projector families. "mlp", LLaVA-1.5's — a CLIP vision transformer (patch embedding by a convolution, a
// class embedding, learned positions, a pre-norm, pre-norm attention + GELU MLP blocks) whose second-to-last
// block's output goes through a two-layer MLP (mm.0, GELU, mm.2) into the text model's embedding width. An image
// is resized to image_size x image_size and becomes (image_size / patch_size)^2 embeddings, one per patch; the
// text model's positions stay one per embedding (no M-RoPE). The file holds general.architecture "clip" and
// clip.* keys of the types libmtmd's loader requires (it aborts on a wrong type, so every key is written with
// the type it reads), every tensor f32. "qwen2vl_merger", Qwen2-VL's — a vision transformer without class or
// position embeddings (two convolution kernels for its two-frame patch embedding, q/k/v biases, a 2-D rotary
// embedding inside the blocks), whose patches are merged 2x2 (mm.0 over 4 concatenated patches, GELU, mm.2):
// an image of any size becomes (W / 2P) x (H / 2P) embeddings after libmtmd resizes its sides to multiples of
// 2P, and with mkmodel's qwen2vl text model (M-RoPE) they take max(W / 2P, H / 2P) positions, not one each.
// "gemma3", Gemma 3's — a SigLIP vision transformer (a biased patch convolution, learned positions, no class
// embedding, biased attention, GELU, a final norm) whose patches are average-pooled 2x2 (Gemma 3's own pool 4x4:
// the factor is written, as libmtmd's tiny test models do), RMS-normed (soft_emb_norm) and projected into the
// text width: an image is resized to image_size x image_size and becomes (image_size / 2P)^2 embeddings, one
// position each, which libmtmd says the text model decodes with non-causal attention among them
// (mtmd_decode_use_non_causal); it goes with mkmodel's gemma3 text model.
// The same params give a byte-identical file (mkmodel's generator and atomic write).
#pragma once

#include <cstdint>
#include <string>

#include "baton/base/status.h"

namespace baton {

struct mkmmproj_params {
    std::string projector = "mlp";  // mlp | qwen2vl_merger | gemma3
    uint64_t seed = 1;
    int text_n_embd = 64;  // the text model's embedding width: the projector's output (mkmodel_params::n_embd)
    int n_embd = 64;       // the vision transformer's width, a multiple of 32 in 32..1024 (two 16+-wide heads)
    int n_layer = 2;       // vision blocks, 2..32 (the last one's tensors exist but are not run: LLaVA's layout)
    int image_size = 32;   // pixels per side, a multiple of patch_size (qwen2vl_merger, gemma3: of 2 x patch_size) in
                           // 16..448; qwen2vl_merger takes images of any size (this is its warm-up size)
    int patch_size = 8;    // pixels per patch side, 2..32
};

// mkmmproj_check_params returns invalid_argument naming the bad field, or ok.
Status mkmmproj_check_params(const mkmmproj_params & p);

// mkmmproj_write writes the projector to path atomically (invalid_argument, io_error as mkmodel_write).
Status mkmmproj_write(const mkmmproj_params & p, const std::string & path);

// mkmmproj_ensure is mkmmproj_write unless a file already exists at path.
Status mkmmproj_ensure(const mkmmproj_params & p, const std::string & path);

// mkmmproj_image_tokens: the embeddings one image becomes with the mlp projector, (image_size / patch_size)^2, and
// with the gemma3 one, (image_size / 2 patch_size)^2.
inline int mkmmproj_image_tokens(const mkmmproj_params & p) {
    const int side = p.image_size / p.patch_size / (p.projector == "gemma3" ? 2 : 1);
    return side * side;
}

}  // namespace baton
