// kv_events.h — the KV-event wire format: what a node's KV cache stored and dropped, as block hashes
// (kv_blocks.h), in numbered batches, and a snapshot of everything it holds for resync.
//
// A node publishes kv_event_batch values in order: seq 1, 2, 3, ... within one epoch (a random id drawn at
// process start, so a restarted node is a new stream). A router that applies them in order knows which
// blocks the node holds; a router that sees a gap in seq (or joins late, or restarts) fetches a kv_snapshot
// and continues with the batch after its seq. The index that does so is the router's prefix_index.
// JSON on the wire (hashes and the seed as 16 lowercase hex digits); docs/kv-events.md tables every field,
// the limits and the error each refusal returns. The decoders are total: any input returns a value or a
// Status, never throws and never asserts.
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "baton/base/status.h"

namespace baton {

// The format's version ("version" field of batches and snapshots). Encoders write it; decoders read it and
// version 1 (which has no tier_stored events and no snapshot "tier") and refuse any other (unsupported).
inline constexpr uint32_t kv_events_version = 2;
inline constexpr uint32_t kv_events_version_min = 1;

// The node stored these blocks, in chain order. parent: the hash of the block before blocks[0] (none: blocks[0]
// is the sequence's first block). The index does not need it (a hash names its prefix); it is there for
// consumers that rebuild the tree.
struct kv_event_stored {
    std::optional<uint64_t> parent;
    std::vector<uint64_t> blocks;
    bool operator==(const kv_event_stored &) const = default;
};

// The node dropped these blocks from its cache.
struct kv_event_removed {
    std::vector<uint64_t> blocks;
    bool operator==(const kv_event_removed &) const = default;
};

// The node dropped every block (its cache was cleared).
struct kv_event_cleared {
    bool operator==(const kv_event_cleared &) const = default;
};

// Version 2: the node wrote entries to the shared tier (docs/tier.md) holding the prefixes these blocks end
// (each hash names its whole prefix: the tier's entry key), kept there for ttl_ms from now at most (Valkey may
// evict them sooner). Not a block the node holds: a router keeps these apart, for every node of the chain key.
struct kv_event_tier_stored {
    std::vector<uint64_t> blocks;
    uint64_t ttl_ms = 0;
    bool operator==(const kv_event_tier_stored &) const = default;
};

using kv_event = std::variant<kv_event_stored, kv_event_removed, kv_event_cleared, kv_event_tier_stored>;

// A tier entry in a snapshot: the block hash its prefix ends with and how long it has left (ms).
struct kv_tier_entry {
    uint64_t block = 0;
    uint64_t ttl_ms = 0;
    bool operator==(const kv_tier_entry &) const = default;
};

// One numbered batch of a node's events, applied in order.
struct kv_event_batch {
    uint32_t version = kv_events_version;
    std::string node;   // the node's id (as the cluster names it)
    std::string epoch;  // random per node process start: a restarted node is a new stream
    uint64_t seed = 0;  // the chain key (kv_block_seed) the hashes were computed with
    uint64_t seq = 0;   // this batch's number: 1, 2, 3, ... per node and epoch
    std::vector<kv_event> events;
    bool operator==(const kv_event_batch &) const = default;
};

// Every block a node holds, as of the batch numbered seq (0: before the first batch of the epoch).
struct kv_snapshot {
    uint32_t version = kv_events_version;
    std::string node;
    std::string epoch;
    uint64_t seed = 0;
    uint64_t seq = 0;              // the last batch this snapshot includes
    std::vector<uint64_t> blocks;  // every block hash held, in no particular order
    std::vector<kv_tier_entry> tier;  // version 2: tier entries the node wrote that have not expired
    bool operator==(const kv_snapshot &) const = default;
};

// What a decoder accepts (over any of them: too_large naming the field and both numbers).
struct kv_event_limits {
    size_t max_text_bytes = size_t(32) << 20;      // the JSON text, checked before it is parsed
    size_t max_events = 1024;                      // events in one batch
    size_t max_event_blocks = 16384;               // blocks in one stored or removed event
    size_t max_snapshot_blocks = size_t(1) << 20;  // blocks in one snapshot
    size_t max_id_bytes = 128;                     // bytes of node and of epoch
};

// The largest seq the format carries: 2^53 - 1, so every JSON reader holds it exactly.
inline constexpr uint64_t kv_events_seq_max = (uint64_t(1) << 53) - 1;
// The longest ttl_ms of a tier entry: 30 days (--tier-ttl's cap).
inline constexpr uint64_t kv_events_tier_ttl_ms_max = uint64_t(30) * 24 * 3600 * 1000;

// kv_event_batch_encode / kv_snapshot_encode write compact JSON, fields in the documented order. They do not
// validate: a value that breaks the rules (an empty node, seq 0 in a batch) encodes to text the decoder
// refuses.
std::string kv_event_batch_encode(const kv_event_batch & b);
std::string kv_snapshot_encode(const kv_snapshot & s);

// kv_event_batch_decode / kv_snapshot_decode parse totally: a version other than 1 or 2 is unsupported; over a
// limit is too_large; anything else that is not exactly the documented form (bad JSON, a missing or unknown
// field, a wrong type, a value out of range, a hash not of 16 lowercase hex digits, an unknown event type) is
// corrupt naming the field.
Result<kv_event_batch> kv_event_batch_decode(std::string_view text, const kv_event_limits & limits = {});
Result<kv_snapshot> kv_snapshot_decode(std::string_view text, const kv_event_limits & limits = {});

// kv_hash_hex renders a hash as the 16 lowercase hex digits of the wire format.
std::string kv_hash_hex(uint64_t h);

}  // namespace baton
