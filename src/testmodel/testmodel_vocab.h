// testmodel_vocab.h — the two vocabularies mkmodel writes: SentencePiece with byte fallback, and a
// byte-level BPE whose merges are learned from a fixed word list. Private to the testmodel module.
// Thread-safety: plain functions.
#pragma once

#include <gguf.h>

#include <cstdint>
#include <string>
#include <vector>

namespace baton::testmodel {

struct vocab_entry {
    std::string text;
    float score = 0.0f;
    int32_t type = 1;  // 1 normal, 2 unknown, 3 control, 6 byte
};

struct vocab_data {
    std::vector<vocab_entry> tokens;
    std::vector<std::string> merges;  // bpe only: "left right", in rank order
    // Fill-in-the-middle tokens (add_fim_tokens): prefix, suffix, middle, pad, repo name, file separator.
    std::vector<int32_t> fim;
};

// build_spm_vocab / build_bpe_vocab: the vocabularies, the same on every platform and every run.
vocab_data build_spm_vocab();
vocab_data build_bpe_vocab();

// add_fim_tokens adds the six fill-in-the-middle control tokens (Qwen2.5-Coder's texts: <|fim_prefix|>, ...)
// to either vocabulary (before a BPE vocabulary's three trailing specials, which keep their places from the
// end) and records their ids; set_spm_vocab / set_bpe_vocab then write tokenizer.ggml.fim_*_token_id.
void add_fim_tokens(vocab_data & vd, bool bpe);

// set_spm_vocab / set_bpe_vocab write a vocabulary's tokenizer.* keys, and the ChatML chat template when
// chat_template is set.
void set_spm_vocab(gguf_context * g, const vocab_data & vd, bool chat_template);
void set_bpe_vocab(gguf_context * g, const vocab_data & vd, bool chat_template);

}  // namespace baton::testmodel
