// text.cpp — tokenizer wrappers.
#include "baton/text.h"

#include <llama.h>

#include <climits>

namespace baton {

Result<std::vector<token_id>> text_tokenize(const llama_vocab * vocab, std::string_view text, bool add_special,
                                            bool parse_special) {
    if (text.size() > size_t(INT32_MAX / 2))
        return Status(status_code::too_large, "prompt: " + std::to_string(text.size()) + " bytes is too long");
    std::vector<token_id> out(text.size() + 8);
    int32_t n = llama_tokenize(vocab, text.data(), int32_t(text.size()), out.data(), int32_t(out.size()), add_special,
                               parse_special);
    if (n < 0) {
        out.resize(size_t(-n));
        n = llama_tokenize(vocab, text.data(), int32_t(text.size()), out.data(), int32_t(out.size()), add_special,
                           parse_special);
    }
    if (n < 0) return Status(status_code::internal, "tokenizer failed on a " + std::to_string(text.size()) + "-byte text");
    out.resize(size_t(n));
    return out;
}

std::string text_token_piece(const llama_vocab * vocab, token_id token, bool special) {
    char buf[256];
    int32_t n = llama_token_to_piece(vocab, token, buf, sizeof buf, 0, special);
    if (n >= 0) return std::string(buf, size_t(n));
    std::string big(size_t(-n), '\0');
    n = llama_token_to_piece(vocab, token, big.data(), int32_t(big.size()), 0, special);
    if (n < 0) return {};
    big.resize(size_t(n));
    return big;
}

std::string text_detokenize(const llama_vocab * vocab, const std::vector<token_id> & tokens, bool special) {
    std::string s;
    for (token_id t : tokens) s += text_token_piece(vocab, t, special);
    return s;
}

size_t utf8_complete_prefix(std::string_view s) {
    // Look back at most 3 bytes for the lead byte of an unfinished sequence.
    const size_t n = s.size();
    for (size_t back = 1; back <= 3 && back <= n; ++back) {
        const unsigned char c = static_cast<unsigned char>(s[n - back]);
        if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
        size_t need = 0;
        if ((c & 0xE0) == 0xC0) need = 2;
        else if ((c & 0xF0) == 0xE0) need = 3;
        else if ((c & 0xF8) == 0xF0) need = 4;
        else return n;  // ASCII or invalid lead: complete
        return back < need ? n - back : n;
    }
    return n;
}

}  // namespace baton
