// tokenize_oracle.h — llama_tokenize itself, the oracle text_tokenize must equal token for token (the
// tokenizer's tests and tokenize_fuzz).
#pragma once

#include <llama.h>

#include <string>
#include <vector>

#include "baton/text.h"

namespace baton {

inline std::vector<token_id> llama_tokenize_all(const llama_vocab * v, const std::string & s, bool add_special,
                                                bool parse_special) {
    std::vector<token_id> out(s.size() * 2 + 16);
    int32_t n =
        llama_tokenize(v, s.data(), int32_t(s.size()), out.data(), int32_t(out.size()), add_special, parse_special);
    if (n < 0) {
        out.resize(size_t(-n));
        n = llama_tokenize(v, s.data(), int32_t(s.size()), out.data(), int32_t(out.size()), add_special, parse_special);
    }
    out.resize(size_t(n < 0 ? 0 : n));
    return out;
}

}  // namespace baton
