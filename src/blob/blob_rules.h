// blob_rules.h — the content rules of a state blob, in one place for the writer and the reader.
//
// blob_write refuses parts that break a rule (invalid_argument) and blob_parse refuses bytes that break one
// (corrupt), so a blob Baton writes always parses. Each rule returns the empty string when the value obeys
// it, else what is wrong, without section name or offset: the reader adds "section: ... at +offset", the
// writer adds the section name. Structural rules (lengths, checksums, framing) belong to the reader alone.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace baton::blob_rules {

// An identity string (arch, llama_version): 1..k_identity_string_max bytes of printable ASCII.
// len_field names the length in messages ("arch_len" in the reader, "arch length" in the writer).
std::string identity_string(std::string_view len_field, std::string_view field, std::string_view s);
std::string n_vocab(uint32_t n_vocab);
std::string kv_type(std::string_view field, int32_t type);  // a ggml_type number: never negative
std::string n_seq_max(uint32_t n_seq_max);
// n_tokens: at least one token, and within n_ctx when the blob records one (n_ctx != 0).
std::string n_tokens(uint32_t n_tokens, uint32_t n_ctx);
// token i of the token list: an id in 0..n_vocab-1, or from format 1.3 on (minor >= 3) a media token (blob.h).
std::string token(uint32_t i, int32_t token, uint32_t n_vocab, uint16_t minor);
// A checkpoint's n_tokens: in 1..n_tokens of the blob and above the previous checkpoint's (prev, 0 for
// the first): checkpoints are ordered and distinct.
std::string checkpoint_n_tokens(uint32_t cp_n_tokens, uint32_t prev, uint32_t n_tokens);
// A checkpoint's positions: 0 <= pos_min <= pos_max < the checkpoint's n_tokens.
std::string checkpoint_positions(int32_t pos_min, int32_t pos_max, uint32_t cp_n_tokens);
// A delta's base: 1 <= n_base < n_tokens (at least one token past the base, at least one in it).
std::string base_tokens(uint32_t n_base, uint32_t n_tokens);
// A generation in progress (format 1.4): n_generated < n_tokens (at least one prompt token), n_cached within the
// prompt (n_tokens - n_generated), and the blob carries the logits it continues from.
std::string generation(uint32_t n_generated, uint32_t n_cached, uint32_t n_tokens, bool has_logits);
// A delta's checkpoint: past its base (the receiver keeps its own up to the base).
std::string delta_checkpoint(uint32_t cp_n_tokens, uint32_t n_base);

}  // namespace baton::blob_rules
