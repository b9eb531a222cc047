// prefix_index.h — which node holds which prompt prefix, from the nodes' KV events (docs/kv-events.md,
// "The router's index").
//
// Nodes publish what their KV caches store and drop as chained block hashes (kv_blocks.h) in numbered
// batches (kv_events.h). The index applies each node's batches in order and answers, for a prompt's block
// hashes, how many leading blocks each candidate node holds: the longer, the less prefill that node repeats.
// Per node it keeps the epoch and the last applied seq: a batch already applied is stale (ignored, so
// several routers fed the same stream, or a replay, are harmless); a batch past the next one, a new epoch
// that does not start at seq 1, or a node first seen past seq 1 is a gap: the node's entries are dropped
// and every batch of that node answers gap until a snapshot (apply_snapshot) resyncs it. The index holds at
// most max_blocks distinct hashes; beyond that the least recently stored or matched block goes, for every
// node that held it. One index serves one chain key (kv_block_seed: a model, a KV layout, a block size);
// batches of another seed are refused. Two indexes fed the same batches in any order that keeps each node's
// seq order (with duplicates, or a snapshot and the batches after it) answer match identically as long as
// neither evicted (eviction follows each router's own match traffic).
// Thread-safety: every method is safe from any thread (one mutex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "baton/base/thread_annotations.h"
#include "baton/pd/kv_events.h"

namespace baton {

// What apply or apply_snapshot did.
enum class prefix_index_outcome : uint8_t {
    applied,     // the batch or snapshot is now part of the index
    stale,       // seq at or before the node's last applied one (a snapshot: before it): ignored, idempotent
    gap,         // a batch was lost (or the node restarted mid-stream, or is new to this router past seq 1):
                 // the node's entries are dropped; fetch its snapshot and apply_snapshot it
    wrong_seed,  // hashes of another chain key than this index's (another model, KV layout or block size): ignored
};

// prefix_index_outcome_name: "applied", "stale", "gap", "wrong_seed" (logs, metrics).
const char * prefix_index_outcome_name(prefix_index_outcome o);

struct prefix_index_stats {
    size_t blocks = 0;        // distinct block hashes held (at most max_blocks)
    size_t nodes = 0;         // nodes with state (applied or awaiting a snapshot)
    uint64_t evictions = 0;   // blocks dropped to stay within max_blocks
    uint64_t gaps = 0;        // times a node fell out of sync (later batches before its snapshot are not counted)
    uint64_t stale = 0;       // batches and snapshots ignored as already applied
    uint64_t wrong_seed = 0;  // batches and snapshots ignored for their seed
};

// What the index holds of one node (the live view).
struct prefix_index_node {
    std::string node;
    size_t blocks = 0;
    bool in_sync = false;
};

class prefix_index {
  public:
    // seed: the chain key every batch and snapshot must carry; max_blocks: distinct hashes held at most
    // (0: none; every store is evicted at once).
    prefix_index(uint64_t seed, size_t max_blocks);

    prefix_index_outcome apply(const kv_event_batch & b) BATON_EXCLUDES(mu_);
    // apply_snapshot replaces everything known about s.node (its epoch, its blocks, its seq: later batches
    // continue from s.seq + 1). Stale when it is of the node's current epoch, the node is in sync, and
    // s.seq < the last applied seq (a late answer to an earlier fetch).
    prefix_index_outcome apply_snapshot(const kv_snapshot & s) BATON_EXCLUDES(mu_);
    // drop_node forgets the node (it left the cluster); its next batch starts it again as a new node.
    void drop_node(const std::string & node) BATON_EXCLUDES(mu_);

    // match returns, for each of nodes, how many leading hashes it holds (counting stops at its first miss;
    // 0 for a node the index does not know). The blocks counted for any node become the most recently used.
    std::vector<size_t> match(std::span<const uint64_t> hashes, const std::vector<std::string> & nodes)
        BATON_EXCLUDES(mu_);

    // needs_snapshot: the node is known and out of sync (its last batch answered gap).
    bool needs_snapshot(const std::string & node) const BATON_EXCLUDES(mu_);
    prefix_index_stats stats() const BATON_EXCLUDES(mu_);
    // nodes: each known node's block count and sync state, by node name.
    std::vector<prefix_index_node> nodes() const BATON_EXCLUDES(mu_);

  private:
    struct node_state {
        std::string epoch;
        uint64_t last_seq = 0;  // the last applied batch (or the snapshot's seq)
        bool in_sync = false;   // false: awaiting a snapshot after a gap
        std::unordered_set<uint64_t> blocks;
    };
    struct block_entry {
        std::vector<node_state *> holders;      // the nodes that hold this block (few: a short vector)
        std::list<uint64_t>::iterator lru_pos;  // its place in lru_
    };

    void store(node_state & n, uint64_t h) BATON_REQUIRES(mu_);
    void remove(node_state & n, uint64_t h) BATON_REQUIRES(mu_);
    void clear(node_state & n) BATON_REQUIRES(mu_);
    void unlink(node_state & n, uint64_t h) BATON_REQUIRES(mu_);
    void touch(block_entry & e) BATON_REQUIRES(mu_);
    void evict_one() BATON_REQUIRES(mu_);

    const uint64_t seed_;
    const size_t max_blocks_;
    mutable mutex mu_;
    // node_state values are stable in memory (unordered_map nodes do not move): block_entry points at them.
    std::unordered_map<std::string, node_state> nodes_ BATON_GUARDED_BY(mu_);
    std::unordered_map<uint64_t, block_entry> blocks_ BATON_GUARDED_BY(mu_);
    std::list<uint64_t> lru_ BATON_GUARDED_BY(mu_);  // most recently used first
    uint64_t evictions_ BATON_GUARDED_BY(mu_) = 0;
    uint64_t gaps_ BATON_GUARDED_BY(mu_) = 0;
    uint64_t stale_ BATON_GUARDED_BY(mu_) = 0;
    uint64_t wrong_seed_ BATON_GUARDED_BY(mu_) = 0;
};

}  // namespace baton
