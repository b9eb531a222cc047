// tier_store_state.h — what a tier_store holds: its config, the pool of idle connections and the breaker
// (under one mutex), the counters (atomics) and the test seam (null in production). Private to the tier
// module; tier_store.cpp and the test seam library make it.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "baton/base/thread_annotations.h"
#include "baton/tier/tier_store.h"
#include "tier_breaker.h"

namespace baton {

struct tier_test_seam;

struct tier_store::state {
    explicit state(tier_config c)
        : config(std::move(c)), breaker({config.breaker_failures_to_open, config.breaker_cooldown_ms}) {}

    const tier_config config;
    std::shared_ptr<const tier_test_seam> seam;  // null in production

    mutex mu;
    std::vector<std::unique_ptr<valkey_client>> idle BATON_GUARDED_BY(mu);
    tier_breaker breaker BATON_GUARDED_BY(mu);

    std::atomic<uint64_t> hits{0}, misses{0}, corrupt{0}, errors{0}, timeouts{0}, breaker_opens{0}, bytes_read{0},
        bytes_written{0}, puts{0};
};

// tier_store_state_make checks config (invalid_argument naming the field) and makes a store's state.
Result<std::unique_ptr<tier_store::state>> tier_store_state_make(tier_config config);

}  // namespace baton
