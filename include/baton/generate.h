// generate.h — single-process, single-sequence generation: Baton's oracle.
//
// A deliberately plain loop (tokenize, feed the prompt in n_batch chunks, sample, feed the token) that
// shares nothing with the engine but the context config and the sampler chain. Prefill -> blob -> decode
// must reproduce what this produces, token for token.
#pragma once

#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "baton/base/status.h"
#include "baton/context.h"
#include "baton/sampling.h"
#include "baton/text.h"

namespace baton {

class loaded_model;

struct generate_params {
    // The prompt: text (tokenized with BOS, control tokens as text) or token ids as they are.
    std::variant<std::string, std::vector<token_id>> prompt;
    int32_t n_predict = 32;               // tokens to generate at most (stops early at end-of-generation)
    bool record_logits = false;           // keep the logits every sampled token was drawn from
    sampling_params sampling;
    context_config ctx;
};

struct generate_output {
    std::vector<token_id> prompt_tokens;
    std::vector<token_id> tokens;            // generated, excluding a final end-of-generation token
    std::string text;                        // bytes of the generated tokens
    std::vector<std::vector<float>> logits;  // [n_steps][n_vocab] when record_logits
    bool stopped_eog = false;
};

// generate_run generates; on_piece (optional) receives each token's bytes as it is produced.
Result<generate_output> generate_run(const loaded_model & model, const generate_params & params,
                                     const std::function<void(const std::string &)> & on_piece = {});

}  // namespace baton
