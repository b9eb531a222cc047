// kv_view.cpp — the router's view of the nodes' KV caches (kv_view.h).
#include "kv_view.h"

#include <algorithm>
#include <charconv>

#include <nlohmann/json.hpp>

#include "baton/pd/kv_blocks.h"
#include "baton/pd/pd_protocol.h"

namespace baton {

std::shared_ptr<prefix_index> kv_view::index_for(uint64_t seed) {
    auto & p = indexes_[seed];
    if (!p) p = std::make_shared<prefix_index>(seed, max_blocks_);
    return p;
}

std::string kv_view::events_query(const std::string & url) const {
    lock_guard lk(mu_);
    auto it = cursors_.find(url);
    if (it == cursors_.end() || !it->second.synced) return "after=0";
    return "after=" + std::to_string(it->second.seq) + "&epoch=" + it->second.epoch;
}

void kv_view::tier_note(uint64_t seed, uint64_t block, uint64_t ttl_ms, clock::time_point now) {
    tier_set & t = tiers_[seed];
    const clock::time_point until = now + std::chrono::milliseconds(ttl_ms);
    if (auto it = t.entries.find(block); it != t.entries.end()) {
        if (it->second->first >= until) return;
        t.by_expiry.erase(it->second);
        it->second = t.by_expiry.emplace(until, block);
    } else {
        t.entries.emplace(block, t.by_expiry.emplace(until, block));
    }
    while (!t.by_expiry.empty() && (t.by_expiry.size() > max_blocks_ || t.by_expiry.begin()->first <= now)) {
        t.entries.erase(t.by_expiry.begin()->second);
        t.by_expiry.erase(t.by_expiry.begin());
    }
}

Result<bool> kv_view::apply_events(const std::string & url, std::string_view body) {
    return apply_events(url, body, clock::now());
}

Status kv_view::apply_snapshot(const std::string & url, std::string_view body) {
    return apply_snapshot(url, body, clock::now());
}

Result<bool> kv_view::apply_events(const std::string & url, std::string_view body, clock::time_point now) {
    const auto j = nlohmann::json::parse(body, nullptr, false);
    if (!j.is_object() || !j.contains("epoch") || !j["epoch"].is_string() || !j.contains("resync") ||
        !j["resync"].is_boolean() || !j.contains("batches") || !j["batches"].is_array()) {
        lock_guard lk(mu_);
        ++rejected_;
        return Status(status_code::corrupt, url + std::string(pd_path_kv_events) + ": not a KV-event answer");
    }
    const std::string epoch = j["epoch"].get<std::string>();
    lock_guard lk(mu_);
    cursor & c = cursors_[url];
    if (j["resync"].get<bool>() || (c.synced && c.epoch != epoch)) {
        c.synced = false;
        return true;
    }
    // A node that has published nothing yet (seq 0) is in sync with an empty cache.
    if (!c.synced && j["batches"].empty() && j.contains("seq") && j["seq"] == 0 && j.contains("seed") &&
        j["seed"].is_string()) {
        const std::string seed_hex = j["seed"].get<std::string>();
        uint64_t seed = 0;
        if (seed_hex.size() == 16 &&
            std::from_chars(seed_hex.data(), seed_hex.data() + 16, seed, 16).ec == std::errc()) {
            c.epoch = epoch;
            c.seed = seed;
            c.seq = 0;
            c.synced = true;
            index_for(seed);
        }
        return false;
    }
    for (const auto & e : j["batches"]) {
        auto b = kv_event_batch_decode(e.dump());
        if (!b.ok()) {
            ++rejected_;
            c.synced = false;  // what follows cannot be applied in order: resync
            return true;
        }
        kv_event_batch & batch = b.value();
        batch.node = url;
        if (!c.synced) {
            // Not synced yet: only a stream from its first batch can be applied; anything else needs the snapshot.
            if (batch.seq != 1) return true;
            c.epoch = batch.epoch;
            c.seed = batch.seed;
            c.synced = true;
        }
        if (batch.epoch != c.epoch || batch.seed != c.seed) {
            c.synced = false;
            return true;
        }
        const prefix_index_outcome o = index_for(c.seed)->apply(batch);
        ++batches_;
        // The tier's entries stand whatever the node's own stream did (they are not the node's cache).
        for (const kv_event & e : batch.events)
            if (const auto * t = std::get_if<kv_event_tier_stored>(&e))
                for (uint64_t h : t->blocks) tier_note(batch.seed, h, t->ttl_ms, now);
        if (o == prefix_index_outcome::gap || o == prefix_index_outcome::wrong_seed) {
            c.synced = false;
            return true;
        }
        c.seq = std::max(c.seq, batch.seq);
    }
    return false;
}

Status kv_view::apply_snapshot(const std::string & url, std::string_view body, clock::time_point now) {
    auto s = kv_snapshot_decode(body);
    lock_guard lk(mu_);
    if (!s.ok()) {
        ++rejected_;
        return s.status();
    }
    kv_snapshot & snap = s.value();
    snap.node = url;
    cursor & c = cursors_[url];
    if (c.seed != 0 && c.seed != snap.seed)  // the node now serves another model or layout
        if (auto it = indexes_.find(c.seed); it != indexes_.end()) it->second->drop_node(url);
    const prefix_index_outcome o = index_for(snap.seed)->apply_snapshot(snap);
    if (o != prefix_index_outcome::wrong_seed)
        for (const kv_tier_entry & e : snap.tier) tier_note(snap.seed, e.block, e.ttl_ms, now);
    if (o == prefix_index_outcome::applied || o == prefix_index_outcome::stale) {
        c.epoch = snap.epoch;
        c.seed = snap.seed;
        c.seq = snap.seq;
        c.synced = true;
        ++resyncs_;
    }
    return Status();
}

void kv_view::forget(const std::string & url) {
    lock_guard lk(mu_);
    auto it = cursors_.find(url);
    if (it == cursors_.end()) return;
    if (auto ix = indexes_.find(it->second.seed); ix != indexes_.end()) ix->second->drop_node(url);
    cursors_.erase(it);
}

std::vector<uint32_t> kv_view::cached_tokens(std::span<const token_id> tokens, const std::vector<std::string> & urls) {
    std::vector<uint32_t> out(urls.size(), 0);
    std::map<uint64_t, std::vector<size_t>> by_seed;  // which of urls each index answers for
    std::map<uint64_t, std::shared_ptr<prefix_index>> indexes;
    {
        lock_guard lk(mu_);
        for (size_t k = 0; k < urls.size(); ++k) {
            auto it = cursors_.find(urls[k]);
            if (it == cursors_.end() || !it->second.synced) continue;
            by_seed[it->second.seed].push_back(k);
            indexes[it->second.seed] = index_for(it->second.seed);
        }
    }
    for (const auto & [seed, which] : by_seed) {
        const std::vector<uint64_t> hashes = kv_block_hashes(tokens, seed, pd_kv_block_tokens);
        if (hashes.empty()) continue;
        std::vector<std::string> names;
        for (size_t k : which) names.push_back(urls[k]);
        const std::vector<size_t> blocks = indexes[seed]->match(hashes, names);
        for (size_t n = 0; n < which.size(); ++n) out[which[n]] = uint32_t(blocks[n] * pd_kv_block_tokens);
    }
    return out;
}

std::vector<uint32_t> kv_view::tier_tokens(std::span<const token_id> tokens, const std::vector<std::string> & urls,
                                           clock::time_point now) {
    std::vector<uint32_t> out(urls.size(), 0);
    std::map<uint64_t, uint32_t> by_seed;  // the answer of each chain key
    lock_guard lk(mu_);
    for (size_t k = 0; k < urls.size(); ++k) {
        auto c = cursors_.find(urls[k]);
        if (c == cursors_.end() || !c->second.synced) continue;
        const uint64_t seed = c->second.seed;
        auto known = by_seed.find(seed);
        if (known == by_seed.end()) {
            uint32_t held = 0;
            if (auto t = tiers_.find(seed); t != tiers_.end() && !t->second.entries.empty()) {
                const std::vector<uint64_t> hashes = kv_block_hashes(tokens, seed, pd_kv_block_tokens);
                for (size_t n = hashes.size(); n-- > 0;) {
                    auto e = t->second.entries.find(hashes[n]);
                    if (e != t->second.entries.end() && e->second->first > now) {
                        held = uint32_t((n + 1) * pd_kv_block_tokens);
                        break;
                    }
                }
            }
            known = by_seed.emplace(seed, held).first;
        }
        out[k] = known->second;
    }
    return out;
}

kv_view_stats kv_view::stats() const {
    lock_guard lk(mu_);
    kv_view_stats s;
    for (const auto & [seed, ix] : indexes_) {
        const prefix_index_stats p = ix->stats();
        s.blocks += p.blocks;
        s.evictions += p.evictions;
        s.gaps += p.gaps;
    }
    for (const auto & [url, c] : cursors_) s.nodes += c.synced ? 1 : 0;
    for (const auto & [seed, t] : tiers_) s.tier_entries += t.entries.size();
    s.resyncs = resyncs_;
    s.batches = batches_;
    s.rejected = rejected_;
    return s;
}

std::vector<kv_view_key> kv_view::keys(clock::time_point now) const {
    lock_guard lk(mu_);
    std::map<uint64_t, kv_view_key> out;
    for (const auto & [seed, ix] : indexes_) {
        kv_view_key & k = out[seed];
        k.seed = seed;
        k.nodes = ix->nodes();
        k.index_blocks = ix->stats().blocks;
    }
    // A node that has published nothing yet is in sync and holds nothing (the index knows only nodes with blocks).
    for (const auto & [url, c] : cursors_) {
        auto it = out.find(c.seed);
        if (it == out.end()) continue;
        auto & ns = it->second.nodes;
        if (std::none_of(ns.begin(), ns.end(), [&](const prefix_index_node & n) { return n.node == url; }))
            ns.push_back({url, 0, c.synced});
    }
    for (auto & [seed, k] : out)
        std::sort(k.nodes.begin(), k.nodes.end(), [](const auto & a, const auto & b) { return a.node < b.node; });
    for (const auto & [seed, t] : tiers_) {
        kv_view_key & k = out[seed];
        k.seed = seed;
        for (auto it = t.by_expiry.lower_bound(now + clock::duration(1)); it != t.by_expiry.end(); ++it) {
            if (k.tier_entries++ == 0) k.tier_next_expiry_s = std::chrono::duration<double>(it->first - now).count();
        }
    }
    std::vector<kv_view_key> v;
    for (auto & [seed, k] : out) v.push_back(std::move(k));
    return v;
}

std::vector<uint32_t> kv_route_scores(const std::vector<uint32_t> & cached, size_t n_tokens,
                                      const std::vector<uint32_t> & tier) {
    const uint32_t margin = std::max<uint32_t>(pd_kv_block_tokens, uint32_t(n_tokens / 8));
    std::vector<uint32_t> out = cached;
    for (size_t i = 0; i < out.size() && i < tier.size(); ++i)
        if (tier[i] > margin) out[i] = std::max(out[i], tier[i] - margin);
    uint32_t most = 0;
    for (uint32_t c : out) most = std::max(most, c);
    for (uint32_t & c : out)
        if (most - c < margin) c = most;
    return out;
}

}  // namespace baton
