// kv_publisher.h — what this node's KV caches hold, published as KV events (docs/kv-events.md) for routers
// to index: each second the node hands it the slots' tokens (engine slot_info::tokens); it hashes them into
// chained blocks (kv_blocks.h), diffs the set the node holds against the last one, and appends one batch of
// stored/removed events, numbered, to a bounded log. A router reads the batches after the last one it
// applied (GET /v1/kv/events?after=N) and, when it fell behind the log or the node restarted (a new epoch),
// the snapshot (GET /v1/kv/snapshot). When the node writes an entry to the shared tier (tier_link), it
// appends a batch with one tier_stored event, and its snapshots list the entries it wrote until they expire.
// Thread-safety: every member is safe from any thread (one mutex).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "baton/base/thread_annotations.h"
#include "baton/pd/kv_events.h"
#include "baton/text.h"

namespace baton {

struct kv_publisher_config {
    std::string node;            // the node's name in its events (informational: routers key by the URL they poll)
    std::string epoch;           // random per process start
    uint64_t seed = 0;           // kv_block_seed of the node's model and KV layout
    uint32_t block_tokens = 64;  // tokens per block
    size_t log_batches = 256;    // batches kept for readers that fall behind; older: the snapshot
};

class kv_publisher {
  public:
    using tokens_ptr = std::shared_ptr<const std::vector<token_id>>;

    explicit kv_publisher(kv_publisher_config c) : cfg_(std::move(c)) {}

    // observe takes the slots' tokens now (index = slot id); appends one batch when what the node holds
    // changed. An unchanged slot (the same pointer) costs nothing.
    void observe(const std::vector<tokens_ptr> & slots);
    // batches_after returns the batches with seq > after, oldest first (empty: nothing new); nullopt when
    // some of them already left the log or `after` is ahead of this node (another epoch): read the snapshot.
    std::optional<std::vector<kv_event_batch>> batches_after(uint64_t after) const;
    // tier_stored: the node wrote a tier entry for the prefix that ends with `block`, kept for ttl_ms.
    void tier_stored(uint64_t block, uint64_t ttl_ms);
    kv_snapshot snapshot() const;
    uint64_t seq() const;  // the last batch's number (0: none yet)
    const kv_publisher_config & config() const { return cfg_; }

  private:
    const kv_publisher_config cfg_;
    mutable mutex mu_;
    void append(std::vector<kv_event> events) BATON_REQUIRES(mu_);
    std::vector<tokens_ptr> last_ BATON_GUARDED_BY(mu_);                    // per slot, what observe saw
    std::vector<std::vector<uint64_t>> slot_blocks_ BATON_GUARDED_BY(mu_);  // per slot, its block hashes
    std::unordered_map<uint64_t, uint32_t> held_ BATON_GUARDED_BY(mu_);     // block -> slots holding it
    std::deque<kv_event_batch> log_ BATON_GUARDED_BY(mu_);
    // Tier entries written, by block: expiry (at most tier_max_, the soonest to expire dropped first).
    static constexpr size_t tier_max_ = 65536;
    std::unordered_map<uint64_t, std::chrono::steady_clock::time_point> tier_ BATON_GUARDED_BY(mu_);
    uint64_t seq_ BATON_GUARDED_BY(mu_) = 0;
};

}  // namespace baton
