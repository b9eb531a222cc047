// node_pool.h — a pool of nodes (prefill or decode) with health state and load, and the selection rules.
//
// Selection: prefill nodes by least outstanding work; decode nodes by prefix affinity (rendezvous hashing
// of a key derived from the conversation's prefix, so the same conversation lands on the node that already
// holds its KV) with a load cap (a node more than `load_cap` requests above the least-loaded healthy node
// is skipped). Ejected nodes are never selected; a health checker re-admits them.
// Thread-safety: all methods are safe from any thread (one mutex).
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "baton/thread_annotations.h"

namespace baton {

struct node_ref {
    size_t index = 0;
    std::string url;   // "http://host:port"
};

class node_pool {
  public:
    explicit node_pool(std::vector<std::string> urls, uint32_t load_cap = 4);

    size_t size() const { return urls_.size(); }
    const std::string & url(size_t i) const { return urls_[i]; }

    // pick_least_loaded returns the healthy node with the fewest outstanding requests, skipping `exclude`.
    std::optional<node_ref> pick_least_loaded(const std::vector<size_t> & exclude = {}) const;
    // pick_affine returns the healthy node preferred for key (rendezvous hashing), unless it is over the
    // load cap, skipping `exclude`.
    std::optional<node_ref> pick_affine(uint64_t key, const std::vector<size_t> & exclude = {}) const;

    // acquire_least_loaded / acquire_affine pick like the functions above among the nodes below their
    // capacity and count the request on the chosen node in the same step (so concurrent picks never
    // overshoot a node's capacity); nullopt when every candidate is full or unhealthy.
    std::optional<node_ref> acquire_least_loaded(const std::vector<size_t> & exclude = {});
    std::optional<node_ref> acquire_affine(uint64_t key, const std::vector<size_t> & exclude = {});
    // has_candidates: some healthy node outside `exclude` exists (full or not): worth waiting for.
    bool has_candidates(const std::vector<size_t> & exclude = {}) const;

    // Outstanding work accounting (acquire when a request is sent to a node, release when it ends).
    void acquire(size_t i);
    void release(size_t i);
    // capacity: how many requests the router lets a node hold at once (its slots plus a small queue);
    // learned from the node by the health checker. Unlimited until set.
    void set_capacity(size_t i, uint32_t n);
    uint32_t capacity(size_t i) const;

    // Health: mark_failure ejects a node after a failed request or health check; mark_healthy re-admits it.
    void mark_failure(size_t i);
    void mark_healthy(size_t i);
    bool healthy(size_t i) const;
    size_t n_healthy() const;
    uint32_t outstanding(size_t i) const;

  private:
    std::vector<std::string> urls_;
    uint32_t load_cap_;
    mutable mutex mu_;
    std::vector<uint32_t> outstanding_ BATON_GUARDED_BY(mu_);
    std::vector<bool> healthy_ BATON_GUARDED_BY(mu_);
    std::vector<uint32_t> capacity_ BATON_GUARDED_BY(mu_);

    std::optional<size_t> pick_least_loaded_locked(const std::vector<size_t> & exclude, bool within_capacity) const BATON_REQUIRES(mu_);
    std::optional<size_t> pick_affine_locked(uint64_t key, const std::vector<size_t> & exclude, bool within_capacity) const
        BATON_REQUIRES(mu_);
};

// affinity_key hashes the first `n_bytes` of a conversation's text (a stable prefix), so requests that
// continue the same conversation map to the same decode node.
uint64_t affinity_key(const std::string & prefix_text, size_t n_bytes = 256);

}  // namespace baton

