// node_pool.h — a pool of nodes (prefill or decode) with membership, health, load, and the selection rules.
//
// Members come from the static --prefill/--decode lists and from the cluster's records in etcd (upsert
// when a record appears or changes, retire when it goes). Entries are never erased, so an index held by
// a request stays valid; a retired or draining node is simply never selected again (until its record
// comes back).
// Selection: prefill nodes by least outstanding work; decode nodes by prefix affinity (rendezvous hashing
// of a key derived from the conversation's prefix, so the same conversation lands on the node that already
// holds its KV) with a load cap (a node more than `load_cap` requests above the least-loaded usable node
// is skipped). A node_filter narrows the candidates to a model and to a blob-compatibility group; a static
// node (no record) matches every filter. Ejected nodes are re-admitted by the health checker.
// Thread-safety: all methods are safe from any thread (one mutex).
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "baton/base/thread_annotations.h"
#include "baton/http/http_client.h"

namespace baton {

struct node_ref {
    size_t index = 0;
    std::string url;  // "http://host:port"
};

// What a registered node says about itself (empty for a static node).
struct node_meta {
    std::string group;     // node_record_group: blobs restore only within one group
    std::string model_id;  // the model's id and alias (requests' "model")
    std::string alias;
    uint32_t capacity = 0;  // requests the router lets it hold (slots + --node-queue); 0: unknown yet
    bool vision = false;    // it takes images (--mmproj)
    bool audio = false;     // it takes audio clips (--mmproj with a projector that reads audio)
};

// node_status: one entry as the live view shows it.
struct node_status {
    std::string url;
    node_meta meta;
    bool registered = false, member = false, healthy = false, draining = false;
    uint32_t outstanding = 0;
    uint32_t capacity = UINT32_MAX;  // unknown yet
};

// node_filter: which nodes may take a request. Empty fields match everything.
struct node_filter {
    std::string group;  // a blob of this group is on its way: only nodes that can restore it
    std::string model;  // the request names this model (its id or alias)
    bool vision = false;  // the request carries images: only nodes with a projector (static nodes: any)
    bool audio = false;   // the request carries audio clips: only nodes whose projector reads audio
};

class node_pool {
  public:
    explicit node_pool(const std::vector<http_url> & static_nodes, uint32_t load_cap = 4);

    size_t size() const;  // entries ever known (members or not)
    std::string url(size_t i) const;
    http_url address(size_t i) const;
    std::string group(size_t i) const;

    // upsert makes url a member with meta (a new entry, or the known one brought back and updated);
    // returns its index and whether it joined (was not a member before).
    std::pair<size_t, bool> upsert(const http_url & url, const node_meta & meta);
    // retire_others: every registered (non-static) member whose url is not in keep stops being a member;
    // returns how many left.
    size_t retire_others(const std::set<std::string> & keep);

    // pick_least_loaded returns the usable node with the fewest outstanding requests, skipping `exclude`.
    std::optional<node_ref> pick_least_loaded(const std::vector<size_t> & exclude = {},
                                              const node_filter & f = {}) const;
    // pick_affine returns the usable node preferred for key (rendezvous hashing; the most cached first, as
    // acquire_affine), unless it is over the load cap, skipping `exclude`.
    std::optional<node_ref> pick_affine(uint64_t key, const std::vector<size_t> & exclude = {},
                                        const node_filter & f = {}, std::span<const uint32_t> cached = {}) const;

    // acquire_least_loaded / acquire_affine pick like the functions above among the nodes below their
    // capacity and count the request on the chosen node in the same step (so concurrent picks never
    // overshoot a node's capacity); nullopt when every candidate is full or unusable. cached (by node index;
    // empty or shorter: 0): the prompt tokens each node's cache already holds (kv_view). Among the nodes a
    // pick may take (within the load cap, for affinity; the least loaded, else), the one holding the most
    // wins; among equals the plain rule decides.
    std::optional<node_ref> acquire_least_loaded(const std::vector<size_t> & exclude = {}, const node_filter & f = {},
                                                 std::span<const uint32_t> cached = {});
    std::optional<node_ref> acquire_affine(uint64_t key, const std::vector<size_t> & exclude = {},
                                           const node_filter & f = {}, std::span<const uint32_t> cached = {});
    // usable_urls: the usable members matching f, by index (the candidates a pick chooses among).
    std::vector<std::pair<size_t, std::string>> usable_urls(const node_filter & f = {}) const;
    // has_candidates: some usable node outside `exclude` matching f exists (full or not): worth waiting for.
    bool has_candidates(const std::vector<size_t> & exclude = {}, const node_filter & f = {}) const;
    // serves: some member (usable or not) answers to this model name.
    bool serves(const std::string & model) const;
    // models: the distinct model ids of registered members.
    std::set<std::string> models() const;

    // Outstanding work accounting (acquire when a request is sent to a node, release when it ends).
    void acquire(size_t i);
    void release(size_t i);
    // capacity: how many requests the router lets a node hold at once (its slots plus a small queue);
    // learned from the node's record or by the health checker. Unlimited until set.
    void set_capacity(size_t i, uint32_t n);
    uint32_t capacity(size_t i) const;

    // Health: mark_failure ejects a node after a failed request or health check; mark_healthy re-admits it.
    void mark_failure(size_t i);
    void mark_healthy(size_t i);
    // mark_draining: the node refused work because it drains: never selected again until it rejoins.
    void mark_draining(size_t i);
    bool healthy(size_t i) const;
    bool member(size_t i) const;
    size_t n_healthy() const;  // usable members
    size_t n_members() const;
    uint32_t outstanding(size_t i) const;
    // status: every entry ever known, by index, read in one step.
    std::vector<node_status> status() const;

  private:
    struct entry {
        http_url address;
        node_meta meta;
        bool registered = false;  // from etcd (else a static node)
        bool member = true;
        bool healthy = true;
        bool draining = false;
        uint32_t outstanding = 0;
        uint32_t capacity = UINT32_MAX;
    };
    bool usable(const entry & e) const { return e.member && e.healthy && !e.draining; }
    static bool matches(const entry & e, const node_filter & f);

    uint32_t load_cap_;
    mutable mutex mu_;
    std::deque<entry> nodes_ BATON_GUARDED_BY(mu_);

    std::optional<size_t> pick_least_loaded_locked(const std::vector<size_t> & exclude, const node_filter & f,
                                                   bool within_capacity, std::span<const uint32_t> cached = {}) const
        BATON_REQUIRES(mu_);
    std::optional<size_t> pick_affine_locked(uint64_t key, const std::vector<size_t> & exclude, const node_filter & f,
                                             bool within_capacity, std::span<const uint32_t> cached = {}) const
        BATON_REQUIRES(mu_);
};

// affinity_key hashes the first `n_bytes` of a conversation's text (a stable prefix), so requests that
// continue the same conversation map to the same decode node.
uint64_t affinity_key(const std::string & prefix_text, size_t n_bytes = 256);

}  // namespace baton
