// text_specials.h — splitting a text at special-token texts exactly as libllama does, in one pass.
//
// llama_tokenize(..., parse_special) first cuts the text at the texts of the vocabulary's special tokens
// (libllama's tokenizer_st_partition): it takes the special tokens one after the other in its own order
// (text length, longest first: `ranks` below), and for each one replaces every leftmost non-overlapping
// occurrence that lies wholly inside a fragment not cut yet; a token with the LSTRIP (RSTRIP) attribute
// also removes the whitespace before (after) it inside that fragment. Only the plain fragments left over go
// to the vocabulary's tokenizer. That loop walks its fragment list from the head for every occurrence and
// searches the whole text once per special token, so a text of N special tokens costs O(N^2) (32,000
// "<|im_start|>a" took 20 s).
//
// special_matcher gives the same split in O(n log n + n * L) for a text of n bytes and special texts of at
// most L bytes: an Aho-Corasick automaton over the reversed texts finds, for every position, the longest
// special text that starts there (and, through its suffix links, every shorter one); each position then
// "offers" its longest text, and offers are taken in libllama's order — token rank, then position — each
// one when the bytes it covers are all still uncut, else replaced by the longest shorter text at that
// position that still fits. Equivalent because a fragment is exactly a maximal run of uncut bytes, and a
// token's occurrences are met left to right within its rank.
// Thread-safety: immutable after build; partition is safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace baton {

// One special token, as the matcher needs it.
struct special_text {
    int32_t token = -1;
    std::string text;     // the token's text (never empty: libllama would never finish with an empty one)
    bool lstrip = false;  // swallows the whitespace before it (LLAMA_TOKEN_ATTR_LSTRIP)
    bool rstrip = false;  // swallows the whitespace after it (LLAMA_TOKEN_ATTR_RSTRIP)
};

// One piece of a split text, in text order: a special token, or a plain fragment (token -1).
struct special_piece {
    uint32_t offset = 0;  // bytes into the text
    uint32_t length = 0;  // bytes
    int32_t token = -1;   // the special token; -1: plain text for the vocabulary's tokenizer
};

class special_matcher {
  public:
    // build takes the special tokens in libllama's order (rank 0 first). A text that appears twice keeps
    // its first (best-ranked) token, as libllama's loop leaves nothing for the second.
    static special_matcher build(const std::vector<special_text> & ranked);

    // partition splits text. Whitespace swallowed by LSTRIP/RSTRIP is in no piece.
    // REQUIRES: text.size() < 2^32.
    std::vector<special_piece> partition(std::string_view text) const;

    bool empty() const { return patterns_.empty(); }

  private:
    struct pattern {
        int32_t token;
        uint32_t length;
        bool lstrip, rstrip;
    };
    struct node {
        uint32_t edge_begin = 0, edge_count = 0;  // into edges_, sorted by byte
        int32_t fail = 0;                         // longest proper suffix that is a node
        int32_t pattern = -1;                     // the pattern this node ends (rank = index), or -1
        int32_t shorter = -1;                     // nearest node on the fail chain that ends a pattern, or -1
    };
    struct edge {
        uint8_t byte;
        int32_t to;
    };
    int32_t step(int32_t state, uint8_t c) const;

    std::vector<pattern> patterns_;  // by rank
    std::vector<node> nodes_;        // nodes_[0] is the root
    std::vector<edge> edges_;
};

}  // namespace baton
