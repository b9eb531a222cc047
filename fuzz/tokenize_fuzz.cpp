// tokenize_fuzz.cpp — libFuzzer target for Baton's linear tokenizer front-end (src/engine/text.cpp and
// text_specials.cpp): the text is split at special-token texts by Baton and only the plain fragments go to
// libllama, and the result must be llama_tokenize's, token for token.
//
// Input: byte 0 picks the vocabulary (mkmodel's SentencePiece or byte-level BPE, both with ChatML control
// tokens) and add_special / parse_special; the rest is the text, repeated up to at least 1100 bytes (text_tokenize
// splits texts over 1 KiB itself, shorter ones go straight to libllama) and cut at 16 KiB. Properties:
// text_tokenize returns llama_tokenize's tokens exactly; text_tokens_min never exceeds their count; with
// n_ctx = that count + 1 the text is accepted, with n_ctx = the count it is refused, never crashing.
// The vocabularies are small mkmodel llama models written to /tmp and loaded vocab-only.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

#include <llama.h>

#include "baton/mkmodel.h"
#include "baton/model.h"
#include "baton/text.h"

namespace {

using namespace baton;

std::unique_ptr<loaded_model> g_vocab[2];

[[noreturn]] void fail(const char * what, const std::string & detail = {}) {
    std::fprintf(stderr, "tokenize_fuzz: %s\n%s\n", what, detail.c_str());
    std::abort();
}

std::vector<token_id> oracle(const llama_vocab * v, const std::string & s, bool add_special, bool parse_special) {
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

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    llama_quiet_logs();
    llama_backend_once();
    for (int i = 0; i < 2; ++i) {
        const std::string path =
            "/tmp/baton-tokenize-fuzz-" + std::to_string(long(getpid())) + "-" + std::to_string(i) + ".gguf";
        mkmodel_params p;
        p.arch = "llama";
        p.n_embd = 32;
        p.n_layer = 1;
        p.vocab = i == 0 ? "spm" : "bpe";
        if (Status s = mkmodel_ensure(p, path); !s.ok()) fail("mkmodel:", s.to_string());
        model_load_params lp;
        lp.vocab_only = true;
        auto m = loaded_model::load(path, lp);
        if (!m.ok()) fail("loading the vocabulary:", m.status().to_string());
        g_vocab[i] = std::move(m.value());
        std::remove(path.c_str());
    }
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    if (size < 2) return 0;
    const llama_vocab * v = g_vocab[data[0] & 1]->vocab();
    const bool add_special = (data[0] & 2) != 0, parse_special = (data[0] & 4) != 0;
    const std::string piece(reinterpret_cast<const char *>(data + 1), size - 1);
    std::string text;
    while (text.size() < 1100) text += piece;
    if (text.size() > 16384) text.resize(16384);
    const auto want = oracle(v, text, add_special, parse_special);
    auto got = text_tokenize(v, text, add_special, parse_special);
    if (!got.ok()) fail("text_tokenize failed where llama_tokenize did not:", got.status().to_string());
    if (got.value() != want) fail("text_tokenize differs from llama_tokenize on:", text);
    if (text_tokens_min(v, text, add_special, parse_special) > want.size())
        fail("text_tokens_min over the count:", text);
    if (!text_tokenize(v, text, add_special, parse_special, uint32_t(want.size() + 1)).ok())
        fail("refused with a context one larger than the text needs:", text);
    if (!want.empty() && text_tokenize(v, text, add_special, parse_special, uint32_t(want.size())).ok())
        fail("accepted with a context the text fills:", text);
    return 0;
}
