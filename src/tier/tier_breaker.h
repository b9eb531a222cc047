// tier_breaker.h — the tier's circuit breaker: a pure state machine over the outcomes of calls and the time
// the caller passes in (so tests drive it with a fake clock).
//
//   closed    calls go to Valkey; failures_to_open consecutive failures open it (a success resets the count)
//   open      calls fail fast (the caller answers unavailable without touching the network) until cooldown
//             has passed since it opened
//   half_open after the cooldown, exactly one call (the probe) goes through; its success closes the breaker,
//             its failure opens it again for another cooldown. Other calls fail fast while the probe runs.
// A failure is what says Valkey is unreachable or broken (unavailable, deadline_exceeded, upstream_error,
// permission_denied); a miss, a corrupt entry or an OOM refusal is a working server's answer: a success.
// Thread-safety: none; tier_store holds it under its mutex.
#pragma once

#include <chrono>
#include <cstdint>

namespace baton {

struct tier_breaker_config {
    uint32_t failures_to_open = 5;  // consecutive failures; >= 1
    uint32_t cooldown_ms = 5000;    // open -> half_open
};

enum class tier_breaker_state { tier_breaker_state_closed, tier_breaker_state_open, tier_breaker_state_half_open };

class tier_breaker {
  public:
    using time_point = std::chrono::steady_clock::time_point;

    explicit tier_breaker(tier_breaker_config config) : config_(config) {}

    // allow: may a call go to the network at now? Moves open -> half_open when the cooldown has passed (the
    // call allowed then is the probe). REQUIRES: every allowed call ends in record_success or record_failure.
    bool allow(time_point now) {
        switch (state_) {
            case tier_breaker_state::tier_breaker_state_closed: return true;
            case tier_breaker_state::tier_breaker_state_open:
                if (now - opened_at_ < std::chrono::milliseconds(config_.cooldown_ms)) return false;
                state_ = tier_breaker_state::tier_breaker_state_half_open;
                return true;
            case tier_breaker_state::tier_breaker_state_half_open: return false;  // the probe is in flight
        }
        return false;
    }
    void record_success() {
        state_ = tier_breaker_state::tier_breaker_state_closed;
        failures_ = 0;
    }
    // record_failure returns true when this failure opened the breaker (counted as a breaker open).
    bool record_failure(time_point now) {
        if (state_ == tier_breaker_state::tier_breaker_state_half_open ||
            (state_ == tier_breaker_state::tier_breaker_state_closed && ++failures_ >= config_.failures_to_open)) {
            state_ = tier_breaker_state::tier_breaker_state_open;
            opened_at_ = now;
            failures_ = 0;
            return true;
        }
        return false;  // already open: a call allowed before it opened, ending late
    }
    tier_breaker_state state() const { return state_; }

  private:
    tier_breaker_config config_;
    tier_breaker_state state_ = tier_breaker_state::tier_breaker_state_closed;
    uint32_t failures_ = 0;  // consecutive, while closed
    time_point opened_at_{};
};

}  // namespace baton
