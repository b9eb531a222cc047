// testmodel_arch.h — what differs between the architectures mkmodel writes: their shapes, hyperparameter
// keys and per-layer tensors (the layout is described at the top of testmodel_arch.cpp). Private to the
// testmodel module. Thread-safety: plain functions and values.
#pragma once

#include <ggml.h>
#include <gguf.h>

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "baton/base/status.h"
#include "baton/testmodel/mkmodel.h"

namespace baton::testmodel {

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

// is_moe: a mixture-of-experts FFN (qwen3moe, qwen3next); is_hybrid_arch: attention on odd layers only;
// layer_is_attention: whether layer il of arch is an attention layer.
bool is_moe(const std::string & arch);
bool is_hybrid_arch(const std::string & arch);
bool layer_is_attention(const std::string & arch, int il);

// shape_of derives every dimension of the model from mkmodel's parameters and the vocabulary's size.
arch_shape shape_of(const mkmodel_params & p, int n_vocab);

// set_hparams writes the architecture's hyperparameter keys ("llama.embedding_length", ...).
void set_hparams(gguf_context * g, const mkmodel_params & mp, const arch_shape & s);

// wtype_of: the ggml type of --wtype; ftype_of: general.file_type for it (libllama's LLAMA_FTYPE_*).
ggml_type wtype_of(const std::string & w);
uint32_t ftype_of(const std::string & w);

// tensor_maker adds tensors, in file order, to a GGUF context; it owns their bytes until the file is written.
struct tensor_maker {
    ggml_context * ctx = nullptr;
    gguf_context * gctx = nullptr;
    rng r{};
    ggml_type wtype = GGML_TYPE_F32;
    std::deque<std::vector<uint8_t>> data;  // tensor bytes, alive until the file is written
    std::vector<float> f;                   // scratch: the f32 values of the current tensor

    // add draws a tensor's values from r (fill: 'w' random in [-scale, scale), 'o' ones, 'z' zeros, 'a'
    // negative (ssm_a), 'd' dt bias), stores them in wtype where the tensor is quantizable (mkmodel.h's
    // fallback rule otherwise) and adds the tensor to gctx.
    void add(const std::string & name, std::vector<int64_t> ne, char fill, float scale = 0.0f);
};

// gguf_file_start: the temporary sibling of path a GGUF is written to (opened and closed once, so an unwritable
// path fails before any work, with the OS reason). gguf_file_finish writes g there and renames it to path (the
// temporary file is removed on any failure), so a failure never leaves a partial file at path.
Result<std::string> gguf_file_start(const std::string & path);
Status gguf_file_finish(gguf_context * g, const std::string & tmp, const std::string & path);
// gguf_file_absent: no file at path (the *_ensure functions write only then).
bool gguf_file_absent(const std::string & path);

// add_layer adds layer il's tensors (blk.N.*): its norm, its attention or recurrent/conv block, its FFN or MoE.
void add_layer(tensor_maker & tm, const std::string & arch, int il, const arch_shape & s);

}  // namespace baton::testmodel
