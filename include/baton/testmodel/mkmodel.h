// mkmodel.h — generate small deterministic GGUF test models (random weights, a SentencePiece byte-fallback
// or a GPT-2 byte-level BPE vocabulary, a ChatML chat template) for the architectures Baton is tested on.
//
// The same params give a byte-identical file: weights come from a splitmix64 stream seeded by `seed` and
// converted to floats with integer arithmetic only, then (for wtype != f32) converted with libggml's
// reference quantizers, which are deterministic. The file is written to a temporary sibling and renamed
// into place, so a failure never leaves a partial file at `path`.
//
// Architectures: llama (dense attention), qwen3 (dense attention with query/key norms), mamba2 (recurrent), granitehybrid (mamba2 + attention), lfm2
// (short conv + attention), gemma3 (interleaved sliding-window and global attention, window 32 tokens),
// qwen3moe (attention + mixture of 8 experts, 2 used), qwen3next (gated delta-net + gated attention hybrid
// with 8 routed experts and a shared expert). Hybrids put their attention layers on the odd layers.
//
// Weight types (`wtype`): the 2-D weight matrices and the 3-D expert stacks are stored in wtype; 1-D
// tensors (norms, biases, ssm_a/ssm_d/ssm_dt), every *_norm weight, the convolution kernels (ssm_conv1d,
// shortconv.conv) and the MoE router (ffn_gate_inp) stay f32, as llama-quantize does. Fallback rule, per
// tensor, when its row length ne[0] is not a multiple of the type's block size: q4_K (256-element blocks)
// -> q5_0 (32-element blocks) -> f16; q8_0 (32-element blocks) -> f16; f16 always fits. So a 64-wide model
// asked for q4_K is all q5_0; n_embd a multiple of 256 gets real q4_K (ffn_down, whose rows are n_ff long,
// e.g. 704 for n_embd 256, stays q5_0). general.file_type is LLAMA_FTYPE_ALL_F32 (0), MOSTLY_F16 (1),
// MOSTLY_Q8_0 (7) or MOSTLY_Q4_K_M (15), whatever the fallbacks.
//
// Vocabularies (`vocab`): spm is a SentencePiece-style "llama" vocabulary (<unk>, <s>, </s>, ChatML control
// tokens, the 256 <0xXX> byte tokens, pieces; add_bos true). bpe is a byte-level "gpt2" vocabulary with
// the "qwen2" pre-tokenizer: the 256 single-byte tokens in GPT-2's byte-to-unicode encoding (ids 0..255, in
// byte order), then the tokens of a deterministic merge list learned from a small built-in word list
// (every merge's parts and result are tokens), then the control tokens <|endoftext|> (bos), <|im_start|>
// and <|im_end|> (eos and eot); add_bos false, as Qwen does. Valid UTF-8 (emoji, NUL and controls included)
// round-trips byte for byte through either vocabulary; libllama 0.7's BPE pre-tokenizer turns each byte of
// invalid UTF-8 (and overlong forms) into U+FFFD before the vocabulary is used, so no BPE vocabulary can
// round-trip those bytes (the SentencePiece one is lossy on them too).
//
// qwen2vl: llama's layout with Qwen2's query/key/value biases and M-RoPE (rope.dimension_sections: a head's rotary
// pairs split into time, height and width sections), the text model of mkmmproj.h's qwen2vl_merger projector.
// Not in mkmodel_archs: on text its arithmetic is llama's, but its state is not (every attention cell carries
// x, y and the token, state_payload.h), so the engine's state suites (family_cases, StateValidation) run it.
//
// Rerankers (`rerank`, qwen3 only): a ranking head cls.output [E,2] with classifier labels "yes", "no",
// qwen3.pooling_type 4 (rank), so libllama's rank pooling (the last token's state through the head, then a
// softmax) gives llama-server's /rerank score, the "yes" probability. With a chat template the model also
// gets a rerank prompt (tokenizer.chat_template.rerank, Qwen3-Reranker's shape with {query} and
// {document}); without one it gets add_eos_token, add_sep_token and SEP = EOS, so llama-server's plain layout
// is BOS query EOS SEP document EOS.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "baton/base/status.h"

namespace baton {

struct mkmodel_params {
    std::string arch =
        "llama";  // llama | qwen3 | qwen2vl | mamba2 | granitehybrid | lfm2 | gemma3 | qwen3moe | qwen3next
    uint64_t seed = 1;
    int n_embd = 64;            // embedding width; a multiple of 32, 32..8192
    int n_layer = 4;            // 1..256 (hybrids and gemma3 need >= 2 to hold both kinds of layer)
    int n_ctx = 4096;           // training context length written to <arch>.context_length, 16..1048576
    bool chat_template = true;  // write tokenizer.chat_template (ChatML); false: a model without a template
    std::string wtype = "f32";  // weight matrices: f32 | f16 | q8_0 | q4_K (fallback rule above)
    std::string vocab = "spm";  // spm (SentencePiece byte fallback) | bpe (GPT-2 byte-level BPE)
    bool fim = false;           // add fill-in-the-middle tokens (<|fim_prefix|>, ...: /infill)
    bool rerank = false;        // qwen3 only: a ranking head (below), for --rerank
};

// mkmodel_archs lists the architectures the generation suites run on. mkmodel also writes qwen3 (llama's
// attention with qwen3moe's query/key norms, a dense FFN) for its ranking head (rerank): it adds nothing to
// those suites but their time.
const std::vector<std::string> & mkmodel_archs();

// mkmodel_wtypes lists the supported weight types; mkmodel_vocabs the supported vocabularies.
const std::vector<std::string> & mkmodel_wtypes();
const std::vector<std::string> & mkmodel_vocabs();

// mkmodel_check_params returns invalid_argument naming the bad field, or ok.
Status mkmodel_check_params(const mkmodel_params & params);

// mkmodel_write builds the model described by params and writes it to path atomically.
// Returns invalid_argument for bad params, io_error (with the OS reason) when path cannot be written.
Status mkmodel_write(const mkmodel_params & params, const std::string & path);

// mkmodel_ensure is mkmodel_write unless a file already exists at path (the model caches of the tests,
// the benchmarks and the fuzz seed maker). Concurrent callers are safe: each writes atomically.
Status mkmodel_ensure(const mkmodel_params & params, const std::string & path);

}  // namespace baton
