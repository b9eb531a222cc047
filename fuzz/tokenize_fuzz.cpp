// tokenize_fuzz.cpp — libFuzzer target for Baton's linear tokenizer front-end (src/engine/text.cpp and
// text_specials.cpp): the text is split at special-token texts by Baton and only the plain fragments go to
// libllama, and the result must be llama_tokenize's, token for token.
//
// Input: byte 0 picks the vocabulary (mkmodel's SentencePiece or byte-level BPE, both with ChatML control
// tokens) and add_special / parse_special; the rest is the text, repeated up to at least 1100 bytes (text_tokenize
// splits texts over 1 KiB itself, shorter ones go straight to libllama) and cut at 16 KiB. Properties:
// text_tokenize returns llama_tokenize's tokens exactly; text_tokens_min never exceeds their count; with
// n_ctx = that count + 1 the text is accepted, with n_ctx = the count it is refused, never crashing.
// The vocabularies are small mkmodel llama models (fuzz_vocab.h); llama_tokenize_all is the tests' oracle.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

#include <llama.h>

#include "baton/model.h"
#include "baton/text.h"
#include "engine/tokenize_oracle.h"
#include "fuzz_vocab.h"

namespace {

using namespace baton;

std::unique_ptr<loaded_model> g_vocab[2];

[[noreturn]] void fail(const char * what, const std::string & detail = {}) {
    std::fprintf(stderr, "tokenize_fuzz: %s\n%s\n", what, detail.c_str());
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    llama_quiet_logs();
    llama_backend_once();
    g_vocab[0] = fuzz_vocab("tokenize-fuzz-spm", nullptr, "spm");
    g_vocab[1] = fuzz_vocab("tokenize-fuzz-bpe", nullptr, "bpe");
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
    const auto want = llama_tokenize_all(v, text, add_special, parse_special);
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
