// rerank.h — the rerank endpoints' dialect (/rerank, /reranking, /v1/rerank, /v1/reranking, as
// llama-server serves them): a request parsed into a query and documents, and the scores rendered.
//
// Request: "query" (a string, required), "documents" (a non-empty array of strings; Jina's and Cohere's
// shape) or "texts" (the same; Hugging Face TEI's shape, which also selects TEI's response), "top_n" (an
// integer >= 0: how many results; default all), "return_text" (TEI only: each result carries its text),
// "model" (echoed, as llama-server does). As llama-server's json_value, a "documents" that is not an array of
// strings falls back to "texts". At most openai_rerank_documents_max documents, and the texts the node
// tokenizes for them (every document with the query) at most --max-prompt-mb.
// Responses: Jina's {"model","object":"list","usage":{"prompt_tokens","total_tokens"},"results":[{"index",
// "relevance_score"}]} or TEI's [{"index","score","text"?}]; results sorted by score, highest first (equal
// scores in document order), cut to top_n; usage counts every document's tokens.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "baton/base/status.h"
#include "baton/openai/openai.h"

namespace baton {

inline constexpr size_t openai_rerank_documents_max = 2048;

struct openai_rerank_request {
    std::string query;
    std::vector<std::string> documents;
    std::optional<uint64_t> top_n;  // nullopt: every document
    bool tei = false;               // "texts" was given: TEI's response shape
    bool return_text = false;       // TEI: results carry their document's text
    std::string model;              // as the client named it ("" if not)
};

// One document's result: the model's score and the tokens its prompt took.
struct rerank_score {
    float score = 0;
    uint32_t n_tokens = 0;
};

// openai_rerank_parse reads a request; invalid_argument (llama-server's messages where it has one) or
// too_large naming the field.
Result<openai_rerank_request> openai_rerank_parse(std::string_view body, const prompt_limits & lim);

// openai_rerank_order: the document indices by score, highest first (a stable order), at most top_n.
std::vector<size_t> openai_rerank_order(const std::vector<rerank_score> & scores, std::optional<uint64_t> top_n);

// openai_rerank_json renders the answer. REQUIRES: scores.size() == r.documents.size(), in document order.
std::string openai_rerank_json(const openai_rerank_request & r, const std::vector<rerank_score> & scores,
                               const std::string & model_name);

}  // namespace baton
