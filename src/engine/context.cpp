// context.cpp — llama_context creation from a context_config.
#include "baton/context.h"

#include <ggml.h>
#include <llama.h>

#include "baton/blob.h"
#include "baton/model.h"

#include <cstdlib>

namespace baton {
namespace {

// The KV cache types llama-server's -ctk/-ctv accept.
constexpr ggml_type k_kv_types[] = {GGML_TYPE_F32,  GGML_TYPE_F16,    GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0,
                                    GGML_TYPE_Q4_1, GGML_TYPE_IQ4_NL, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1};

bool kv_type_allowed(int32_t t) {
    for (ggml_type k : k_kv_types)
        if (int32_t(k) == t) return true;
    return false;
}

std::string kv_types_list() {
    std::string out;
    for (ggml_type k : k_kv_types) out += (out.empty() ? "" : ", ") + std::string(ggml_type_name(k));
    return out;
}

}  // namespace

Result<int32_t> kv_cache_type_parse(const std::string & s, const std::string & flag) {
    for (ggml_type k : k_kv_types)
        if (s == ggml_type_name(k)) return int32_t(k);
    return Status(status_code::invalid_argument, flag + ": '" + s + "' is not one of " + kv_types_list());
}

Status flash_attn_parse(const std::string & s, context_config & c) {
    if (s != "on" && s != "off" && s != "auto")
        return Status(status_code::invalid_argument, "-fa/--flash-attn: '" + s + "' is not on, off or auto");
    c.flash_attn = s == "on";
    c.flash_attn_auto = s == "auto";
    return {};
}

context_config context_resolve(const loaded_model & model, const context_config & in) {
    context_config c = in;
    if (c.flash_attn_auto)
        c.flash_attn = model.placement().layers_on_device > 0 || ggml_is_quantized(ggml_type(c.type_v));
    c.flash_attn_auto = false;
    return c;
}

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
    if (c.n_threads_batch < 0 || c.n_threads_batch > 1024)
        return bad("threads-batch: " + std::to_string(c.n_threads_batch) + " is not in 0..1024");
    if (!kv_type_allowed(c.type_k))
        return bad("type_k (-ctk): ggml type " + std::to_string(c.type_k) + " is not one of " + kv_types_list());
    if (!kv_type_allowed(c.type_v))
        return bad("type_v (-ctv): ggml type " + std::to_string(c.type_v) + " is not one of " + kv_types_list());
    if (ggml_is_quantized(ggml_type(c.type_v)) && !c.flash_attn && !c.flash_attn_auto)
        return bad(std::string("-ctv ") + ggml_type_name(ggml_type(c.type_v)) +
                   ": a quantized V cache needs flash attention (-fa on); libllama refuses it otherwise");
    return {};
}

// A quantized cache stores rows of whole blocks: the head size must be a multiple of the block size
// (libllama refuses the context otherwise; this says which flag to change).
Status check_kv_blocks(const loaded_model & model, const context_config & c) {
    llama_model * m = model.get();
    const int32_t n_head = llama_model_n_head(m);
    if (n_head <= 0) return {};  // no attention (recurrent models): no KV cache rows
    auto head_size = [&](const char * key) {
        char buf[32];
        const std::string k = model.identity().arch + ".attention." + key;
        if (llama_model_meta_val_str(m, k.c_str(), buf, sizeof buf) > 0) return int64_t(std::atoll(buf));
        return int64_t(llama_model_n_embd(m) / n_head);
    };
    const struct {
        const char * flag;
        int32_t type;
        int64_t head;
    } caches[] = {{"-ctk", c.type_k, head_size("key_length")}, {"-ctv", c.type_v, head_size("value_length")}};
    for (const auto & k : caches) {
        const int64_t blck = ggml_blck_size(ggml_type(k.type));
        if (k.head > 0 && k.head % blck != 0)
            return {status_code::invalid_argument,
                    std::string(k.flag) + " " + ggml_type_name(ggml_type(k.type)) + ": its block size " +
                        std::to_string(blck) + " does not divide the model's attention head size " +
                        std::to_string(k.head) + " (choose f16, bf16 or f32 for this model)"};
    }
    return {};
}

Result<context_ptr> context_make(const loaded_model & model, const context_config & in) {
    BATON_RETURN_IF_ERROR(context_check(in));
    const context_config c = context_resolve(model, context_normalized(in));
    BATON_RETURN_IF_ERROR(check_kv_blocks(model, c));
    llama_context_params p = llama_context_default_params();
    p.n_ctx = c.n_ctx;
    p.n_batch = c.n_batch;
    p.n_ubatch = c.n_ubatch;
    p.n_seq_max = c.n_seq_max;
    p.n_threads = c.n_threads;
    p.n_threads_batch = c.n_threads_batch > 0 ? c.n_threads_batch : c.n_threads;
    p.kv_unified = c.kv_unified;
    p.flash_attn_type = c.flash_attn ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    p.type_k = ggml_type(c.type_k);
    p.type_v = ggml_type(c.type_v);
    p.no_perf = true;
    p.embeddings = c.embeddings;
    p.pooling_type = static_cast<enum llama_pooling_type>(c.pooling_type);
    // A sliding-window cache of the window's size (llama-server's default; libllama's is full size): SWA
    // layers keep only the last n_swa positions, so the engine treats them as partial state.
    p.swa_full = false;
    llama_context * ctx = llama_init_from_model(model.get(), p);
    if (!ctx)
        return Status(status_code::engine_error,
                      "libllama could not create a context (n_ctx " + std::to_string(c.n_ctx) + ", slots " +
                          std::to_string(c.n_seq_max) + ", KV " + ggml_type_name(ggml_type(c.type_k)) + "/" +
                          ggml_type_name(ggml_type(c.type_v)) + ", flash attention " + (c.flash_attn ? "on" : "off") +
                          "; set BATON_LLAMA_LOG=1 for libllama's reason)");
    return context_ptr(ctx);
}

}  // namespace baton
