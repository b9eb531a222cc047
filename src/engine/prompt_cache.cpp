// prompt_cache.cpp — the host-memory prompt cache (prompt_cache.h).
#include "prompt_cache.h"

#include <algorithm>

#include "slot.h"

namespace baton {

size_t prompt_cache_reusable(const blob_view & v, const std::vector<token_id> & prompt, bool partial_state) {
    if (prompt.empty()) return 0;
    const size_t lcp = std::min(common_prefix(v.tokens, prompt), prompt.size() - 1);
    if (!partial_state || lcp == v.tokens.size()) return lcp;
    size_t best = 0;  // partial state rolls back only to a checkpoint
    for (const blob_checkpoint_view & c : v.checkpoints)
        if (c.n_tokens <= lcp) best = std::max<size_t>(best, c.n_tokens);
    return best;
}

namespace {
bool begins_with(const std::vector<token_id> & a, const std::vector<token_id> & prefix) {
    return prefix.size() <= a.size() && std::equal(prefix.begin(), prefix.end(), a.begin());
}
}  // namespace

prompt_cache::put_outcome prompt_cache::put(blob_ptr b, bool partial_state) {
    put_outcome out;
    if (!enabled() || !b || b->view().tokens.empty() || b->size() > max_bytes_) return out;
    const std::vector<token_id> & t = b->view().tokens;
    for (size_t i = entries_.size(); i-- > 0;) {
        const std::vector<token_id> & e = *entries_[i].tokens;
        if (partial_state) {  // a newer state of the same tokens replaces the older (its checkpoints are newer)
            if (e == t) drop(i), ++out.evicted;
            continue;
        }
        if (begins_with(e, t)) {  // the entry holds all of b (and maybe more): b adds nothing
            entries_[i].last_used = ++clock_;
            return out;
        }
        if (begins_with(t, e)) drop(i), ++out.evicted;  // b holds all of the entry
    }
    while (bytes_ + b->size() > max_bytes_ && !entries_.empty()) {
        size_t lru = 0;
        for (size_t i = 1; i < entries_.size(); ++i)
            if (entries_[i].last_used < entries_[lru].last_used) lru = i;
        drop(lru);
        ++out.evicted;
    }
    bytes_ += b->size();
    entry e;
    e.tokens = std::make_shared<const std::vector<token_id>>(t);
    e.blob = std::move(b);
    e.last_used = ++clock_;
    entries_.push_back(std::move(e));
    out.kept = true;
    return out;
}

prompt_cache::match prompt_cache::best(const std::vector<token_id> & prompt, bool partial_state) const {
    match m;
    uint64_t when = 0;
    for (size_t i = 0; i < entries_.size(); ++i) {
        const size_t n = prompt_cache_reusable(entries_[i].blob->view(), prompt, partial_state);
        if (n > m.n || (n == m.n && n > 0 && entries_[i].last_used > when)) {
            m = {i, n};
            when = entries_[i].last_used;
        }
    }
    return m;
}

blob_ptr prompt_cache::use(size_t index) {
    if (index >= entries_.size()) return nullptr;
    entries_[index].last_used = ++clock_;
    return entries_[index].blob;
}

void prompt_cache::drop(size_t index) {
    bytes_ -= entries_[index].blob->size();
    entries_.erase(entries_.begin() + std::ptrdiff_t(index));
}

std::vector<std::shared_ptr<const std::vector<token_id>>> prompt_cache::prefixes() const {
    std::vector<std::shared_ptr<const std::vector<token_id>>> out;
    out.reserve(entries_.size());
    for (const entry & e : entries_) out.push_back(e.tokens);
    return out;
}

blob_ptr prompt_cache::holding(std::span<const token_id> base) const {
    const entry * best = nullptr;
    for (const entry & e : entries_) {
        const auto & t = *e.tokens;
        if (t.size() >= base.size() && std::equal(base.begin(), base.end(), t.begin()) &&
            (!best || e.last_used > best->last_used))
            best = &e;
    }
    return best ? best->blob : nullptr;
}

}  // namespace baton
