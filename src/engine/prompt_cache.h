// prompt_cache.h — the node tier of the prefix cache (`--cache-ram`, llama-server's flag and meaning): states
// that leave a slot (its cells are about to be overwritten by another conversation, or a parked slot's blob is
// about to be dropped) are kept in host memory as validated blobs — tokens, state, checkpoints, logits, as a
// slot exports them — within a byte budget, least recently used out first. A prompt whose prefix an entry
// holds better than any slot gets it back through the one restore routine (slot_restore), never as tokens
// without cells. The scheduler owns one; see docs/engine.md "The host prompt cache".
// Thread-safety: only the engine's scheduler thread calls it (like slot.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "baton/engine.h"

namespace baton {

// prompt_cache_reusable: how many of prompt's tokens a state with view v can give a slot without computing
// them: the common prefix, never the prompt's last token (its logits are needed); for memory with partial
// state (recurrent, hybrid, sliding-window), which cannot be truncated, only the state's full length or a
// checkpoint at or below that.
size_t prompt_cache_reusable(const blob_view & v, const std::vector<token_id> & prompt, bool partial_state);

class prompt_cache {
  public:
    // max_bytes: the budget (0: off, nothing is kept).
    explicit prompt_cache(size_t max_bytes) : max_bytes_(max_bytes) {}

    bool enabled() const { return max_bytes_ > 0; }

    struct put_outcome {
        bool kept = false;   // false: off, larger than the budget, or already covered by an entry
        size_t evicted = 0;  // entries dropped for it (the budget) or replaced by it (a prefix of it)
    };
    // put keeps b. Entries it makes redundant go (with attention-only memory, an entry whose tokens b's begin
    // with; with partial state, one with exactly b's tokens), and least recently used ones until it fits; it
    // is not kept when an entry's tokens already begin with all of b's (attention-only) or it alone exceeds
    // the budget.
    put_outcome put(blob_ptr b, bool partial_state);

    struct match {
        size_t index = 0;
        size_t n = 0;  // prompt_cache_reusable of that entry; 0: no entry gives anything
    };
    // best: the entry giving the most of prompt (the most recently used among equals).
    match best(const std::vector<token_id> & prompt, bool partial_state) const;
    // use returns entry `index`'s blob (from best) and makes it the most recently used; the entry stays (a
    // restore copies the state: the slot may soon hold it no longer).
    blob_ptr use(size_t index);

    // holding: the most recently used entry whose tokens begin with base (null: none).
    blob_ptr holding(std::span<const token_id> base) const;

    size_t bytes() const { return bytes_; }
    size_t entries() const { return entries_.size(); }
    // The entries' tokens (for the node's KV events): the same pointer for an entry as long as it is kept.
    std::vector<std::shared_ptr<const std::vector<token_id>>> prefixes() const;

  private:
    struct entry {
        blob_ptr blob;
        std::shared_ptr<const std::vector<token_id>> tokens;
        uint64_t last_used = 0;
    };
    void drop(size_t index);

    std::vector<entry> entries_;  // few (a budget of GiB holds tens to hundreds of states): linear scans
    size_t max_bytes_ = 0, bytes_ = 0;
    uint64_t clock_ = 0;
};

}  // namespace baton
