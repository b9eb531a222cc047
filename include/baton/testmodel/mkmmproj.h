// mkmmproj.h — generate a small deterministic multimodal projector GGUF ("mmproj", what llama-server's --mmproj
// and libmtmd's mtmd_init_from_file load) with random weights, to go with a mkmodel text model, so image prompts
// are tested without downloads (issue 28's first piece: nothing serves images yet).
//
// One projector family: "mlp", LLaVA-1.5's — a CLIP vision transformer (patch embedding by a convolution, a
// class embedding, learned positions, a pre-norm, pre-norm attention + GELU MLP blocks) whose second-to-last
// block's output goes through a two-layer MLP (mm.0, GELU, mm.2) into the text model's embedding width. An image
// is resized to image_size x image_size and becomes (image_size / patch_size)^2 embeddings, one per patch; the
// text model's positions stay one per embedding (no M-RoPE). The file holds general.architecture "clip" and
// clip.* keys of the types libmtmd's loader requires (it aborts on a wrong type, so every key is written with
// the type it reads), every tensor f32. The same params give a byte-identical file (mkmodel's generator and
// atomic write).
#pragma once

#include <cstdint>
#include <string>

#include "baton/base/status.h"

namespace baton {

struct mkmmproj_params {
    std::string projector = "mlp";  // the projector family (only mlp)
    uint64_t seed = 1;
    int text_n_embd = 64;  // the text model's embedding width: the projector's output (mkmodel_params::n_embd)
    int n_embd = 64;       // the vision transformer's width, a multiple of 32 in 32..1024 (two 16+-wide heads)
    int n_layer = 2;       // vision blocks, 2..32 (the last one's tensors exist but are not run: LLaVA's layout)
    int image_size = 32;   // pixels per side, a multiple of patch_size in 16..448
    int patch_size = 8;    // pixels per patch side, 2..32
};

// mkmmproj_check_params returns invalid_argument naming the bad field, or ok.
Status mkmmproj_check_params(const mkmmproj_params & p);

// mkmmproj_write writes the projector to path atomically (invalid_argument, io_error as mkmodel_write).
Status mkmmproj_write(const mkmmproj_params & p, const std::string & path);

// mkmmproj_ensure is mkmmproj_write unless a file already exists at path.
Status mkmmproj_ensure(const mkmmproj_params & p, const std::string & path);

// mkmmproj_image_tokens: the embeddings one image becomes, (image_size / patch_size)^2.
inline int mkmmproj_image_tokens(const mkmmproj_params & p) {
    return (p.image_size / p.patch_size) * (p.image_size / p.patch_size);
}

}  // namespace baton
