// model.h — loading a GGUF model through libllama, with the identity Baton records in every blob.
//
// A loaded_model owns a llama_model and knows its identity: the fingerprint (XXH3-128 over the GGUF file's
// bytes, i.e. its metadata, tensor descriptions and tensor data; computed once per load), the libllama
// version, the architecture name and shape. It also reads, once, what the modules above the engine need of
// a model (model_info: special-token texts, the chat template, the training context), so they never touch
// libllama's types. Thread-safety: immutable after load; llama_model is safe to share between contexts.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "baton/base/identity.h"
#include "baton/base/status.h"
#include "baton/device.h"

struct llama_model;
struct llama_vocab;

namespace baton {

// model_fingerprint_file hashes a file's bytes (streaming, bounded memory).
Result<std::array<uint8_t, 16>> model_fingerprint_file(const std::string & path);

// model_info: a model's metadata as plain values, for the modules above the engine (the chat formatter,
// /props, the node's default context). Filled by loaded_model::load; a test builds one by hand to stand for
// a model. The vocabulary's size is model_identity::n_vocab.
struct model_info {
    std::string bos_text;  // the BOS token's text ("<s>"); "" when the vocabulary has none
    std::string eos_text;  // the EOS token's text ("</s>", "<|im_end|>"); "" when the vocabulary has none
    bool add_bos = false;  // text_tokenize(..., add_special = true) puts BOS first
    bool add_eos = false;  // ... and EOS last
    std::optional<std::string> chat_template;  // tokenizer.chat_template; nullopt when absent or empty
    uint32_t n_ctx_train = 0;  // tokens: the context the model was trained with (0 after a vocab_only load)

    bool operator==(const model_info &) const = default;
};

struct model_load_params {
    offload_config offload;  // default: CPU only (-dev none), whatever devices ggml found
    bool quiet = true;       // route libllama's logs to nowhere except errors
    bool vocab_only = false; // load only the vocabulary and metadata (no weights, no fingerprint)
};

class loaded_model {
  public:
    ~loaded_model();
    loaded_model(const loaded_model &) = delete;
    loaded_model & operator=(const loaded_model &) = delete;

    // load reads the GGUF at path and computes its identity. io_error if the file cannot be read,
    // invalid_argument if libllama rejects it.
    static Result<std::unique_ptr<loaded_model>> load(const std::string & path, const model_load_params & params = {});

    // get, vocab: libllama's handles, for the engine itself (other modules use info() and the
    // loaded_model forms of text.h and sampling.h; scripts/check-deps keeps libllama's types inside the engine).
    llama_model * get() const { return model_; }
    const llama_vocab * vocab() const;
    const model_identity & identity() const { return identity_; }
    const model_info & info() const { return info_; }
    const std::string & path() const { return path_; }
    // placement: the devices in use and how many layers (with their KV cache) libllama put on them.
    const offload_placement & placement() const { return placement_; }
    bool is_recurrent() const;
    bool is_hybrid() const;
    // n_swa: the sliding window of the model's SWA layers (0: no sliding-window attention).
    int32_t n_swa() const;
    // positions_2d: M-RoPE models (Qwen2-VL, Qwen3-VL and kin) give each token four position components;
    // libllama keeps two of them (x, y) in every attention cell beside its position and writes them in states.
    bool positions_2d() const;
    // has_partial_state: memory that cannot be truncated and needs checkpoints to roll back: recurrent and
    // hybrid models, and sliding-window ones (their SWA cache keeps only the last n_swa positions, so
    // removing the tail cannot bring back the cells the window already dropped).
    bool has_partial_state() const { return is_recurrent() || is_hybrid() || n_swa() > 0; }

  private:
    loaded_model() = default;
    llama_model * model_ = nullptr;
    model_identity identity_;
    model_info info_;
    std::string path_;
    offload_placement placement_;
};

// libllama_version: the linked libllama's version ("0.7.0"), what model_identity::llama_version records.
std::string libllama_version();

// llama_quiet_logs sends libllama's and ggml's log messages to Baton's logger (base/log.h) as "llama: ..." at
// their level: only errors, or every message when BATON_LLAMA_LOG is set (read once). Idempotent.
void llama_quiet_logs();

// llama_backend_once initializes the libllama backend once per process, with the quiet logs installed first
// (ggml loads its backends then and reports each one). Thread-safe.
void llama_backend_once();

}  // namespace baton
