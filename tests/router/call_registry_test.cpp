// call_registry_test.cpp — the calls in flight to each node: an ejection cancels exactly the calls that node
// holds, on their own strands; a call that ended is never touched; a call blocked on a node that accepted
// the connection and then never answers (a stalled process) ends at once, reporting the ejection.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "baton/http/http_client.h"
#include "call_registry.h"

namespace baton {
namespace {

using steady = std::chrono::steady_clock;

void run(net::io_context & ioc) {
    ioc.restart();
    ioc.run();
}

TEST(CallRegistry, EjectionCancelsThatNodesCallsOnTheirStrands) {
    net::io_context ioc;
    auto strand = net::make_strand(ioc);
    call_registry reg;
    int a = 0, b = 0, c = 0;
    call_guard ga = reg.enter(0, strand, [&] { ++a; });
    call_guard gb = reg.enter(0, strand, [&] { ++b; });
    call_guard gc = reg.enter(1, strand, [&] { ++c; });
    EXPECT_EQ(reg.in_flight(0), 2u);
    EXPECT_EQ(reg.in_flight(1), 1u);
    const Status why(status_code::upstream_error, "http://n0:1 was ejected by the router's health check: no answer");
    EXPECT_EQ(reg.cancel_node(0, why), 2u);
    EXPECT_EQ(a + b, 0) << "the cancel actions run on the calls' strands, not on the ejecting thread";
    EXPECT_TRUE(ga.cancelled());
    EXPECT_TRUE(gb.cancelled());
    EXPECT_FALSE(gc.cancelled());
    EXPECT_EQ(ga.reason().code(), status_code::upstream_error);
    EXPECT_EQ(ga.reason().message(), why.message());
    EXPECT_TRUE(gc.reason().ok());
    const Status socket_error(status_code::upstream_error, "http://n0:1: reading the response: Operation canceled");
    EXPECT_EQ(ga.failure(socket_error).message(), why.message()) << "a cancelled call reports the ejection";
    EXPECT_EQ(gc.failure(socket_error).message(), socket_error.message())
        << "another node's call reports its own error";
    run(ioc);
    EXPECT_EQ(a, 1);
    EXPECT_EQ(b, 1);
    EXPECT_EQ(c, 0);
    EXPECT_EQ(reg.cancel_node(0, why), 0u) << "calls already cancelled are not cancelled again";
    run(ioc);
    EXPECT_EQ(a, 1);
}

TEST(CallRegistry, CallThatEndedBeforeItsCancellationRanIsNeverTouched) {
    net::io_context ioc;
    auto strand = net::make_strand(ioc);
    call_registry reg;
    int fired = 0;
    {
        call_guard g = reg.enter(3, strand, [&] { ++fired; });
        EXPECT_EQ(reg.cancel_node(3, Status(status_code::upstream_error, "ejected")), 1u);
    }  // the call ends (its upstream is gone) while the cancellation is still queued on its strand
    EXPECT_EQ(reg.in_flight(3), 0u);
    run(ioc);
    EXPECT_EQ(fired, 0);
}

TEST(CallRegistry, CallRegisteredAfterAnEjectionIsCancelledByTheNextFailedCheck) {
    net::io_context ioc;
    auto strand = net::make_strand(ioc);
    call_registry reg;
    EXPECT_EQ(reg.cancel_node(0, Status(status_code::upstream_error, "first")), 0u);
    int fired = 0;
    call_guard g = reg.enter(0, strand, [&] { ++fired; });
    EXPECT_FALSE(g.cancelled()) << "an earlier ejection does not reach a later call";
    EXPECT_EQ(reg.cancel_node(0, Status(status_code::upstream_error, "second")), 1u);
    run(ioc);
    EXPECT_EQ(fired, 1);
    EXPECT_EQ(g.reason().message(), "second");
}

TEST(CallRegistry, MovedGuardKeepsTheRegistrationAndUnregistersOnce) {
    net::io_context ioc;
    auto strand = net::make_strand(ioc);
    call_registry reg;
    int fired = 0;
    call_guard outer;
    EXPECT_FALSE(outer.cancelled());
    {
        call_guard g = reg.enter(5, strand, [&] { ++fired; });
        outer = std::move(g);
    }
    EXPECT_EQ(reg.in_flight(5), 1u) << "the moved-from guard's end must not unregister the call";
    call_guard other = reg.enter(5, strand, [&] { fired += 10; });
    other = std::move(outer);  // other's own call ends; it now holds the first one
    EXPECT_EQ(reg.in_flight(5), 1u);
    EXPECT_EQ(reg.cancel_node(5, Status(status_code::upstream_error, "ejected")), 1u);
    run(ioc);
    EXPECT_EQ(fired, 1);
    other = call_guard();
    EXPECT_EQ(reg.in_flight(5), 0u);
}

// A listening socket that nobody accepts from: the kernel completes the handshake and takes the request,
// and no answer ever comes — what a SIGSTOPped node looks like from the router.
TEST(CallRegistry, ReadBlockedOnAStalledNodeEndsAtOnceWhenTheNodeIsEjected) {
    net::io_context ioc;
    tcp::acceptor listener(ioc, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
    auto url = http_url_parse("http://127.0.0.1:" + std::to_string(listener.local_endpoint().port()));
    ASSERT_TRUE(url.ok());
    call_registry reg;
    const Status why(status_code::upstream_error, url->text + " was ejected by the router's health check: no answer");
    std::atomic<bool> done{false};
    Status got;
    bool cancelled = false;
    steady::time_point t_cancel{}, t_end{};
    auto strand = net::make_strand(ioc);
    net::co_spawn(
        strand,
        [&]() -> net::awaitable<void> {
            const auto deadline = steady::now() + std::chrono::seconds(120);  // far beyond the bound below
            auto conn = co_await http_upstream::connect(url.value(), deadline);
            if (!conn.ok()) {
                got = conn.status();
                done = true;
                co_return;
            }
            auto self = co_await net::this_coro::executor;
            call_guard g = reg.enter(7, self, [u = conn.value().get()] { u->close(); });
            Status st = co_await conn.value()->send("GET", "/health", {}, "", "");
            Result<http_response_head> head(st);
            if (st.ok()) head = co_await conn.value()->read_head();
            t_end = steady::now();
            cancelled = g.cancelled();
            got = head.ok() ? Status() : g.failure(head.status());
            done = true;
        },
        net::detached);
    std::thread loop_a([&] { ioc.run(); });
    std::thread loop_b([&] { ioc.run(); });
    // The ejecting thread (the health checker's, in the router) waits until the call is registered.
    const auto until = steady::now() + std::chrono::seconds(30);
    while (reg.in_flight(7) == 0 && !done && steady::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_EQ(reg.in_flight(7), 1u) << got.message();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let the read block
    t_cancel = steady::now();
    EXPECT_EQ(reg.cancel_node(7, why), 1u);
    while (!done && steady::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ioc.stop();
    loop_a.join();
    loop_b.join();
    ASSERT_TRUE(done.load()) << "the read never ended";
    EXPECT_TRUE(cancelled);
    EXPECT_EQ(got.code(), status_code::upstream_error);
    EXPECT_EQ(got.message(), why.message());
    EXPECT_LT(std::chrono::duration<double>(t_end - t_cancel).count(), 10.0)
        << "the call waited for its deadline instead of ending when its node was ejected";
    EXPECT_EQ(reg.in_flight(7), 0u);
}

}  // namespace
}  // namespace baton
