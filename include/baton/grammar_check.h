// grammar_check.h — Baton's own structure check of GBNF text, run before libllama's grammar parser sees it.
//
// libllama's grammar parser and its left-recursion check are recursive on the shape of the grammar (one
// stack frame per nested group, one per rule on a chain of rules that start with the next one), its
// repetition expansion copies elements without a size bound, and its parse-stack expansion can loop or
// explode on grammars it accepts. A client's grammar reaches it from a request ("grammar", a schema, tools)
// or from a blob's embedded request, so every such grammar passes grammar_check first: a total, iterative
// scanner that mirrors libllama 0.7's parser (rules, alternatives, groups, strings and character classes
// with their escapes, ".", rule references, token references <[id]> and <text>, repetitions * + ? {m}
// {m,} {m,n}, comments) and then bounds, without recursion of its own:
//   - depth_max:    groups nested inside groups (libllama recurses once per level while parsing);
//   - chain_max:    rules a position descends through before matching a character (rule A whose
//                   alternative starts with B, B with C, ..., groups and repetitions included, and refs
//                   after a prefix that can match nothing): libllama's left-recursion check recurses once
//                   per rule on the chain;
//   - rules_max:    rules libllama builds: named ones, one per group, one or more per repetition;
//   - elements_max: grammar elements after repetitions are expanded ("x"{1000} is 1000 copies of x); the
//                   left-recursion check may visit at most 4 x elements_max elements (it has no memo, so a
//                   grammar can make it walk exponentially many paths);
//   - fanout_max:   parse stacks one position expands into before the next character (libllama keeps one
//                   per alternative that can start there and compares them pairwise), and at most 16 x
//                   fanout_max stacks explored on the way;
//   - grammar_nullable_run_max (fixed): elements in a row that can each match nothing or a string of one
//                   repeated character (libllama reads a token of such characters along every split).
// It also refuses what libllama would loop on or misread: a rule that can reach itself before matching a
// character (left recursion, also through rules that can match nothing — stricter than libllama, which
// only follows rules with an empty alternative and then expands such a grammar forever), {m,n} with n < m
// (libllama then builds 2^64 rules), counts above 2000 (libllama refuses larger minimums and silently
// drops larger maximums), token ids above 2^32 - 1, <text> tokens longer than 256 bytes (each is
// tokenized), NUL bytes (libllama would read only the text before one), undefined rules and a missing
// root rule. Refusals are invalid_argument naming the limit and where: "grammar: groups nested deeper than
// 64 at byte 1234". Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "baton/base/status.h"

namespace baton {

// The limits, settable on `baton serve` (--grammar-max-depth, --grammar-max-chain, --grammar-max-rules,
// --grammar-max-elements, --grammar-max-fanout; docs/api.md "Grammar and schema limits").
//
// Why these numbers (measured with libllama 0.7.0, GCC's release build, x86-64): llama_sampler_init_grammar
// overflows an 8 MiB thread stack at 17,461 nested groups (~480 bytes a level) and a 1 MiB one at 2,170;
// a chain of rules overflows 1 MiB at 9,304 rules (~112 bytes a rule) and 8 MiB at ~75,000. The defaults
// use under 1/250 (depth: 64 levels, ~30 KiB) and 1/70 (chain: 1024 rules, ~112 KiB) of an 8 MiB stack; the
// caps (1024 levels ~480 KiB, 4096 rules ~450 KiB) still fit a 1 MiB stack with half of it to spare.
// Baton's JSON Schema converter (32 nested schemas, 4096 alternatives at a position) and tool-call grammars
// stay well inside the defaults.
struct grammar_limits {
    uint32_t depth_max = 64;                    // groups nested inside groups
    uint32_t chain_max = 1024;                  // rules on a chain before a character
    uint32_t rules_max = 65536;                 // rules, counting groups and repetitions
    uint64_t elements_max = uint64_t(1) << 21;  // elements after repetitions are expanded (8 bytes each)
    uint32_t fanout_max = 4096;                 // parse stacks at one position
    bool operator==(const grammar_limits &) const = default;
};

// The most a flag may raise each limit to.
inline constexpr grammar_limits grammar_limits_cap{.depth_max = 1024,
                                                   .chain_max = 4096,
                                                   .rules_max = 1u << 20,
                                                   .elements_max = uint64_t(1) << 24,
                                                   .fanout_max = 16384};

inline constexpr uint32_t grammar_repeat_max = 2000;   // {m,n} counts: libllama's MAX_REPETITION_THRESHOLD
inline constexpr size_t grammar_token_text_max = 256;  // bytes of a <text> token reference
// Elements in a row that can each match nothing and start with a common character, the element that
// ends the row included (x x x x "," with x ::= [a-z,]*: 5): libllama reads a token of L such characters in
// about C(run + L, L) ways, without merging them. 4 keeps a 10-letter token at ~1,000 ways per parse stack
// (8 would be ~44,000: about a second per sampling step over a 150k-token vocabulary); Baton's JSON Schema
// and tool-call grammars stay at 2.
inline constexpr uint32_t grammar_nullable_run_max = 4;

// grammar_limits_check: invalid_argument naming the flag when a limit is 0 or above its cap.
Status grammar_limits_check(const grammar_limits & limits);

// grammar_check returns ok when gbnf (start rule "root") parses as libllama parses it and stays within
// limits; else invalid_argument "grammar: ..." naming the limit or the syntax error and the byte offset
// (0-based) or rule it is at. Linear in the size of the grammar and its expansion (both bounded by the
// limits). REQUIRES: limits within grammar_limits_cap (checked: a limit above it is an error too).
Status grammar_check(std::string_view gbnf, const grammar_limits & limits = {});

}  // namespace baton
