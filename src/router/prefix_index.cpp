// prefix_index.cpp — the router's bounded index of which node holds which block (see prefix_index.h and
// docs/kv-events.md, "The router's index").
#include "prefix_index.h"

#include <algorithm>
#include <variant>

namespace baton {

const char * prefix_index_outcome_name(prefix_index_outcome o) {
    switch (o) {
        case prefix_index_outcome::applied: return "applied";
        case prefix_index_outcome::stale: return "stale";
        case prefix_index_outcome::gap: return "gap";
        case prefix_index_outcome::wrong_seed: return "wrong_seed";
    }
    return "unknown";
}

prefix_index::prefix_index(uint64_t seed, size_t max_blocks) : seed_(seed), max_blocks_(max_blocks) {}

prefix_index_outcome prefix_index::apply(const kv_event_batch & b) {
    lock_guard lock(mu_);
    if (b.seed != seed_) {
        wrong_seed_++;
        return prefix_index_outcome::wrong_seed;
    }
    auto [pos, is_new] = nodes_.try_emplace(b.node);
    node_state & n = pos->second;
    if (is_new || n.epoch != b.epoch) {  // a node new to this index, or a restarted one: a stream from seq 1
        clear(n);
        n.epoch = b.epoch;
        n.last_seq = 0;
        n.in_sync = true;
    }
    if (!n.in_sync) return prefix_index_outcome::gap;  // still awaiting its snapshot; counted when it fell out
    if (b.seq <= n.last_seq) {
        stale_++;
        return prefix_index_outcome::stale;
    }
    if (b.seq != n.last_seq + 1) {
        clear(n);
        n.in_sync = false;
        gaps_++;
        return prefix_index_outcome::gap;
    }
    for (const kv_event & e : b.events) {
        if (const auto * stored = std::get_if<kv_event_stored>(&e)) {
            // Last to first: a chain's leading blocks end up the more recent, so eviction takes a chain from
            // its tail (a prefix without its first block matches nothing).
            for (auto it = stored->blocks.rbegin(); it != stored->blocks.rend(); ++it) store(n, *it);
        } else if (const auto * removed = std::get_if<kv_event_removed>(&e)) {
            for (uint64_t h : removed->blocks) remove(n, h);
        } else if (std::holds_alternative<kv_event_cleared>(e)) {
            clear(n);
        }
        // kv_event_tier_stored: not the node's cache (kv_view keeps the tier's entries apart).
    }
    n.last_seq = b.seq;
    return prefix_index_outcome::applied;
}

prefix_index_outcome prefix_index::apply_snapshot(const kv_snapshot & s) {
    lock_guard lock(mu_);
    if (s.seed != seed_) {
        wrong_seed_++;
        return prefix_index_outcome::wrong_seed;
    }
    node_state & n = nodes_[s.node];
    if (n.epoch == s.epoch && n.in_sync && s.seq < n.last_seq) {
        stale_++;
        return prefix_index_outcome::stale;
    }
    clear(n);
    n.epoch = s.epoch;
    n.last_seq = s.seq;
    n.in_sync = true;
    for (uint64_t h : s.blocks) store(n, h);
    return prefix_index_outcome::applied;
}

void prefix_index::drop_node(const std::string & node) {
    lock_guard lock(mu_);
    auto it = nodes_.find(node);
    if (it == nodes_.end()) return;
    clear(it->second);
    nodes_.erase(it);
}

std::vector<size_t> prefix_index::match(std::span<const uint64_t> hashes, const std::vector<std::string> & nodes) {
    lock_guard lock(mu_);
    std::vector<size_t> out(nodes.size(), 0);
    size_t longest = 0;
    for (size_t i = 0; i < nodes.size(); i++) {
        auto it = nodes_.find(nodes[i]);
        if (it == nodes_.end()) continue;
        const auto & held = it->second.blocks;
        size_t k = 0;
        while (k < hashes.size() && held.contains(hashes[k])) k++;
        out[i] = k;
        longest = std::max(longest, k);
    }
    // Deepest first, so the first block ends up the most recent (as store does).
    for (size_t k = longest; k-- > 0;) {
        auto it = blocks_.find(hashes[k]);
        if (it != blocks_.end()) touch(it->second);
    }
    return out;
}

bool prefix_index::needs_snapshot(const std::string & node) const {
    lock_guard lock(mu_);
    auto it = nodes_.find(node);
    return it != nodes_.end() && !it->second.in_sync;
}

prefix_index_stats prefix_index::stats() const {
    lock_guard lock(mu_);
    prefix_index_stats s;
    s.blocks = blocks_.size();
    s.nodes = nodes_.size();
    s.evictions = evictions_;
    s.gaps = gaps_;
    s.stale = stale_;
    s.wrong_seed = wrong_seed_;
    return s;
}

std::vector<prefix_index_node> prefix_index::nodes() const {
    lock_guard lock(mu_);
    std::vector<prefix_index_node> out;
    for (const auto & [name, n] : nodes_) out.push_back({name, n.blocks.size(), n.in_sync});
    std::sort(out.begin(), out.end(), [](const auto & a, const auto & b) { return a.node < b.node; });
    return out;
}

void prefix_index::store(node_state & n, uint64_t h) {
    if (max_blocks_ == 0) return;
    auto it = blocks_.find(h);
    if (it != blocks_.end()) {
        auto & holders = it->second.holders;
        if (std::find(holders.begin(), holders.end(), &n) == holders.end()) {
            holders.push_back(&n);
            n.blocks.insert(h);
        }
        touch(it->second);
        return;
    }
    if (blocks_.size() >= max_blocks_) evict_one();
    lru_.push_front(h);
    block_entry & e = blocks_[h];
    e.holders.push_back(&n);
    e.lru_pos = lru_.begin();
    n.blocks.insert(h);
}

void prefix_index::remove(node_state & n, uint64_t h) {
    if (n.blocks.erase(h) != 0) unlink(n, h);
}

void prefix_index::clear(node_state & n) {
    for (uint64_t h : n.blocks) unlink(n, h);
    n.blocks.clear();
}

// unlink: n no longer holds h (the caller updates n.blocks); the block goes when no node holds it.
void prefix_index::unlink(node_state & n, uint64_t h) {
    auto it = blocks_.find(h);
    if (it == blocks_.end()) return;
    auto & holders = it->second.holders;
    holders.erase(std::remove(holders.begin(), holders.end(), &n), holders.end());
    if (holders.empty()) {
        lru_.erase(it->second.lru_pos);
        blocks_.erase(it);
    }
}

void prefix_index::touch(block_entry & e) { lru_.splice(lru_.begin(), lru_, e.lru_pos); }

void prefix_index::evict_one() {
    if (lru_.empty()) return;
    const uint64_t h = lru_.back();
    auto it = blocks_.find(h);
    if (it != blocks_.end()) {
        for (node_state * holder : it->second.holders) holder->blocks.erase(h);
        blocks_.erase(it);
    }
    lru_.pop_back();
    evictions_++;
}

}  // namespace baton
