// model.h — loading a GGUF model through libllama, with the identity Baton records in every blob.
//
// A loaded_model owns a llama_model and knows its identity: the fingerprint (XXH3-128 over the GGUF file's
// bytes, i.e. its metadata, tensor descriptions and tensor data; computed once per load), the libllama
// version, the architecture name and shape. Thread-safety: immutable after load; llama_model is safe to
// share between contexts.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "baton/base/identity.h"
#include "baton/base/status.h"
#include "baton/device.h"

struct llama_model;
struct llama_vocab;

namespace baton {

// model_fingerprint_file hashes a file's bytes (streaming, bounded memory).
Result<std::array<uint8_t, 16>> model_fingerprint_file(const std::string & path);

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

    llama_model * get() const { return model_; }
    const llama_vocab * vocab() const;
    const model_identity & identity() const { return identity_; }
    const std::string & path() const { return path_; }
    // placement: the devices in use and how many layers (with their KV cache) libllama put on them.
    const offload_placement & placement() const { return placement_; }
    bool is_recurrent() const;
    bool is_hybrid() const;
    // n_swa: the sliding window of the model's SWA layers (0: no sliding-window attention).
    int32_t n_swa() const;
    // has_partial_state: memory that cannot be truncated and needs checkpoints to roll back: recurrent and
    // hybrid models, and sliding-window ones (their SWA cache keeps only the last n_swa positions, so
    // removing the tail cannot bring back the cells the window already dropped).
    bool has_partial_state() const { return is_recurrent() || is_hybrid() || n_swa() > 0; }

  private:
    loaded_model() = default;
    llama_model * model_ = nullptr;
    model_identity identity_;
    std::string path_;
    offload_placement placement_;
};

// llama_quiet_logs sends libllama's and ggml's log messages to Baton's logger (base/log.h) as "llama: ..." at
// their level: only errors, or every message when BATON_LLAMA_LOG is set (read once). Idempotent.
void llama_quiet_logs();

// llama_backend_once initializes the libllama backend once per process, with the quiet logs installed first
// (ggml loads its backends then and reports each one). Thread-safe.
void llama_backend_once();

}  // namespace baton
