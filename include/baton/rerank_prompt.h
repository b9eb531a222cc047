// rerank_prompt.h — llama-server's rerank prompt: a query and a document made into the one sequence a ranking model
// scores (the embedder, with rank pooling, turns it into the score).
//
// Two layouts, as llama-server's format_prompt_rerank has them:
//   - the model has a rerank template (tokenizer.chat_template.rerank): "{query}" in it is replaced by the
//     query, then "{document}" (in the result) by the document, and the text is tokenized with its control
//     tokens and without BOS/EOS (Qwen3-Reranker's shape);
//   - otherwise [BOS] query [EOS] [SEP] document [EOS], each marker where the vocabulary's add_bos /
//     add_eos / add_sep flag asks for it, the texts tokenized without specials and without parsing
//     control-token texts (EOS falls back to SEP when the vocabulary has no EOS).
// Thread-safety: pure functions and a read-only model; safe from any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "baton/base/status.h"
#include "baton/model.h"
#include "baton/text.h"

namespace baton {

// rerank_layout: what of a model decides its rerank prompt.
struct rerank_layout {
    std::optional<std::string> prompt_template;  // tokenizer.chat_template.rerank; nullopt: the plain layout
    token_id bos = -1, eos = -1, sep = -1;       // -1: the vocabulary has none (eos: SEP when it has no EOS)
    bool add_bos = false, add_eos = false, add_sep = false;

    bool operator==(const rerank_layout &) const = default;
};

// rerank_layout_of reads model's layout.
rerank_layout rerank_layout_of(const loaded_model & model);

// rerank_template_fill: the template's text for one pair ("{query}" replaced first, then "{document}").
std::string rerank_template_fill(std::string_view prompt_template, std::string_view query, std::string_view document);

// rerank_join: the plain layout's tokens for an already tokenized pair. A marker the layout asks for but the
// vocabulary lacks (-1) is left out.
std::vector<token_id> rerank_join(const rerank_layout & layout, const std::vector<token_id> & query,
                                  const std::vector<token_id> & document);

// rerank_prompts: the token sequence of (query, documents[i]) for each document, in order. Errors are
// text_tokenize's.
Result<std::vector<std::vector<token_id>>> rerank_prompts(const loaded_model & model, const rerank_layout & layout,
                                                          std::string_view query,
                                                          const std::vector<std::string> & documents);

}  // namespace baton
