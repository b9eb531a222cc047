// kv_view.h — the router's view of the nodes' KV caches: one prefix_index per chain key (a model and KV layout),
// fed with what each node publishes (GET /v1/kv/events and /v1/kv/snapshot, docs/kv-events.md), and asked
// how many leading blocks of a prompt each node holds. Beside each index, the shared tier's entries that the
// nodes of that chain key reported writing (tier_stored events, snapshots' "tier"), each until its TTL runs
// out, at most max_blocks_per_model of them (the soonest to expire go first): any node of the key can fetch
// those (docs/tier.md), so tier_tokens answers the same for all of them. A belief that outlives the entry
// (Valkey evicted or was flushed) costs a recompute on the node, never a wrong answer. Nodes are keyed by the URL the router reaches them at
// (a node's own name in its events is informational). The health checker polls the events (router_impl::
// kv_poll); routing asks cached_tokens. Without a vocabulary (-m) the router has no tokens to hash and routing
// falls back to affinity.
// Thread-safety: every member is safe from any thread (one mutex; the indexes have their own).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "baton/base/status.h"
#include "baton/base/thread_annotations.h"
#include "baton/text.h"
#include "prefix_index.h"

namespace baton {

struct kv_view_stats {
    size_t blocks = 0, nodes = 0, tier_entries = 0;
    uint64_t evictions = 0, gaps = 0, resyncs = 0, batches = 0, rejected = 0;
};

// What the view holds for one chain key (a model and KV layout): the prefix index's blocks by node, and the
// shared tier's entries the nodes of that key reported writing (the live view's cache table).
struct kv_view_key {
    uint64_t seed = 0;
    std::vector<prefix_index_node> nodes;
    size_t index_blocks = 0;         // distinct blocks in the index
    size_t tier_entries = 0;         // unexpired at `now`
    double tier_next_expiry_s = -1;  // seconds until the soonest entry expires (-1: none)
};

class kv_view {
  public:
    explicit kv_view(size_t max_blocks_per_model) : max_blocks_(max_blocks_per_model) {}

    // The query a poll of node url sends: "after=SEQ&epoch=EPOCH" (or "after=0" for a node not yet synced).
    std::string events_query(const std::string & url) const;
    // apply_events applies a node's GET /v1/kv/events answer; returns true when the node must be resynced
    // from its snapshot (it restarted, the router fell behind its log, or a batch was lost); an answer
    // that does not parse is an error (the node's entries stay as they were).
    Result<bool> apply_events(const std::string & url, std::string_view body);
    // apply_snapshot applies a node's GET /v1/kv/snapshot answer (replacing what was known about it).
    Status apply_snapshot(const std::string & url, std::string_view body);
    // forget: the node left.
    void forget(const std::string & url);

    using clock = std::chrono::steady_clock;

    // apply_events and apply_snapshot also take the tier entries they carry, expiring from `now`.
    Result<bool> apply_events(const std::string & url, std::string_view body, clock::time_point now);
    Status apply_snapshot(const std::string & url, std::string_view body, clock::time_point now);

    // cached_tokens: for each of urls, how many leading tokens of `tokens` its cache holds (whole blocks).
    std::vector<uint32_t> cached_tokens(std::span<const token_id> tokens, const std::vector<std::string> & urls);
    // tier_tokens: for each of urls, the longest prefix of `tokens` (whole blocks) the tier holds an unexpired
    // entry for, under that node's chain key (0 for a node not in sync).
    std::vector<uint32_t> tier_tokens(std::span<const token_id> tokens, const std::vector<std::string> & urls,
                                      clock::time_point now = clock::now());
    kv_view_stats stats() const;
    // keys: every chain key's contents at now (entries past their TTL not counted).
    std::vector<kv_view_key> keys(clock::time_point now = clock::now()) const;

  private:
    struct cursor {
        std::string epoch;
        uint64_t seq = 0;
        uint64_t seed = 0;
        bool synced = false;
    };
    // The tier's entries of one chain key: block hash -> expiry, and the same ordered by expiry.
    struct tier_set {
        std::multimap<clock::time_point, uint64_t> by_expiry;
        std::unordered_map<uint64_t, std::multimap<clock::time_point, uint64_t>::iterator> entries;
    };
    std::shared_ptr<prefix_index> index_for(uint64_t seed) BATON_REQUIRES(mu_);
    void tier_note(uint64_t seed, uint64_t block, uint64_t ttl_ms, clock::time_point now) BATON_REQUIRES(mu_);

    const size_t max_blocks_;
    mutable mutex mu_;
    std::map<uint64_t, std::shared_ptr<prefix_index>> indexes_ BATON_GUARDED_BY(mu_);  // by seed
    std::map<std::string, cursor> cursors_ BATON_GUARDED_BY(mu_);                      // by node url
    std::map<uint64_t, tier_set> tiers_ BATON_GUARDED_BY(mu_);                         // by seed
    uint64_t resyncs_ BATON_GUARDED_BY(mu_) = 0;
    uint64_t batches_ BATON_GUARDED_BY(mu_) = 0;
    uint64_t rejected_ BATON_GUARDED_BY(mu_) = 0;
};

// kv_route_scores: what routing compares of the nodes' cached prompt tokens (cached_tokens, by node): amounts
// within an eighth of the prompt (at least a block, pd_kv_block_tokens) of the largest count as the largest, so
// so little saved compute never outweighs load — a system prompt's shared preamble, which every busy node holds,
// must not draw every new tenant to those nodes. Ties then go to the least loaded (node_pool.h). tier (by node,
// may be empty): what each node can fetch from the shared tier (tier_tokens), credited at that less the same
// margin — a node that holds a prefix beats the tier's copy of it, the tier beats recomputing. Pure.
std::vector<uint32_t> kv_route_scores(const std::vector<uint32_t> & cached, size_t n_tokens,
                                      const std::vector<uint32_t> & tier = {});

}  // namespace baton
