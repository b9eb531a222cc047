// text.h — tokenization and detokenization over a model's vocabulary.
//
// Byte-fallback vocabularies can split one UTF-8 character over several tokens, so token pieces are raw
// bytes; utf8_complete_prefix() tells how many bytes of a growing buffer can be emitted without cutting a
// character. Thread-safety: the vocabulary is read-only; these functions are safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "baton/status.h"

struct llama_vocab;
struct llama_model;

namespace baton {

using token_id = int32_t;

// text_tokenize tokenizes text; add_special adds BOS as the model asks; parse_special lets control-token
// text such as "<|im_start|>" become the control token (used for chat templates, never for user text).
Result<std::vector<token_id>> text_tokenize(const llama_vocab * vocab, std::string_view text, bool add_special,
                                            bool parse_special);

// text_token_piece returns the bytes of one token (control tokens render as nothing unless special).
std::string text_token_piece(const llama_vocab * vocab, token_id token, bool special = false);

// text_detokenize concatenates the pieces of tokens (special: control tokens as their text, "<s>").
std::string text_detokenize(const llama_vocab * vocab, const std::vector<token_id> & tokens, bool special = false);

// utf8_complete_prefix returns the length of the longest prefix of s that does not end inside an
// incomplete UTF-8 sequence (invalid bytes count as complete, so nothing is held back forever).
size_t utf8_complete_prefix(std::string_view s);

}  // namespace baton
