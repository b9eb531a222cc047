// capacity_gate_test.cpp — the router's queue: bounded, woken in arrival order, wake-ups never lost.
#include <gtest/gtest.h>

#include "capacity_gate.h"

namespace baton {
namespace {

// pending: whether w has a notification waiting (consumed by checking).
bool pending(net::io_context & ioc, const notify_ptr & w) {
    bool got = false;
    net::co_spawn(ioc, [&]() -> net::awaitable<void> { got = co_await w->wait_until(std::chrono::steady_clock::now()); }, net::detached);
    ioc.restart();
    ioc.run();
    return got;
}

TEST(CapacityGate, BoundedAndWokenInArrivalOrder) {
    net::io_context ioc;
    capacity_gate g(2);
    auto a = g.enter(ioc.get_executor());
    auto b = g.enter(ioc.get_executor());
    ASSERT_TRUE(a && b);
    EXPECT_EQ(g.enter(ioc.get_executor()), nullptr) << "over --queue-max: refused at once";
    EXPECT_EQ(g.waiting(), 2u);
    g.wake_one();
    EXPECT_TRUE(pending(ioc, a));
    EXPECT_FALSE(pending(ioc, b));
    EXPECT_EQ(g.waiting(), 1u);
}

TEST(CapacityGate, WokenWaiterThatLeavesPassesTheWakeUpOn) {
    net::io_context ioc;
    capacity_gate g(8);
    auto a = g.enter(ioc.get_executor());
    auto b = g.enter(ioc.get_executor());
    g.wake_one();          // a is woken (and out of the queue)...
    g.leave(a, true);      // ...but leaves (deadline, client gone) without taking the room
    EXPECT_TRUE(pending(ioc, b)) << "the room freed for a must go to the next waiter";
}

TEST(CapacityGate, RequeuedWaiterKeepsItsPlaceAndWakeAllWakesEveryone) {
    net::io_context ioc;
    capacity_gate g(8);
    auto a = g.enter(ioc.get_executor());
    auto b = g.enter(ioc.get_executor());
    g.wake_one();
    g.requeue(a);  // a found no room after all: back to the front
    g.wake_one();
    EXPECT_TRUE(pending(ioc, a));
    EXPECT_FALSE(pending(ioc, b));
    g.wake_all();
    EXPECT_TRUE(pending(ioc, b));
    EXPECT_EQ(g.waiting(), 0u);
}

}  // namespace
}  // namespace baton
