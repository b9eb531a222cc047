// anthropic_response.cpp — Messages API answers and stream events (see anthropic_response.h).
#include "baton/openai/anthropic_response.h"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace baton {

namespace {

using mjson = nlohmann::ordered_json;

std::string anthropic_dump(const mjson & j) { return j.dump(-1, ' ', false, mjson::error_handler_t::replace); }

// anthropic_usage: llama-server's usage object (the tokens read from cache apart from the others).
mjson anthropic_usage(const usage_counts & u, uint32_t output_tokens) {
    const uint32_t cached = std::min(u.cached_tokens, u.prompt_tokens);
    return {{"cache_read_input_tokens", cached},
            {"input_tokens", u.prompt_tokens - cached},
            {"output_tokens", output_tokens}};
}

mjson anthropic_stop_sequence(const openai_result & r) {
    if (std::string(anthropic_stop_reason(r)) != "stop_sequence") return nullptr;
    return r.done.stop_word;
}

// anthropic_input: a call's arguments as the object they are (tool_calls.h: compact JSON of an object; {}
// should a model's text ever not parse).
mjson anthropic_input(const std::string & arguments) {
    mjson in = mjson::parse(arguments, nullptr, false);
    if (in.is_discarded() || !in.is_object()) return mjson::object();
    return in;
}

anthropic_event anthropic_event_of(const char * name, mjson data) { return {name, anthropic_dump(data)}; }

}  // namespace

const char * anthropic_stop_reason(const openai_result & r) {
    if (r.done.finish == finish_reason::length) return "max_tokens";
    if (!r.tool_calls.empty()) return "tool_use";
    if (!r.done.stop_word.empty()) return "stop_sequence";
    return "end_turn";
}

std::string anthropic_message_json(const openai_response_meta & m, const openai_result & r) {
    mjson content = mjson::array();
    if (!r.reasoning.empty()) content.push_back({{"type", "thinking"}, {"thinking", r.reasoning}, {"signature", ""}});
    if (!r.content.empty()) content.push_back({{"type", "text"}, {"text", r.content}});
    for (const tool_call & c : r.tool_calls)
        content.push_back(
            {{"type", "tool_use"}, {"id", c.id}, {"name", c.name}, {"input", anthropic_input(c.arguments)}});
    const mjson j = {{"id", m.id},
                     {"type", "message"},
                     {"role", "assistant"},
                     {"content", std::move(content)},
                     {"model", m.model},
                     {"stop_reason", anthropic_stop_reason(r)},
                     {"stop_sequence", anthropic_stop_sequence(r)},
                     {"usage", anthropic_usage(r.done.usage, r.done.usage.generated_tokens)}};
    return anthropic_dump(j);
}

std::string anthropic_count_tokens_json(uint32_t n_input_tokens) {
    return anthropic_dump(mjson{{"input_tokens", n_input_tokens}});
}

anthropic_stream::anthropic_stream(openai_response_meta m) : m_(std::move(m)) {}

std::vector<anthropic_event> anthropic_stream::start(uint32_t n_prompt) const {
    usage_counts u;
    u.prompt_tokens = n_prompt;
    const mjson message = {
        {"id", m_.id},       {"type", "message"},      {"role", "assistant"},      {"content", mjson::array()},
        {"model", m_.model}, {"stop_reason", nullptr}, {"stop_sequence", nullptr}, {"usage", anthropic_usage(u, 0)}};
    return {anthropic_event_of("message_start", {{"type", "message_start"}, {"message", message}})};
}

void anthropic_stream::close(std::vector<anthropic_event> & out) {
    if (open_ == block::none) return;
    if (open_ == block::thinking)  // (Anthropic's thinking blocks end with their signature: a local model's is "")
        out.push_back(
            anthropic_event_of("content_block_delta", {{"type", "content_block_delta"},
                                                       {"index", index_},
                                                       {"delta", {{"type", "signature_delta"}, {"signature", ""}}}}));
    out.push_back(anthropic_event_of("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}}));
    open_ = block::none;
}

void anthropic_stream::open(block b, std::vector<anthropic_event> & out, const tool_call_delta * call) {
    if (open_ == b && b != block::tool_use) return;
    close(out);
    open_ = b;
    ++index_;
    mjson cb;
    if (b == block::thinking) cb = {{"type", "thinking"}, {"thinking", ""}};
    else if (b == block::text) cb = {{"type", "text"}, {"text", ""}};
    else cb = {{"type", "tool_use"}, {"id", call->id}, {"name", call->name}, {"input", mjson::object()}};
    out.push_back(anthropic_event_of("content_block_start",
                                     {{"type", "content_block_start"}, {"index", index_}, {"content_block", cb}}));
}

std::vector<anthropic_event> anthropic_stream::push(const openai_delta & d) {
    std::vector<anthropic_event> out;
    auto delta = [&](mjson body) {
        out.push_back(anthropic_event_of(
            "content_block_delta", {{"type", "content_block_delta"}, {"index", index_}, {"delta", std::move(body)}}));
    };
    if (!d.text.reasoning.empty()) {
        open(block::thinking, out);
        delta({{"type", "thinking_delta"}, {"thinking", d.text.reasoning}});
    }
    if (!d.text.content.empty()) {
        open(block::text, out);
        delta({{"type", "text_delta"}, {"text", d.text.content}});
    }
    for (const tool_call_delta & c : d.tool_calls) {
        if (!c.name.empty()) open(block::tool_use, out, &c);  // a call's first delta names it
        if (open_ != block::tool_use || c.arguments.empty()) continue;
        delta({{"type", "input_json_delta"}, {"partial_json", c.arguments}});
    }
    return out;
}

std::vector<anthropic_event> anthropic_stream::finish(const openai_result & r) {
    std::vector<anthropic_event> out;
    close(out);
    const mjson delta = {{"stop_reason", anthropic_stop_reason(r)}, {"stop_sequence", anthropic_stop_sequence(r)}};
    out.push_back(
        anthropic_event_of("message_delta", {{"type", "message_delta"},
                                             {"delta", delta},
                                             {"usage", anthropic_usage(r.done.usage, r.done.usage.generated_tokens)}}));
    out.push_back(anthropic_event_of("message_stop", {{"type", "message_stop"}}));
    return out;
}

}  // namespace baton
