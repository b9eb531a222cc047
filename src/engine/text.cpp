// text.cpp — tokenizer wrappers: libllama's tokens, with the special-token split done by Baton in one pass.
//
// text_tokenize = BOS/EOS (what add_special adds) around the pieces of special_matcher::partition: a special
// token as it is, a plain fragment through llama_tokenize(fragment, add_special=false, parse_special=false).
// That is what llama_tokenize does after its own split — every vocabulary type tokenizes each plain
// fragment on its own (SentencePiece prefixes each with a space, as every fragment follows a special token
// or starts the text), and the fragments hold no special text any more, so libllama's split of a fragment
// finds nothing. The state for a vocabulary (the automata, BOS/EOS, the self-check) is built once and kept
// while the vocabulary's special tokens, size, type and BOS/EOS are the same: they are read again on every
// call (one pass over the token table), so a vocabulary freed and another loaded at its address never gets
// stale state. The self-check compares a few texts made of the vocabulary's own special tokens with
// llama_tokenize; a vocabulary that fails it is tokenized by llama_tokenize directly (bounded by the
// callers' byte limits only).
#include "baton/text.h"

#include <llama.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>

#include "baton/base/thread_annotations.h"
#include "text_specials.h"

namespace baton {

namespace {

constexpr uint32_t k_attr_special = LLAMA_TOKEN_ATTR_CONTROL | LLAMA_TOKEN_ATTR_USER_DEFINED | LLAMA_TOKEN_ATTR_UNKNOWN;
constexpr uint32_t k_attr_parse_only =
    LLAMA_TOKEN_ATTR_CONTROL | LLAMA_TOKEN_ATTR_UNKNOWN;  // skipped unless parse_special
// Texts up to this many bytes go straight to llama_tokenize: its quadratic split costs microseconds at this
// size, less than the pass over the token table.
constexpr size_t k_direct_bytes_max = 1024;
// Texts up to this size are tokenized whole before a context check (an exact count in the refusal); a larger
// one that cannot fit is refused as soon as a lower bound of its count reaches the context.
constexpr size_t k_exact_count_bytes_max = size_t(1) << 20;
constexpr size_t k_text_bytes_max = size_t(1) << 30;

// direct_tokenize is llama_tokenize into a vector.
Result<std::vector<token_id>> direct_tokenize(const llama_vocab * vocab, std::string_view text, bool add_special,
                                              bool parse_special) {
    std::vector<token_id> out(text.size() + 8);
    int32_t n = llama_tokenize(vocab, text.data(), int32_t(text.size()), out.data(), int32_t(out.size()), add_special,
                               parse_special);
    if (n < 0 && n != INT32_MIN) {
        out.resize(size_t(-int64_t(n)));
        n = llama_tokenize(vocab, text.data(), int32_t(text.size()), out.data(), int32_t(out.size()), add_special,
                           parse_special);
    }
    if (n < 0) return Status(status_code::internal, "tokenizer failed on a " + std::to_string(text.size()) + "-byte text");
    out.resize(size_t(n));
    return out;
}

// What identifies a vocabulary's tokenizer state; read afresh on every call.
struct vocab_key {
    const llama_vocab * vocab = nullptr;
    int32_t n_tokens = 0;
    int32_t type = 0;
    uint64_t specials = 0;  // FNV-1a over every special token's id, attributes and text
    uint32_t text_max = 0;  // the longest token text (bytes)
    llama_token bos = LLAMA_TOKEN_NULL, eos = LLAMA_TOKEN_NULL, sep = LLAMA_TOKEN_NULL;
    bool add_bos = false, add_eos = false;
    bool operator==(const vocab_key &) const = default;
};

void fnv(uint64_t & h, const void * p, size_t n) {
    const auto * b = static_cast<const unsigned char *>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
}

vocab_key vocab_key_read(const llama_vocab * vocab) {
    vocab_key k;
    k.vocab = vocab;
    k.n_tokens = llama_vocab_n_tokens(vocab);
    k.type = int32_t(llama_vocab_type(vocab));
    k.bos = llama_vocab_bos(vocab);
    k.eos = llama_vocab_eos(vocab);
    k.sep = llama_vocab_sep(vocab);
    k.add_bos = llama_vocab_get_add_bos(vocab);
    k.add_eos = llama_vocab_get_add_eos(vocab);
    uint64_t h = 0xcbf29ce484222325ull;
    for (int32_t id = 0; id < k.n_tokens; ++id) {
        const char * t = llama_vocab_get_text(vocab, id);
        const size_t len = t ? std::strlen(t) : 0;
        k.text_max = std::max(k.text_max, uint32_t(std::min<size_t>(len, UINT32_MAX)));
        const uint32_t attr = uint32_t(llama_vocab_get_attr(vocab, id));
        if (!(attr & k_attr_special)) continue;
        fnv(h, &id, sizeof id);
        fnv(h, &attr, sizeof attr);
        fnv(h, &len, sizeof len);
        fnv(h, t, len);
    }
    k.specials = h;
    return k;
}

struct vocab_tokenizer {
    vocab_key key;
    special_matcher parse_all;             // parse_special: control, user-defined and unknown tokens
    special_matcher user_only;             // !parse_special: user-defined tokens only, as libllama
    std::vector<token_id> prefix, suffix;  // what add_special puts around the text
    bool affixes = false;                  // prefix/suffix are known (else add_special goes to llama_tokenize)
    bool fast = false;                     // the self-check agreed with llama_tokenize
    bool raw_bound = false;                // plain fragments count bytes / text_max tokens at least
};

// split_affixes finds what add_special adds before and after a text: llama_tokenize("") with add_special is
// both, and probes tell where one ends (a unique split for every probe, else unknown).
bool split_affixes(const llama_vocab * vocab, const vocab_key & k, std::vector<token_id> & prefix,
                   std::vector<token_id> & suffix) {
    // libllama asserts instead of failing when a WordPiece vocabulary lacks BOS or SEP.
    if (k.type == LLAMA_VOCAB_TYPE_WPM && (k.bos == LLAMA_TOKEN_NULL || k.sep == LLAMA_TOKEN_NULL)) return false;
    auto both = direct_tokenize(vocab, "", true, false);
    if (!both.ok()) return false;
    const std::vector<token_id> & e = both.value();
    std::vector<bool> valid(e.size() + 1, true);
    for (const char * probe : {"a", "Hello world", "1 2", "\n"}) {
        auto plain = direct_tokenize(vocab, probe, false, false);
        auto full = direct_tokenize(vocab, probe, true, false);
        if (!plain.ok() || !full.ok() || full->size() != plain->size() + e.size()) return false;
        for (size_t p = 0; p <= e.size(); ++p) {
            if (!valid[p]) continue;
            std::vector<token_id> want(e.begin(), e.begin() + ptrdiff_t(p));
            want.insert(want.end(), plain->begin(), plain->end());
            want.insert(want.end(), e.begin() + ptrdiff_t(p), e.end());
            valid[p] = want == full.value();
        }
    }
    if (std::count(valid.begin(), valid.end(), true) != 1) return false;
    const size_t p = size_t(std::find(valid.begin(), valid.end(), true) - valid.begin());
    prefix.assign(e.begin(), e.begin() + ptrdiff_t(p));
    suffix.assign(e.begin() + ptrdiff_t(p), e.end());
    return true;
}

// raw_bound_holds: every byte alone makes a token (so no byte of a plain fragment is dropped), and the
// vocabulary tokenizes without normalizing (SentencePiece, byte-level BPE), so a token covers at most its
// own text's bytes.
bool raw_bound_holds(const llama_vocab * vocab, const vocab_key & k) {
    if (k.type != LLAMA_VOCAB_TYPE_SPM && k.type != LLAMA_VOCAB_TYPE_BPE) return false;
    for (int b = 0; b < 256; ++b) {
        const char c = char(b);
        auto t = direct_tokenize(vocab, std::string_view(&c, 1), false, false);
        if (!t.ok() || t->empty()) return false;
    }
    return k.text_max > 0;
}

Result<std::vector<token_id>> fast_tokenize(const vocab_tokenizer & t, const llama_vocab * vocab, std::string_view text,
                                            bool add_special, bool parse_special, uint32_t n_ctx);

bool self_check(const vocab_tokenizer & t, const llama_vocab * vocab, const std::vector<special_text> & ranked) {
    // Texts made of the vocabulary's own special texts (the longest and the shortest few), pieces of them,
    // whitespace (what stripping tokens swallow) and plain words.
    std::vector<std::string> specials;
    for (size_t i = 0; i < ranked.size() && i < 6; ++i) specials.push_back(ranked[i].text);
    for (size_t i = ranked.size() > 6 ? ranked.size() - 6 : 6; i < ranked.size(); ++i)
        specials.push_back(ranked[i].text);
    std::vector<std::string> probes = {"Hello world", " a  b\n\nc ", ""};
    for (const std::string & s : specials) {
        probes.push_back(s + "x" + s + s + " y \n" + s + "  ");
        probes.push_back("a " + s + " b" + s.substr(0, s.size() / 2) + s + "\t" + s.substr(s.size() / 2));
    }
    std::string all;
    for (const std::string & s : specials) all += s + " " + s.substr(s.size() / 3);
    probes.push_back(all);
    for (const std::string & p : probes)
        for (bool add : {false, true}) {
            if (add && !t.affixes) continue;
            for (bool parse : {false, true}) {
                auto want = direct_tokenize(vocab, p, add, parse);
                auto got = fast_tokenize(t, vocab, p, add, parse, 0);
                if (!want.ok() || !got.ok() || want.value() != got.value()) return false;
            }
        }
    return true;
}

std::shared_ptr<const vocab_tokenizer> vocab_tokenizer_build(const llama_vocab * vocab, const vocab_key & k) {
    auto t = std::make_shared<vocab_tokenizer>();
    t->key = k;
    std::vector<llama_token> ids;
    for (int32_t id = 0; id < k.n_tokens; ++id)
        if (uint32_t(llama_vocab_get_attr(vocab, id)) & k_attr_special) ids.push_back(id);
    // libllama's order: the same ids ascending, the same std::sort by text length, longest first (not a
    // stable sort: equal lengths come out as this very algorithm leaves them).
    std::vector<size_t> len(size_t(k.n_tokens), 0);
    for (llama_token id : ids) len[size_t(id)] = std::strlen(llama_vocab_get_text(vocab, id));
    std::sort(ids.begin(), ids.end(), [&](llama_token a, llama_token b) { return len[size_t(a)] > len[size_t(b)]; });
    std::vector<special_text> all, user;
    for (llama_token id : ids) {
        const uint32_t attr = uint32_t(llama_vocab_get_attr(vocab, id));
        special_text s{id, llama_vocab_get_text(vocab, id), (attr & LLAMA_TOKEN_ATTR_LSTRIP) != 0,
                       (attr & LLAMA_TOKEN_ATTR_RSTRIP) != 0};
        if (!(attr & k_attr_parse_only)) user.push_back(s);
        all.push_back(std::move(s));
    }
    t->parse_all = special_matcher::build(all);
    t->user_only = special_matcher::build(user);
    t->affixes = split_affixes(vocab, k, t->prefix, t->suffix);
    t->raw_bound = raw_bound_holds(vocab, k);
    t->fast = true;
    t->fast = self_check(*t, vocab, all);
    return t;
}

// The state of the vocabularies in use (a few: one per model a process loaded).
struct tokenizer_cache {
    mutex mu;
    std::vector<std::shared_ptr<const vocab_tokenizer>> entries BATON_GUARDED_BY(mu);  // most recent first
};

std::shared_ptr<const vocab_tokenizer> vocab_tokenizer_for(const llama_vocab * vocab) {
    static tokenizer_cache cache;
    const vocab_key k = vocab_key_read(vocab);
    {
        lock_guard lk(cache.mu);
        for (size_t i = 0; i < cache.entries.size(); ++i)
            if (cache.entries[i]->key == k) {
                auto hit = cache.entries[i];
                cache.entries.erase(cache.entries.begin() + ptrdiff_t(i));
                cache.entries.insert(cache.entries.begin(), hit);
                return hit;
            }
    }
    auto t = vocab_tokenizer_build(vocab, k);  // outside the lock: a big vocabulary takes milliseconds
    lock_guard lk(cache.mu);
    for (size_t i = 0; i < cache.entries.size(); ++i)
        if (cache.entries[i]->key.vocab == vocab) cache.entries.erase(cache.entries.begin() + ptrdiff_t(i--));
    cache.entries.insert(cache.entries.begin(), t);
    if (cache.entries.size() > 8) cache.entries.resize(8);
    return t;
}

size_t pieces_tokens_min(const vocab_tokenizer & t, const std::vector<special_piece> & pieces, bool add_special) {
    size_t n = add_special ? t.prefix.size() + t.suffix.size() : 0;
    for (const special_piece & p : pieces)
        n += p.token >= 0 ? 1 : t.raw_bound ? (size_t(p.length) + t.key.text_max - 1) / t.key.text_max : 0;
    return n;
}

Result<std::vector<token_id>> fast_tokenize(const vocab_tokenizer & t, const llama_vocab * vocab, std::string_view text,
                                            bool add_special, bool parse_special, uint32_t n_ctx) {
    const std::vector<special_piece> pieces = (parse_special ? t.parse_all : t.user_only).partition(text);
    if (n_ctx > 0) {
        const size_t n_min = pieces_tokens_min(t, pieces, add_special);
        if (n_min >= n_ctx) return context_exceeded_status(n_min, n_ctx, true);
    }
    std::vector<token_id> out;
    if (add_special) out = t.prefix;
    std::vector<token_id> buf;
    size_t n_specials_left = 0;  // special tokens after the current piece (one token each, for certain)
    size_t n_texts_left = 0;     // text pieces from the current one on (while any is left, a count is a bound)
    for (const special_piece & p : pieces) (p.token >= 0 ? n_specials_left : n_texts_left) += 1;
    if (add_special) n_specials_left += t.suffix.size();
    for (const special_piece & p : pieces) {
        if (p.token >= 0) {
            --n_specials_left;
            out.push_back(p.token);
        } else {
            buf.resize(size_t(p.length) + 8);
            const char * s = text.data() + p.offset;
            int32_t n = llama_tokenize(vocab, s, int32_t(p.length), buf.data(), int32_t(buf.size()), false, false);
            if (n < 0 && n != INT32_MIN) {
                buf.resize(size_t(-int64_t(n)));
                n = llama_tokenize(vocab, s, int32_t(p.length), buf.data(), int32_t(buf.size()), false, false);
            }
            if (n < 0)
                return Status(status_code::internal,
                              "tokenizer failed on a " + std::to_string(p.length) + "-byte text");
            out.insert(out.end(), buf.begin(), buf.begin() + n);
            --n_texts_left;
        }
        if (n_ctx > 0 && out.size() + n_specials_left >= n_ctx)  // exact once no text is left to tokenize
            return context_exceeded_status(out.size() + n_specials_left, n_ctx, n_texts_left > 0);
    }
    if (add_special) out.insert(out.end(), t.suffix.begin(), t.suffix.end());
    return out;
}

}  // namespace

Result<std::vector<token_id>> text_tokenize(const llama_vocab * vocab, std::string_view text, bool add_special,
                                            bool parse_special, uint32_t n_ctx) {
    if (text.size() > k_text_bytes_max)
        return Status(status_code::too_large, "prompt: " + std::to_string(text.size()) + " bytes is too long");
    auto direct = [&]() -> Result<std::vector<token_id>> {
        auto out = direct_tokenize(vocab, text, add_special, parse_special);
        if (out.ok() && n_ctx > 0 && out->size() >= n_ctx) return context_exceeded_status(out->size(), n_ctx);
        return out;
    };
    if (text.size() <= k_direct_bytes_max) return direct();
    auto t = vocab_tokenizer_for(vocab);
    if (!t->fast || (add_special && !t->affixes)) return direct();
    if (text.size() > k_exact_count_bytes_max) return fast_tokenize(*t, vocab, text, add_special, parse_special, n_ctx);
    // Small enough to count exactly (a refusal then says how many tokens, as llama-server's does).
    auto out = fast_tokenize(*t, vocab, text, add_special, parse_special, 0);
    if (out.ok() && n_ctx > 0 && out->size() >= n_ctx) return context_exceeded_status(out->size(), n_ctx);
    return out;
}

size_t text_tokens_min(const llama_vocab * vocab, std::string_view text, bool add_special, bool parse_special) {
    if (text.size() > k_text_bytes_max) return 0;
    auto t = vocab_tokenizer_for(vocab);
    if (!t->fast || (add_special && !t->affixes)) return 0;
    return pieces_tokens_min(*t, (parse_special ? t->parse_all : t->user_only).partition(text), add_special);
}

bool text_tokenize_linear(const llama_vocab * vocab) {
    auto t = vocab_tokenizer_for(vocab);
    return t->fast && t->affixes;
}

text_special text_special_tokens(const llama_vocab * vocab) {
    text_special s;
    s.fim_pre = llama_vocab_fim_pre(vocab);
    s.fim_suf = llama_vocab_fim_suf(vocab);
    s.fim_mid = llama_vocab_fim_mid(vocab);
    s.fim_rep = llama_vocab_fim_rep(vocab);
    s.fim_sep = llama_vocab_fim_sep(vocab);
    if (llama_vocab_get_add_bos(vocab)) s.bos_added = llama_vocab_bos(vocab);
    return s;  // (LLAMA_TOKEN_NULL is -1)
}

std::vector<token_id> text_eog_tokens(const llama_vocab * vocab) {
    std::vector<token_id> out;
    const int32_t n = llama_vocab_n_tokens(vocab);
    for (int32_t t = 0; t < n; ++t)
        if (llama_vocab_is_eog(vocab, t)) out.push_back(t);
    return out;
}

std::string text_token_piece(const llama_vocab * vocab, token_id token, bool special) {
    if (token < 0 || token >= llama_vocab_n_tokens(vocab)) return {};  // (an image's media token: no text)
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
