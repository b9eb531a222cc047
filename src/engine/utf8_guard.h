// utf8_guard.h — a sampler that keeps the output valid UTF-8 (private to the engine).
//
// With a byte-fallback vocabulary a model can write a lone continuation byte, or a lead byte followed by
// something else; libllama's grammar sampler folds such bytes into code points without checking them, so a
// grammar alone cannot keep a JSON string valid. The guard, placed before the grammar in the chain, removes
// every candidate whose bytes would make the output invalid UTF-8 (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF), and every empty-text token (end of generation, control tokens) while
// a character is incomplete. Its state is the incomplete character at the end of the output.
// Thread-safety: a sampler belongs to one chain; the piece table is immutable and shared.
#pragma once

#include <string>

#include "baton/sampling.h"  // token_pieces

struct llama_sampler;

namespace baton {

// utf8_guard_make returns a new sampler (free it with llama_sampler_free, or let a chain own it).
llama_sampler * utf8_guard_make(token_pieces pieces);

// utf8_state: an incomplete UTF-8 character (need continuation bytes still to come; lo..hi: the range the
// next one must be in).
struct utf8_state {
    int need = 0;
    unsigned char lo = 0x80, hi = 0xBF;
};

// utf8_advance feeds bytes to st; false (st unspecified) when they make the text invalid.
bool utf8_advance(utf8_state & st, const std::string & bytes);

}  // namespace baton
