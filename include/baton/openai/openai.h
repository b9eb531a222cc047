// openai.h — OpenAI-compatible request parsing into typed structs, and the canonical JSON of a request.
//
// This is the edge: JSON is parsed here, once, into openai_request; the engine only ever sees gen_request.
// What a prefill node embeds in a blob is not this dialect but the PD protocol's own format
// (pd/pd_request.h), which writes every field explicitly so defaults never drift between nodes.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "baton/base/status.h"
#include "baton/engine.h"
#include "baton/openai/chat_message.h"
#include "baton/openai/reasoning.h"
#include "baton/openai/tool_calls.h"
#include "baton/sampling.h"
#include "baton/text.h"

namespace baton {

// completions: /v1/completions (OpenAI's text completions); chat: /v1/chat/completions; completion:
// llama-server's own /completion (same prompt shapes as completions, llama-server's response shape).
// infill: llama-server's /infill, answered in /completion's shape (a node builds its prompt, infill.h, and goes
// on as /completion with those tokens). messages: Anthropic's Messages API (/v1/messages), a chat in
// Anthropic's shapes (anthropic_response.h), parsed into the same openai_chat every chat becomes.
enum class openai_endpoint : uint8_t { completions, chat, completion, infill, messages };
// "completions" | "chat" | "completion" | "infill" | "messages"
const char * openai_endpoint_name(openai_endpoint e);
// openai_endpoint_is_chat: the endpoints whose input is a chat (chat, messages).
inline bool openai_endpoint_is_chat(openai_endpoint e) {
    return e == openai_endpoint::chat || e == openai_endpoint::messages;
}
// openai_endpoint_parse: the endpoint of a name openai_endpoint_name returns (invalid_argument otherwise).
Result<openai_endpoint> openai_endpoint_parse(std::string_view name);

// What the model is asked to continue: one of four shapes, decided by the endpoint and the body.
struct openai_prompt_text {  // completions: "prompt" as a string (or a one-string array)
    std::string text;
    bool operator==(const openai_prompt_text &) const = default;
};
struct openai_prompt_tokens {  // completions: "prompt" as token ids (non-empty)
    std::vector<token_id> tokens;
    // The images among tokens, when a node encoded a prompt with images (openai_prompt_media) into this; never
    // from a client, never embedded in a blob (the state carries their cells).
    std::vector<media_span> media = {};
    bool operator==(const openai_prompt_tokens &) const = default;
};
struct openai_chat {  // chat: "messages" (non-empty), rendered by the node's chat template
    std::vector<chat_message> messages;
    nlohmann::json template_kwargs = nullptr;                  // "chat_template_kwargs": null or an object
    bool add_generation_prompt = true;                         // "add_generation_prompt"
    std::optional<reasoning_format> reasoning = std::nullopt;  // "reasoning_format": else --reasoning-format
    nlohmann::ordered_json tools =
        nullptr;  // "tools": null or a checked array (tools_check), in the client's key order
    tool_choice choice = tool_choice_auto{};                   // "tool_choice"
    bool parallel_tool_calls = true;                           // "parallel_tool_calls" (OpenAI's default)
    // The images and audio clips of the messages ("image_url" and "input_audio" parts, Anthropic's image blocks):
    // each file's bytes, in the order their openai_media_marker() stands in the messages' contents. A node encodes
    // them with its projector when it renders the chat (media.h); without one it refuses them.
    std::vector<std::string> images = {};
    // The images named by an http(s) URL (image_url parts, Anthropic url sources): images[index] stays empty until
    // the node that prefills fetches url (only with --image-urls; refused otherwise). where names the field.
    struct image_url {
        size_t index = 0;
        std::string url, where;
        bool operator==(const image_url &) const = default;
    };
    std::vector<image_url> image_urls = {};
    bool operator==(const openai_chat &) const = default;
};
// How a chat's output is split into reasoning_content and content (decided when the prompt was rendered).
struct openai_reasoning {
    reasoning_format format = reasoning_format::none;
    reasoning_tags tags{"<think>", "</think>"};
    bool starts_open = false;  // the rendered prompt opened the thought (reasoning_prompt_opens)
    bool operator==(const openai_reasoning &) const = default;
};
// chat, already rendered by a node's template and tokenized (chat_formatter::render_request): what a prefill
// node embeds in a blob (pd/pd_request.h), so the decode node needs no template. Never parsed from a client.
struct openai_chat_rendered {
    std::vector<token_id> tokens;
    openai_reasoning reasoning;
    // The output is parsed into tool_calls in this format (tools were given and tool_choice is not none).
    std::optional<tool_call_format> tools = std::nullopt;
    std::string prefill;  // the trailing assistant message the prompt ends with: the answer's content starts with it
    // The chat's images, encoded: where each stands in tokens (its media tokens) and its embeddings. Not embedded
    // in a blob (the decode node receives their cells).
    std::vector<media_span> media = {};
    bool operator==(const openai_chat_rendered &) const = default;
};
// infill: /infill's fields (parse_infill in openai.cpp), turned into tokens by infill_tokens (infill.h) on the
// node that prefills, so a blob never carries this shape.
inline constexpr size_t openai_infill_extra_max = 1024;  // input_extra chunks per request
struct openai_infill_chunk {
    std::string filename, text;
    bool operator==(const openai_infill_chunk &) const = default;
};
struct openai_infill {
    std::string prefix, suffix;              // input_prefix, input_suffix
    std::string prompt;                      // what the middle starts with
    std::vector<openai_infill_chunk> extra;  // input_extra: other files as context
    bool operator==(const openai_infill &) const = default;
};
// media: llama-server's multimodal prompt, {"prompt_string": "... <__media__> ...", "multimodal_data": [base64,
// ...]} (completions, completion): the text with openai_media_marker() where each image stands, and the images'
// file bytes in order. The node that prefills encodes it (media.h) into openai_prompt_tokens with its spans, so
// a blob never carries this shape.
inline constexpr std::string_view openai_media_marker_llama = "<__media__>";  // llama-server's marker
struct openai_prompt_media {
    std::string text;
    std::vector<std::string> images;
    bool operator==(const openai_prompt_media &) const = default;
};
// mixed: llama-server's direct token input, "prompt" as an array mixing texts and token ids. The node that
// prefills turns it into openai_prompt_tokens (openai_mixed_tokens), so a blob never carries this shape.
struct openai_prompt_mixed {
    std::vector<std::variant<std::string, token_id>> parts;
    bool operator==(const openai_prompt_mixed &) const = default;
};
using openai_input = std::variant<openai_prompt_text, openai_prompt_tokens, openai_chat, openai_chat_rendered,
                                  openai_infill, openai_prompt_mixed, openai_prompt_media>;

// openai_media_marker: the text that stands for one image in a chat's message contents until the chat is rendered.
// Random per process (no client can write it into a text to shift or forge an image's place).
const std::string & openai_media_marker();

// openai_mixed_tokens tokenizes a mixed prompt as llama-server does: texts with their control tokens parsed,
// the first part (when it is a text) with the model's BOS; ids as they are.
Result<std::vector<token_id>> openai_mixed_tokens(const openai_prompt_mixed & m, const loaded_model & model);

struct openai_request {
    openai_endpoint endpoint = openai_endpoint::completions;  // decides the response shape
    openai_input input;       // chat and chat_rendered for the chat endpoint, text or tokens otherwise
    std::string model;        // routes among models at a router; a node answers with its own model name
    int32_t max_tokens = -1;  // -1: until end-of-generation or the context is full
    int32_t n = 1;            // choices, each sampled with seed + index (1..openai_defaults::n_max)
    int32_t n_probs = -1;     // logprobs: -1 none, else the sampled token's and the n_probs most likely tokens'
    sampling_params sampling;  // sampling.grammar: from "grammar", "json_schema", "response_format" or the tools
    // logit_bias entries given as text (llama-server's [["text", bias]], or a non-numeric key of the object
    // form): every token of the text's tokenization gets the bias (openai_to_gen adds them to sampling).
    std::vector<std::pair<std::string, float>> logit_bias_text;
    std::vector<std::string> stop;
    bool stream = false;
    bool include_usage = false;  // stream_options.include_usage
    bool ignore_eos = false;
    bool return_tokens = false;  // /completion: "tokens" holds the generated ids
    bool return_progress = false;  // streamed: prompt_progress chunks before the first token (llama-server's)
    bool operator==(const openai_request &) const = default;
};

// Bounds on a request's lists (the public parser's, and the embedded request's in pd/pd_request.h).
inline constexpr size_t openai_stop_max = 16;                    // "stop": strings
inline constexpr size_t openai_logit_bias_texts_max = 64;        // "logit_bias": entries given as text
inline constexpr size_t openai_logit_bias_text_bytes_max = 256;  // ... each 1..256 bytes

// Bounds on the work a prompt may ask of the chat template and the tokenizer, checked while the body is
// parsed, before any template or tokenizer runs (a chat's rendered text is checked again after rendering:
// chat_format_config). Over one: too_large (413) naming the flag. docs/api.md "Prompt limits".
struct prompt_limits {
    uint32_t max_messages = 4096;                   // --max-messages: entries of a chat's "messages"
    uint64_t max_prompt_bytes = uint64_t(4) << 20;  // --max-prompt-mb: a text prompt, or a chat's texts together
};

// The node's defaults for what a request leaves out (llama-server's --temp, --top-k, ..., --seed, -n).
struct openai_defaults {
    sampling_params sampling;
    int32_t max_tokens = -1;
    int32_t n_max = 8;     // the largest "n" a request may ask for (--n-max)
    prompt_limits prompt;  // --max-messages, --max-prompt-mb (the same defaults wherever a request is parsed)
};

// Several prompts in one completions request (/v1/completions, /completion): "prompt" an array of two or more
// elements that are each a prompt (a string, an array of token ids or of ids and strings, a multimodal object).
// The node answers each as its own generation in one response (docs/api.md "Several prompts"); openai_parse takes
// one prompt, so a node or router splits the body first.
inline constexpr size_t openai_prompts_max = 64;  // prompts one request may carry
// openai_prompts_split: such a body as one body per prompt, in order, each the original with "prompt" set to that
// prompt alone (the other fields and their order kept); empty when the body holds one prompt, is not a
// completions body, or is not a JSON object (openai_parse reports what is wrong then). invalid_argument over
// openai_prompts_max prompts, or when an element is none of the above.
Result<std::vector<std::string>> openai_prompts_split(std::string_view body, openai_endpoint endpoint);

// openai_parse parses a client's request body. endpoint decides which shape is expected (for /v1/prefill
// the router names it in the X-Baton-Endpoint header); messages reads Anthropic's Messages body
// (src/openai/anthropic_request.h has the mapping). Fields the request leaves out take the defaults. Errors are invalid_argument naming the field ("temperature: must be a number"); a field Baton
// does not implement whose value would change the answer (a grammar, tools, logit_bias, mirostat ...) is
// an error naming it, never silently dropped (docs/api.md lists them).
Result<openai_request> openai_parse(std::string_view body, openai_endpoint endpoint,
                                    const openai_defaults & defaults = {});
// openai_request_endpoint: the endpoint whose response shape the request gets.
inline openai_endpoint openai_request_endpoint(const openai_request & r) { return r.endpoint; }

// openai_to_gen tokenizes the prompt and builds the engine request. REQUIRES: the input is not an
// unrendered openai_chat (render it first: chat_formatter in chat_format.h; invalid_argument otherwise).
// n_ctx > 0 (the slot's context): a text prompt that cannot come to fewer tokens is refused without being
// tokenized whole (text_tokenize), as the engine would refuse it after. Tokens come from model's vocabulary.
Result<gen_request> openai_to_gen(const openai_request & r, const loaded_model & model, uint32_t n_ctx = 0);

}  // namespace baton
