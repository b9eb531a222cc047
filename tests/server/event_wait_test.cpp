// event_wait_test.cpp — the deadline and the client check hold even when events never stop coming.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "server/event_wait.h"

namespace baton::test {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

engine_event token_event() {
    engine_event ev;
    ev.type = engine_event::kind::token;
    ev.text = "x";
    return ev;
}

// Regression (RequestOverTimeoutIs504 failed on a fast CI machine): the deadline was checked only after
// an idle poll, so a stream whose tokens kept arriving ran past --timeout to its natural end.
TEST(EventWait, DeadlineHoldsWhileEventsKeepArriving) {
    request_handle h(1);
    for (int i = 0; i < 100; ++i) h.push(token_event());
    event_wait_limits lim;
    lim.deadline = steady_clock::now() - milliseconds(1);
    lim.timeout_s = 3;
    engine_event ev;
    const Status st = event_wait(h, ev, lim);
    EXPECT_EQ(st.code(), status_code::deadline_exceeded);
    EXPECT_NE(st.message().find("--timeout of 3 s"), std::string::npos) << st.message();
    EXPECT_TRUE(h.cancelled());
}

TEST(EventWait, ClientGoneHoldsWhileEventsKeepArriving) {
    request_handle h(1);
    for (int i = 0; i < 100; ++i) h.push(token_event());
    event_wait_limits lim;
    lim.client_gone = [] { return true; };
    engine_event ev;
    EXPECT_EQ(event_wait(h, ev, lim).code(), status_code::cancelled);
    EXPECT_TRUE(h.cancelled());
}

TEST(EventWait, DeliversQueuedEventsInOrderBeforeTheDeadline) {
    request_handle h(1);
    for (int i = 0; i < 3; ++i) {
        engine_event ev = token_event();
        ev.text = std::to_string(i);
        h.push(ev);
    }
    event_wait_limits lim;
    lim.deadline = steady_clock::now() + std::chrono::seconds(60);
    for (int i = 0; i < 3; ++i) {
        engine_event ev;
        ASSERT_TRUE(event_wait(h, ev, lim).ok());
        EXPECT_EQ(ev.text, std::to_string(i));
    }
    EXPECT_FALSE(h.cancelled());
}

// With no event at all, the wait ends at the deadline itself, not at the next poll interval after it.
TEST(EventWait, IdleWaitEndsAtTheDeadline) {
    request_handle h(1);
    event_wait_limits lim;
    lim.poll = milliseconds(10000);
    const auto t0 = steady_clock::now();
    lim.deadline = t0 + milliseconds(100);
    engine_event ev;
    EXPECT_EQ(event_wait(h, ev, lim).code(), status_code::deadline_exceeded);
    EXPECT_LT(steady_clock::now() - t0, std::chrono::seconds(5));
}

// An event pushed by another thread wakes the waiter.
TEST(EventWait, EventFromAnotherThreadIsDelivered) {
    request_handle h(1);
    std::thread producer([&] {
        std::this_thread::sleep_for(milliseconds(20));
        h.push(token_event());
    });
    event_wait_limits lim;
    lim.deadline = steady_clock::now() + std::chrono::seconds(60);
    engine_event ev;
    EXPECT_TRUE(event_wait(h, ev, lim).ok());
    EXPECT_EQ(ev.text, "x");
    producer.join();
}

}  // namespace
}  // namespace baton::test
