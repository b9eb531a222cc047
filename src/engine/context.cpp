// context.cpp — llama_context creation from a context_config.
#include "baton/context.h"

#include <ggml.h>
#include <llama.h>

#include "baton/blob.h"
#include "baton/model.h"

namespace baton {

void context_deleter::operator()(llama_context * c) const { llama_free(c); }

context_config context_normalized(const context_config & in) {
    context_config c = in;
    if (c.n_batch > c.n_ctx) c.n_batch = c.n_ctx;
    if (c.n_ubatch > c.n_batch) c.n_ubatch = c.n_batch;
    return c;
}

Status context_check(const context_config & in) {
    const context_config c = context_normalized(in);
    auto bad = [](const std::string & m) { return Status(status_code::invalid_argument, m); };
    if (c.n_ctx < 16 || c.n_ctx > (1u << 24)) return bad("n_ctx: " + std::to_string(c.n_ctx) + " is not in 16..16777216");
    if (c.n_batch < 1 || c.n_batch > c.n_ctx) return bad("n_batch: " + std::to_string(c.n_batch) + " is not in 1..n_ctx");
    if (c.n_ubatch < 1 || c.n_ubatch > c.n_batch) return bad("n_ubatch: must be in 1..n_batch");
    if (c.n_seq_max < 1 || c.n_seq_max > 256) return bad("n_seq_max (slots): " + std::to_string(c.n_seq_max) + " is not in 1..256");
    if (c.n_threads < 1 || c.n_threads > 1024) return bad("threads: " + std::to_string(c.n_threads) + " is not in 1..1024");
    if (c.type_k < 0 || c.type_k >= GGML_TYPE_COUNT) return bad("type_k: unknown ggml type " + std::to_string(c.type_k));
    if (c.type_v < 0 || c.type_v >= GGML_TYPE_COUNT) return bad("type_v: unknown ggml type " + std::to_string(c.type_v));
    return {};
}

Result<context_ptr> context_make(const loaded_model & model, const context_config & in) {
    BATON_RETURN_IF_ERROR(context_check(in));
    const context_config c = context_normalized(in);
    llama_context_params p = llama_context_default_params();
    p.n_ctx = c.n_ctx;
    p.n_batch = c.n_batch;
    p.n_ubatch = c.n_ubatch;
    p.n_seq_max = c.n_seq_max;
    p.n_threads = c.n_threads;
    p.n_threads_batch = c.n_threads;
    p.kv_unified = c.kv_unified;
    p.flash_attn_type = c.flash_attn ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    p.type_k = ggml_type(c.type_k);
    p.type_v = ggml_type(c.type_v);
    p.no_perf = true;
    llama_context * ctx = llama_init_from_model(model.get(), p);
    if (!ctx) return Status(status_code::engine_error, "libllama could not create a context (n_ctx " +
                                                           std::to_string(c.n_ctx) + ", slots " + std::to_string(c.n_seq_max) + ")");
    return context_ptr(ctx);
}

}  // namespace baton
