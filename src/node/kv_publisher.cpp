// kv_publisher.cpp — the node's KV events (kv_publisher.h).
#include "kv_publisher.h"

#include <algorithm>
#include <span>

#include "baton/pd/kv_blocks.h"

namespace baton {

void kv_publisher::observe(const std::vector<tokens_ptr> & slots) {
    lock_guard lk(mu_);
    if (last_.size() < slots.size()) {
        last_.resize(slots.size());
        slot_blocks_.resize(slots.size());
    }
    std::vector<kv_event> events;
    std::vector<uint64_t> removed;
    for (size_t i = 0; i < slots.size(); ++i) {
        if (slots[i] == last_[i]) continue;
        last_[i] = slots[i];
        std::vector<uint64_t> now;
        if (slots[i])
            now = kv_block_hashes(std::span<const int32_t>(slots[i]->data(), slots[i]->size()), cfg_.seed,
                                  cfg_.block_tokens);
        std::vector<uint64_t> & was = slot_blocks_[i];
        // Chained hashes: the two lists agree up to the first block that differs, and differ after it.
        size_t common = 0;
        while (common < was.size() && common < now.size() && was[common] == now[common]) ++common;
        for (size_t k = common; k < was.size(); ++k) {
            auto it = held_.find(was[k]);
            if (it != held_.end() && --it->second == 0) {
                held_.erase(it);
                removed.push_back(was[k]);
            }
        }
        // The blocks new to the node, as runs that continue a chain (parent: the block before the run).
        kv_event_stored run;
        for (size_t k = common; k < now.size(); ++k) {
            if (held_[now[k]]++ > 0) {  // another slot holds it already: ends a run
                if (!run.blocks.empty()) events.emplace_back(std::move(run));
                run = kv_event_stored{};
                continue;
            }
            if (run.blocks.empty() && k > 0) run.parent = now[k - 1];
            run.blocks.push_back(now[k]);
        }
        if (!run.blocks.empty()) events.emplace_back(std::move(run));
        was = std::move(now);
    }
    // A block dropped by one slot and stored by another in the same round is held throughout: neither event.
    // (A loop, not erase_if with a lambda: the thread-safety analysis does not see mu_ held inside a lambda.)
    size_t kept = 0;
    for (uint64_t b : removed)
        if (held_.count(b) == 0) removed[kept++] = b;
    removed.resize(kept);
    if (!removed.empty()) events.emplace_back(kv_event_removed{std::move(removed)});
    if (events.empty()) return;
    append(std::move(events));
}

void kv_publisher::append(std::vector<kv_event> events) {
    kv_event_batch b;
    b.node = cfg_.node;
    b.epoch = cfg_.epoch;
    b.seed = cfg_.seed;
    b.seq = ++seq_;
    b.events = std::move(events);
    log_.push_back(std::move(b));
    while (log_.size() > cfg_.log_batches) log_.pop_front();
}

void kv_publisher::tier_stored(uint64_t block, uint64_t ttl_ms) {
    const auto now = std::chrono::steady_clock::now();
    lock_guard lk(mu_);
    if (tier_.size() >= tier_max_) {
        for (auto it = tier_.begin(); it != tier_.end();) it = it->second <= now ? tier_.erase(it) : std::next(it);
        while (tier_.size() >= tier_max_) {  // all live: drop the soonest to expire
            auto first = tier_.begin();
            for (auto it = tier_.begin(); it != tier_.end(); ++it)
                if (it->second < first->second) first = it;
            tier_.erase(first);
        }
    }
    tier_[block] = now + std::chrono::milliseconds(ttl_ms);
    append({kv_event_tier_stored{{block}, ttl_ms}});
}

std::optional<std::vector<kv_event_batch>> kv_publisher::batches_after(uint64_t after) const {
    lock_guard lk(mu_);
    if (after > seq_) return std::nullopt;  // the reader knew a later seq: another epoch of this node
    std::vector<kv_event_batch> out;
    if (after == seq_) return out;
    if (log_.empty() || log_.front().seq > after + 1) return std::nullopt;  // fell behind the log
    for (const kv_event_batch & b : log_)
        if (b.seq > after) out.push_back(b);
    return out;
}

uint64_t kv_publisher::seq() const {
    lock_guard lk(mu_);
    return seq_;
}

kv_snapshot kv_publisher::snapshot() const {
    lock_guard lk(mu_);
    kv_snapshot s;
    s.node = cfg_.node;
    s.epoch = cfg_.epoch;
    s.seed = cfg_.seed;
    s.seq = seq_;
    s.blocks.reserve(held_.size());
    for (const auto & [b, n] : held_) s.blocks.push_back(b);
    std::sort(s.blocks.begin(), s.blocks.end());
    const auto now = std::chrono::steady_clock::now();
    for (const auto & [b, until] : tier_)
        if (until > now)
            s.tier.push_back({b, uint64_t(std::max<int64_t>(
                                     1, std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count()))});
    std::sort(s.tier.begin(), s.tier.end(),
              [](const kv_tier_entry & a, const kv_tier_entry & b) { return a.block < b.block; });
    return s;
}

}  // namespace baton
