// blob_rules.cpp — see blob_rules.h.
#include "blob_rules.h"

#include "blob_format.h"

namespace baton::blob_rules {
namespace {

std::string num(uint64_t v) { return std::to_string(v); }

}  // namespace

std::string identity_string(std::string_view len_field, std::string_view field, std::string_view s) {
    if (s.empty() || s.size() > blob_format::k_identity_string_max)
        return std::string(len_field) + " " + num(s.size()) + " is not in 1.." +
               num(blob_format::k_identity_string_max);
    for (unsigned char c : s)
        if (c < 0x20 || c > 0x7e) return std::string(field) + " is not printable ASCII";
    return {};
}

std::string n_vocab(uint32_t n) { return n == 0 ? "n_vocab is 0" : std::string(); }

std::string kv_type(std::string_view field, int32_t type) {
    return type < 0 ? std::string(field) + " " + std::to_string(type) + " is negative" : std::string();
}

std::string n_seq_max(uint32_t n) { return n == 0 ? "n_seq_max is 0" : std::string(); }

std::string n_tokens(uint32_t n, uint32_t n_ctx) {
    if (n == 0) return "n_tokens is 0 (a blob covers at least one token)";
    if (n_ctx != 0 && n > n_ctx) return "n_tokens " + num(n) + " > n_ctx " + num(n_ctx);
    return {};
}

std::string token(uint32_t i, int32_t t, uint32_t n_vocab, uint16_t minor) {
    if (t >= 0 && uint32_t(t) < n_vocab) return {};
    if (media_token_is(t)) {
        if (minor >= 3) return {};
        return "token[" + num(i) + "] = " + std::to_string(t) + " is a media token, which a format 1." + num(minor) +
               " blob cannot hold (1.3)";
    }
    return "token[" + num(i) + "] = " + std::to_string(t) + " is not in 0..n_vocab " + num(n_vocab) +
           (minor >= 3 ? " nor a media token" : "");
}

std::string checkpoint_n_tokens(uint32_t cp, uint32_t prev, uint32_t n_tokens) {
    if (cp < 1 || cp > n_tokens) return "n_tokens " + num(cp) + " is not in 1..n_tokens " + num(n_tokens);
    if (cp <= prev)
        return "n_tokens " + num(cp) + " <= previous " + num(prev) + " (checkpoints must be ordered by n_tokens)";
    return {};
}

std::string checkpoint_positions(int32_t pos_min, int32_t pos_max, uint32_t cp_n_tokens) {
    if (pos_min < 0 || pos_min > pos_max)
        return "pos_min " + std::to_string(pos_min) + " is not in 0..pos_max " + std::to_string(pos_max);
    if (uint32_t(pos_max) >= cp_n_tokens)
        return "pos_max " + std::to_string(pos_max) + " >= n_tokens " + num(cp_n_tokens);
    return {};
}

std::string base_tokens(uint32_t n_base, uint32_t n_tokens) {
    if (n_base < 1 || n_base >= n_tokens)
        return "n_base " + num(n_base) + " is not in 1..n_tokens-1 (" + num(n_tokens) + " tokens)";
    return {};
}

std::string generation(uint32_t n_generated, uint32_t n_cached, uint32_t n_tokens, bool has_logits) {
    if (n_generated >= n_tokens)
        return "n_generated " + num(n_generated) + " is not below n_tokens " + num(n_tokens) +
               " (a generation continues a prompt of at least one token)";
    if (n_cached > n_tokens - n_generated)
        return "n_cached " + num(n_cached) + " exceeds the prompt's " + num(n_tokens - n_generated) + " tokens";
    if (!has_logits) return "a generation in progress needs the logits it continues from (flags bit0)";
    return {};
}

std::string delta_checkpoint(uint32_t cp, uint32_t n_base) {
    if (cp <= n_base) return "n_tokens " + num(cp) + " is not past the delta's base of " + num(n_base) + " tokens";
    return {};
}

}  // namespace baton::blob_rules
