// sampling.h — generation options and the libllama sampler chain built from them.
//
// One function builds the chain, so the single-node oracle, the engine and the decode side sample
// identically for identical options and seed. Thread-safety: a sampler chain belongs to one slot.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "baton/base/status.h"
#include "baton/grammar_check.h"
#include "baton/model.h"

struct llama_sampler;
struct llama_vocab;

namespace baton {

// A GBNF grammar the output must follow (llama-server's "grammar"; response_format and tools compile to one).
// lazy: the grammar applies only from the first match of one of trigger_patterns (regexes matched against
// the output from its start; the grammar is fed from the first capture group), e.g. a tool call's opening tag.
inline constexpr size_t grammar_bytes_max = size_t(1) << 20;

struct sampling_grammar {
    std::string gbnf;  // empty: no grammar
    bool lazy = false;
    std::vector<std::string> trigger_patterns;
    bool operator==(const sampling_grammar &) const = default;
};

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
    sampling_grammar grammar;
    // What grammar_check holds the grammar to: the node's --grammar-max-* (never read from a request; a
    // request parsed with a node's defaults carries them to the engine, which checks them again).
    grammar_limits grammar_bounds;
    bool operator==(const sampling_params &) const = default;  // floats by value (0.0 == -0.0)
};

// sampling_check returns invalid_argument naming the first out-of-range field (logit_bias: at most 1024
// entries, token ids >= 0, biases in -100..100 or -infinity; ids beyond the vocabulary are the caller's to
// check, sampling_make_chain skips none; grammar: at most 1 MiB, at most 16 trigger patterns, and
// grammar_check's structure limits (grammar_bounds, themselves within grammar_limits_cap); whether libllama
// accepts it for a vocabulary is sampling_check_grammar's).
Status sampling_check(const sampling_params & p);

struct sampler_deleter {
    void operator()(llama_sampler * s) const;
};
using sampler_ptr = std::unique_ptr<llama_sampler, sampler_deleter>;

// The text of every token of a vocabulary (control tokens as ""), indexed by id: what the UTF-8 guard of a
// grammar chain checks candidates against. Built once per model (sampling_token_pieces), shared.
using token_pieces = std::shared_ptr<const std::vector<std::string>>;
token_pieces sampling_token_pieces(const llama_vocab * vocab);

// sampling_make_chain builds: logit_bias -> [utf8 guard -> grammar] -> penalties -> top_k -> top_p -> min_p -> temp ->
// dist(seed), or logit_bias -> grammar -> penalties -> greedy at temperature <= 0 (the grammar, when there is
// one, removes every token that cannot continue it, so nothing after it can pick one). A grammar comes with
// a guard that keeps the output valid UTF-8 (libllama's grammar sampler does not check the bytes of a
// character split over byte tokens, src/engine/utf8_guard.h); pieces is its table (null: built here).
// REQUIRES: every logit_bias id < the vocabulary's size. Errors: invalid_argument when grammar_check refuses
// the grammar (libllama never sees it) or libllama's GBNF parser rejects it (or a trigger pattern).
Result<sampler_ptr> sampling_make_chain(const sampling_params & p, const llama_vocab * vocab,
                                        const token_pieces & pieces = nullptr);

// sampling_sample applies chain to logits[0..n) and accepts the chosen token. Returns -1 when every
// candidate was removed (nothing may follow, e.g. a complete grammar while logit_bias forbids
// end-of-generation: the generation ends there; accepting a token the grammar removed would make libllama
// throw or abort), engine_error when libllama's sampler threw.
Result<int32_t> sampling_sample(llama_sampler * chain, const float * logits, size_t n);

// sampling_replay brings a fresh chain (sampling_make_chain, same params) to the state it reached after sampling
// `generated`, token by token: each is accepted (the grammar, the penalties' window and the UTF-8 guard follow the
// tokens alone), and the final dist sampler's RNG advances by one draw per token (libllama's dist sampler draws
// once per call whatever the candidates: pinned by SamplingReplay tests). So a generation that moves to another
// node continues with the tokens it would have sampled where it was (live migration). incompatible when the
// chain refuses a token (a grammar it does not continue); the chain is then unusable.
Status sampling_replay(llama_sampler * chain, std::span<const int32_t> generated);

// sampling_check_grammar: whether p's grammar passes grammar_check (p.grammar_bounds) and then libllama
// accepts it for vocab (builds and frees its sampler).
Status sampling_check_grammar(const sampling_params & p, const llama_vocab * vocab);
// The same for the modules above the engine, which never see libllama's types: model's vocabulary.
inline Status sampling_check_grammar(const sampling_params & p, const loaded_model & model) {
    return sampling_check_grammar(p, model.vocab());
}

}  // namespace baton
