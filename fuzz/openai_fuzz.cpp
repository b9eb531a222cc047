// openai_fuzz.cpp — libFuzzer target for the OpenAI request parser (src/openai/openai.cpp).
//
// Input layout: byte 0 selects the call, the rest is the request body.
//   bit 0: endpoint (0 completions or completion, 1 chat)
//   bit 1: allow_endpoint_field (the /v1/prefill form, where "endpoint" in the body overrides bits 0 and 2,
//          and a chat may come rendered: "prompt" token ids and "reasoning")
//   bit 2: with bit 0 clear, llama-server's /completion instead of /v1/completions
//   bits 3..7: ignored (so mutations of the selector still land on one of the six cases)
//
// For any input: openai_parse must return (never crash, hang or touch memory it does not own, which
// ASan/UBSan check) and a failure must carry a message. For an input that parses, the canonical JSON is a
// fixed point, which is what lets a decode node rebuild exactly the request prefill embedded in a blob:
//   J1 = openai_request_json(parse(body))          must parse again (same endpoint, endpoint field allowed),
//   r2 = parse(J1)                                  must equal the first request field for field, and
//   J2 = openai_request_json(r2)                    must be byte-identical to J1.
// Why this holds (checked against openai.cpp, not assumed):
//   - nlohmann's parser rejects invalid UTF-8 and lone surrogates, so every string that reaches the request
//     is valid UTF-8 and the dump's error_handler_t::replace never rewrites it;
//   - float fields are range-checked as double and then narrowed; every range bound (0, 1, 2, 10, 100) is
//     a float exactly and rounding is monotone, so the narrowed value stays in range. The dump writes the
//     float widened to double in shortest round-trip form, so re-parsing and narrowing gives the same
//     float bits (-0.0 included);
//   - logit_bias: numeric object keys become ids, in the object's (sorted) order; texts (array strings and
//     other keys) are written after the ids as [text, bias] (an array string: a text again); false (never)
//     is written as false, since JSON has no infinity;
//   - aliases collapse to one spelling (max_completion_tokens/n_predict -> max_tokens, a string stop -> a
//     one-element array, a one-string prompt array -> a string, text content parts -> one string, null
//     content -> ""), and the canonical spelling parses to the same value;
//   - "endpoint" is always written, and the re-parse allows it, so the endpoint survives either way;
//   - a schema (json_schema, response_format) is written as the grammar it compiled to, and a grammar
//     re-parses as itself; tool-call arguments in the history are re-dumped compactly (a fixed point), and
//     the logprobs fields collapse to n_probs.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "baton/openai/openai.h"

namespace {

using namespace baton;

[[noreturn]] void fail(const char * what, std::string_view a = {}, std::string_view b = {}) {
    std::fprintf(stderr, "openai_fuzz: %s\n", what);
    if (!a.empty()) std::fprintf(stderr, "  first:  %.*s\n", int(a.size()), a.data());
    if (!b.empty()) std::fprintf(stderr, "  second: %.*s\n", int(b.size()), b.data());
    __builtin_trap();
}

// same_float compares bits: 0.0 and -0.0 render differently, so they must not be confused.
bool same_float(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

bool same_bias(const std::vector<std::pair<int32_t, float>> & a, const std::vector<std::pair<int32_t, float>> & b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (a[i].first != b[i].first || !same_float(a[i].second, b[i].second)) return false;
    return true;
}

bool same_texts(const std::vector<std::pair<std::string, float>> & a,
                const std::vector<std::pair<std::string, float>> & b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (a[i].first != b[i].first || !same_float(a[i].second, b[i].second)) return false;
    return true;
}

bool same_sampling(const sampling_params & a, const sampling_params & b) {
    return same_float(a.temperature, b.temperature) && a.top_k == b.top_k && same_float(a.top_p, b.top_p) &&
           same_float(a.min_p, b.min_p) && same_float(a.repeat_penalty, b.repeat_penalty) &&
           a.repeat_last_n == b.repeat_last_n && same_float(a.frequency_penalty, b.frequency_penalty) &&
           same_float(a.presence_penalty, b.presence_penalty) && a.seed == b.seed &&
           same_bias(a.logit_bias, b.logit_bias) && a.grammar == b.grammar;
}

bool same_request(const openai_request & a, const openai_request & b) {
    if (a.endpoint != b.endpoint || a.input != b.input || a.model != b.model) return false;
    return a.max_tokens == b.max_tokens && a.n == b.n && a.n_probs == b.n_probs &&
           same_texts(a.logit_bias_text, b.logit_bias_text) && same_sampling(a.sampling, b.sampling) &&
           a.stop == b.stop && a.stream == b.stream && a.include_usage == b.include_usage &&
           a.ignore_eos == b.ignore_eos && a.return_tokens == b.return_tokens;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    if (size == 0) return 0;
    const openai_endpoint endpoint = (data[0] & 1)   ? openai_endpoint::chat
                                     : (data[0] & 4) ? openai_endpoint::completion
                                                     : openai_endpoint::completions;
    const bool allow_endpoint_field = (data[0] & 2) != 0;
    const std::string_view body(reinterpret_cast<const char *>(data) + 1, size - 1);

    auto r = openai_parse(body, endpoint, allow_endpoint_field);
    if (!r.ok()) {
        if (r.status().message().empty()) fail("error without a message");
        return 0;
    }
    const std::string j1 = openai_request_json(r.value());
    auto r2 = openai_parse(j1, endpoint, true);
    if (!r2.ok()) fail(("canonical JSON does not parse: " + r2.status().to_string()).c_str(), j1);
    if (!same_request(r.value(), r2.value())) fail("re-parsed canonical JSON is a different request", j1);
    const std::string j2 = openai_request_json(r2.value());
    if (j1 != j2) fail("canonical JSON is not a fixed point", j1, j2);
    return 0;
}
