// embeddings.h — the embedding endpoints' dialect: llama-server's /embedding (/embeddings) and OpenAI's
// /v1/embeddings, parsed into inputs and rendered from the embedder's results (embedder.h).
//
// Request: "input" (or llama-server's "content"): a string, an array of strings, an array of token ids, or an
// array of token-id arrays — one input each; at most openai_embedding_inputs_max inputs. "encoding_format"
// ("float" default, or "base64": the float32 little-endian bytes), "embd_normalize" (llama-server's: -1..,
// default the node's --embd-normalize), "model" (echoed, as llama-server does). "dimensions" is refused (a
// model's width is fixed). Strings are tokenized by the node with the model's specials (BOS, ...) as
// llama-server does.
// Responses: /v1/embeddings {"model","object":"list","usage":{"prompt_tokens","total_tokens"},
// "data":[{"embedding","index","object":"embedding"}]} — pooling none is refused there (OpenAI's shape is one
// vector); /embedding [{"index","embedding":[[...], ...]}] with one vector, or with pooling none one per token.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "baton/base/status.h"
#include "baton/embedder.h"
#include "baton/openai/openai.h"

namespace baton {

inline constexpr size_t openai_embedding_inputs_max = 2048;

struct openai_embedding_request {
    std::vector<std::variant<std::string, std::vector<token_id>>> inputs;
    bool base64 = false;
    std::optional<int32_t> normalize;  // embd_normalize; nullopt: the node's
    std::string model;                 // as the client named it ("" if not)
};

// openai_embedding_parse reads a request (either endpoint's); invalid_argument / too_large naming the field.
Result<openai_embedding_request> openai_embedding_parse(std::string_view body, const prompt_limits & lim);

// openai_embedding_json renders results as /v1/embeddings (oai) or /embedding answers. REQUIRES: results in
// input order; for oai, pooled (one vector each).
std::string openai_embedding_json(const openai_embedding_request & r, const std::vector<embedding_result> & results,
                                  bool oai, const std::string & model_name);

}  // namespace baton
