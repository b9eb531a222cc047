// openai_response.h — response bodies and server-sent-event chunks, built from engine results, in the
// shapes of OpenAI's API (/v1/completions, /v1/chat/completions) and of llama-server's /completion.
//
// Both the normal path and /v1/decode render their responses with these functions, so a decode node
// answers what a single node answers for the same request, except for the per-response fields "id" and
// "created" and the node's own measurements ("timings", usage.prompt_tokens_details.cached_tokens: a decode
// node counts the prompt tokens it got in the blob as cached).
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "baton/engine.h"
#include "baton/openai/openai.h"
#include "baton/openai/reasoning.h"
#include "baton/openai/tool_calls.h"

namespace baton {

// What every body and chunk of one response shares.
struct openai_response_meta {
    openai_endpoint endpoint = openai_endpoint::completions;
    std::string id;        // "cmpl-...", "chatcmpl-..." or "msg_..." (differs per response)
    int64_t created = 0;   // unix seconds (differs per response)
    std::string model;     // the node's model name (its --alias when set)
    std::string system_fingerprint;  // "fp_" + the model fingerprint's first 12 hex digits: the same on every
                                     // node that serves the model, so PD and single-node answers agree
    // /completion only: llama-server's generation_settings, the prompt as the model saw it, and n_ctx.
    nlohmann::json generation_settings;
    std::string prompt_text;
    bool return_tokens = false;
    bool logprobs = false;  // the request asked for logprobs: choices carry them (else "logprobs": null)
    // Choice i answers prompt i / choices_per_prompt (the request's n; several prompts: docs/api.md): usage
    // counts each prompt once.
    uint32_t choices_per_prompt = 1;
};

// openai_response_meta_make fills id (unique within the process) and created (now).
openai_response_meta openai_response_meta_make(openai_endpoint endpoint, const std::string & model,
                                               const std::string & system_fingerprint);

// openai_generation_settings: llama-server's generation_settings object of a request (/completion, /props).
// Its logit_bias lists the request's token biases and, with ignore_eos, a -inf bias (null in JSON, as
// llama-server writes it) on each of eog, the model's end-of-generation tokens.
nlohmann::json openai_generation_settings(const openai_request & r, uint32_t n_ctx,
                                          const std::vector<token_id> & eog = {});

// openai_finish_name: "stop" | "length" (anything else renders as "stop").
const char * openai_finish_name(finish_reason r);

// One token's log-probability as a response shows it (llama-server's shape: id, token text, bytes, logprob).
struct openai_logprob_top {
    token_id id = -1;
    std::string text;  // the token's bytes (may be part of a UTF-8 character)
    float logprob = 0;
};
struct openai_logprob {
    token_id id = -1;
    std::string text;
    float logprob = 0;
    std::vector<openai_logprob_top> top;  // top_logprobs, most likely first
};

// openai_logprob_make: the response form of one token's probabilities (pieces from the vocabulary).
openai_logprob openai_logprob_make(const loaded_model & model, token_id token, const token_probs & p);

// One choice of a finished generation.
struct openai_result {
    uint32_t index = 0;            // the choice's index (n > 1)
    std::string content;           // the answer (without the thought when the reasoning is split out, and
                                   // without the tool calls when they are parsed out)
    std::string reasoning;         // reasoning_content ("" when none)
    std::vector<token_id> tokens;  // generated ids (/completion's "tokens" with return_tokens)
    std::vector<openai_logprob> logprobs;  // when the request asked for them
    std::vector<tool_call> tool_calls;     // parsed from the output, ids filled in
    event_done done;               // finish, stop word, usage, timings, slot (tail and blob unused)
};

// openai_response_json renders a complete (non-streamed) response of one or more choices (in index order).
// usage: each prompt counted once (m.choices_per_prompt), completion tokens summed over the choices; timings: the
// first choice's. /completion: one result's object (several prompts: the node renders one per result).
std::string openai_response_json(const openai_response_meta & m, const std::vector<openai_result> & choices);

// openai_chunk_role_json: the first chat chunk of a choice (delta {"role":"assistant","content":null}, as
// OpenAI and llama-server send it).
std::string openai_chunk_role_json(const openai_response_meta & m, uint32_t index);

// openai_chunk_progress_json: a prompt-progress chunk (return_progress), as llama-server sends it: "prompt_progress"
// {total, cache, processed, time_ms} on /completion's shape with no content, or on a chunk of the first choice
// (chat: its role delta) with no text. Its "tokens" is [] where llama-server's holds a stray 0.
std::string openai_chunk_progress_json(const openai_response_meta & m, const event_progress & p);

// What one streamed chunk of a choice adds.
struct openai_delta {
    uint32_t index = 0;
    reasoning_delta text;                     // content and reasoning_content
    std::vector<tool_call_delta> tool_calls;  // chat: OpenAI's delta.tool_calls (id and name on a call's first)
    std::vector<token_id> tokens;             // /completion: the token ids
    std::vector<openai_logprob> logprobs;     // the probabilities of the tokens this chunk reports
};
bool openai_delta_empty(const openai_delta & d);

// openai_chunk_delta_json: one chunk carrying generated text (chat: delta.content and/or
// delta.reasoning_content and/or delta.tool_calls; /completion: content and the token ids). n_generated
// counts the choice's tokens so far.
std::string openai_chunk_delta_json(const openai_response_meta & m, const openai_delta & d, uint32_t n_generated,
                                    uint32_t n_prompt);

// openai_chunk_finish_json: the last chunk of a choice (empty text/delta and the finish reason, with the
// logprobs not yet sent; /completion: the final object with "stop": true).
std::string openai_chunk_finish_json(const openai_response_meta & m, const openai_result & r,
                                     const std::vector<openai_logprob> & logprobs);

// openai_chunk_usage_json: the usage chunk of stream_options.include_usage (empty choices, with timings).
std::string openai_chunk_usage_json(const openai_response_meta & m, const std::vector<openai_result> & choices);

// openai_finish_of: the finish_reason a choice reports ("tool_calls" when it made any).
const char * openai_finish_of(const openai_result & r);

// openai_stream_ends_with_done: OpenAI's streams end with "data: [DONE]"; llama-server's /completion and
// Anthropic's Messages streams (message_stop) do not.
inline bool openai_stream_ends_with_done(const openai_response_meta & m) {
    return m.endpoint != openai_endpoint::completion && m.endpoint != openai_endpoint::messages;
}

}  // namespace baton
