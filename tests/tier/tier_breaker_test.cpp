// tier_breaker_test.cpp — the tier's circuit breaker driven by a fake clock: closed, open, half-open.
#include <gtest/gtest.h>

#include "tier_breaker.h"

namespace baton {
namespace {

using ms = std::chrono::milliseconds;
constexpr auto k_closed = tier_breaker_state::tier_breaker_state_closed;
constexpr auto k_open = tier_breaker_state::tier_breaker_state_open;
constexpr auto k_half_open = tier_breaker_state::tier_breaker_state_half_open;

struct fake_clock {
    tier_breaker::time_point t{};
    tier_breaker::time_point operator()() const { return t; }
    void advance(ms d) { t += d; }
};

TEST(TierBreaker, ASuccessResetsTheFailureCount) {
    tier_breaker b({3, 1000});
    fake_clock clock;
    for (int round = 0; round < 5; ++round) {
        ASSERT_TRUE(b.allow(clock()));
        EXPECT_FALSE(b.record_failure(clock()));
        ASSERT_TRUE(b.allow(clock()));
        EXPECT_FALSE(b.record_failure(clock()));
        ASSERT_TRUE(b.allow(clock()));
        b.record_success();
    }
    EXPECT_EQ(b.state(), k_closed);
}

TEST(TierBreaker, OpensAfterConsecutiveFailuresAndFailsFastUntilTheCooldown) {
    tier_breaker b({3, 1000});
    fake_clock clock;
    EXPECT_FALSE(b.record_failure(clock()));
    EXPECT_FALSE(b.record_failure(clock()));
    EXPECT_TRUE(b.record_failure(clock())) << "the third consecutive failure opens it";
    EXPECT_EQ(b.state(), k_open);
    EXPECT_FALSE(b.allow(clock()));
    clock.advance(ms(999));
    EXPECT_FALSE(b.allow(clock())) << "still within the cooldown";
    EXPECT_EQ(b.state(), k_open);
}

TEST(TierBreaker, HalfOpenLetsOneProbeThroughAndItsSuccessCloses) {
    tier_breaker b({1, 1000});
    fake_clock clock;
    EXPECT_TRUE(b.record_failure(clock()));
    clock.advance(ms(1000));
    EXPECT_TRUE(b.allow(clock())) << "the probe";
    EXPECT_EQ(b.state(), k_half_open);
    EXPECT_FALSE(b.allow(clock())) << "a second call while the probe runs fails fast";
    b.record_success();
    EXPECT_EQ(b.state(), k_closed);
    EXPECT_TRUE(b.allow(clock()));
}

TEST(TierBreaker, AFailedProbeOpensItAgainForAWholeCooldown) {
    tier_breaker b({2, 1000});
    fake_clock clock;
    b.record_failure(clock());
    EXPECT_TRUE(b.record_failure(clock()));
    clock.advance(ms(1500));
    ASSERT_TRUE(b.allow(clock()));
    EXPECT_TRUE(b.record_failure(clock())) << "one failed probe reopens it (no count of failures_to_open)";
    EXPECT_EQ(b.state(), k_open);
    clock.advance(ms(999));
    EXPECT_FALSE(b.allow(clock()));
    clock.advance(ms(1));
    EXPECT_TRUE(b.allow(clock()));
}

TEST(TierBreaker, ALateFailureOfACallAllowedBeforeItOpenedDoesNotReopen) {
    tier_breaker b({1, 1000});
    fake_clock clock;
    ASSERT_TRUE(b.allow(clock()));
    ASSERT_TRUE(b.allow(clock()));
    EXPECT_TRUE(b.record_failure(clock()));
    clock.advance(ms(500));
    EXPECT_FALSE(b.record_failure(clock())) << "already open: not a second opening";
    clock.advance(ms(500));
    EXPECT_TRUE(b.allow(clock())) << "the cooldown counts from the first opening";
}

}  // namespace
}  // namespace baton
