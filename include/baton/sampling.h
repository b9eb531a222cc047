// sampling.h — generation options and the libllama sampler chain built from them.
//
// One function builds the chain, so the single-node oracle, the engine and the decode side sample
// identically for identical options and seed. Thread-safety: a sampler chain belongs to one slot.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
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
};

// sampling_check returns invalid_argument naming the first out-of-range field.
Status sampling_check(const sampling_params & p);

struct sampler_deleter {
    void operator()(llama_sampler * s) const;
};
using sampler_ptr = std::unique_ptr<llama_sampler, sampler_deleter>;

// sampling_make_chain builds: penalties -> top_k -> top_p -> min_p -> temp -> dist(seed), or greedy at
// temperature <= 0.
sampler_ptr sampling_make_chain(const sampling_params & p, int32_t n_vocab);

}  // namespace baton
