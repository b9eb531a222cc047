// node_pool.cpp — node membership, health, load and selection.
#include "node_pool.h"

#include <xxhash.h>

#include <algorithm>

namespace baton {

node_pool::node_pool(const std::vector<http_url> & static_nodes, uint32_t load_cap) : load_cap_(load_cap) {
    for (const auto & u : static_nodes) nodes_.push_back(entry{u, {}, false});
}

namespace {
bool excluded(const std::vector<size_t> & ex, size_t i) { return std::find(ex.begin(), ex.end(), i) != ex.end(); }
}  // namespace

bool node_pool::matches(const entry & e, const node_filter & f) {
    if (!e.registered) return true;  // a static node says nothing about itself: it takes anything
    if (!f.group.empty() && e.meta.group != f.group) return false;
    if (f.vision && !e.meta.vision) return false;
    if (f.audio && !e.meta.audio) return false;
    if (!f.model.empty() && f.model != e.meta.model_id && (e.meta.alias.empty() || f.model != e.meta.alias))
        return false;
    return true;
}

size_t node_pool::size() const {
    lock_guard lk(mu_);
    return nodes_.size();
}

std::string node_pool::url(size_t i) const {
    lock_guard lk(mu_);
    return nodes_[i].address.text;
}

http_url node_pool::address(size_t i) const {
    lock_guard lk(mu_);
    return nodes_[i].address;
}

std::string node_pool::group(size_t i) const {
    lock_guard lk(mu_);
    return nodes_[i].registered ? nodes_[i].meta.group : std::string();
}

std::pair<size_t, bool> node_pool::upsert(const http_url & url, const node_meta & meta) {
    lock_guard lk(mu_);
    for (size_t i = 0; i < nodes_.size(); ++i) {
        entry & e = nodes_[i];
        if (e.address.text != url.text) continue;
        const bool joined = !e.member || e.draining;
        if (!e.registered && e.member) return {i, false};  // a static node stays what it is
        e.registered = true;
        e.meta = meta;
        e.member = true;
        e.draining = false;
        if (joined) e.healthy = true;  // a node that (re)joins is tried again
        if (meta.capacity > 0) e.capacity = meta.capacity;
        return {i, joined};
    }
    entry e{url, meta, true};
    if (meta.capacity > 0) e.capacity = meta.capacity;
    nodes_.push_back(std::move(e));
    return {nodes_.size() - 1, true};
}

size_t node_pool::retire_others(const std::set<std::string> & keep) {
    lock_guard lk(mu_);
    size_t n = 0;
    for (entry & e : nodes_) {
        if (!e.registered || !e.member || keep.count(e.address.text)) continue;
        e.member = false;
        ++n;
    }
    return n;
}

namespace {
uint32_t cached_at(std::span<const uint32_t> cached, size_t i) { return i < cached.size() ? cached[i] : 0; }
}  // namespace

std::optional<size_t> node_pool::pick_least_loaded_locked(const std::vector<size_t> & exclude, const node_filter & f,
                                                          bool within_capacity,
                                                          std::span<const uint32_t> cached) const {
    std::optional<size_t> best;
    uint32_t min_load = UINT32_MAX;
    for (size_t i = 0; i < nodes_.size(); ++i) {
        const entry & e = nodes_[i];
        if (!usable(e) || !matches(e, f) || excluded(exclude, i) || (within_capacity && e.outstanding >= e.capacity))
            continue;
        min_load = std::min(min_load, e.outstanding);
        if (!best || e.outstanding < nodes_[*best].outstanding) best = i;
    }
    // A node holding part of the prompt wins if it is within the load cap of the least loaded.
    for (size_t i = 0; best && i < nodes_.size(); ++i) {
        const entry & e = nodes_[i];
        if (!usable(e) || !matches(e, f) || excluded(exclude, i) || (within_capacity && e.outstanding >= e.capacity) ||
            e.outstanding > min_load + load_cap_)
            continue;
        if (cached_at(cached, i) > cached_at(cached, *best)) best = i;
    }
    return best;
}

std::optional<size_t> node_pool::pick_affine_locked(uint64_t key, const std::vector<size_t> & exclude,
                                                    const node_filter & f, bool within_capacity,
                                                    std::span<const uint32_t> cached) const {
    auto ok = [&](size_t i) BATON_REQUIRES(mu_) {
        const entry & e = nodes_[i];
        return usable(e) && matches(e, f) && !excluded(exclude, i) && !(within_capacity && e.outstanding >= e.capacity);
    };
    uint32_t min_load = UINT32_MAX;
    for (size_t i = 0; i < nodes_.size(); ++i)
        if (ok(i)) min_load = std::min(min_load, nodes_[i].outstanding);
    if (min_load == UINT32_MAX) return std::nullopt;
    // Rendezvous hashing: the highest score among nodes within the load cap wins. A node's score for a
    // key does not depend on the other nodes, so adding or ejecting one node moves only its own keys.
    std::optional<size_t> best;
    uint64_t best_score = 0;
    for (size_t i = 0; i < nodes_.size(); ++i) {
        if (!ok(i) || nodes_[i].outstanding > min_load + load_cap_) continue;
        const std::string & u = nodes_[i].address.text;
        const uint64_t parts[2] = {key, XXH3_64bits(u.data(), u.size())};
        const uint64_t score = XXH3_64bits(parts, sizeof parts);
        // The most cached prefix first (KV events: the router's scores, kv_route_scores); the rendezvous score
        // among equals (with the index, the router keys on the prompt past what the nodes hold:
        // frontier_affinity_key).
        const uint32_t c = cached_at(cached, i), cb = best ? cached_at(cached, *best) : 0;
        if (!best || c > cb || (c == cb && score > best_score)) {
            best = i;
            best_score = score;
        }
    }
    return best;
}

std::optional<node_ref> node_pool::pick_least_loaded(const std::vector<size_t> & exclude, const node_filter & f) const {
    lock_guard lk(mu_);
    auto i = pick_least_loaded_locked(exclude, f, false);
    if (!i) return std::nullopt;
    return node_ref{*i, nodes_[*i].address.text};
}

std::optional<node_ref> node_pool::pick_affine(uint64_t key, const std::vector<size_t> & exclude, const node_filter & f,
                                               std::span<const uint32_t> cached) const {
    lock_guard lk(mu_);
    auto i = pick_affine_locked(key, exclude, f, false, cached);
    if (!i) return std::nullopt;
    return node_ref{*i, nodes_[*i].address.text};
}

std::optional<node_ref> node_pool::acquire_least_loaded(const std::vector<size_t> & exclude, const node_filter & f,
                                                        std::span<const uint32_t> cached) {
    lock_guard lk(mu_);
    auto i = pick_least_loaded_locked(exclude, f, true, cached);
    if (!i) return std::nullopt;
    ++nodes_[*i].outstanding;
    return node_ref{*i, nodes_[*i].address.text};
}

std::optional<node_ref> node_pool::acquire_affine(uint64_t key, const std::vector<size_t> & exclude,
                                                  const node_filter & f, std::span<const uint32_t> cached) {
    lock_guard lk(mu_);
    auto i = pick_affine_locked(key, exclude, f, true, cached);
    if (!i) return std::nullopt;
    ++nodes_[*i].outstanding;
    return node_ref{*i, nodes_[*i].address.text};
}

std::vector<std::pair<size_t, std::string>> node_pool::usable_urls(const node_filter & f) const {
    lock_guard lk(mu_);
    std::vector<std::pair<size_t, std::string>> out;
    for (size_t i = 0; i < nodes_.size(); ++i)
        if (usable(nodes_[i]) && matches(nodes_[i], f)) out.emplace_back(i, nodes_[i].address.text);
    return out;
}

bool node_pool::has_candidates(const std::vector<size_t> & exclude, const node_filter & f) const {
    lock_guard lk(mu_);
    for (size_t i = 0; i < nodes_.size(); ++i)
        if (usable(nodes_[i]) && matches(nodes_[i], f) && !excluded(exclude, i)) return true;
    return false;
}

bool node_pool::serves(const std::string & model) const {
    lock_guard lk(mu_);
    for (const entry & e : nodes_)
        if (e.member && e.registered && (model == e.meta.model_id || (!e.meta.alias.empty() && model == e.meta.alias)))
            return true;
    return false;
}

std::set<std::string> node_pool::models() const {
    lock_guard lk(mu_);
    std::set<std::string> out;
    for (const entry & e : nodes_)
        if (e.member && e.registered) out.insert(e.meta.model_id);
    return out;
}

void node_pool::set_capacity(size_t i, uint32_t n) {
    lock_guard lk(mu_);
    nodes_[i].capacity = std::max<uint32_t>(1, n);
}

uint32_t node_pool::capacity(size_t i) const {
    lock_guard lk(mu_);
    return nodes_[i].capacity;
}

void node_pool::acquire(size_t i) {
    lock_guard lk(mu_);
    ++nodes_[i].outstanding;
}

void node_pool::release(size_t i) {
    lock_guard lk(mu_);
    if (nodes_[i].outstanding > 0) --nodes_[i].outstanding;
}

void node_pool::mark_failure(size_t i) {
    lock_guard lk(mu_);
    nodes_[i].healthy = false;
}

void node_pool::mark_healthy(size_t i) {
    lock_guard lk(mu_);
    nodes_[i].healthy = true;
}

void node_pool::mark_draining(size_t i) {
    lock_guard lk(mu_);
    nodes_[i].draining = true;
}

std::vector<node_status> node_pool::status() const {
    lock_guard lk(mu_);
    std::vector<node_status> out;
    out.reserve(nodes_.size());
    for (const entry & e : nodes_)
        out.push_back(node_status{e.address.text, e.meta, e.registered, e.member, e.healthy, e.draining, e.outstanding,
                                  e.capacity});
    return out;
}

bool node_pool::healthy(size_t i) const {
    lock_guard lk(mu_);
    return nodes_[i].healthy;
}

bool node_pool::member(size_t i) const {
    lock_guard lk(mu_);
    return nodes_[i].member;
}

size_t node_pool::n_healthy() const {
    lock_guard lk(mu_);
    return size_t(std::count_if(nodes_.begin(), nodes_.end(), [this](const entry & e) { return usable(e); }));
}

size_t node_pool::n_members() const {
    lock_guard lk(mu_);
    return size_t(std::count_if(nodes_.begin(), nodes_.end(), [](const entry & e) { return e.member; }));
}

uint32_t node_pool::outstanding(size_t i) const {
    lock_guard lk(mu_);
    return nodes_[i].outstanding;
}

uint64_t affinity_key(const std::string & prefix_text, size_t n_bytes) {
    return XXH3_64bits(prefix_text.data(), std::min(n_bytes, prefix_text.size()));
}

}  // namespace baton
