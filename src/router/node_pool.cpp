// node_pool.cpp — node health, load and selection.
#include "node_pool.h"

#include <xxhash.h>

#include <algorithm>

namespace baton {

node_pool::node_pool(std::vector<std::string> urls, uint32_t load_cap)
    : urls_(std::move(urls)), load_cap_(load_cap), outstanding_(urls_.size(), 0), healthy_(urls_.size(), true),
      capacity_(urls_.size(), UINT32_MAX) {}

namespace {
bool excluded(const std::vector<size_t> & ex, size_t i) { return std::find(ex.begin(), ex.end(), i) != ex.end(); }
}  // namespace

std::optional<size_t> node_pool::pick_least_loaded_locked(const std::vector<size_t> & exclude, bool within_capacity) const {
    std::optional<size_t> best;
    for (size_t i = 0; i < urls_.size(); ++i) {
        if (!healthy_[i] || excluded(exclude, i) || (within_capacity && outstanding_[i] >= capacity_[i])) continue;
        if (!best || outstanding_[i] < outstanding_[*best]) best = i;
    }
    return best;
}

std::optional<size_t> node_pool::pick_affine_locked(uint64_t key, const std::vector<size_t> & exclude, bool within_capacity) const {
    auto usable = [&](size_t i) BATON_REQUIRES(mu_) {
        return healthy_[i] && !excluded(exclude, i) && !(within_capacity && outstanding_[i] >= capacity_[i]);
    };
    uint32_t min_load = UINT32_MAX;
    for (size_t i = 0; i < urls_.size(); ++i)
        if (usable(i)) min_load = std::min(min_load, outstanding_[i]);
    if (min_load == UINT32_MAX) return std::nullopt;
    // Rendezvous hashing: the highest score among nodes within the load cap wins. A node's score for a
    // key does not depend on the other nodes, so adding or ejecting one node moves only its own keys.
    std::optional<size_t> best;
    uint64_t best_score = 0;
    for (size_t i = 0; i < urls_.size(); ++i) {
        if (!usable(i) || outstanding_[i] > min_load + load_cap_) continue;
        const uint64_t parts[2] = {key, XXH3_64bits(urls_[i].data(), urls_[i].size())};
        const uint64_t score = XXH3_64bits(parts, sizeof parts);
        if (!best || score > best_score) {
            best = i;
            best_score = score;
        }
    }
    return best;
}

std::optional<node_ref> node_pool::pick_least_loaded(const std::vector<size_t> & exclude) const {
    lock_guard lk(mu_);
    auto i = pick_least_loaded_locked(exclude, false);
    if (!i) return std::nullopt;
    return node_ref{*i, urls_[*i]};
}

std::optional<node_ref> node_pool::pick_affine(uint64_t key, const std::vector<size_t> & exclude) const {
    lock_guard lk(mu_);
    auto i = pick_affine_locked(key, exclude, false);
    if (!i) return std::nullopt;
    return node_ref{*i, urls_[*i]};
}

std::optional<node_ref> node_pool::acquire_least_loaded(const std::vector<size_t> & exclude) {
    lock_guard lk(mu_);
    auto i = pick_least_loaded_locked(exclude, true);
    if (!i) return std::nullopt;
    ++outstanding_[*i];
    return node_ref{*i, urls_[*i]};
}

std::optional<node_ref> node_pool::acquire_affine(uint64_t key, const std::vector<size_t> & exclude) {
    lock_guard lk(mu_);
    auto i = pick_affine_locked(key, exclude, true);
    if (!i) return std::nullopt;
    ++outstanding_[*i];
    return node_ref{*i, urls_[*i]};
}

bool node_pool::has_candidates(const std::vector<size_t> & exclude) const {
    lock_guard lk(mu_);
    for (size_t i = 0; i < urls_.size(); ++i)
        if (healthy_[i] && !excluded(exclude, i)) return true;
    return false;
}

void node_pool::set_capacity(size_t i, uint32_t n) {
    lock_guard lk(mu_);
    capacity_[i] = std::max<uint32_t>(1, n);
}

uint32_t node_pool::capacity(size_t i) const {
    lock_guard lk(mu_);
    return capacity_[i];
}

void node_pool::acquire(size_t i) {
    lock_guard lk(mu_);
    ++outstanding_[i];
}

void node_pool::release(size_t i) {
    lock_guard lk(mu_);
    if (outstanding_[i] > 0) --outstanding_[i];
}

void node_pool::mark_failure(size_t i) {
    lock_guard lk(mu_);
    healthy_[i] = false;
}

void node_pool::mark_healthy(size_t i) {
    lock_guard lk(mu_);
    healthy_[i] = true;
}

bool node_pool::healthy(size_t i) const {
    lock_guard lk(mu_);
    return healthy_[i];
}

size_t node_pool::n_healthy() const {
    lock_guard lk(mu_);
    return size_t(std::count(healthy_.begin(), healthy_.end(), true));
}

uint32_t node_pool::outstanding(size_t i) const {
    lock_guard lk(mu_);
    return outstanding_[i];
}

uint64_t affinity_key(const std::string & prefix_text, size_t n_bytes) {
    return XXH3_64bits(prefix_text.data(), std::min(n_bytes, prefix_text.size()));
}

}  // namespace baton
