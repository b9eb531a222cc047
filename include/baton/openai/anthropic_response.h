// anthropic_response.h — Anthropic Messages API answers (POST /v1/messages): the message object and the
// typed server-sent events of a stream, built from the same engine results as the OpenAI shapes
// (openai_response.h), so a decode node answers what a single node answers.
//
// A message's content is its blocks in order: "thinking" (the reasoning split out, with an empty
// "signature": a local model signs nothing), "text", then one "tool_use" per call ({id, name, input}).
// stop_reason: "max_tokens" (the limit), "tool_use" (calls were made), "stop_sequence" (a stop sequence
// ended it; stop_sequence names it), else "end_turn". usage, as llama-server reports it:
// {cache_read_input_tokens, input_tokens (the prompt tokens not read from cache), output_tokens}; like
// OpenAI's cached_tokens these are the node's own measure (a decode node read its whole prompt from the
// blob), and input_tokens + cache_read_input_tokens is the prompt's length everywhere.
//
// A stream is message_start, then for each block content_block_start, its deltas (text_delta,
// thinking_delta, input_json_delta; a thinking block ends with an empty signature_delta) and
// content_block_stop, each block closed before the next opens and numbered from 0 in order; then
// message_delta (stop_reason, stop_sequence, usage) and message_stop. No [DONE].
// Thread-safety: pure functions; an anthropic_stream is one response's state (one owner).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "baton/openai/openai_response.h"

namespace baton {

// One server-sent event: its name ("event: NAME") and its JSON data.
struct anthropic_event {
    std::string name;
    std::string data;
    bool operator==(const anthropic_event &) const = default;
};

// anthropic_stop_reason: "max_tokens" | "tool_use" | "stop_sequence" | "end_turn" (see above).
const char * anthropic_stop_reason(const openai_result & r);

// anthropic_message_json: the whole (non-streamed) message of a generation. m.id is the message id.
std::string anthropic_message_json(const openai_response_meta & m, const openai_result & r);

// anthropic_count_tokens_json: /v1/messages/count_tokens' answer, {"input_tokens": n}.
std::string anthropic_count_tokens_json(uint32_t n_input_tokens);

// anthropic_stream renders one streamed message from the deltas of its choice (openai_delta, in order).
class anthropic_stream {
  public:
    explicit anthropic_stream(openai_response_meta m);

    // start: message_start. n_prompt: the prompt's tokens (how many were read from cache is known at the end:
    // message_start counts them all as input_tokens, message_delta gives the split).
    std::vector<anthropic_event> start(uint32_t n_prompt) const;
    // push: the events one delta adds (a block opened, closing the one before, and its deltas).
    std::vector<anthropic_event> push(const openai_delta & d);
    // finish: the open block's end, message_delta and message_stop. r: the finished choice.
    std::vector<anthropic_event> finish(const openai_result & r);

  private:
    enum class block : uint8_t { none, thinking, text, tool_use };
    void open(block b, std::vector<anthropic_event> & out, const tool_call_delta * call = nullptr);
    void close(std::vector<anthropic_event> & out);

    openai_response_meta m_;
    block open_ = block::none;
    int64_t index_ = -1;  // the open (or last) block's index
};

}  // namespace baton
