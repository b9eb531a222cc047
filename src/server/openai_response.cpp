// openai_response.cpp — response JSON and SSE chunks (see openai_response.h).
#include "openai_response.h"

#include <atomic>
#include <ctime>

namespace baton {

using json = nlohmann::json;

namespace {

std::string dump(const json & j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json usage_json(const usage_counts & u) {
    return {{"prompt_tokens", u.prompt_tokens},
            {"completion_tokens", u.generated_tokens},
            {"total_tokens", u.prompt_tokens + u.generated_tokens},
            {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

// timings_json: llama-server's "timings" (prompt_n counts the prompt tokens this node computed).
json timings_json(const event_done & d) {
    const uint32_t cache_n = d.usage.cached_tokens;
    const uint32_t prompt_n = d.usage.prompt_tokens > cache_n ? d.usage.prompt_tokens - cache_n : 0;
    const uint32_t predicted_n = d.usage.generated_tokens;
    auto per = [](double ms, uint32_t n) { return n ? ms / n : 0.0; };
    auto rate = [](double ms, uint32_t n) { return ms > 0 ? 1e3 * n / ms : 0.0; };
    return {{"cache_n", cache_n},
            {"prompt_n", prompt_n},
            {"prompt_ms", d.ms_prompt},
            {"prompt_per_token_ms", per(d.ms_prompt, prompt_n)},
            {"prompt_per_second", rate(d.ms_prompt, prompt_n)},
            {"predicted_n", predicted_n},
            {"predicted_ms", d.ms_generate},
            {"predicted_per_token_ms", per(d.ms_generate, predicted_n)},
            {"predicted_per_second", rate(d.ms_generate, predicted_n)}};
}

bool is_chat(const openai_response_meta & m) { return m.endpoint == openai_endpoint::chat; }

json head(const openai_response_meta & m, bool chunk) {
    const char * object = is_chat(m) ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
    return {{"id", m.id},
            {"object", object},
            {"created", m.created},
            {"model", m.model},
            {"system_fingerprint", m.system_fingerprint}};
}

// choice renders one choice of a chunk; finish is null while the stream goes on.
json chunk_choice(const openai_response_meta & m, const json & delta_or_text, const json & finish) {
    if (is_chat(m)) return {{"index", 0}, {"delta", delta_or_text}, {"logprobs", nullptr}, {"finish_reason", finish}};
    return {{"index", 0}, {"text", delta_or_text}, {"logprobs", nullptr}, {"finish_reason", finish}};
}

std::string chunk(const openai_response_meta & m, json choice) {
    json j = head(m, true);
    j["choices"] = json::array({std::move(choice)});
    return dump(j);
}

const char * stop_type(const event_done & d) {
    if (d.finish == finish_reason::length) return "limit";
    return d.stop_word.empty() ? "eos" : "word";
}

// completion_final: llama-server's /completion object at the end of a generation.
json completion_final(const openai_response_meta & m, const openai_result & r, const std::string & content) {
    const event_done & d = r.done;
    json j = {{"index", 0},
              {"content", content},
              {"tokens", m.return_tokens ? json(r.tokens) : json::array()},
              {"id_slot", d.slot},
              {"stop", true},
              {"model", m.model},
              {"tokens_predicted", d.usage.generated_tokens},
              {"tokens_evaluated", d.usage.prompt_tokens},
              {"generation_settings", m.generation_settings},
              {"prompt", m.prompt_text},
              {"has_new_line", content.find('\n') != std::string::npos},
              {"truncated", false},
              {"stop_type", stop_type(d)},
              {"stopping_word", d.stop_word},
              // what the slot holds: the prompt and every generated token but the last (never decoded)
              {"tokens_cached", d.usage.prompt_tokens + (d.usage.generated_tokens ? d.usage.generated_tokens - 1 : 0)},
              {"timings", timings_json(d)}};
    return j;
}

}  // namespace

openai_response_meta openai_response_meta_make(openai_endpoint endpoint, const std::string & model,
                                               const std::string & system_fingerprint) {
    static std::atomic<uint64_t> counter{0};
    openai_response_meta m;
    m.endpoint = endpoint;
    m.created = int64_t(std::time(nullptr));
    m.id = std::string(endpoint == openai_endpoint::chat ? "chatcmpl-" : "cmpl-") + std::to_string(m.created) + "-" +
           std::to_string(counter.fetch_add(1) + 1);
    m.model = model;
    m.system_fingerprint = system_fingerprint;
    return m;
}

json openai_generation_settings(const openai_request & r, uint32_t n_ctx) {
    const sampling_params & s = r.sampling;
    return {{"n_ctx", n_ctx},
            {"seed", s.seed},
            {"temperature", s.temperature},
            {"top_k", s.top_k},
            {"top_p", s.top_p},
            {"min_p", s.min_p},
            {"repeat_last_n", s.repeat_last_n},
            {"repeat_penalty", s.repeat_penalty},
            {"presence_penalty", s.presence_penalty},
            {"frequency_penalty", s.frequency_penalty},
            {"max_tokens", r.max_tokens},
            {"n_predict", r.max_tokens},
            {"stop", r.stop},
            {"ignore_eos", r.ignore_eos},
            {"stream", r.stream},
            {"samplers", {"penalties", "top_k", "top_p", "min_p", "temperature"}}};
}

const char * openai_finish_name(finish_reason r) { return r == finish_reason::length ? "length" : "stop"; }

std::string openai_response_json(const openai_response_meta & m, const openai_result & r) {
    if (m.endpoint == openai_endpoint::completion) return dump(completion_final(m, r, r.content));
    json j = head(m, false);
    json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", openai_finish_name(r.done.finish)}};
    if (is_chat(m)) {
        choice["message"] = {{"role", "assistant"}, {"content", r.content}};
        if (!r.reasoning.empty()) choice["message"]["reasoning_content"] = r.reasoning;
    } else {
        choice["text"] = r.content;
    }
    j["choices"] = json::array({std::move(choice)});
    j["usage"] = usage_json(r.done.usage);
    j["timings"] = timings_json(r.done);
    return dump(j);
}

std::string openai_chunk_role_json(const openai_response_meta & m) {
    return chunk(m, chunk_choice(m, {{"role", "assistant"}, {"content", nullptr}}, nullptr));
}

std::string openai_chunk_delta_json(const openai_response_meta & m, const reasoning_delta & d,
                                    const std::vector<token_id> & tokens, uint32_t n_generated, uint32_t n_prompt) {
    if (m.endpoint == openai_endpoint::completion)
        return dump({{"index", 0},
                     {"content", d.content},
                     {"tokens", tokens},
                     {"stop", false},
                     {"id_slot", -1},
                     {"tokens_predicted", n_generated},
                     {"tokens_evaluated", n_prompt}});
    if (!is_chat(m)) return chunk(m, chunk_choice(m, json(d.content), nullptr));
    json delta = json::object();
    if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
    if (!d.content.empty()) delta["content"] = d.content;
    return chunk(m, chunk_choice(m, delta, nullptr));
}

std::string openai_chunk_finish_json(const openai_response_meta & m, const openai_result & r) {
    if (m.endpoint == openai_endpoint::completion) return dump(completion_final(m, r, ""));
    return chunk(m, chunk_choice(m, is_chat(m) ? json::object() : json(""), openai_finish_name(r.done.finish)));
}

std::string openai_chunk_usage_json(const openai_response_meta & m, const openai_result & r) {
    json j = head(m, true);
    j["choices"] = json::array();
    j["usage"] = usage_json(r.done.usage);
    j["timings"] = timings_json(r.done);
    return dump(j);
}

}  // namespace baton
