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

#include "baton/chunk_plan.h"
#include "baton/identity.h"
#include "baton/status.h"

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
    // Where prompts are cut and checkpointed (models with recurrent/SWA state): part of the numerics.
    checkpoint_policy checkpoints;
};

// context_normalized clamps n_batch and n_ubatch to n_ctx (a batch can never exceed the context).
context_config context_normalized(const context_config & c);

// context_check returns invalid_argument naming the bad field.
Status context_check(const context_config & c);

struct context_deleter {
    void operator()(llama_context * c) const;
};
using context_ptr = std::unique_ptr<llama_context, context_deleter>;

// context_make creates a context for model with config c. engine_error if libllama refuses.
Result<context_ptr> context_make(const loaded_model & model, const context_config & c);

}  // namespace baton
