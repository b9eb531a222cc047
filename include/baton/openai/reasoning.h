// reasoning.h — splitting a reasoning model's thoughts out of its output (llama-server's --reasoning-format).
//
// Reasoning models (Qwen3, DeepSeek-R1, Magistral, ...) write a thought block such as "<think>...</think>"
// before the answer. The server returns the thought in message.reasoning_content (delta.reasoning_content
// when streaming) and the rest in content. The template decides the markers (reasoning_tags_for_template)
// and whether the prompt already opened the thought (reasoning_prompt_opens); reasoning_splitter then splits
// the generated text, piece by piece, into the two fields.
//
// The split, for an output string S (whitespace is ASCII " \t\n\r\f\v"):
//   none:     content = S verbatim, reasoning = "". Nothing is held back.
//   deepseek: only a thought block at the very start of S is extracted. It starts there when S, after
//             optional leading whitespace, begins with tags.open, or when starts_in_reasoning is set (then
//             no open tag is expected; one that appears anyway, after optional leading whitespace, is
//             consumed). The text up to the first tags.close is the reasoning, with its leading and trailing
//             whitespace dropped; tags.close itself and the whitespace right after it are dropped; the rest
//             is content, verbatim (its own trailing whitespace kept; a later open tag is plain content).
//             With no close tag before the end, everything after the open tag is reasoning (trailing
//             whitespace dropped) and content is "". When S does not start with the open tag (and
//             starts_in_reasoning is not set), everything is content verbatim, leading whitespace included.
//   deepseek_legacy: content = S verbatim (tags included); reasoning as in deepseek.
//
// Streaming: feed() holds back only bytes whose fate is still open — a suffix that may be the start of a
// tag, and whitespace that is dropped if a tag follows it — and emits everything else at once. For any S and
// any split of S into pieces, the concatenated reasoning (and content) of all feed()s plus finish() equals
// that of feeding S in one piece, which is the split above. Bytes are never reordered, and every cut falls
// before an ASCII byte (tags must be ASCII, as all known ones are), so pieces of complete UTF-8 give deltas
// of complete UTF-8.
//
// Thread-safety: the free functions are pure; a reasoning_splitter is one request's state (one owner).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "baton/base/status.h"

namespace baton {

enum class reasoning_format : uint8_t {
    none,             // everything is content
    deepseek,         // the thought goes to reasoning, the rest to content
    deepseek_legacy,  // as deepseek, but content keeps the whole output (tags included)
};

// reasoning_format_parse parses "none" | "deepseek" | "deepseek-legacy" | "auto" (auto = deepseek, as
// llama-server resolves it). Anything else is invalid_argument naming the (escaped) value.
Result<reasoning_format> reasoning_format_parse(std::string_view s);

// reasoning_format_name returns "none" | "deepseek" | "deepseek-legacy".
const char * reasoning_format_name(reasoning_format f);

// The markers around a thought: non-empty ASCII without whitespace.
struct reasoning_tags {
    std::string open;   // e.g. "<think>"
    std::string close;  // e.g. "</think>"

    bool operator==(const reasoning_tags &) const = default;
};

// reasoning_tags_for_template returns the markers of a chat template's family, detected from its Jinja
// source: "[THINK]"/"[/THINK]" (Magistral), "<|START_THINKING|>"/"<|END_THINKING|>" (Command R7B),
// "<seed:think>"/"</seed:think>" (Seed-OSS), else "<think>"/"</think>" (Qwen3, DeepSeek-R1, and the default
// when the source names no marker).
reasoning_tags reasoning_tags_for_template(std::string_view template_source);

// reasoning_prompt_opens: true when rendered_prompt ends (ignoring trailing whitespace) with tags.open: the
// template forced the thought open (Qwen3 with enable_thinking, DeepSeek-R1), so the output starts inside it.
bool reasoning_prompt_opens(std::string_view rendered_prompt, const reasoning_tags & tags);

// One step of the split: bytes to append to reasoning_content and to content.
struct reasoning_delta {
    std::string reasoning;
    std::string content;

    bool operator==(const reasoning_delta &) const = default;
};

// reasoning_splitter splits one generation's output as the header comment specifies.
class reasoning_splitter {
  public:
    // REQUIRES: tags.open and tags.close are non-empty and contain no whitespace.
    reasoning_splitter(reasoning_format f, reasoning_tags tags, bool starts_in_reasoning);

    // feed takes the text of one or more generated tokens and returns what is decided so far.
    reasoning_delta feed(std::string_view piece);
    // finish ends the generation: returns what was held back. The splitter then passes text through as
    // content (feed after finish is not expected).
    reasoning_delta finish();

  private:
    enum class phase : uint8_t {
        start,           // before the first non-whitespace byte: does the output open a thought?
        reasoning_lead,  // inside the thought, dropping its leading whitespace
        reasoning,       // inside the thought
        content_lead,    // after the close tag, dropping whitespace
        content,         // everything else is content, verbatim
    };

    // step decides what it can of pending_ (at_end: all of it), phase by phase. step_start and step_reasoning
    // return true when they changed phase_ and step should go on with the next phase.
    void step(bool at_end, reasoning_delta & out);
    bool step_start(bool at_end);
    bool step_reasoning(bool at_end, reasoning_delta & out);
    void emit_content(std::string_view s, reasoning_delta & out) const;

    reasoning_format format_;
    reasoning_tags tags_;
    bool starts_in_reasoning_;
    phase phase_ = phase::start;
    std::string pending_;    // bytes held back, in order; their fate depends on what follows
    size_t pending_ws_ = 0;  // bytes: pending_ starts with this many whitespace bytes (saves rescans)
    size_t searched_ = 0;    // bytes: reasoning found no close tag within pending_[0, searched_)
};

}  // namespace baton
