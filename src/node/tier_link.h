// tier_link.h — a node's side of the shared prefix-cache tier (docs/tier.md, "A node and the tier"): which
// states go to Valkey and under which key, and which state a prompt fetches from it.
//
// Writes (off the request path): the engine offers states (engine_config::state_kept: those its host prompt
// cache keeps, and the state a slot holds when a generation ends); offer queues them (at most queue_max; beyond,
// the state is dropped and counted) and one writer thread stores each under the key of its whole blocks —
// tier_entry_key {the model's fingerprint, the KV layout, the state blob's format version, the chain hash of
// its first floor(n / block_tokens) blocks of tokens (kv_blocks.h)} — skipping a key it wrote less than ttl/2
// ago. A state of fewer than one block is not stored. With a state key the entry is the state re-written with
// its MAC (blob_write), so nodes that require authenticated states accept it.
// Reads: fetch probes the keys of the prompt's block prefixes, longest first (never the prompt's last token),
// down to the blocks the node already holds, at most probe_max of them; the first entry found is returned as
// bytes, to be parsed (validated_blob::parse) and checked by the caller like any state from outside. A tier
// error (unreachable, slow, the breaker open) ends the probing: the caller computes the prompt.
// Thread-safety: every member may be called from any thread.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "baton/base/thread_annotations.h"
#include "baton/engine.h"
#include "baton/tier/tier_store.h"

namespace baton {

struct tier_link_config {
    tier_config store;
    std::string fingerprint;  // identity_fingerprint_hex of the model
    std::string layout;       // the KV layout's name in keys ("f16.f16.nofa.unified")
    uint64_t block_seed = 0;  // kv_block_seed of the model, the layout and block_tokens
    uint32_t block_tokens = 64;
    uint64_t ttl_ms = 3600000;  // of every entry written
    size_t queue_max = 64;      // states waiting for the writer
    uint32_t probe_max = 64;    // keys fetch tries per prompt
    // The node's state key (--state-secret-file): entries are written with its MAC, so a node that requires
    // authenticated states verifies them like any other (null: written without one).
    blob_key_ptr key;
    // Called on the writer thread after each entry written (the chain hash its key ends with, its TTL): the
    // node's KV events tell routers (kv_publisher::tier_stored). Must not block.
    std::function<void(uint64_t block, uint64_t ttl_ms)> on_written;
};

struct tier_link_counters {
    uint64_t offered = 0, written = 0, write_errors = 0, dropped = 0, skipped = 0;
    uint64_t fetches = 0, fetch_hits = 0, fetch_errors = 0;
    tier_counters store;
    // The last call's outcome (a put or a get): /health's "tier" (a failing tier is slow, never wrong: the node
    // stays healthy and computes what it misses).
    bool last_ok = true;
    std::string last_error;  // the last failure's message, "" when none yet
};

class tier_link {
  public:
    static Result<std::unique_ptr<tier_link>> create(tier_link_config c);
    ~tier_link();  // stops the writer; states still queued are dropped
    tier_link(const tier_link &) = delete;
    tier_link & operator=(const tier_link &) = delete;

    void offer(const blob_ptr & b);
    // fetch: the bytes of the entry holding the longest block prefix of prompt past `held` tokens, or nullopt.
    std::optional<std::vector<uint8_t>> fetch(const std::vector<token_id> & prompt, size_t held);
    tier_link_counters counters() const;

  private:
    explicit tier_link(tier_link_config c, std::unique_ptr<tier_store> s);
    void write_loop();
    tier_entry_key key_of(uint64_t chain_hash) const;

    const tier_link_config cfg_;
    const std::unique_ptr<tier_store> store_;
    mutable mutex mu_;
    condition_variable cv_;
    std::deque<blob_ptr> queue_ BATON_GUARDED_BY(mu_);
    std::unordered_map<uint64_t, std::chrono::steady_clock::time_point> written_ BATON_GUARDED_BY(mu_);
    tier_link_counters n_ BATON_GUARDED_BY(mu_);
    bool stopping_ BATON_GUARDED_BY(mu_) = false;
    std::thread writer_;
};

}  // namespace baton
