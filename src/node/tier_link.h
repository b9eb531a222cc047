// tier_link.h — a node's side of the shared prefix-cache tier (docs/tier.md, "A node and the tier"): which
// states go to Valkey and under which key, and which state a prompt fetches from it.
//
// Writes (off the request path): the engine offers states (engine_config::state_kept: those its host prompt
// cache keeps, and the state a slot holds when a generation ends); offer queues them (at most queue_max; beyond,
// the state is dropped and counted) and one writer thread stores each under the key of the whole blocks of
// its first key_tokens tokens (the prompt, for a finished generation) — tier_entry_key {the model's
// fingerprint, the KV layout, the state blob's format version, the chain hash of its first
// floor(key_tokens / block_tokens) blocks of tokens (kv_blocks.h)} — skipping a key it wrote less than ttl/2
// ago. A state of fewer than one block is not stored. With a state key the entry is the state re-written with
// its MAC (blob_write), so nodes that require authenticated states accept it.
// Deltas: when this node wrote, less than ttl/2 ago, an entry for a shorter prefix of the state (a
// conversation's previous turn), the state is stored as a delta over it (make_delta: the cells past that
// prefix, every other part whole) if that is under delta_ratio_max of the whole; a chain of deltas is at most
// delta_depth_max entries long (then a whole state again).
// Reads: fetch probes the keys of the prompt's block prefixes, longest first (never the prompt's last token),
// down to the blocks the node already holds, at most probe_max of them. An entry found that is a delta over
// more than the node holds brings its base's entry too (by the base's key), and so on down the chain until a
// whole state or a delta over what the node holds; a broken chain (a link evicted or expired) goes on probing
// shorter keys. Each entry is parsed, once, by the caller's parser (validated_blob::parse: like any state from
// outside) as it arrives; the chain is returned base first. The node then needs only the entries past what it
// holds. A tier error (unreachable, slow, the breaker open) or an entry that does not parse ends the probing:
// the caller computes the prompt.
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
    // The delta of a whole state over its first n_base tokens, as blob bytes (engine::delta_of, with the state
    // key's MAC). Unset: every entry is a whole state.
    std::function<Result<std::vector<uint8_t>>(const blob_view & full, uint32_t n_base)> make_delta;
    uint32_t delta_depth_max = 4;  // entries on a chain of deltas, the whole state at its base included
    double delta_ratio_max = 0.9;  // a delta is stored only when smaller than this share of the whole state
};

struct tier_link_counters {
    uint64_t offered = 0, written = 0, write_errors = 0, dropped = 0, skipped = 0;
    uint64_t deltas_written = 0, delta_bytes_saved = 0;  // entries written as deltas, and the bytes that saved
    uint64_t fetches = 0, fetch_hits = 0, fetch_errors = 0;
    uint64_t chain_links = 0, broken_chains = 0;  // base entries fetched for a delta; chains with a link missing
    tier_counters store;
    // The last call's outcome (a put or a get): /health's "tier" (a failing tier is slow, never wrong: the node
    // stays healthy and computes what it misses).
    bool last_ok = true;
    std::string last_error;  // the last failure's message, "" when none yet
};

class tier_link {
  public:
    static Result<std::unique_ptr<tier_link>> create(tier_link_config c);
    ~tier_link();  // stop()
    // stop: the writer ends (after the entry it is writing); states queued or offered later are dropped.
    // Idempotent.
    void stop();
    tier_link(const tier_link &) = delete;
    tier_link & operator=(const tier_link &) = delete;

    // offer: b is to be stored under the key of the whole blocks of its first key_tokens tokens
    // (engine_config::state_kept).
    void offer(const blob_ptr & b, size_t key_tokens);
    // fetch: the entries that give the longest block prefix of prompt past `held` tokens — one whole state, or
    // a chain of deltas base first down to one over at most `held` tokens — each parsed by parse, or nullopt.
    using blob_parser = std::function<Result<blob_ptr>(std::vector<uint8_t>)>;
    std::optional<std::vector<blob_ptr>> fetch(const std::vector<token_id> & prompt, size_t held,
                                               const blob_parser & parse);
    tier_link_counters counters() const;

  private:
    explicit tier_link(tier_link_config c, std::unique_ptr<tier_store> s);
    void write_loop();
    tier_entry_key key_of(uint64_t chain_hash) const;

    const tier_link_config cfg_;
    const std::unique_ptr<tier_store> store_;
    mutable mutex mu_;
    condition_variable cv_;
    std::deque<std::pair<blob_ptr, size_t>> queue_ BATON_GUARDED_BY(mu_);
    struct written_entry {
        std::chrono::steady_clock::time_point at;
        uint32_t depth = 0;  // 0: a whole state; n: a delta over an entry of depth n - 1
    };
    std::unordered_map<uint64_t, written_entry> written_ BATON_GUARDED_BY(mu_);
    tier_link_counters n_ BATON_GUARDED_BY(mu_);
    bool stopping_ BATON_GUARDED_BY(mu_) = false;
    std::thread writer_;
};

}  // namespace baton
