// context.h — llama_context configuration shared by every path that creates a context.
//
// The oracle (baton generate), the engine and the benchmarks create contexts only through context_make,
// so identical configs give identical numerics. The fields that decide whether a state blob can be
// restored (type_k, type_v, flash_attn, kv_unified, n_seq_max) are recorded in every blob.
// Thread-safety: a llama_context is used by one thread at a time (the engine's scheduler thread).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "baton/base/identity.h"
#include "baton/base/status.h"
#include "baton/chunk_plan.h"

struct llama_context;

namespace baton {

class loaded_model;

// context_config: the kv_layout (which decides whether a blob restores) plus what does not change the
// state's bytes. n_ctx is the total of KV cells (shared by all sequences when kv_unified); n_seq_max is the
// number of slots.
struct context_config : kv_layout {
    context_config() { n_ctx = 4096; }
    uint32_t n_batch = 512;    // max tokens per llama_decode; prompts are fed in chunks of this size
    uint32_t n_ubatch = 512;   // physical micro-batch
    int32_t n_threads = 2;
    int32_t n_threads_batch = 0;  // threads for prompt batches (-tb); 0: n_threads
    // -fa auto: flash_attn is decided by context_resolve once the model is loaded (see there).
    bool flash_attn_auto = false;
    // Where prompts are cut and checkpointed (models with recurrent/SWA state): part of the numerics.
    checkpoint_policy checkpoints;
    // An embedding context (embedder.h): outputs embeddings, pooled as pooling_type says (libllama's
    // llama_pooling_type; -1 the model's default). Generation contexts leave these alone.
    bool embeddings = false;
    int32_t pooling_type = -1;
};

// context_normalized clamps n_batch and n_ubatch to n_ctx (a batch can never exceed the context).
context_config context_normalized(const context_config & c);

// context_check returns invalid_argument naming the bad field (and the flag that sets it): sizes, thread
// counts, KV cache types (those llama-server's -ctk/-ctv allow), and a quantized V cache without flash
// attention, which libllama refuses.
Status context_check(const context_config & c);

// kv_cache_type_parse: "f16" -> the ggml type (f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1), else
// invalid_argument naming `flag`.
Result<int32_t> kv_cache_type_parse(const std::string & s, const std::string & flag);

// flash_attn_parse: on | off | auto (llama-server's -fa) into c's flash_attn / flash_attn_auto.
// invalid_argument otherwise.
Status flash_attn_parse(const std::string & s, context_config & c);

// context_resolve decides -fa auto for a loaded model: on when any layer is on a GPU device or the V cache is
// quantized (which needs it), off when everything runs on the CPU. (llama-server turns it on for the CPU
// too; Baton does not, because with flash attention the CPU kernels make a long-running node's output
// depend in the last bits on where its sequence's cells sit — docs/engine.md, "Flash attention".) The
// result has flash_attn_auto false; a blob records the resolved value. context_make and the engine resolve
// their config through it.
context_config context_resolve(const loaded_model & model, const context_config & c);

struct context_deleter {
    void operator()(llama_context * c) const;
};
using context_ptr = std::unique_ptr<llama_context, context_deleter>;

// context_make creates a context for model with config c. engine_error if libllama refuses.
Result<context_ptr> context_make(const loaded_model & model, const context_config & c);

}  // namespace baton
