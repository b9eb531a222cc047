// event_wait_test.cpp — the deadline and the client check hold even when events never stop coming, and
// an event pushed by the engine's thread wakes the waiting coroutine (no thread waits for it).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "event_wait.h"

namespace baton::test {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

engine_event token_event() {
    event_token ev;
    ev.text = "x";
    return ev;
}

// wait_once runs one event_wait on a fresh event loop and returns its status (ev receives the event).
Status wait_once(const request_ptr & h, engine_event & ev, const event_wait_limits & lim) {
    net::io_context ioc;
    Status out(status_code::internal, "not run");
    net::co_spawn(
        ioc,
        [&]() -> net::awaitable<void> {
            event_watch w(h, co_await net::this_coro::executor);
            out = co_await event_wait(w, ev, lim);
        },
        net::detached);
    ioc.run();
    return out;
}

// Regression (RequestOverTimeoutIs504 failed on a fast CI machine): the deadline was checked only after
// an idle poll, so a stream whose tokens kept arriving ran past --timeout to its natural end.
TEST(EventWait, DeadlineHoldsWhileEventsKeepArriving) {
    auto h = std::make_shared<request_handle>(1);
    for (int i = 0; i < 100; ++i) h->push(token_event());
    event_wait_limits lim;
    lim.deadline = steady_clock::now() - milliseconds(1);
    lim.timeout_s = 3;
    engine_event ev;
    const Status st = wait_once(h, ev, lim);
    EXPECT_EQ(st.code(), status_code::deadline_exceeded);
    EXPECT_NE(st.message().find("--timeout of 3 s"), std::string::npos) << st.message();
    EXPECT_TRUE(h->cancelled());
}

TEST(EventWait, ClientGoneHoldsWhileEventsKeepArriving) {
    auto h = std::make_shared<request_handle>(1);
    for (int i = 0; i < 100; ++i) h->push(token_event());
    event_wait_limits lim;
    lim.client_gone = [] { return true; };
    engine_event ev;
    EXPECT_EQ(wait_once(h, ev, lim).code(), status_code::cancelled);
    EXPECT_TRUE(h->cancelled());
}

TEST(EventWait, DeliversQueuedEventsInOrderBeforeTheDeadline) {
    auto h = std::make_shared<request_handle>(1);
    for (int i = 0; i < 3; ++i) {
        event_token ev;
        ev.text = std::to_string(i);
        h->push(std::move(ev));
    }
    event_wait_limits lim;
    lim.deadline = steady_clock::now() + std::chrono::seconds(60);
    for (int i = 0; i < 3; ++i) {
        engine_event ev;
        ASSERT_TRUE(wait_once(h, ev, lim).ok());
        EXPECT_EQ(std::get<event_token>(ev).text, std::to_string(i));
    }
    EXPECT_FALSE(h->cancelled());
}

// With no event at all, the wait ends at the deadline itself.
TEST(EventWait, IdleWaitEndsAtTheDeadline) {
    auto h = std::make_shared<request_handle>(1);
    event_wait_limits lim;
    const auto t0 = steady_clock::now();
    lim.deadline = t0 + milliseconds(100);
    engine_event ev;
    EXPECT_EQ(wait_once(h, ev, lim).code(), status_code::deadline_exceeded);
    EXPECT_GE(steady_clock::now() - t0, milliseconds(100));
    EXPECT_LT(steady_clock::now() - t0, std::chrono::seconds(5));
}

// An event pushed by another thread (the scheduler's) wakes the waiting coroutine through its notifier.
TEST(EventWait, EventFromAnotherThreadWakesTheCoroutine) {
    auto h = std::make_shared<request_handle>(1);
    std::thread producer([&] {
        std::this_thread::sleep_for(milliseconds(20));
        h->push(token_event());
    });
    event_wait_limits lim;
    lim.deadline = steady_clock::now() + std::chrono::seconds(60);
    engine_event ev;
    const auto t0 = steady_clock::now();
    EXPECT_TRUE(wait_once(h, ev, lim).ok());
    EXPECT_EQ(std::get<event_token>(ev).text, "x");
    EXPECT_LT(steady_clock::now() - t0, std::chrono::seconds(30));
    producer.join();
}

// The watch removes its notify callback: an event after the request ended wakes nobody.
TEST(EventWait, WatchUnregistersOnDestruction) {
    auto h = std::make_shared<request_handle>(1);
    {
        net::io_context ioc;
        event_watch w(h, ioc.get_executor());
    }
    h->push(token_event());  // must not touch the destroyed event loop
    engine_event ev;
    EXPECT_TRUE(h->try_next(ev));
}

}  // namespace
}  // namespace baton::test
