// state_hold.h — the states a prefill node made for a decode node to fetch (direct transfer, docs/router.md).
//
// With direct transfer a prefill node does not send the blob back to the router: it keeps it here under a
// lease and answers with the state's id; the decode node the router picks fetches it with GET
// /v1/states/{id} (pd_protocol.h) and the router releases it (DELETE) when the request no longer needs it. A
// lease that nobody releases ends after its TTL (a router that died, a request that fell back), so no
// state is stranded; the bytes and the count held are bounded (a prefill that would exceed them is
// refused as busy: the router tries another prefill node). Fetching does not end a lease: a decode node
// that fails before its first token leaves the state in place for the next decode node.
// Thread-safety: every member is safe from any thread (one mutex; a fetched blob is shared, read-only, and
// outlives its lease while a send still reads it).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "baton/base/status.h"
#include "baton/base/thread_annotations.h"
#include "held_stream.h"

namespace baton {

struct state_hold_limits {
    uint64_t max_bytes = uint64_t(2) << 30;  // --state-hold-mb: the bytes all held states may take
    uint32_t max_states = 64;                // held at once
    std::chrono::milliseconds ttl{30000};    // --state-lease-ms: a lease's length
};

// Counters for /metrics (baton_state_hold_*).
struct state_hold_stats {
    uint64_t held = 0, held_bytes = 0;        // now
    uint64_t put = 0, refused = 0;            // leases started; prefills refused for want of room
    uint64_t fetched = 0, fetched_bytes = 0;  // GETs served (a state may be fetched more than once)
    uint64_t released = 0, expired = 0;       // leases ended by DELETE; by their TTL
};

class state_hold {
  public:
    using clock = std::chrono::steady_clock;
    using blob_ref = std::shared_ptr<const std::vector<uint8_t>>;

    explicit state_hold(state_hold_limits limits) : limits_(limits) {}

    // put holds blob under a new lease from now; returns its id (32 lowercase hex digits, random), or
    // unavailable when the state would exceed max_bytes or max_states (after expiring what is due), or
    // too_large when it alone exceeds max_bytes.
    Result<std::string> put(std::vector<uint8_t> blob, clock::time_point now);
    // put_stream holds a state that is still being made (streamed transfer, held_stream.h) under a new lease;
    // unavailable when max_states are held. Its bytes do not count against max_bytes (they grow as the prompt
    // computes; the prefill node's admission bounds how many prompts compute at once), and its TTL runs only
    // once the stream is closed.
    Result<std::string> put_stream(std::shared_ptr<held_stream> stream, clock::time_point now);
    // get returns the state while its lease runs (not_found otherwise: unknown, released or expired, or a
    // stream's: get_stream).
    Result<blob_ref> get(std::string_view id, clock::time_point now);
    // get_stream returns a held stream while its lease runs (not_found otherwise, or for a whole state's).
    Result<std::shared_ptr<held_stream>> get_stream(std::string_view id, clock::time_point now);
    // count_served adds the bytes a fetch of a stream sent (a whole state's are counted by get).
    void count_served(uint64_t bytes);
    // release ends a lease (a stream still being made is abandoned: held_stream::abandon); false when there was none.
    bool release(std::string_view id);
    // expire ends every lease whose TTL passed; returns how many. The node calls it every second.
    size_t expire(clock::time_point now);
    state_hold_stats stats() const;
    const state_hold_limits & limits() const { return limits_; }

    // random_id: 32 random lowercase hex digits (a state's id; the node's KV-event epoch takes 16 of them).
    static std::string random_id();

  private:
    struct lease {
        blob_ref blob;                        // a whole state, or
        std::shared_ptr<held_stream> stream;  // one still being made
        clock::time_point expires;
        uint64_t size() const { return blob ? blob->size() : 0; }
    };
    size_t expire_locked(clock::time_point now) BATON_REQUIRES(mu_);

    const state_hold_limits limits_;
    mutable mutex mu_;
    std::map<std::string, lease, std::less<>> leases_ BATON_GUARDED_BY(mu_);
    state_hold_stats stats_ BATON_GUARDED_BY(mu_);
};

}  // namespace baton
