// mkmodel.h — generate small deterministic GGUF test models (random weights, SentencePiece byte-fallback
// vocabulary, a ChatML chat template) for the architectures Baton is tested on.
//
// The same params give a byte-identical file: weights come from a splitmix64 stream seeded by `seed` and
// converted to floats with integer arithmetic only. The file is written to a temporary sibling and renamed
// into place, so a failure never leaves a partial file at `path`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "baton/status.h"

namespace baton {

struct mkmodel_params {
    std::string arch = "llama";  // llama | mamba2 | granitehybrid | lfm2
    uint64_t seed = 1;
    int n_embd = 64;    // embedding width; a multiple of 32, 32..8192
    int n_layer = 4;    // 1..256 (hybrids need >= 2 to hold both kinds of layer)
    int n_ctx = 4096;   // training context length written to <arch>.context_length, 16..1048576
    bool chat_template = true;  // write tokenizer.chat_template (ChatML); false: a model without a template
};

// mkmodel_archs lists the supported architecture names.
const std::vector<std::string> & mkmodel_archs();

// mkmodel_check_params returns invalid_argument naming the bad field, or ok.
Status mkmodel_check_params(const mkmodel_params & params);

// mkmodel_write builds the model described by params and writes it to path atomically.
// Returns invalid_argument for bad params, io_error (with the OS reason) when path cannot be written.
Status mkmodel_write(const mkmodel_params & params, const std::string & path);

// mkmodel_ensure is mkmodel_write unless a file already exists at path (the model caches of the tests,
// the benchmarks and the fuzz seed maker). Concurrent callers are safe: each writes atomically.
Status mkmodel_ensure(const mkmodel_params & params, const std::string & path);

}  // namespace baton
