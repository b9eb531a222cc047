// openai_response.cpp — response JSON and SSE chunks (see openai_response.h).
#include "baton/openai/openai_response.h"

#include <atomic>
#include <cmath>
#include <ctime>
#include <limits>
#include <random>

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

json bytes_of(const std::string & s) {
    json b = json::array();
    for (unsigned char c : s) b.push_back(int(c));
    return b;
}

json logprob_json(const openai_logprob & p) {
    json top = json::array();
    for (const auto & t : p.top)
        top.push_back({{"id", t.id}, {"token", t.text}, {"bytes", bytes_of(t.text)}, {"logprob", t.logprob}});
    return {
        {"id", p.id}, {"token", p.text}, {"bytes", bytes_of(p.text)}, {"logprob", p.logprob}, {"top_logprobs", top}};
}

json logprobs_list(const std::vector<openai_logprob> & ps) {
    json a = json::array();
    for (const auto & p : ps) a.push_back(logprob_json(p));
    return a;
}

// choice_logprobs: OpenAI's choice.logprobs (llama-server's shape on both endpoints: {"content": [...]}).
json choice_logprobs(const openai_response_meta & m, const std::vector<openai_logprob> & ps) {
    if (!m.logprobs) return nullptr;
    return {{"content", logprobs_list(ps)}};
}

// choice renders one choice of a chunk; finish is null while the stream goes on.
json chunk_choice(const openai_response_meta & m, uint32_t index, const json & delta_or_text, const json & finish,
                  const std::vector<openai_logprob> & ps = {}) {
    const json lp = ps.empty() ? json(nullptr) : choice_logprobs(m, ps);
    if (is_chat(m)) return {{"index", index}, {"delta", delta_or_text}, {"logprobs", lp}, {"finish_reason", finish}};
    return {{"index", index}, {"text", delta_or_text}, {"logprobs", lp}, {"finish_reason", finish}};
}

json tool_calls_json(const std::vector<tool_call> & calls) {
    json a = json::array();
    for (const auto & c : calls)
        a.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    return a;
}

usage_counts usage_of(const openai_response_meta & m, const std::vector<openai_result> & choices) {
    usage_counts u;
    for (const auto & c : choices) {
        if (c.index % std::max<uint32_t>(m.choices_per_prompt, 1) == 0) {  // a prompt's first choice
            u.prompt_tokens += c.done.usage.prompt_tokens;
            u.cached_tokens += c.done.usage.cached_tokens;
        }
        u.generated_tokens += c.done.usage.generated_tokens;
    }
    return u;
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
    json j = {{"index", r.index},
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
              // llama-server's: true when the slot's context filled before n_predict (Baton never shifts it)
              {"truncated", d.context_full},
              {"stop_type", stop_type(d)},
              {"stopping_word", d.stop_word},
              // what the slot holds: the prompt and every generated token but the last (never decoded)
              {"tokens_cached", d.usage.prompt_tokens + (d.usage.generated_tokens ? d.usage.generated_tokens - 1 : 0)},
              {"timings", timings_json(d)}};
    if (m.logprobs) j["completion_probabilities"] = logprobs_list(r.logprobs);
    return j;
}

}  // namespace

openai_response_meta openai_response_meta_make(openai_endpoint endpoint, const std::string & model,
                                               const std::string & system_fingerprint) {
    static std::atomic<uint64_t> counter{0};
    openai_response_meta m;
    m.endpoint = endpoint;
    m.created = int64_t(std::time(nullptr));
    if (endpoint == openai_endpoint::messages) {
        // Anthropic's message ids: "msg_" and 24 letters and digits (unique per response).
        static constexpr char k_chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        thread_local std::mt19937_64 rng{std::random_device{}() ^ (counter.fetch_add(1) << 20)};
        m.id = "msg_";
        for (int i = 0; i < 24; ++i) m.id += k_chars[rng() % (sizeof(k_chars) - 1)];
    } else {
        m.id = std::string(endpoint == openai_endpoint::chat ? "chatcmpl-" : "cmpl-") + std::to_string(m.created) +
               "-" + std::to_string(counter.fetch_add(1) + 1);
    }
    m.model = model;
    m.system_fingerprint = system_fingerprint;
    return m;
}

json openai_generation_settings(const openai_request & r, uint32_t n_ctx, const std::vector<token_id> & eog) {
    const sampling_params & s = r.sampling;
    json bias = json::array();
    auto add_bias = [&](int32_t token, float b) {
        bias.push_back({{"bias", std::isfinite(b) ? json(b) : json(nullptr)}, {"token", token}});
    };
    for (const auto & [token, b] : s.logit_bias) add_bias(token, b);
    if (r.ignore_eos)
        for (token_id e : eog) add_bias(e, -std::numeric_limits<float>::infinity());
    return {{"n_ctx", n_ctx},
            {"logit_bias", std::move(bias)},
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

const char * openai_finish_of(const openai_result & r) {
    if (!r.tool_calls.empty() && r.done.finish != finish_reason::length) return "tool_calls";
    return openai_finish_name(r.done.finish);
}

openai_logprob openai_logprob_make(const loaded_model & model, token_id token, const token_probs & p) {
    openai_logprob out{token, text_token_piece(model, token, true), p.logprob, {}};
    for (const auto & t : p.top) out.top.push_back({t.token, text_token_piece(model, t.token, true), t.logprob});
    return out;
}

bool openai_delta_empty(const openai_delta & d) {
    return d.text.content.empty() && d.text.reasoning.empty() && d.tool_calls.empty() && d.tokens.empty() &&
           d.logprobs.empty();
}

std::string openai_response_json(const openai_response_meta & m, const std::vector<openai_result> & choices) {
    if (m.endpoint == openai_endpoint::completion)  // one result (n > 1 is refused there)
        return dump(completion_final(m, choices.at(0), choices.at(0).content));
    json j = head(m, false);
    json out = json::array();
    for (const openai_result & r : choices) {
        json choice = {
            {"index", r.index}, {"logprobs", choice_logprobs(m, r.logprobs)}, {"finish_reason", openai_finish_of(r)}};
        if (is_chat(m)) {
            choice["message"] = {{"role", "assistant"}, {"content", r.content}};
            if (!r.reasoning.empty()) choice["message"]["reasoning_content"] = r.reasoning;
            if (!r.tool_calls.empty()) {
                choice["message"]["tool_calls"] = tool_calls_json(r.tool_calls);
                if (r.content.empty()) choice["message"]["content"] = nullptr;
            }
        } else {
            choice["text"] = r.content;
        }
        out.push_back(std::move(choice));
    }
    j["choices"] = std::move(out);
    j["usage"] = usage_json(usage_of(m, choices));
    if (!choices.empty()) j["timings"] = timings_json(choices[0].done);
    return dump(j);
}

std::string openai_chunk_role_json(const openai_response_meta & m, uint32_t index) {
    return chunk(m, chunk_choice(m, index, {{"role", "assistant"}, {"content", nullptr}}, nullptr));
}

std::string openai_chunk_progress_json(const openai_response_meta & m, const event_progress & p) {
    const json progress = {
        {"total", p.total}, {"cache", p.cache}, {"processed", p.processed}, {"time_ms", int64_t(p.ms)}};
    if (m.endpoint == openai_endpoint::completion) {
        json j = {{"index", 0},    {"content", ""},         {"tokens", json::array()},    {"stop", false},
                  {"id_slot", -1}, {"tokens_predicted", 0}, {"tokens_evaluated", p.total}};
        j["prompt_progress"] = progress;
        return dump(j);
    }
    json j = head(m, true);
    j["choices"] = json::array(
        {chunk_choice(m, 0, is_chat(m) ? json{{"role", "assistant"}, {"content", nullptr}} : json(""), nullptr)});
    j["prompt_progress"] = progress;
    return dump(j);
}

std::string openai_chunk_delta_json(const openai_response_meta & m, const openai_delta & d, uint32_t n_generated,
                                    uint32_t n_prompt) {
    if (m.endpoint == openai_endpoint::completion) {
        json j = {{"index", d.index}, {"content", d.text.content},       {"tokens", d.tokens},          {"stop", false},
                  {"id_slot", -1},    {"tokens_predicted", n_generated}, {"tokens_evaluated", n_prompt}};
        if (m.logprobs) j["completion_probabilities"] = logprobs_list(d.logprobs);
        return dump(j);
    }
    if (!is_chat(m)) return chunk(m, chunk_choice(m, d.index, json(d.text.content), nullptr, d.logprobs));
    json delta = json::object();
    if (!d.text.reasoning.empty()) delta["reasoning_content"] = d.text.reasoning;
    if (!d.text.content.empty()) delta["content"] = d.text.content;
    if (!d.tool_calls.empty()) {
        json calls = json::array();
        for (const auto & c : d.tool_calls) {
            json call = {{"index", c.index}};
            if (!c.name.empty()) {
                call["id"] = c.id;
                call["type"] = "function";
                call["function"] = {{"name", c.name}, {"arguments", c.arguments}};
            } else {
                call["function"] = {{"arguments", c.arguments}};
            }
            calls.push_back(std::move(call));
        }
        delta["tool_calls"] = std::move(calls);
    }
    return chunk(m, chunk_choice(m, d.index, delta, nullptr, d.logprobs));
}

std::string openai_chunk_finish_json(const openai_response_meta & m, const openai_result & r,
                                     const std::vector<openai_logprob> & logprobs) {
    if (m.endpoint == openai_endpoint::completion) {
        openai_result last = r;
        last.logprobs = logprobs;
        return dump(completion_final(m, last, ""));
    }
    return chunk(m, chunk_choice(m, r.index, is_chat(m) ? json::object() : json(""), openai_finish_of(r), logprobs));
}

std::string openai_chunk_usage_json(const openai_response_meta & m, const std::vector<openai_result> & choices) {
    json j = head(m, true);
    j["choices"] = json::array();
    j["usage"] = usage_json(usage_of(m, choices));
    if (!choices.empty()) j["timings"] = timings_json(choices[0].done);
    return dump(j);
}

}  // namespace baton
