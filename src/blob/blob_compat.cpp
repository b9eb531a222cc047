// blob_compat.cpp — blob_check_compatible: can a valid blob be restored into this node's model and context?
//
// libllama's state reader checks little on its own (measured on 0.7.0: it accepts a state from a same-shaped
// but different model), so every field it depends on is compared here, before a slot is touched. The first
// difference wins; context differences name the node flag that fixes them.
#include <algorithm>

#include "baton/blob.h"

namespace baton {
namespace {

Status incompatible(const std::string & m) { return Status(status_code::incompatible, m); }

const char * on_off(bool b) { return b ? "on" : "off"; }

}  // namespace

Status blob_check_compatible(const blob_view & blob, const model_identity & node, const kv_layout & node_ctx) {
    const model_identity & id = blob.identity;
    const std::string bn = " (blob vs node)";
    if (id.arch != node.arch) return incompatible("arch " + id.arch + " vs " + node.arch + bn);
    if (id.n_layer != node.n_layer)
        return incompatible("n_layer " + std::to_string(id.n_layer) + " vs " + std::to_string(node.n_layer) + bn);
    if (id.n_embd != node.n_embd)
        return incompatible("n_embd " + std::to_string(id.n_embd) + " vs " + std::to_string(node.n_embd) + bn);
    if (id.n_vocab != node.n_vocab)
        return incompatible("n_vocab " + std::to_string(id.n_vocab) + " vs " + std::to_string(node.n_vocab) + bn);
    if (id.fingerprint != node.fingerprint)
        return incompatible("model fingerprint differs: blob " + identity_fingerprint_hex(id.fingerprint) +
                            " vs node " + identity_fingerprint_hex(node.fingerprint) +
                            " (the blob was made with a different model file)");
    if (id.llama_version != node.llama_version)
        return incompatible("llama_version " + id.llama_version + " vs " + node.llama_version + bn +
                            ": libllama's state layout may differ between versions");

    const kv_layout & c = blob.context;
    if (c.type_k != node_ctx.type_k)
        return incompatible("type_k " + identity_kv_type_name(c.type_k) + " vs " +
                            identity_kv_type_name(node_ctx.type_k) + bn + ": restart the node with -ctk " +
                            identity_kv_type_name(c.type_k));
    if (c.type_v != node_ctx.type_v)
        return incompatible("type_v " + identity_kv_type_name(c.type_v) + " vs " +
                            identity_kv_type_name(node_ctx.type_v) + bn + ": restart the node with -ctv " +
                            identity_kv_type_name(c.type_v));
    if (c.flash_attn != node_ctx.flash_attn)
        return incompatible(std::string("flash_attn ") + on_off(c.flash_attn) + " vs " + on_off(node_ctx.flash_attn) +
                            bn + ": the V cache layout differs; restart the node with -fa " + on_off(c.flash_attn));
    if (c.kv_unified != node_ctx.kv_unified)
        return incompatible(std::string("kv_unified ") + on_off(c.kv_unified) + " vs " + on_off(node_ctx.kv_unified) +
                            bn + ": restart the node with " + (c.kv_unified ? "--kv-unified" : "--no-kv-unified"));
    // A non-unified cache writes one stream per sequence slot: only the same slot count reads it back.
    if (!c.kv_unified && c.n_seq_max != node_ctx.n_seq_max)
        return incompatible("n_seq_max " + std::to_string(c.n_seq_max) + " vs " + std::to_string(node_ctx.n_seq_max) +
                            " (blob vs node, non-unified KV cache): restart the node with -np " +
                            std::to_string(c.n_seq_max) + " (or make blobs with --kv-unified)");
    if (node_ctx.n_ctx != 0) {
        const uint64_t per_seq = node_ctx.kv_unified ? node_ctx.n_ctx : node_ctx.n_ctx / std::max(1u, node_ctx.n_seq_max);
        if (blob.tokens.size() > per_seq)
            return incompatible("tokens: n_tokens " + std::to_string(blob.tokens.size()) + " > the node's " +
                                std::to_string(per_seq) + " cells per sequence: restart the node with a larger -c");
    }
    return {};
}

}  // namespace baton
