// body_relay_test.cpp — a blob passed on while it arrives: order, waking the reader, replay, and every way
// it fails. Producer and reader are coroutines on one strand, as in the router.
#include <gtest/gtest.h>

#include <string>

#include "body_relay.h"

namespace baton {
namespace {

using namespace std::chrono_literals;
using clk = std::chrono::steady_clock;

void put(body_relay & r, const std::string & s) {
    ASSERT_LE(s.size(), r.room());
    std::copy(s.begin(), s.end(), r.tail());
    r.commit(s.size());
}

std::string contents(const body_relay & r) { return std::string(reinterpret_cast<const char *>(r.data()), size_t(r.size())); }

TEST(BodyRelay, ReaderIsWokenForEveryPieceAndReadsInOrderThenReplays) {
    const std::string body = "0123456789abcdefghijklmnopqrstuvwxyz";
    net::io_context ioc;
    auto relay = std::make_shared<body_relay>(body.size());
    std::string got, replay;
    int wakeups = 0;
    net::co_spawn(ioc, [&]() -> net::awaitable<void> {
        auto n = async_notify::make(co_await net::this_coro::executor);
        relay->set_reader(n);
        uint64_t off = 0;
        while (off < relay->length()) {
            if (relay->size() > off) {
                got.append(reinterpret_cast<const char *>(relay->data()) + off, size_t(relay->size() - off));
                off = relay->size();
                continue;
            }
            EXPECT_TRUE(co_await n->wait_until(clk::now() + 5s));
            ++wakeups;
        }
        replay = contents(*relay);  // a retry reads from the start again
    }, net::detached);
    net::co_spawn(ioc, [&]() -> net::awaitable<void> {
        net::steady_timer t(co_await net::this_coro::executor);
        for (size_t i = 0; i < body.size(); i += 7) {
            t.expires_after(1ms);
            co_await t.async_wait(net::use_awaitable);
            put(*relay, body.substr(i, 7));
        }
        relay->finish(Status());
    }, net::detached);
    ioc.run();
    EXPECT_EQ(got, body);
    EXPECT_EQ(replay, body);
    EXPECT_GE(wakeups, 1);
    EXPECT_TRUE(relay->ended());
    EXPECT_FALSE(relay->failed());
}

TEST(BodyRelay, ShortBodyFailsTheRelay) {
    body_relay r(10);
    put(r, "12345");
    r.finish(Status());
    EXPECT_TRUE(r.failed());
    EXPECT_EQ(r.status().code(), status_code::upstream_error);
    EXPECT_NE(r.status().message().find("5 of 10 bytes"), std::string::npos) << r.status().message();
}

TEST(BodyRelay, ProducerErrorIsKept) {
    body_relay r(10);
    r.finish(Status(status_code::deadline_exceeded, "late"));
    EXPECT_TRUE(r.failed());
    EXPECT_EQ(r.status().code(), status_code::deadline_exceeded);
}

TEST(BodyRelay, NeverTakesMoreThanItsLength) {
    body_relay r(4);
    EXPECT_EQ(r.room(), 4u);
    r.commit(100);  // a producer bug must not run past the buffer
    EXPECT_EQ(r.size(), 4u);
    EXPECT_EQ(r.room(), 0u);
    r.finish(Status());
    EXPECT_FALSE(r.failed());
}

TEST(BodyRelay, NothingAfterTheEnd) {
    body_relay r(4);
    r.finish(Status(status_code::upstream_error, "cut"));
    r.commit(4);
    EXPECT_EQ(r.size(), 0u);
    r.finish(Status());
    EXPECT_TRUE(r.failed());
}

}  // namespace
}  // namespace baton
