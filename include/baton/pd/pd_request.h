// pd_request.h — the request a prefill node embeds in a state blob (blob section 7), as a format of its own.
//
// A prefill node resolves the client's request once (its defaults filled in, a chat rendered by its template
// and tokenized, a JSON Schema or tools compiled to a grammar) and embeds the result; the decode node
// generates from exactly that, needing neither the prefill node's defaults nor its template. This is not the
// public dialect: the client's parser (openai_parse) never sees it, and the embedded request never goes
// through openai_parse. It has its own version (pd_request_version) and its own total parser: every field
// is required, typed and range-checked, an unknown field or version is refused. docs/state-blob.md,
// "Section 7: the embedded request", tables the fields.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "baton/base/status.h"
#include "baton/grammar_check.h"
#include "baton/openai/openai.h"

namespace baton {

// The embedded request's format version ("version" field). Version 2 adds a rendered chat's "prefill" (the
// trailing assistant message the prompt continues); the encoder writes 2 only for a request that has one, so
// nodes that read version 1 still take every other request. Version 3 adds the "messages" endpoint
// (Anthropic's Messages API; its input always carries "prefill", "" when none); the encoder writes 3 only
// for that endpoint, so an older decode node refuses it as incompatible (the router falls back) and takes
// every other request. Version 4 adds "return_progress" (always true: the encoder writes 4 only for a request
// that asked for progress events). A decoder reads 1..pd_request_version and refuses any other (incompatible).
inline constexpr int pd_request_version = 4;
inline constexpr int pd_request_version_min = 1;

// What a decode node holds an embedded request to: its own limits, never its defaults (the prefill node
// filled in every field).
struct pd_request_limits {
    prompt_limits prompt;    // a text prompt's and the logit_bias texts' bytes (--max-prompt-mb)
    grammar_limits grammar;  // the grammar's structure (--grammar-max-*); also the decoded grammar_bounds
    int32_t n_max = openai_defaults{}.n_max;  // choices (--n-max)
};

// pd_request_encode writes the embedded request (compact JSON, fields in the documented order). REQUIRES:
// the input is not an unrendered openai_chat (prefill renders it first; invalid_argument otherwise).
Result<std::string> pd_request_encode(const openai_request & r);

// pd_request_decode parses an embedded request totally: malformed, incomplete or of the wrong type is
// corrupt naming the field; another version, or a value over this node's limits (or the engine's ranges,
// sampling_check), is incompatible. Either way the decode node answers 422 and the router falls back. The result's sampling.grammar_bounds are
// limits.grammar (the engine checks the grammar against them again).
Result<openai_request> pd_request_decode(std::string_view text, const pd_request_limits & limits);

}  // namespace baton
