// openai_fuzz.cpp — libFuzzer target for the two request parsers a generation meets: the client's (the
// OpenAI dialect, src/openai/openai.cpp, and Anthropic's Messages API, src/openai/anthropic_request.cpp) and
// the embedded request a prefill node writes into a blob
// (src/pd/pd_request.cpp), which the decode node reads back.
//
// Input layout: byte 0 selects the call, the rest is the body.
//   bit 0: endpoint (0 completions or completion, 1 chat)
//   bit 1: the body is an embedded request (pd_request_decode) instead of a client's (openai_parse)
//   bit 2: with bit 0 clear, llama-server's /completion instead of /v1/completions
//   bit 3: with bits 0 and 2 clear, llama-server's /infill (its fields parsed; the request then goes on as the
//          /completion of token ids derived from them, as a node makes it with infill_tokens)
//   bit 4: the body is an embeddings request (openai_embedding_parse); one that parses renders, in both
//          shapes, to JSON that parses back with one result per input
//   bit 5: with bit 4 clear, the body is a rerank request (openai_rerank_parse); one that parses has 1..max
//          documents and a top_n the answer respects, and renders (Jina's or TEI's shape) to JSON that parses
//          back with min(top_n, documents) results, highest score first, each index once
//   bit 6: with bits 4 and 5 clear, Anthropic's Messages body (openai_endpoint::messages, its mapping in
//          src/openai/anthropic_request.cpp) instead of the endpoint of bits 0, 2 and 3; one that parses also
//          renders a message and a stream (anthropic_response.h) from its texts, which must be JSON events
//   bit 7: ignored (so mutations of the selector still land on one of the cases)
//
// For any input: the parser must return (never crash, hang or touch memory it does not own, which
// ASan/UBSan check) and a failure must carry a message. For a client's request that parses, the embedded
// form is exact, which is what lets a decode node generate from exactly the request prefill resolved:
//   r  = openai_parse(body), a chat replaced by a rendered one (as a prefill node renders it, token ids and
//        a reasoning split derived from the input so the fuzzer varies them);
//   J1 = pd_request_encode(r)       must decode (with limits no lower than the parser's),
//   r2 = pd_request_decode(J1)      must equal r field for field (floats bit for bit), and
//   J2 = pd_request_encode(r2)      must be byte-identical to J1.
// An embedded request that decodes must re-encode to text that decodes to the same request.
// Several prompts (completions, completion): openai_prompts_split gives 2..openai_prompts_max bodies or none; each
// body it gives holds one prompt (splits to none again), and the whole body then does not parse (openai_parse
// takes one prompt). Each piece goes through the checks below as a body of its own.
// Why the round trip holds (checked against the code, not assumed):
//   - nlohmann's parser rejects invalid UTF-8 and lone surrogates, so every string that reaches the request
//     is valid UTF-8 and the dump's error_handler_t::replace never rewrites it;
//   - float fields are range-checked and stored as float; the encoder writes the float widened to double in
//     shortest round-trip form, so decoding and narrowing gives the same float bits (-0.0 included);
//   - a never-sampled bias (-infinity) is written as false, since JSON has no infinity;
//   - the public parser's bounds (stop strings, logit_bias texts, n, n_probs, token ids) are the decoder's.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "baton/openai/anthropic_response.h"
#include "baton/openai/embeddings.h"
#include "baton/openai/openai.h"
#include "baton/openai/rerank.h"
#include "baton/pd/pd_request.h"

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

// rendered: the chat as a prefill node would embed it (the template's output is the node's; here token ids
// and a reasoning split derived from the messages, so both vary with the input).
openai_chat_rendered rendered(const openai_chat & c) {
    openai_chat_rendered out;
    for (const auto & m : c.messages) out.tokens.push_back(token_id(m.content.size() & 0xffff));
    if (out.tokens.empty()) out.tokens.push_back(1);
    out.reasoning.format = c.reasoning.value_or(reasoning_format::none);
    out.reasoning.starts_open = c.add_generation_prompt;
    if (c.tools.is_array() && !c.tools.empty()) out.tools = tool_call_format::hermes;
    return out;
}

void embedded_round_trip(const openai_request & r) {
    auto j1 = pd_request_encode(r);
    if (!j1.ok()) fail(("a parsed request does not encode: " + j1.status().to_string()).c_str());
    auto r2 = pd_request_decode(j1.value(), pd_request_limits{});
    if (!r2.ok()) fail(("the embedded request does not decode: " + r2.status().to_string()).c_str(), j1.value());
    if (!same_request(r, r2.value())) fail("the decoded embedded request is a different request", j1.value());
    auto j2 = pd_request_encode(r2.value());
    if (!j2.ok() || j1.value() != j2.value())
        fail("the embedded request is not a fixed point", j1.value(), j2.ok() ? j2.value() : "");
}

// rerank_round_trip: bit 5 (above). The scores are derived from the documents so ties and orders vary.
void rerank_round_trip(std::string_view body) {
    auto r = openai_rerank_parse(body, prompt_limits{});
    if (!r.ok()) {
        if (r.status().message().empty()) fail("error without a message");
        return;
    }
    if (r->documents.empty() || r->documents.size() > openai_rerank_documents_max) fail("documents out of bounds");
    std::vector<rerank_score> scores(r->documents.size());
    for (size_t i = 0; i < scores.size(); ++i)
        scores[i] = {float(r->documents[i].size() % 7) / 7.0f, uint32_t(r->documents[i].size())};
    const auto j = nlohmann::json::parse(openai_rerank_json(r.value(), scores, "m"), nullptr, false);
    if (j.is_discarded()) fail("a rerank answer that is not JSON");
    const nlohmann::json & results = r->tei ? j : j["results"];
    const size_t want = r->top_n ? std::min<uint64_t>(*r->top_n, scores.size()) : scores.size();
    if (!results.is_array() || results.size() != want) fail("not min(top_n, documents) results");
    std::vector<bool> seen(scores.size());
    double last = 2;
    for (const auto & e : results) {
        const size_t i = e["index"].get<size_t>();
        if (i >= scores.size() || seen[i]) fail("a result index out of range or repeated");
        seen[i] = true;
        const double s = e[r->tei ? "score" : "relevance_score"].get<double>();
        if (s > last) fail("results not sorted by score");
        last = s;
    }
}

// anthropic_render: a message and a stream made of a Messages request's texts (its messages' contents as
// thought, text and a call, stopped by its first stop sequence when it has one) render to JSON events.
void anthropic_render(const openai_request & r) {
    const auto * chat = std::get_if<openai_chat>(&r.input);
    if (!chat || r.n != 1) fail("a Messages request that is not one chat");
    openai_result res;
    res.done.finish = finish_reason::stop;
    if (!r.stop.empty()) res.done.stop_word = r.stop[0];
    openai_delta d;
    for (const auto & m : chat->messages) {
        (m.role == "assistant" ? d.text.reasoning : d.text.content) += m.content;
        for (const auto & c : m.tool_calls) d.tool_calls.push_back({d.tool_calls.size(), c.id, c.name, c.arguments});
    }
    res.reasoning = d.text.reasoning;
    res.content = d.text.content;
    for (const auto & c : d.tool_calls) res.tool_calls.push_back({c.id, c.name, c.arguments});
    const openai_response_meta meta = openai_response_meta_make(r.endpoint, r.model, "fp");
    if (nlohmann::json::parse(anthropic_message_json(meta, res), nullptr, false).is_discarded())
        fail("a message that is not JSON");
    anthropic_stream s(meta);
    std::vector<anthropic_event> events = s.start(7);
    for (auto & e : s.push(d)) events.push_back(std::move(e));
    for (auto & e : s.finish(res)) events.push_back(std::move(e));
    for (const auto & e : events) {
        const auto j = nlohmann::json::parse(e.data, nullptr, false);
        if (j.is_discarded() || !j.is_object() || j.value("type", "") != e.name)
            fail("an event that is not JSON", e.data);
    }
    if (events.back().name != "message_stop") fail("a stream that does not end with message_stop");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    if (size == 0) return 0;
    const openai_endpoint endpoint = (data[0] & 64)  ? openai_endpoint::messages
                                     : (data[0] & 1) ? openai_endpoint::chat
                                     : (data[0] & 4) ? openai_endpoint::completion
                                     : (data[0] & 8) ? openai_endpoint::infill
                                                     : openai_endpoint::completions;
    const bool embedded = (data[0] & 2) != 0;
    const std::string_view body(reinterpret_cast<const char *>(data) + 1, size - 1);

    if (data[0] & 16) {
        auto e = openai_embedding_parse(body, prompt_limits{});
        if (!e.ok()) {
            if (e.status().message().empty()) fail("error without a message");
            return 0;
        }
        if (e->inputs.empty() || e->inputs.size() > openai_embedding_inputs_max) fail("inputs out of bounds");
        std::vector<embedding_result> results(e->inputs.size());
        for (auto & r : results) r.vectors = {{0.5f, -0.25f}};
        for (const bool oai : {false, true}) {
            const auto j = nlohmann::json::parse(openai_embedding_json(e.value(), results, oai, "m"), nullptr, false);
            if (j.is_discarded()) fail("an embeddings answer that is not JSON");
            if ((oai ? j["data"].size() : j.size()) != results.size()) fail("not one result per input");
        }
        return 0;
    }

    if (data[0] & 32) {
        rerank_round_trip(body);
        return 0;
    }

    if (embedded) {
        auto r = pd_request_decode(body, pd_request_limits{});
        if (!r.ok()) {
            if (r.status().message().empty()) fail("error without a message");
            return 0;
        }
        embedded_round_trip(r.value());
        return 0;
    }
    auto several = openai_prompts_split(body, endpoint);
    if (!several.ok() && several.status().message().empty()) fail("error without a message");
    if (several.ok() && !several->empty()) {
        if (several->size() < 2 || several->size() > openai_prompts_max) fail("a split of the wrong size");
        if (openai_parse(body, endpoint).ok()) fail("several prompts parsed as one", std::string(body), "");
        for (const std::string & one : *several) {
            auto again = openai_prompts_split(one, endpoint);
            if (!again.ok() || !again->empty()) fail("a split prompt splits again", one, "");
            std::string input(1, char(data[0]));  // the same selector: the piece runs every check below
            input += one;
            LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t *>(input.data()), input.size());
        }
        return 0;
    }
    auto r = openai_parse(body, endpoint);
    if (!r.ok()) {
        if (r.status().message().empty()) fail("error without a message");
        return 0;
    }
    if (r->endpoint == openai_endpoint::messages) anthropic_render(r.value());
    if (const auto * chat = std::get_if<openai_chat>(&r->input)) r->input = rendered(*chat);
    if (const auto * m = std::get_if<openai_prompt_mixed>(&r->input)) {
        if (pd_request_encode(r.value()).ok()) fail("an untokenized mixed prompt was embedded", std::string(body), "");
        openai_prompt_tokens t;  // as a node makes it: texts become tokens (here: one per text, its length)
        for (const auto & part : m->parts)
            t.tokens.push_back(std::holds_alternative<token_id>(part) ? std::get<token_id>(part)
                                                                      : token_id(std::get<std::string>(part).size()));
        r->input = std::move(t);
    }
    if (const auto * pm = std::get_if<openai_prompt_media>(&r->input)) {
        if (pd_request_encode(r.value()).ok())
            fail("an unencoded prompt with images was embedded", std::string(body), "");
        if (pm->images.empty()) fail("a multimodal prompt without images", std::string(body), "");
        openai_prompt_tokens t;  // as a node makes it: the text's length, then one media token per image
        t.tokens.push_back(token_id(pm->text.size()));
        for (size_t i = 0; i < pm->images.size(); ++i) {
            if (pm->images[i].empty()) fail("an empty image", std::string(body), "");
            t.tokens.push_back(media_token_min + token_id(i));
        }
        r->input = std::move(t);
    }
    if (const auto * in = std::get_if<openai_infill>(&r->input)) {
        if (endpoint != openai_endpoint::infill || r->endpoint != openai_endpoint::infill)
            fail("infill fields from another endpoint", std::string(body), "");
        if (pd_request_encode(r.value()).ok()) fail("an unbuilt /infill was embedded", std::string(body), "");
        openai_prompt_tokens t;  // one token per text, its length: the fields reach the builder intact
        for (const std::string * x : {&in->prefix, &in->suffix, &in->prompt}) t.tokens.push_back(token_id(x->size()));
        for (const auto & c : in->extra) t.tokens.push_back(token_id(c.filename.size() + c.text.size()));
        r->input = std::move(t);
        r->endpoint = openai_endpoint::completion;
    }
    // The decoder holds the grammar to its limits (the same defaults the parser used).
    embedded_round_trip(r.value());
    return 0;
}
