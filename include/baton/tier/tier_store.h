// tier_store.h — a shared prefix-cache tier on Valkey: opaque entries (later, Baton state blobs) stored under
// keys that name what they hold, never keys a caller spells (docs/tier.md).
//
// An entry key is {model fingerprint, KV layout, state version, chain hash of the token blocks}; it becomes
// "baton:v1:<fingerprint>:<layout>:<version>:<chain hash, 16 hex>". put cuts the entry into parts of at most
// part_bytes, writes them (each under its index and XXH3-64) and then the manifest, last, so a reader never
// sees half an entry. get reads the manifest, then every part in one pipeline, and checks each part's size
// and XXH3-64 and the whole entry's XXH3-128: what it returns is exactly what was put.
//
// What get and put answer:
//   get -> an entry          every part present and matching (counted as a hit)
//   get -> nullopt           no manifest, or a part missing (expired, evicted, flushed): a miss; a manifest that
//                            does not parse or a part whose size or checksum does not match: a corrupt miss.
//                            Never data that was not put.
//   unavailable              Valkey cannot be reached, or the circuit breaker is open (no network call made)
//   deadline_exceeded        a wait for Valkey took longer than command_timeout_ms (also counted as a timeout)
//   permission_denied        AUTH refused, or the ACL user may not touch baton:* keys
//   resource_exhausted       put only: Valkey is full (maxmemory under noeviction); the parts written are deleted
//                            and the manifest is never written, so a later get is a miss
//   invalid_argument         a malformed entry key, a TTL of 0; too_large: an entry over entry_bytes_max
//   upstream_error           an error reply or a reply of an unexpected shape
// After failures_to_open consecutive failures (unavailable, deadline_exceeded, permission_denied,
// upstream_error) the breaker opens for cooldown_ms: calls fail fast with unavailable, then one probe goes
// through (src/tier/tier_breaker.h).
//
// Thread-safety: put, get and counters may be called from any number of threads at once. Each call takes a
// connection from a pool (a new one when none is idle; at most connections_idle_max are kept), so calls run in
// parallel; the pool and the breaker are guarded by one mutex, held only to take and give back.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "baton/base/status.h"
#include "baton/tier/valkey_client.h"

namespace baton {

// tier_entry_key: what an entry holds. Its fields become the Valkey key, so they are checked, not escaped.
struct tier_entry_key {
    std::string fingerprint;     // the model's fingerprint: 1..64 lowercase hex digits (identity_fingerprint_hex)
    std::string layout;          // the KV layout: 1..128 characters of [A-Za-z0-9._=,+-] ("f16.f16.fa0.u1")
    uint32_t state_version = 0;  // the state format's version (a blob version, say)
    uint64_t chain_hash = 0;     // the chained hash of the token blocks the entry holds (kv_block_hashes' last)
};

// tier_entry_key_name: the Valkey key of an entry: invalid_argument naming the field when one is malformed.
Result<std::string> tier_entry_key_name(const tier_entry_key & key);

struct tier_config {
    valkey_config valkey;
    uint64_t part_bytes = uint64_t(4) << 20;       // the largest part; 1 .. 512 MiB
    uint64_t entry_bytes_max = uint64_t(1) << 30;  // put refuses more (too_large), get treats more as corrupt
    uint32_t breaker_failures_to_open = 5;         // >= 1
    uint32_t breaker_cooldown_ms = 5000;
    uint32_t connections_idle_max = 4;  // idle connections kept for the next calls
};

// tier_counters: a snapshot (every field counts since the store was made).
struct tier_counters {
    uint64_t hits = 0;           // gets that returned an entry
    uint64_t misses = 0;         // gets that found no manifest or a part missing
    uint64_t corrupt = 0;        // gets that found a manifest or a part that did not check out (a miss too)
    uint64_t errors = 0;         // puts and gets that failed (breaker fast-fails and OOM refusals included)
    uint64_t timeouts = 0;       // of errors: deadline_exceeded
    uint64_t breaker_opens = 0;  // times the breaker opened
    uint64_t bytes_read = 0;     // entry bytes returned by hits
    uint64_t bytes_written = 0;  // entry bytes of completed puts
    uint64_t puts = 0;           // completed puts (manifest written)
};

struct tier_test_seam;

class tier_store {
  public:
    // create checks config (invalid_argument naming the field); it connects to nothing yet.
    static Result<std::unique_ptr<tier_store>> create(tier_config config);
    ~tier_store();
    tier_store(const tier_store &) = delete;
    tier_store & operator=(const tier_store &) = delete;

    // put stores bytes under key for ttl_ms milliseconds (> 0). Parts live 1 s longer than the manifest, so
    // a manifest never outlives the parts it names because of the order they were written in.
    Status put(const tier_entry_key & key, std::span<const uint8_t> bytes, uint64_t ttl_ms);
    // get returns the entry stored under key, or nullopt on a miss (see above). The buffer comes from
    // buffer_pool::shared(); callers may give it back there when done.
    Result<std::optional<std::vector<uint8_t>>> get(const tier_entry_key & key);

    tier_counters counters() const;

    struct state;  // opaque: src/tier/tier_store_state.h

  private:
    friend struct tier_test_access;
    explicit tier_store(std::unique_ptr<state> s);
    std::unique_ptr<state> s_;
};

}  // namespace baton
