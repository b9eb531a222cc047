// openai_response.h — OpenAI response bodies and server-sent-event chunks, built from engine results.
//
// Both the normal path (/v1/completions, /v1/chat/completions) and /v1/decode render their responses
// with these functions, so a decode node answers byte for byte what a single node answers for the same
// request, except for the two per-response fields "id" and "created".
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

#include "baton/engine.h"
#include "baton/server/openai.h"

namespace baton {

// What every body and chunk of one response shares.
struct openai_response_meta {
    openai_endpoint endpoint = openai_endpoint::completions;
    std::string id;        // "cmpl-..." or "chatcmpl-..." (differs per response)
    int64_t created = 0;   // unix seconds (differs per response)
    std::string model;     // the request's model field, or the node's model name
    std::string system_fingerprint;  // "fp_" + the model fingerprint's first 12 hex digits: the same on every
                                     // node that serves the model, so PD and single-node answers agree
};

// openai_response_meta_make fills id (unique within the process) and created (now).
openai_response_meta openai_response_meta_make(openai_endpoint endpoint, const std::string & model,
                                               const std::string & system_fingerprint);

// openai_finish_name: "stop" | "length" (anything else renders as "stop").
const char * openai_finish_name(finish_reason r);

// openai_response_json renders a complete (non-streaming) response with usage.
std::string openai_response_json(const openai_response_meta & m, const std::string & text, finish_reason finish,
                                 const usage_counts & usage);

// openai_chunk_role_json: the first chat chunk (delta {"role":"assistant","content":null}, as OpenAI and
// llama-server send it).
std::string openai_chunk_role_json(const openai_response_meta & m);

// openai_chunk_text_json: one chunk carrying generated text.
std::string openai_chunk_text_json(const openai_response_meta & m, const std::string & text);

// openai_chunk_finish_json: the last choice chunk (empty text/delta and the finish reason).
std::string openai_chunk_finish_json(const openai_response_meta & m, finish_reason finish);

// openai_chunk_usage_json: the usage chunk of stream_options.include_usage (empty choices).
std::string openai_chunk_usage_json(const openai_response_meta & m, const usage_counts & usage);


}  // namespace baton
