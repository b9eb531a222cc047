// state_hold_test.cpp — leases on held states (src/node/state_hold.h): ids, TTL, release, the bounds, and a
// fetched state that outlives its lease while a send still reads it. Time is passed in, never slept.
#include "state_hold.h"

#include <gtest/gtest.h>

#include <set>

#include "baton/pd/pd_protocol.h"

namespace baton {
namespace {

using namespace std::chrono_literals;
using clk = state_hold::clock;

std::vector<uint8_t> bytes(size_t n, uint8_t v = 7) { return std::vector<uint8_t>(n, v); }

state_hold_limits limits(uint64_t max_bytes = 1000, uint32_t max_states = 4, std::chrono::milliseconds ttl = 1000ms) {
    state_hold_limits l;
    l.max_bytes = max_bytes;
    l.max_states = max_states;
    l.ttl = ttl;
    return l;
}

TEST(StateHold, PutGivesAValidUniqueIdAndGetReturnsTheBytes) {
    state_hold h(limits(1 << 20, 64));
    const auto t = clk::now();
    std::set<std::string> ids;
    for (int i = 0; i < 50; ++i) {
        auto id = h.put(bytes(10, uint8_t(i)), t);
        ASSERT_TRUE(id.ok()) << id.status().message();
        EXPECT_TRUE(pd_state_id_valid(id.value())) << id.value();
        ids.insert(id.value());
        auto b = h.get(id.value(), t);
        ASSERT_TRUE(b.ok());
        EXPECT_EQ(*b.value(), bytes(10, uint8_t(i)));
    }
    EXPECT_EQ(ids.size(), 50u);
    const state_hold_stats s = h.stats();
    EXPECT_EQ(s.held, 50u);
    EXPECT_EQ(s.held_bytes, 500u);
    EXPECT_EQ(s.fetched, 50u);
}

TEST(StateHold, IdValidityIsTheFormPutReturns) {
    EXPECT_TRUE(pd_state_id_valid(std::string(32, 'a')));
    EXPECT_FALSE(pd_state_id_valid(std::string(31, 'a')));
    EXPECT_FALSE(pd_state_id_valid(std::string(33, 'a')));
    EXPECT_FALSE(pd_state_id_valid(std::string(32, 'A')));
    EXPECT_FALSE(pd_state_id_valid(std::string(31, 'a') + "/"));
    EXPECT_FALSE(pd_state_id_valid(""));
}

TEST(StateHold, FetchingDoesNotEndTheLease) {
    state_hold h(limits());
    const auto t = clk::now();
    auto id = h.put(bytes(10), t).value();
    EXPECT_TRUE(h.get(id, t).ok());
    EXPECT_TRUE(h.get(id, t + 500ms).ok());  // a second decode node after the first failed
    EXPECT_EQ(h.stats().held, 1u);
}

TEST(StateHold, ALeaseEndsAtItsTtl) {
    state_hold h(limits(1000, 4, 1000ms));
    const auto t = clk::now();
    auto id = h.put(bytes(100), t).value();
    EXPECT_TRUE(h.get(id, t + 999ms).ok());
    auto gone = h.get(id, t + 1000ms);
    ASSERT_FALSE(gone.ok());
    EXPECT_EQ(gone.status().code(), status_code::not_found);
    EXPECT_EQ(h.expire(t + 1000ms), 1u);
    const state_hold_stats s = h.stats();
    EXPECT_EQ(s.held, 0u);
    EXPECT_EQ(s.held_bytes, 0u);
    EXPECT_EQ(s.expired, 1u);
}

TEST(StateHold, ReleaseEndsTheLeaseOnce) {
    state_hold h(limits());
    const auto t = clk::now();
    auto id = h.put(bytes(100), t).value();
    EXPECT_TRUE(h.release(id));
    EXPECT_FALSE(h.release(id));
    EXPECT_FALSE(h.get(id, t).ok());
    EXPECT_FALSE(h.release(std::string(32, '0')));
    const state_hold_stats s = h.stats();
    EXPECT_EQ(s.released, 1u);
    EXPECT_EQ(s.held_bytes, 0u);
}

TEST(StateHold, BytesAndCountAreBoundedAndExpiryMakesRoom) {
    state_hold h(limits(250, 2, 1000ms));
    const auto t = clk::now();
    ASSERT_TRUE(h.put(bytes(100), t).ok());
    ASSERT_TRUE(h.put(bytes(100), t).ok());
    auto third = h.put(bytes(10), t);  // over the count
    ASSERT_FALSE(third.ok());
    EXPECT_EQ(third.status().code(), status_code::unavailable);
    EXPECT_TRUE(h.put(bytes(10), t + 1000ms).ok());  // the first two expired on the way in
    auto big = h.put(bytes(251), t + 1000ms);        // alone over the bytes
    ASSERT_FALSE(big.ok());
    EXPECT_EQ(big.status().code(), status_code::too_large);
    auto over = h.put(bytes(241), t + 1000ms);  // 10 + 241 > 250
    ASSERT_FALSE(over.ok());
    EXPECT_EQ(over.status().code(), status_code::unavailable);
    EXPECT_EQ(h.stats().refused, 3u);
}

TEST(StateHold, AFetchedStateOutlivesItsLeaseWhileItIsRead) {
    state_hold h(limits());
    const auto t = clk::now();
    auto id = h.put(bytes(100, 9), t).value();
    auto reading = h.get(id, t).value();
    EXPECT_TRUE(h.release(id));
    EXPECT_EQ(*reading, bytes(100, 9));  // still whole: the send that holds it finishes
}

// A held stream (streamed transfer): its lease runs only once the stream has closed; a fetch reads every frame from
// the first; releasing or expiring it before its end abandons it (the hook that cancels the prompt runs once),
// while a stream that ended normally is not abandoned by its release.
TEST(StateHold, AStreamIsHeldWhileOpenAndAbandonedWhenItsLeaseEndsFirst) {
    state_hold h(limits(1000, 4, 1000ms));
    const auto t = clk::now();
    auto open = std::make_shared<held_stream>();
    int cancelled = 0;
    open->set_on_abandon([&] { ++cancelled; });
    open->append(bytes(3, 1));
    auto id = h.put_stream(open, t);
    ASSERT_TRUE(id.ok()) << id.status().message();
    EXPECT_FALSE(h.get(id.value(), t).ok()) << "a stream is not a whole state";
    // Open: its TTL does not run.
    h.expire(t + 5s);
    auto s = h.get_stream(id.value(), t + 5s);
    ASSERT_TRUE(s.ok());
    open->append(bytes(4, 2));
    std::vector<held_stream::frame> frames;
    EXPECT_FALSE(s.value()->frames_from(0, frames));
    ASSERT_EQ(frames.size(), 2u);
    EXPECT_EQ(*frames[1], bytes(4, 2));
    EXPECT_TRUE(h.release(id.value()));
    EXPECT_EQ(cancelled, 1);
    EXPECT_TRUE(open->closed());
    open->append(bytes(1));  // nothing is added after the end
    frames.clear();
    EXPECT_TRUE(open->frames_from(0, frames));
    EXPECT_EQ(frames.size(), 2u);

    auto whole = std::make_shared<held_stream>();
    int never = 0;
    whole->set_on_abandon([&] { ++never; });
    auto id2 = h.put_stream(whole, t);
    ASSERT_TRUE(id2.ok());
    whole->close();
    EXPECT_TRUE(h.release(id2.value()));
    EXPECT_EQ(never, 0) << "a stream that ended is not abandoned";

    auto expiring = std::make_shared<held_stream>();
    auto id3 = h.put_stream(expiring, t);
    ASSERT_TRUE(id3.ok());
    int expired = 0;
    expiring->set_on_abandon([&] { ++expired; });
    EXPECT_EQ(h.expire(t + 10s), 0u) << "open: its lease is extended";
    expiring->close();
    EXPECT_EQ(h.expire(t + 12s), 1u) << "closed: its TTL ran out";
    EXPECT_EQ(expired, 0);
}

}  // namespace
}  // namespace baton
