// json_schema_fuzz.cpp — libFuzzer target for the JSON Schema -> GBNF converter (src/openai/json_schema_grammar.cpp).
//
// Input: a JSON text (a schema). If it parses, json_schema_to_gbnf must return (never crash, hang or touch
// memory it does not own, which ASan/UBSan check); a refusal must carry a message; and a grammar it returns
// must be one libllama's grammar parser accepts (llama_sampler_init_grammar non-null: no syntax error, no
// undefined rule, no left recursion). json_object_gbnf() is checked the same way once at start-up.
// The vocabulary comes from a small mkmodel llama model written to $BATON_JSON_SCHEMA_FUZZ_MODEL or
// /tmp/baton-json-schema-fuzz-<pid>.gguf, loaded vocab-only.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <unistd.h>

#include <llama.h>
#include <nlohmann/json.hpp>

#include "baton/model.h"
#include "baton/openai/json_schema_grammar.h"
#include "fuzz_vocab.h"

namespace {

using namespace baton;

std::unique_ptr<loaded_model> g_model;

[[noreturn]] void fail(const char * what, const std::string & detail) {
    std::fprintf(stderr, "json_schema_fuzz: %s\n%s\n", what, detail.c_str());
    std::abort();
}

void check_loads(const std::string & gbnf) {
    llama_sampler * s = llama_sampler_init_grammar(g_model->vocab(), gbnf.c_str(), "root");
    if (!s) fail("libllama rejected a grammar the converter produced:", gbnf);
    llama_sampler_free(s);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    llama_quiet_logs();
    llama_backend_once();
    g_model = fuzz_vocab("json-schema-fuzz", "BATON_JSON_SCHEMA_FUZZ_MODEL");
    check_loads(json_object_gbnf());
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    const nlohmann::json schema = nlohmann::json::parse(data, data + size, nullptr, false);
    if (schema.is_discarded()) return 0;
    auto g = json_schema_to_gbnf(schema);
    if (!g.ok()) {
        if (g.status().message().empty()) fail("a refusal without a message for:", schema.dump());
        return 0;
    }
    check_loads(g.value());
    return 0;
}
