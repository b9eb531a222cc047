// sampling.h — generation options and the libllama sampler chain built from them.
//
// One function builds the chain, so the single-node oracle, the engine and the decode side sample
// identically for identical options and seed. Thread-safety: a sampler chain belongs to one slot.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "baton/status.h"

struct llama_sampler;
struct llama_vocab;

namespace baton {

struct sampling_params {
    float temperature = 0.8f;    // <= 0: greedy
    int32_t top_k = 40;          // <= 0: off
    float top_p = 0.95f;         // >= 1: off
    float min_p = 0.05f;         // <= 0: off
    float repeat_penalty = 1.0f; // 1: off
    int32_t repeat_last_n = 64;
    float frequency_penalty = 0.0f;
    float presence_penalty = 0.0f;
    uint32_t seed = 0xFFFFFFFFu; // LLAMA_DEFAULT_SEED: random
    // Added to a token's logit before every other sampler (-infinity: the token is never sampled); a
    // token may appear more than once (the biases add up).
    std::vector<std::pair<int32_t, float>> logit_bias;
};

// sampling_check returns invalid_argument naming the first out-of-range field (logit_bias: at most 1024
// entries, token ids >= 0, biases in -100..100 or -infinity; ids beyond the vocabulary are the caller's to
// check, sampling_make_chain skips none).
Status sampling_check(const sampling_params & p);

struct sampler_deleter {
    void operator()(llama_sampler * s) const;
};
using sampler_ptr = std::unique_ptr<llama_sampler, sampler_deleter>;

// sampling_make_chain builds: logit_bias -> penalties -> top_k -> top_p -> min_p -> temp -> dist(seed), or
// logit_bias -> penalties -> greedy at temperature <= 0. REQUIRES: every logit_bias id < n_vocab.
sampler_ptr sampling_make_chain(const sampling_params & p, int32_t n_vocab);

}  // namespace baton
