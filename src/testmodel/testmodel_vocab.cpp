// testmodel_vocab.cpp — mkmodel's vocabularies and how they are written into a GGUF file.
#include "testmodel_vocab.h"

#include <algorithm>
#include <array>
#include <map>

namespace baton::testmodel {
namespace {

constexpr int k_bpe_max_merges = 1024;

// The words both vocabularies are built from (SentencePiece pieces; the BPE merge list's training set).
const char * const k_words[] = {
    "the",   "and",   "to",    "of",     "a",     "in",    "is",     "it",      "you",  "that",      "he",
    "was",   "for",   "on",    "are",    "with",  "as",    "I",      "his",     "they", "be",        "at",
    "one",   "have",  "this",  "from",   "or",    "had",   "by",     "word",    "but",  "what",      "some",
    "we",    "can",   "out",   "other",  "were",  "all",   "there",  "when",    "up",   "use",       "your",
    "how",   "said",  "an",    "each",   "she",   "which", "do",     "their",   "time", "if",        "will",
    "way",   "about", "many",  "then",   "them",  "write", "would",  "like",    "so",   "these",     "her",
    "long",  "make",  "thing", "see",    "him",   "two",   "has",    "look",    "more", "day",       "could",
    "go",    "come",  "did",   "number", "sound", "no",    "most",   "people",  "my",   "over",      "know",
    "water", "than",  "call",  "first",  "who",   "may",   "down",   "side",    "been", "now",       "find",
    "Hello", "world", "model", "token",  "state", "node",  "decode", "prefill", "user", "assistant", "system"};

std::string utf8_encode(uint32_t cp) {
    std::string s;
    if (cp < 0x80) {
        s += char(cp);
    } else if (cp < 0x800) {
        s += char(0xC0 | (cp >> 6));
        s += char(0x80 | (cp & 0x3F));
    } else {
        s += char(0xE0 | (cp >> 12));
        s += char(0x80 | ((cp >> 6) & 0x3F));
        s += char(0x80 | (cp & 0x3F));
    }
    return s;
}

// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the other 68 bytes (controls,
// space, DEL, NBSP, soft hyphen...) map to U+0100.. in byte order. So a space is "Ġ" (U+0120).
std::array<std::string, 256> gpt2_byte_symbols() {
    std::array<std::string, 256> out;
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
        const bool self = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
        out[b] = utf8_encode(self ? b : next++);
    }
    return out;
}

const char * k_chat_template =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

void set_tokens(gguf_context * g, const vocab_data & vd, bool with_scores) {
    std::vector<const char *> texts;
    std::vector<float> scores;
    std::vector<int32_t> types;
    for (const auto & e : vd.tokens) {
        texts.push_back(e.text.c_str());
        scores.push_back(e.score);
        types.push_back(e.type);
    }
    gguf_set_arr_str(g, "tokenizer.ggml.tokens", texts.data(), texts.size());
    if (with_scores) gguf_set_arr_data(g, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores.data(), scores.size());
    gguf_set_arr_data(g, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types.data(), types.size());
}

}  // namespace

// SentencePiece style with byte fallback.
vocab_data build_spm_vocab() {
    vocab_data vd;
    auto & v = vd.tokens;
    v.push_back({"<unk>", 0.0f, 2});
    v.push_back({"<s>", 0.0f, 3});
    v.push_back({"</s>", 0.0f, 3});
    v.push_back({"<|im_start|>", 0.0f, 3});
    v.push_back({"<|im_end|>", 0.0f, 3});
    for (int b = 0; b < 256; ++b) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "<0x%02X>", b);
        v.push_back({buf, 0.0f, 6});
    }
    const std::string sp = "\xe2\x96\x81";  // U+2581, SentencePiece's space marker
    static const char * pieces[] = {"th", "he", "in", "er", "an", "re", "on",  "at",  "en",  "nd",   "ti", "es",
                                    "or", "te", "of", "ed", "is", "it", "al",  "ar",  "st",  "to",   "nt", "ng",
                                    "se", "ha", "as", "ou", "io", "le", "ve",  "co",  "me",  "de",   "hi", "ri",
                                    "ro", "ic", "ne", "ea", "ra", "ce", "ing", "ion", "ent", "tion", "ed"};
    float score = -1.0f;
    for (const char * w : k_words) v.push_back({sp + w, score -= 0.01f, 1});
    for (const char * p : pieces) {
        bool dup = false;
        for (const auto & e : v) dup = dup || e.text == p;
        if (!dup) v.push_back({p, score -= 0.01f, 1});
    }
    v.push_back({sp, score -= 0.01f, 1});
    for (int c = 33; c < 127; ++c) v.push_back({std::string(1, char(c)), score -= 0.01f, 1});
    return vd;
}

// Byte-level BPE. The merge list is learned, deterministically, from k_words (each word with a leading
// space, weight 2, and bare, weight 1): repeatedly merge the most frequent adjacent pair (ties: the pair of
// smallest token ids) until every word is one token or k_bpe_max_merges. A merge's parts are existing tokens
// and its result is added as a token, so the list is consistent by construction, and libllama's BPE, which
// applies merges by rank, turns those words back into single tokens.
vocab_data build_bpe_vocab() {
    vocab_data vd;
    const auto sym = gpt2_byte_symbols();
    std::map<std::string, int32_t> id_of;
    for (int b = 0; b < 256; ++b) {
        vd.tokens.push_back({sym[b], 0.0f, 1});
        id_of[sym[b]] = b;
    }
    struct word {
        std::vector<int32_t> ids;
        int weight = 0;
    };
    std::vector<word> corpus;
    for (const char * w : k_words) {
        for (int spaced = 1; spaced >= 0; --spaced) {
            word cw;
            cw.weight = spaced ? 2 : 1;
            if (spaced) cw.ids.push_back(' ');
            for (const char * c = w; *c; ++c) cw.ids.push_back(static_cast<unsigned char>(*c));
            corpus.push_back(std::move(cw));
        }
    }
    for (int m = 0; m < k_bpe_max_merges; ++m) {
        std::map<std::pair<int32_t, int32_t>, int> counts;
        for (const auto & w : corpus)
            for (size_t i = 0; i + 1 < w.ids.size(); ++i) counts[{w.ids[i], w.ids[i + 1]}] += w.weight;
        if (counts.empty()) break;
        auto best = counts.begin();
        for (auto it = counts.begin(); it != counts.end(); ++it)
            if (it->second > best->second) best = it;
        const auto [a, b] = best->first;
        const std::string merged = vd.tokens[size_t(a)].text + vd.tokens[size_t(b)].text;
        auto found = id_of.find(merged);
        int32_t id = 0;
        if (found != id_of.end()) {
            id = found->second;
        } else {
            id = int32_t(vd.tokens.size());
            vd.tokens.push_back({merged, 0.0f, 1});
            id_of[merged] = id;
        }
        vd.merges.push_back(vd.tokens[size_t(a)].text + " " + vd.tokens[size_t(b)].text);
        for (auto & w : corpus) {
            std::vector<int32_t> out;
            for (size_t i = 0; i < w.ids.size(); ++i) {
                if (i + 1 < w.ids.size() && w.ids[i] == a && w.ids[i + 1] == b) {
                    out.push_back(id);
                    ++i;
                } else {
                    out.push_back(w.ids[i]);
                }
            }
            w.ids = std::move(out);
        }
    }
    vd.tokens.push_back({"<|endoftext|>", 0.0f, 3});
    vd.tokens.push_back({"<|im_start|>", 0.0f, 3});
    vd.tokens.push_back({"<|im_end|>", 0.0f, 3});
    return vd;
}

void add_fim_tokens(vocab_data & vd, bool bpe) {
    static const char * texts[] = {"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>",
                                   "<|fim_pad|>",    "<|repo_name|>",  "<|file_sep|>"};
    const size_t at = bpe ? vd.tokens.size() - 3 : vd.tokens.size();
    std::vector<vocab_entry> fim;
    for (const char * t : texts) {
        vd.fim.push_back(int32_t(at + fim.size()));
        fim.push_back({t, 0.0f, 3});
    }
    vd.tokens.insert(vd.tokens.begin() + ptrdiff_t(at), fim.begin(), fim.end());
}

namespace {

void set_fim(gguf_context * g, const vocab_data & vd) {
    static const char * keys[] = {"tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.fim_suf_token_id",
                                  "tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.fim_pad_token_id",
                                  "tokenizer.ggml.fim_rep_token_id", "tokenizer.ggml.fim_sep_token_id"};
    for (size_t i = 0; i < vd.fim.size() && i < std::size(keys); ++i) gguf_set_val_u32(g, keys[i], uint32_t(vd.fim[i]));
}

}  // namespace

void set_spm_vocab(gguf_context * g, const vocab_data & vd, bool chat_template) {
    gguf_set_val_str(g, "tokenizer.ggml.model", "llama");
    set_tokens(g, vd, true);
    gguf_set_val_u32(g, "tokenizer.ggml.unknown_token_id", 0);
    gguf_set_val_u32(g, "tokenizer.ggml.bos_token_id", 1);
    gguf_set_val_u32(g, "tokenizer.ggml.eos_token_id", 2);
    gguf_set_val_u32(g, "tokenizer.ggml.eot_token_id", 4);
    gguf_set_val_bool(g, "tokenizer.ggml.add_bos_token", true);
    gguf_set_val_bool(g, "tokenizer.ggml.add_eos_token", false);
    // No SentencePiece space prefix: detokenize(tokenize(text)) == text byte for byte.
    gguf_set_val_bool(g, "tokenizer.ggml.add_space_prefix", false);
    if (chat_template) gguf_set_val_str(g, "tokenizer.chat_template", k_chat_template);
    set_fim(g, vd);
}

void set_bpe_vocab(gguf_context * g, const vocab_data & vd, bool chat_template) {
    const uint32_t n = uint32_t(vd.tokens.size());  // ..., <|endoftext|>, <|im_start|>, <|im_end|>
    gguf_set_val_str(g, "tokenizer.ggml.model", "gpt2");
    // qwen2: the GPT-2/Llama-3 style regex (contractions, letter runs with one leading non-letter, single
    // digits, punctuation runs, newline and whitespace runs), no space cleanup on decode.
    gguf_set_val_str(g, "tokenizer.ggml.pre", "qwen2");
    set_tokens(g, vd, false);
    std::vector<const char *> merges;
    for (const auto & m : vd.merges) merges.push_back(m.c_str());
    gguf_set_arr_str(g, "tokenizer.ggml.merges", merges.data(), merges.size());
    gguf_set_val_u32(g, "tokenizer.ggml.bos_token_id", n - 3);
    gguf_set_val_u32(g, "tokenizer.ggml.eos_token_id", n - 1);
    gguf_set_val_u32(g, "tokenizer.ggml.eot_token_id", n - 1);
    gguf_set_val_u32(g, "tokenizer.ggml.padding_token_id", n - 3);
    gguf_set_val_bool(g, "tokenizer.ggml.add_bos_token", false);
    gguf_set_val_bool(g, "tokenizer.ggml.add_eos_token", false);
    if (chat_template) gguf_set_val_str(g, "tokenizer.chat_template", k_chat_template);
    set_fim(g, vd);
}

}  // namespace baton::testmodel
