// embedder.h — embeddings of texts (llama-server's --embedding): a context of its own with libllama's pooling,
// many inputs decoded together.
//
// An embedder owns one llama_context made with embeddings on and the pooling asked for (none, mean, cls,
// last, rank; unspecified: the model's own). embed() packs the inputs into batches of at most
// embedder_pack_tokens_max tokens (an input longer than that goes alone, up to n_batch) and n_seq_max sequences, one sequence per input, decodes each batch from an empty memory and reads the
// pooled vector of each sequence (pooling none: one vector per token). Pooled vectors are normalized as
// llama-server's --embd-normalize says: -1 none, 0 max-abs scaled to int16 range, 1 taxicab, 2 euclidean
// (default), p > 2 the p-norm; per-token vectors are not.
// Errors: an input longer than n_batch (a sequence must fit one batch), empty, or holding a token outside
// the vocabulary is invalid_argument naming its index; libllama refusing a batch is engine_error.
// Thread-safety: embed() may be called from any thread; calls are serialized (one context).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "baton/base/status.h"
#include "baton/base/thread_annotations.h"
#include "baton/context.h"
#include "baton/text.h"

namespace baton {

// With one unified memory every token of a batch attends over every cell the batch fills, so packing more
// inputs into a decode costs attention quadratically: 256 tokens measured best (figure 20, docs/benchmarks.md).
inline constexpr size_t embedder_pack_tokens_max = 256;

enum class pooling_kind : int8_t { none = 0, mean = 1, cls = 2, last = 3, rank = 4 };
const char * pooling_kind_name(pooling_kind p);  // "none" | "mean" | "cls" | "last" | "rank"
// pooling_kind_parse: llama-server's --pooling values; invalid_argument otherwise.
Result<pooling_kind> pooling_kind_parse(const std::string & s);

struct embedder_config {
    std::optional<pooling_kind> pooling;  // nullopt: the model's default (libllama's)
    uint32_t n_batch = 2048;              // tokens per batch; an input must fit one
    uint32_t n_seq_max = 32;              // inputs per batch
    int32_t n_threads = 2;
    int32_t normalize = 2;  // --embd-normalize
};

// One input's result: its pooled vector (vectors.size() == 1), or with pooling none one vector per token.
struct embedding_result {
    std::vector<std::vector<float>> vectors;
    uint32_t n_tokens = 0;
};

// embedding_normalize applies --embd-normalize's rule to v in place (see above).
void embedding_normalize(std::vector<float> & v, int32_t mode);

class embedder {
  public:
    static Result<std::unique_ptr<embedder>> create(const loaded_model & model, const embedder_config & cfg);
    ~embedder();
    embedder(const embedder &) = delete;
    embedder & operator=(const embedder &) = delete;

    // embed computes every input's result, in order; normalize: the request's --embd-normalize.
    Result<std::vector<embedding_result>> embed(const std::vector<std::vector<token_id>> & inputs, int32_t normalize);

    pooling_kind pooling() const { return pooling_; }
    int32_t n_embd() const { return n_embd_; }  // a pooled vector's length (rank: the classifier's outputs)
    const embedder_config & config() const { return cfg_; }

  private:
    embedder() = default;
    embedder_config cfg_;
    pooling_kind pooling_ = pooling_kind::mean;
    int32_t n_embd_ = 0;
    int32_t n_vocab_ = 0;
    mutable mutex mu_;
    context_ptr ctx_ BATON_GUARDED_BY(mu_);
};

}  // namespace baton
