// serve_load_test.cpp — concurrency and lifecycle: 32 clients on mixed endpoints (no errors, memory flat),
// and SIGTERM while a stream is open (the stream ends, the node exits 0).
#include <atomic>
#include <mutex>
#include <thread>

#include "serve_test_util.h"

namespace baton::test {
namespace {

// one_request runs request number i of a client on a mixed set of endpoints; returns an error text or "".
std::string one_request(const node_process & n, int client, int i) {
    const std::string prompt = "Client " + std::to_string(client) + " asks question " + std::to_string(i % 3);
    const json completion = {{"prompt", prompt}, {"max_tokens", 8}, {"temperature", 0.7}, {"seed", client}};
    const json chat = {
        {"messages", json::array({{{"role", "user"}, {"content", prompt}}})}, {"max_tokens", 8}, {"stream", true}};
    http_reply r;
    switch ((client + i) % 6) {
        case 0: r = post(n, "/v1/completions", completion.dump()); break;
        case 1: r = post(n, "/v1/chat/completions", chat.dump()); break;
        case 2: {
            json p = completion;
            r = post(n, "/v1/prefill", p.dump());
            if (r.status == 200) r = post(n, "/v1/decode", r.body, "application/octet-stream");
            break;
        }
        case 3: r = get(n, "/v1/slots"); break;
        case 4: r = get(n, "/metrics"); break;
        default: {
            json s = completion;
            s["stream"] = true;
            r = post(n, "/v1/completions", s.dump());
            if (r.status == 200 && r.body.find("data: [DONE]") == std::string::npos) return "stream without [DONE]";
        }
    }
    if (r.status != 200) return "status " + std::to_string(r.status) + ": " + r.body.substr(0, 200);
    return "";
}

// run_clients runs n_clients threads of n_requests each; returns the errors seen.
std::vector<std::string> run_clients(const node_process & n, int n_clients, int n_requests) {
    std::mutex mu;
    std::vector<std::string> errors;
    std::vector<std::thread> threads;
    for (int c = 0; c < n_clients; ++c)
        threads.emplace_back([&, c] {
            for (int i = 0; i < n_requests; ++i) {
                std::string e = one_request(n, c, i);
                if (e.empty()) continue;
                std::lock_guard<std::mutex> lk(mu);
                errors.push_back(e);
            }
        });
    for (auto & t : threads) t.join();
    return errors;
}

TEST(ServeLoad, ThirtyTwoClientsMixedEndpointsNoErrorsMemoryFlat) {
    auto n = node_process::start(serve_args("llama", {"-np", "4", "--queue-max", "64"}));
    auto errors = run_clients(*n, 32, 2);  // warm-up: buffers, thread pool, allocator arenas
    ASSERT_TRUE(errors.empty()) << errors.size() << " errors, first: " << errors[0];
    const long rss_warm = n->rss_kb();
    ASSERT_GT(rss_warm, 0);
    const auto t0 = std::chrono::steady_clock::now();
    errors = run_clients(*n, 32, 12);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_TRUE(errors.empty()) << errors.size() << " errors, first: " << errors[0];
    const long rss_end = n->rss_kb();
    if (!k_sanitized) {
        EXPECT_LE(rss_end, rss_warm + std::max(64L * 1024, rss_warm / 4))
            << "RSS grew from " << rss_warm << " kB to " << rss_end << " kB";
    }
    EXPECT_EQ(get(*n, "/health").status, 200);
    // A handler releases its slot and its admission a moment after its response's last byte went out, so
    // the client may read /metrics first: wait (bounded) for the node to settle, then require zero.
    std::string m;
    const auto settle_until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    do {
        m = get(*n, "/metrics").body;
        if (metric_value(m, "baton_slots{state=\"busy\"}") == 0 && metric_value(m, "baton_requests_in_flight") == 0)
            break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    } while (std::chrono::steady_clock::now() < settle_until);
    EXPECT_EQ(metric_value(m, "baton_slots{state=\"busy\"}"), 0) << m;
    EXPECT_EQ(metric_value(m, "baton_requests_in_flight"), 0) << m;
    std::printf("32 clients x 12 mixed requests: %.1f s, RSS %ld -> %ld kB\n", seconds, rss_warm, rss_end);
    EXPECT_EQ(n->terminate(), 0) << n->stderr_text();
}

TEST(ServeLoad, SigtermWhileStreamingEndsTheStreamAndExitsZero) {
    auto n = node_process::start(serve_args("llama", {"-np", "2"}));
    held_stream s(*n, long_stream_body());
    ASSERT_TRUE(s.wait_for("data: ")) << s.received();
    EXPECT_EQ(n->terminate(30), 0) << n->stderr_text();
    ASSERT_TRUE(s.wait_end(10));
    const std::string body = s.received();
    EXPECT_NE(body.find("data: [DONE]"), std::string::npos) << body.substr(body.size() > 300 ? body.size() - 300 : 0);
}

TEST(ServeLoad, SigtermWhenIdleExitsZero) {
    auto n = node_process::start(serve_args("llama"));
    EXPECT_EQ(post(*n, "/v1/completions", R"({"prompt":"hi","max_tokens":2})").status, 200);
    EXPECT_EQ(n->terminate(30), 0) << n->stderr_text();
}

}  // namespace
}  // namespace baton::test
