// text.h — tokenization and detokenization over a model's vocabulary.
//
// Byte-fallback vocabularies can split one UTF-8 character over several tokens, so token pieces are raw
// bytes; utf8_complete_prefix() tells how many bytes of a growing buffer can be emitted without cutting a
// character. The functions take the vocabulary (the engine's own callers) or, for the modules above the
// engine, which never see libllama's types, the loaded_model it belongs to: the same function either way.
// Thread-safety: the vocabulary is read-only; these functions are safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "baton/base/status.h"
#include "baton/model.h"

struct llama_vocab;

namespace baton {

using token_id = int32_t;

// text_tokenize tokenizes text; add_special adds BOS as the model asks; parse_special lets control-token
// text such as "<|im_start|>" become the control token (used for chat templates, never for user text).
// The tokens are exactly llama_tokenize's, but the cost is linear in the text: Baton finds the special-token
// texts itself in one pass (libllama's own split is quadratic in their number) and hands libllama only the
// plain fragments between them. n_ctx > 0: the text must come to fewer than n_ctx tokens, else
// context_exceeded ("request (N tokens) exceeds the available context size (n_ctx tokens), ...", with N in its
// context_overflow detail). Up to 1 MiB of text N is the exact count; a larger text that cannot fit is refused
// before its plain text is tokenized when text_tokens_min already reaches n_ctx, and as soon as the tokens made
// reach it otherwise, with N a lower bound ("at least N tokens"). A text over 2^30 bytes is too_large.
Result<std::vector<token_id>> text_tokenize(const llama_vocab * vocab, std::string_view text, bool add_special,
                                            bool parse_special, uint32_t n_ctx = 0);

// text_tokens_min returns a lower bound on text_tokenize's count, from the special-token split alone (no
// plain text tokenized): the special tokens found, BOS/EOS, and for SentencePiece and byte-level BPE
// vocabularies each plain fragment's bytes divided by the longest token text (a token never covers more
// bytes of the text than its own text has; other vocabularies normalize, so their fragments count 0).
size_t text_tokens_min(const llama_vocab * vocab, std::string_view text, bool add_special, bool parse_special);

// text_tokenize_linear: text_tokenize splits this vocabulary's special tokens itself, so a long text costs
// linear time (a self-check against llama_tokenize passed on texts made of the vocabulary's own special
// tokens); false: long texts go to llama_tokenize as they are (its cost, bounded by the callers' limits).
bool text_tokenize_linear(const llama_vocab * vocab);

// text_token_piece returns the bytes of one token (control tokens render as nothing unless special; an id outside
// the vocabulary, such as an image's media token (media.h), as nothing).
std::string text_token_piece(const llama_vocab * vocab, token_id token, bool special = false);

// text_detokenize concatenates the pieces of tokens (special: control tokens as their text, "<s>").
std::string text_detokenize(const llama_vocab * vocab, const std::vector<token_id> & tokens, bool special = false);

// text_special: the vocabulary's fill-in-the-middle tokens (-1 where it has none) and the BOS token it adds to
// a tokenized text (-1 when it adds none).
struct text_special {
    token_id fim_pre = -1, fim_suf = -1, fim_mid = -1, fim_rep = -1, fim_sep = -1;
    token_id bos_added = -1;
};
text_special text_special_tokens(const llama_vocab * vocab);

// text_eog_tokens lists the vocabulary's end-of-generation tokens (llama_vocab_is_eog), ascending.
std::vector<token_id> text_eog_tokens(const llama_vocab * vocab);

// The same for the modules above the engine: the vocabulary of model.
inline Result<std::vector<token_id>> text_tokenize(const loaded_model & model, std::string_view text, bool add_special,
                                                   bool parse_special, uint32_t n_ctx = 0) {
    return text_tokenize(model.vocab(), text, add_special, parse_special, n_ctx);
}
inline text_special text_special_tokens(const loaded_model & model) { return text_special_tokens(model.vocab()); }
inline std::vector<token_id> text_eog_tokens(const loaded_model & model) { return text_eog_tokens(model.vocab()); }
inline std::string text_token_piece(const loaded_model & model, token_id token, bool special = false) {
    return text_token_piece(model.vocab(), token, special);
}
inline std::string text_detokenize(const loaded_model & model, const std::vector<token_id> & tokens,
                                   bool special = false) {
    return text_detokenize(model.vocab(), tokens, special);
}

// utf8_complete_prefix returns the length of the longest prefix of s that does not end inside an
// incomplete UTF-8 sequence (invalid bytes count as complete, so nothing is held back forever).
size_t utf8_complete_prefix(std::string_view s);

}  // namespace baton
