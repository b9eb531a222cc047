// infill.h — the prompt of llama-server's /infill (fill in the middle): what a node tokenizes for it before it
// goes on as a /completion of those tokens (src/node/generation.cpp, prepare).
//
// The layout is llama-server's, so the same model continues the same tokens:
//   [extra context] [BOS if the vocabulary adds one] FIM_PRE prefix prompt FIM_SUF suffix FIM_MID
// where the extra context is FIM_REP "myproject\n", then per input_extra chunk FIM_SEP "<filename>\n" <text>
// (without FIM_SEP: "\n\n--- snippet ---\n\n" <text>), then FIM_SEP "filename\n". Truncation, as llama-server's:
// the prefix keeps its last 3/4 * n_batch tokens, the suffix its first n_batch/4 - (2 + |prompt|), and the
// extra context its last n_ctx - n_batch - 2 * n_predict (none when that is not positive). Texts are
// tokenized without special tokens, the prompt with them (it may hold control tokens). The suffix-first
// order (llama-server's --spm-infill) is not offered.
// Errors: not_implemented when the model has no FIM prefix, suffix or middle token (llama-server's 501).
// Thread-safety: a pure function of its arguments.
#pragma once

#include <cstdint>
#include <vector>

#include "baton/base/status.h"
#include "baton/openai/openai.h"
#include "baton/text.h"

namespace baton {

// infill_tokens builds the prompt of in for model. n_batch: the node's -b; n_predict: the node's -n (-1:
// none); n_ctx: a slot's context.
Result<std::vector<token_id>> infill_tokens(const openai_infill & in, const loaded_model & model, uint32_t n_batch,
                                            int32_t n_predict, uint32_t n_ctx);

}  // namespace baton
