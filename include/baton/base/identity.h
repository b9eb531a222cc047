// identity.h — what a state blob must match to be restored: the model's identity and the KV layout.
//
// One definition shared by every side: the engine fills them from its model and context, the blob writer
// records them, the parser returns them and blob_check_compatible (blob.h) compares them. A
// context_config (context.h) *is* a kv_layout plus the settings that do not change the state's bytes.
// Thread-safety: plain values.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

namespace baton {

// model_identity: the model a blob's state was computed with.
struct model_identity {
    std::array<uint8_t, 16> fingerprint{};  // XXH3-128 of the GGUF file's bytes, big-endian digest (model.h)
    std::string llama_version;              // llama_version() of the libllama that wrote the state, "0.7.0"
    std::string arch;                       // general.architecture
    uint32_t n_layer = 0;
    uint32_t n_embd = 0;
    uint32_t n_vocab = 0;

    bool operator==(const model_identity &) const = default;
};

// kv_layout: the context settings libllama's state reader depends on, plus the cell count that bounds how
// many tokens a sequence can hold.
struct kv_layout {
    uint32_t n_ctx = 0;       // KV cells in the context (0 in a kv_layout: not known); not a compatibility
                              // rule by itself, but a blob's tokens must fit a node's cells per sequence
    int32_t type_k = 1;       // ggml_type of the K cache (1 = f16)
    int32_t type_v = 1;       // ggml_type of the V cache
    bool flash_attn = false;  // V is stored transposed when flash attention is off
    bool kv_unified = true;   // one KV buffer for all sequences; false: one stream per sequence, restorable
                              // only with the same n_seq_max
    uint32_t n_seq_max = 1;   // sequences (slots) in the context

    bool operator==(const kv_layout &) const = default;
};

// hex_encode renders bytes as lowercase hex digits, two per byte.
std::string hex_encode(std::span<const uint8_t> bytes);

// identity_fingerprint_hex renders a model fingerprint as 32 lowercase hex digits.
std::string identity_fingerprint_hex(const std::array<uint8_t, 16> & fp);

// identity_kv_type_name names a ggml_type number ("f16", "q8_0"; "type#N" when unknown), the names
// llama-server's -ctk/-ctv take.
std::string identity_kv_type_name(int32_t type);

}  // namespace baton
