// body_relay_test.cpp — a blob passed on while it arrives: order, waiting, replay, and every way it fails.
#include <gtest/gtest.h>

#include <thread>

#include "router/body_relay.h"

namespace baton {
namespace {

using namespace std::chrono_literals;
using clk = std::chrono::steady_clock;

// read_all reads the relay from offset 0 to its end the way an upload does; false if a read failed.
bool read_all(body_relay & r, std::string & out, size_t piece = 7) {
    out.clear();
    while (out.size() < r.length()) {
        const auto res = r.read(out.size(), piece, clk::now() + 5s, [&](const uint8_t * p, size_t n) {
            out.append(reinterpret_cast<const char *>(p), n);
            return true;
        });
        if (res != body_relay::read_result::data) return false;
    }
    return true;
}

TEST(BodyRelay, ReaderGetsBytesInOrderWhileTheyArriveAndCanReplay) {
    const std::string body = "0123456789abcdefghijklmnopqrstuvwxyz";
    body_relay r(body.size());
    std::thread producer([&] {
        for (size_t i = 0; i < body.size(); i += 5) {
            r.append(body.data() + i, std::min<size_t>(5, body.size() - i));
            std::this_thread::sleep_for(1ms);
        }
        r.finish({});
    });
    std::string got;
    EXPECT_TRUE(read_all(r, got));
    producer.join();
    EXPECT_EQ(got, body);
    EXPECT_TRUE(r.wait_end(clk::now() + 1s).ok());
    EXPECT_FALSE(r.failed());
    std::string again;
    EXPECT_TRUE(read_all(r, again, 100)) << "a second decode node gets the same body from the start";
    EXPECT_EQ(again, body);
}

TEST(BodyRelay, NothingYetIsWaitingNotFailure) {
    body_relay r(10);
    const auto res = r.read(0, 10, clk::now() + 20ms, [](const uint8_t *, size_t) { return true; });
    EXPECT_EQ(res, body_relay::read_result::waiting);
    EXPECT_EQ(r.wait_end(clk::now() + 20ms).code(), status_code::deadline_exceeded);
}

TEST(BodyRelay, ShortBodyFailsEveryReader) {
    body_relay r(10);
    r.append("abc", 3);
    r.finish({});  // the producer says done, but 7 bytes are missing
    EXPECT_TRUE(r.failed());
    std::string got;
    EXPECT_FALSE(read_all(r, got));
    const Status st = r.wait_end(clk::now() + 1s);
    EXPECT_EQ(st.code(), status_code::upstream_error);
    EXPECT_NE(st.message().find("3 of 10"), std::string::npos) << st.message();
}

TEST(BodyRelay, LongBodyFails) {
    body_relay r(4);
    r.append("abcdef", 6);
    EXPECT_TRUE(r.failed());
    EXPECT_NE(r.wait_end(clk::now() + 1s).message().find("longer than its Content-Length"), std::string::npos);
}

TEST(BodyRelay, ProducerErrorReachesAWaitingReader) {
    body_relay r(100);
    r.append("abc", 3);
    std::thread producer([&] {
        std::this_thread::sleep_for(10ms);
        r.finish(Status(status_code::upstream_error, "prefill node went away"));
    });
    std::string got;
    EXPECT_FALSE(read_all(r, got, 100));
    producer.join();
    EXPECT_EQ(got, "abc");
    EXPECT_EQ(r.wait_end(clk::now() + 1s).message(), "prefill node went away");
}

TEST(BodyRelay, ConsumerRefusalIsAFailedRead) {
    body_relay r(3);
    r.append("abc", 3);
    r.finish({});
    EXPECT_EQ(r.read(0, 3, clk::now() + 1s, [](const uint8_t *, size_t) { return false; }), body_relay::read_result::failed);
}

}  // namespace
}  // namespace baton
