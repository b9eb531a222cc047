// grammar_check_fuzz.cpp — libFuzzer target for Baton's GBNF structure check (src/engine/grammar_check.cpp).
//
// Input: one selector byte, then GBNF text. The selector's low bit picks the limits: 0 the defaults, 1 small
// ones (so inputs reach every limit quickly). grammar_check must return (never crash, hang or touch memory
// it does not own, which ASan/UBSan check); a refusal must be invalid_argument and start "grammar: ". A
// grammar it accepts is handed to libllama's grammar parser (llama_sampler_init_grammar), which must then
// return without overflowing the stack or running out of time or memory (-timeout, -rss_limit_mb), and
// whose sampler, when libllama accepts the grammar, must take one pass over every token of the vocabulary.
// The vocabulary comes from a small mkmodel llama model written to $BATON_GRAMMAR_FUZZ_MODEL or
// /tmp/baton-grammar-fuzz-<pid>.gguf, loaded vocab-only.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <unistd.h>
#include <vector>

#include <llama.h>

#include "baton/grammar_check.h"
#include "baton/model.h"
#include "fuzz_vocab.h"

namespace {

using namespace baton;

std::unique_ptr<loaded_model> g_model;

[[noreturn]] void fail(const char * what, const std::string & detail) {
    std::fprintf(stderr, "grammar_check_fuzz: %s\n%s\n", what, detail.c_str());
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    llama_quiet_logs();
    llama_backend_once();
    g_model = fuzz_vocab("grammar-fuzz", "BATON_GRAMMAR_FUZZ_MODEL");
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    if (size < 1) return 0;
    grammar_limits l;
    if (data[0] & 1)
        l = grammar_limits{.depth_max = 8, .chain_max = 16, .rules_max = 256, .elements_max = 4096, .fanout_max = 64};
    const std::string gbnf(reinterpret_cast<const char *>(data + 1), size - 1);
    const Status st = grammar_check(gbnf, l);
    if (!st.ok()) {
        if (st.code() != status_code::invalid_argument || st.message().rfind("grammar: ", 0) != 0)
            fail("a refusal that is not invalid_argument \"grammar: ...\":", st.to_string());
        return 0;
    }
    llama_sampler * s = llama_sampler_init_grammar(g_model->vocab(), gbnf.c_str(), "root");
    if (!s) return 0;  // libllama's own refusal (a <text> that is not one token, say)
    const int32_t n_vocab = llama_vocab_n_tokens(g_model->vocab());
    std::vector<llama_token_data> cur(static_cast<size_t>(n_vocab));
    for (int32_t t = 0; t < n_vocab; ++t) cur[size_t(t)] = {t, 0.0f, 0.0f};
    llama_token_data_array arr = {cur.data(), cur.size(), -1, false};
    llama_sampler_apply(s, &arr);
    llama_sampler_free(s);
    return 0;
}
