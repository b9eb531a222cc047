// tool_calls.h — OpenAI function calling: tool definitions, the model's tool calls, and the grammar that
// forces them.
//
// A chat request may declare tools (OpenAI "tools": functions with a JSON-Schema "parameters") and a
// tool_choice. The chat template renders the tools into the prompt; the model then writes its calls in the
// template family's own syntax, which this module turns into OpenAI tool_calls (message.tool_calls, or
// delta.tool_calls when streaming). The family is detected from the template's source
// (tool_call_format_detect). What each format's model writes (whitespace is ASCII " \t\n\r\f\v"):
//
//   hermes  (Qwen 2.5/3, Hermes 2/3, ...): blocks "<tool_call>" ws* OBJ ws* "</tool_call>" anywhere in the
//           output, OBJ a JSON object {"name": string, "arguments": object}. OBJ's extent is found by matching
//           brackets outside JSON strings, so a "</tool_call>" inside an argument string does not end it. A
//           block that does not have this shape (malformed JSON, no name, arguments not an object, no closing
//           tag, stopped by the length limit) is not a call: its "<tool_call>" is ordinary content and the
//           scan goes on right after it, so its text stays in content verbatim.
//   mistral (Mistral Nemo/Small, ...): blocks "[TOOL_CALLS]" ws* ARR, ARR a non-empty JSON array of
//           {"name": string, "arguments": object, "id"?: string}; otherwise as hermes.
//   llama3  (Llama 3.1/3.2/3.3): the whole output is ws* ["<|python_tag|>" ws*] OBJ (ws* ";" ws* OBJ)* ws*,
//           OBJ {"name": string, "parameters": object} ("arguments" is accepted too). Anything else is all
//           content, verbatim (no calls).
//   generic (any other template; the prompt asks for JSON): the whole output is ws* OBJ ws* with OBJ
//           {"tool_calls": [call, ...]} (non-empty) or {"tool_call": call}, call = {"name", "arguments"} ->
//           those calls; {"response": string} -> content is that string; anything else -> all content.
//
// Content, for hermes and mistral: the text outside the call blocks, verbatim, except that when there is at
// least one call, a stretch of text between calls (or before the first, or after the last) made only of
// whitespace is dropped (it only separated blocks). With no call, content is the output verbatim.
// Arguments are the call's "arguments" object re-serialized compactly (nlohmann's dump()), so streamed and
// final calls agree byte for byte; names are non-empty strings; a call's JSON may nest at most
// tool_call_depth_max brackets deep (deeper is not a call).
//
// Streaming (tool_call_stream): a call is emitted as one delta carrying its index, name, id (Mistral, when
// the model wrote one) and whole arguments, once its block is complete and known to be well-formed: a
// fragment of arguments sent early could not be taken back if the block then turned out malformed and had
// to become content. Content is emitted at once except bytes whose fate is still open: a suffix that may be
// the start of a marker, a call block not yet complete, whitespace that is dropped if a call follows, and
// for llama3 and generic, the whole output for as long as it may still be a call (it starts, after
// whitespace, with "{" or the python tag and has stayed well-formed). For any output S and any split of S
// into pieces, the concatenated content of all pieces equals tool_calls_parse(S).content, and the deltas
// grouped by index equal tool_calls_parse(S).calls. Every cut falls before an ASCII byte, so pieces of
// complete UTF-8 give content of complete UTF-8.
//
// Thread-safety: the free functions are pure; a tool_call_stream is one request's state (one owner).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "baton/base/status.h"

namespace baton {

enum class tool_call_format : uint8_t {
    generic,  // a JSON object, {"tool_calls": [...]} or {"response": "..."}
    hermes,   // <tool_call>{"name": ..., "arguments": {...}}</tool_call>
    llama3,   // [<|python_tag|>]{"name": ..., "parameters": {...}}
    mistral,  // [TOOL_CALLS][{"name": ..., "arguments": {...}, "id": ...}]
};

// Bound on the bracket nesting of one call's JSON (the model's output is untrusted).
inline constexpr size_t tool_call_depth_max = 128;

// tool_call_format_name returns "generic" | "hermes" | "llama3" | "mistral".
const char * tool_call_format_name(tool_call_format f);

// tool_call_format_detect picks the format from a chat template's Jinja source: "<tool_call>" -> hermes;
// "[TOOL_CALLS]" -> mistral; "<|python_tag|>", or "ipython" together with "<|start_header_id|>" -> llama3;
// otherwise generic.
tool_call_format tool_call_format_detect(std::string_view template_source);

// One call the model made.
struct tool_call {
    std::string id;         // the model's id (Mistral), else "" (the server makes one)
    std::string name;       // the function's name, non-empty
    std::string arguments;  // compact JSON text of an object

    bool operator==(const tool_call &) const = default;
};

// The model's output split into the message's content and its tool calls.
struct tool_output {
    std::string content;
    std::vector<tool_call> calls;

    bool operator==(const tool_output &) const = default;
};

// tool_calls_parse splits a whole output as the header comment specifies. Total: any bytes are accepted.
tool_output tool_calls_parse(tool_call_format f, std::string_view output);

// One step of a streamed call (OpenAI's delta.tool_calls[i]).
struct tool_call_delta {
    size_t index = 0;       // the call's position among the output's calls, from 0
    std::string id;         // set in the call's first delta when the model wrote one
    std::string name;       // set in the call's first delta
    std::string arguments;  // a fragment of the arguments (here: all of them, in the first delta)

    bool operator==(const tool_call_delta &) const = default;
};

// What one push decided: content to append and call deltas (the content may have been written before or
// after the calls of the same piece; OpenAI clients append both independently).
struct tool_stream_piece {
    std::string content;
    std::vector<tool_call_delta> calls;

    bool operator==(const tool_stream_piece &) const = default;
};

// tool_call_stream splits one generation's output as it is generated (see the header comment).
class tool_call_stream {
  public:
    explicit tool_call_stream(tool_call_format f);

    // push takes the text of one or more generated tokens and returns what is decided so far.
    tool_stream_piece push(std::string_view text);
    // finish ends the generation and returns what was held back. push after finish is not expected (its
    // text would be content).
    tool_stream_piece finish();

  private:
    enum class phase : uint8_t {
        text,     // hermes/mistral: outside a block, looking for the marker
        block,    // hermes/mistral: pending_ starts with the marker; scanning the block
        whole,    // llama3/generic: the output may still be a call; scanning it
        content,  // everything from here on is content, verbatim
    };
    // Where a block or whole-output scan is (resumable across pushes).
    enum class stage : uint8_t {
        lead,       // skipping whitespace (llama3: and the python tag) before the first JSON value
        value,      // inside a JSON value (brackets counted, strings skipped)
        after,      // after a value: whitespace, then the closing tag (hermes), ";" (llama3) or the end
        close_tag,  // hermes: matching "</tool_call>"
    };

    void step(bool at_end, tool_stream_piece & out);
    void step_text(bool at_end, tool_stream_piece & out);
    // step_block returns false when it needs more bytes.
    bool step_block(bool at_end, tool_stream_piece & out);
    void step_whole(bool at_end, tool_stream_piece & out);
    void emit_text(std::string_view s, tool_stream_piece & out);
    void emit_call(tool_call c, tool_stream_piece & out);
    void fail_whole(tool_stream_piece & out);
    void scan_reset();

    tool_call_format format_;
    phase phase_;
    std::string pending_;          // bytes not yet decided, in order
    size_t base_ = 0;              // hermes/mistral, within a step: bytes at pending_'s front already decided
    std::string held_ws_;          // hermes/mistral: the current stretch so far, all whitespace, held back
    bool stretch_ws_only_ = true;  // the stretch since the last call (or the start) is whitespace so far
    size_t n_calls_ = 0;           // calls emitted
    // Scan state within pending_ (block phase: from base_; whole phase: from 0).
    stage stage_ = stage::lead;
    size_t pos_ = 0;          // bytes of pending_ examined
    size_t value_start_ = 0;  // where the current JSON value starts in pending_
    // scan_value takes one character of the JSON value being scanned (brackets counted outside strings).
    enum class value_step : uint8_t { more, too_deep, closed };
    value_step scan_value(char c);
    size_t depth_ = 0;        // open brackets in the current value
    bool in_string_ = false;
    bool escape_ = false;
    size_t pos_value_end_ = 0;            // where the current JSON value ended in pending_
    size_t tag_start_ = 0;                // hermes: where the closing tag starts in pending_
    size_t tag_matched_ = 0;              // bytes of a closing tag or python tag matched
    std::vector<tool_call> whole_calls_;  // llama3/generic: the calls found so far (held until the end)
    std::string whole_content_;           // generic: a {"response": ...} string
    bool whole_is_response_ = false;
};

// ---- tool definitions and choice ----

struct tool_choice_auto {
    bool operator==(const tool_choice_auto &) const = default;
};
struct tool_choice_none {
    bool operator==(const tool_choice_none &) const = default;
};
struct tool_choice_required {
    bool operator==(const tool_choice_required &) const = default;
};
struct tool_choice_named {
    std::string name;
    bool operator==(const tool_choice_named &) const = default;
};
using tool_choice = std::variant<tool_choice_auto, tool_choice_none, tool_choice_required, tool_choice_named>;

// tools_check validates an OpenAI tools array: each element {"type": "function", "function": {"name":
// [A-Za-z0-9_.-]{1,64}, "description"?: string, "parameters"?: object, "strict"?: bool}}, names unique.
// Other keys are ignored. Errors: invalid_argument naming the path ("tools[1].function.name: ...").
Status tools_check(const nlohmann::ordered_json & tools);

// tool_choice_parse parses "auto" | "none" | "required" | {"type": "function", "function": {"name": N}}
// where N names one of tools (REQUIRES: tools passed tools_check, or is null when the request has none).
// "required" and a named choice need tools. Errors: invalid_argument naming "tool_choice".
Result<tool_choice> tool_choice_parse(const nlohmann::ordered_json & v, const nlohmann::ordered_json & tools);

// tool_calls_history_check validates an assistant message's "tool_calls" from the client: an array of
// {"id": string, "type"?: "function", "function": {"name": non-empty string, "arguments": string holding a
// JSON object}}. path names the array in errors: invalid_argument
// "messages[3].tool_calls[0].function.arguments: not a JSON object".
Status tool_calls_history_check(const nlohmann::ordered_json & tool_calls, std::string_view path);

// A grammar for the grammar sampler. Empty gbnf: no constraint. lazy: the grammar applies only once one of
// trigger_patterns (regexes for llama_sampler_init_grammar_lazy_patterns: matched against the whole output
// so far, the grammar fed from the first capture group) has matched.
struct tool_grammar {
    std::string gbnf;
    bool lazy = false;
    std::vector<std::string> trigger_patterns;

    bool operator==(const tool_grammar &) const = default;
};

// tool_calls_grammar returns the grammar that makes the output tool calls in format f, written exactly as
// tool_calls_parse reads them, each call's arguments following its function's "parameters" schema (any JSON
// object when it has none), keys "name" then the arguments (llama3: "parameters"):
//   required: one call of any declared function, or one or more if parallel;
//   named:    one call of that function, or one or more if parallel;
//   auto:     hermes, mistral: the required grammar, lazy, triggered by the marker ("<tool_call>",
//             "[TOOL_CALLS]"), so text may come first. llama3, generic: none (any JSON-looking output would
//             be ambiguous). A schema the converter refuses gives no grammar (auto only helps).
//   none:     none.
// The wrappers: hermes "<tool_call>\n" CALL "\n</tool_call>", calls separated by "\n"; mistral
// "[TOOL_CALLS][" CALL (", " CALL)* "]" (CALL may end with an "id" of 9 letters or digits); llama3 CALL
// ("; " CALL)*; generic {"tool_call": CALL} or, if parallel, {"tool_calls": [CALL (", " CALL)*]}.
// REQUIRES: tools passed tools_check and choice came from tool_choice_parse with them. Errors:
// invalid_argument from the schema converter (naming the tool: "tools[0].function.parameters: ...").
Result<tool_grammar> tool_calls_grammar(tool_call_format f, const nlohmann::ordered_json & tools,
                                        const tool_choice & choice, bool parallel);

}  // namespace baton
