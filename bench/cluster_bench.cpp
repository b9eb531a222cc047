// cluster_bench.cpp — figure 10: a cluster that changes under traffic (docs/cluster.md).
//
// A real etcd (tests/support/etcd_process.h), `baton serve` nodes registered with --etcd --advertise
// --lease-ttl 2 --drain 10 (tests/support/member_process.h: a port chosen before the start, restartable on
// the same port), and `baton route --etcd` with no static node list, all on loopback and sharing the cores.
// Measured side by side in one run:
//   (a) join: a new decode node's key appears in etcd (polled every 1 ms) -> the first response of a request
//       the router sent to it (X-Baton-Decode-Node), while two clients send short PD requests back to back;
//   (b) leave: kill -9 of that node -> the router's baton_router_nodes{role="decode"} drops (polled every
//       10 ms), and -> its key is gone from etcd (lease expiry);
//   (c) rolling restarts of the 2-node decode pool under 4 closed-loop streaming clients (text prompts of
//       random words, so prefix affinity spreads them): each node in turn gets SIGTERM (drains, exits 0), is
//       started again on the same port and is waited for until it is registered, back in the router's pool
//       and generating for it again (10 rounds of the whole pool, back to back); request latency P50/P99 and
//       failed requests during the restarts vs the same clients in steady state just before.
//       Target: 0 failed requests.
// The router's pool count is of usable members: its health checks usually eject a killed node before the
// lease expires, so (b)'s two figures differ. --quick: a 128x2 model, 24-word prompts, 8 tokens, 2
// join/leave runs, 2 rounds, 4 s of steady state (full: 256x4, 32 words, 16 tokens, 5 runs, 10 rounds, 15 s).
#include <atomic>
#include <mutex>
#include <sstream>

#include "../tests/support/etcd_process.h"
#include "../tests/support/member_process.h"
#include "bench_net.h"

using namespace baton;
using namespace baton::bench;
using baton::test::etcd_process;
using baton::test::member_options;
using baton::test::member_process;

namespace {

constexpr int k_ttl = 2;

double router_decode_nodes(const member_process & r) {
    auto res = r.client(5)->Get("/metrics");
    return res && res->status == 200 ? metric_sum(res->body, "baton_router_nodes", "role=\"decode\"") : -1;
}

double generated_tokens(const member_process & n) {
    auto res = n.client(5)->Get("/metrics");
    return res && res->status == 200 ? metric_sum(res->body, "baton_generated_tokens_total", "") : -1;
}

template <class F>
bool poll_until(double timeout_s, int every_ms, F pred) {
    const double end = now_ms() + timeout_s * 1000;
    for (;;) {
        if (pred()) return true;
        if (now_ms() > end) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(every_ms));
    }
}

struct cluster {
    std::unique_ptr<etcd_process> etcd;
    std::string name, model;
    int n_ctx = 4096, slots = 4;

    std::string prefix() const { return "/baton/" + name + "/nodes/"; }
    std::unique_ptr<member_process> node(const std::string & role) const {
        member_options o;
        o.argv = {baton_exe(),   "serve",
                  "-m",          model,
                  "--role",      role,
                  "-t",          "1",
                  "-np",         std::to_string(slots),
                  "-c",          std::to_string(n_ctx),
                  "--etcd",      etcd->url(),
                  "--cluster",   name,
                  "--lease-ttl", std::to_string(k_ttl),
                  "--drain",     "10",
                  "--queue-max", "256"};
        o.advertise = true;
        return member_process::start(o);
    }
    std::unique_ptr<member_process> router() const {
        member_options o;
        o.argv = {baton_exe(),       "route", "--etcd",    etcd->url(), "--cluster", name,
                  "--pd-min-tokens", "1",     "--timeout", "60",        "-m",        model};
        o.port = 0;
        o.wait_health = false;
        return member_process::start(o);
    }
    bool registered(const member_process & n) const {
        const std::string tail = "/127.0.0.1:" + std::to_string(n.port());
        for (const auto & k : etcd->keys(prefix(), 2))
            if (k.size() >= tail.size() && k.compare(k.size() - tail.size(), tail.size(), tail) == 0) return true;
        return false;
    }
};

// short_request: a non-streaming PD completion of 2 tokens; returns X-Baton-Decode-Node ("" on failure).
std::string short_request(const member_process & r, int i) {
    nlohmann::json b = {{"prompt", "join probe " + std::to_string(i) + " of the cluster benchmark"},
                        {"max_tokens", 2},
                        {"temperature", 0}};
    auto res = r.client(30)->Post("/v1/completions", b.dump(), "application/json");
    return res && res->status == 200 ? res->get_header_value("X-Baton-Decode-Node") : "";
}

// random_text: n seeded pseudo-words of 4 letters (distinct from the first word on, so prefix affinity
// spreads the requests over the decode nodes).
std::string random_text(size_t n, uint32_t seed) {
    std::mt19937 rng{seed};
    std::string s;
    for (size_t w = 0; w < n; ++w) {
        if (!s.empty()) s += ' ';
        for (int k = 0; k < 4; ++k) s += char('a' + rng() % 26);
    }
    return s;
}

struct timed_request {
    double t_send = 0, total_ms = 0, ttft_ms = 0;
    bool ok = false;
    std::string error;
};

}  // namespace

int main(int argc, char ** argv) try {
    const bool quick = quick_mode(argc, argv);
    const int runs = quick ? 2 : 5, rounds = quick ? 2 : 10;  // join/leave runs; rolling restarts of the whole pool
    const double steady_s = quick ? 4 : 15;
    const int n_words = quick ? 24 : 32, n_gen = quick ? 8 : 16, clients = 4;
    cluster c;
    c.model =
        quick ? bench_model("llama", 128, 2) : bench_model("llama", 256, 4);  // membership, not compute, is measured
    c.etcd = etcd_process::start();
    c.name = "bench-" + std::to_string(::getpid());
    auto pre = c.node("prefill");
    auto d1 = c.node("decode");
    auto route = c.router();
    if (!poll_until(20, 20, [&] { return router_decode_nodes(*route) == 1; }))
        throw std::runtime_error("the router never saw the first decode node; router stderr: " + route->stderr_text());

    // (a) join and (b) leave, run by run with the same second decode node.
    std::vector<double> join_ms, leave_router_ms, leave_etcd_ms;
    for (int run = 0; run < runs; ++run) {
        std::atomic<bool> stop{false};
        std::atomic<double> t_reg{0}, t_first{0};
        std::atomic<int> seq{run * 100000};
        std::string d2_url;  // set before any sender reads it (under mu)
        std::mutex mu;
        std::thread poller([&] {
            while (!stop && t_reg == 0) {
                if (c.etcd->keys(c.prefix() + "decode/", 1).size() >= 2) t_reg = now_ms();
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
            }
        });
        std::vector<std::thread> senders;
        for (int s = 0; s < 2; ++s)
            senders.emplace_back([&] {
                while (!stop && t_first == 0) {
                    const std::string node = short_request(*route, seq++);
                    const double at = now_ms();
                    std::lock_guard<std::mutex> lk(mu);
                    if (!d2_url.empty() && node == d2_url && t_first == 0) t_first = at;
                }
            });
        std::unique_ptr<member_process> d2;
        try {
            d2 = c.node("decode");
        } catch (...) {
            stop = true;
            poller.join();
            for (auto & t : senders) t.join();
            throw;
        }
        {
            std::lock_guard<std::mutex> lk(mu);
            d2_url = d2->url();
        }
        const bool joined = poll_until(20, 5, [&] { return t_first != 0 && t_reg != 0; });
        stop = true;
        poller.join();
        for (auto & t : senders) t.join();
        if (!joined)
            throw std::runtime_error("run " + std::to_string(run) +
                                     ": no request reached the new decode node within 20 s");
        join_ms.push_back(t_first - t_reg);

        // (b): no traffic; the node is in the router's pool (it just served a request).
        if (!poll_until(10, 10, [&] { return router_decode_nodes(*route) == 2; }))
            throw std::runtime_error("router pool never reached 2");
        d2->signal(SIGKILL);
        const double t_kill = now_ms();
        double t_router = 0, t_etcd = 0;
        poll_until(k_ttl + 15, 10, [&] {
            if (t_router == 0 && router_decode_nodes(*route) == 1) t_router = now_ms();
            if (t_etcd == 0 && !c.registered(*d2)) t_etcd = now_ms();
            return t_router != 0 && t_etcd != 0;
        });
        d2->kill();  // reap
        if (t_router == 0 || t_etcd == 0)
            throw std::runtime_error("run " + std::to_string(run) + ": the killed node never left");
        leave_router_ms.push_back(t_router - t_kill);
        leave_etcd_ms.push_back(t_etcd - t_kill);
    }

    // (c) rolling restart vs steady state.
    std::vector<std::unique_ptr<member_process>> pool;
    pool.push_back(std::move(d1));
    pool.push_back(c.node("decode"));
    if (!poll_until(20, 20, [&] { return router_decode_nodes(*route) == 2; }))
        throw std::runtime_error("the pool never reached 2 nodes");
    {
        auto w =
            stream_completion(route->host(), route->port(), {1}, 4, 60, {{"prompt", random_text(size_t(n_words), 7)}});
        if (!w.ok) throw std::runtime_error("warm-up: " + w.error);
    }
    std::mutex mu;
    std::vector<timed_request> done;
    std::atomic<bool> stop{false};
    std::vector<std::thread> ts;
    for (int k = 0; k < clients; ++k)
        ts.emplace_back([&, k] {
            for (uint32_t i = 0; !stop; ++i) {
                // A text prompt: the router's prefix affinity hashes prompt text (a token-array prompt has none, so
                // every such request would go to the same decode node).
                const nlohmann::json text = {{"prompt", random_text(size_t(n_words), uint32_t(k) * 1000003u + i)}};
                auto t = stream_completion(route->host(), route->port(), {1}, n_gen, 60, text);
                timed_request r{t.t_send, t.total_ms, t.ttft_ms, t.ok && t.completion_tokens == n_gen,
                                t.ok ? "" : t.error};
                if (t.ok && t.completion_tokens != n_gen) r.error = "short completion";
                std::lock_guard<std::mutex> lk(mu);
                done.push_back(r);
            }
        });
    const double t_steady = now_ms();
    std::this_thread::sleep_for(std::chrono::duration<double>(steady_s));  // the steady-state window itself
    const double t_roll = now_ms();
    std::vector<int> exit_codes;
    std::string roll_error;
    for (int round = 0; round < rounds && roll_error.empty(); ++round)
        for (auto & n : pool) {
            exit_codes.push_back(n->terminate(30));
            try {
                n->restart();
            } catch (const std::exception & e) {
                roll_error = e.what();
                break;
            }
            // Back for real: registered, and the router sends it work again (the fresh process generated tokens).
            if (!poll_until(20, 10, [&] {
                    return c.registered(*n) && router_decode_nodes(*route) == 2 && generated_tokens(*n) > 0;
                })) {
                auto m = route->client(5)->Get("/metrics");
                roll_error = "the restarted node " + n->url() +
                             " never rejoined the router's pool (registered: " + std::to_string(c.registered(*n)) +
                             ", router decode nodes: " + std::to_string(router_decode_nodes(*route)) +
                             ", its generated tokens: " + std::to_string(generated_tokens(*n)) + ")\nrouter stderr:\n" +
                             route->stderr_text() + "\nrouter metrics:\n" + (m ? m->body : "") + "\nnode stderr:\n" +
                             n->stderr_text();
                break;
            }
        }
    const double t_roll_end = now_ms();
    stop = true;
    for (auto & t : ts) t.join();
    if (!roll_error.empty()) throw std::runtime_error("rolling restart: " + roll_error);

    struct phase {
        std::vector<double> total, ttft;
        int failed = 0, n = 0;
        std::string first_error;
    } steady, rolling;
    for (const auto & r : done) {
        phase * p = r.t_send >= t_steady && r.t_send < t_roll     ? &steady
                    : r.t_send >= t_roll && r.t_send < t_roll_end ? &rolling
                                                                  : nullptr;
        if (!p) continue;
        ++p->n;
        if (!r.ok) {
            if (p->failed++ == 0) p->first_error = r.error;
            continue;
        }
        p->total.push_back(r.total_ms);
        p->ttft.push_back(r.ttft_ms);
    }
    bool drained_ok = true;
    for (int code : exit_codes) drained_ok = drained_ok && code == 0;

    const stats sj = summarize(join_ms), slr = summarize(leave_router_ms), sle = summarize(leave_etcd_ms);
    std::printf("cluster: lease TTL %d s, %d join/leave runs, %d clients x %d-word prompts, %d generated\n", k_ttl,
                runs, clients, n_words, n_gen);
    std::printf("%-44s %9s %9s %9s %3s\n", "membership change", "median", "min", "max", "n");
    std::printf("%-44s %9.0f %9.0f %9.0f %3zu\n", "(a) key in etcd -> first request on it, ms", sj.median, sj.min,
                sj.max, sj.n);
    std::printf("%-44s %9.0f %9.0f %9.0f %3zu\n", "(b) kill -9 -> out of the router's pool, ms", slr.median, slr.min,
                slr.max, slr.n);
    std::printf("%-44s %9.0f %9.0f %9.0f %3zu\n", "(b) kill -9 -> key gone from etcd, ms", sle.median, sle.min, sle.max,
                sle.n);
    std::printf("\n%-16s %6s %7s %9s %9s %10s %10s\n", "(c) phase", "reqs", "failed", "p50 ms", "p99 ms", "TTFT p50",
                "TTFT p99");
    for (const auto & [tag, p] :
         std::vector<std::pair<std::string, const phase *>>{{"steady", &steady}, {"rolling restart", &rolling}})
        std::printf("%-16s %6d %7d %9.1f %9.1f %10.1f %10.1f%s%s\n", tag.c_str(), p->n, p->failed,
                    percentile(p->total, 50), percentile(p->total, 99), percentile(p->ttft, 50),
                    percentile(p->ttft, 99), p->failed ? "  first error: " : "", p->first_error.c_str());
    std::printf("%d rolling restarts took %.1f s; drained nodes' exit codes:", rounds, (t_roll_end - t_roll) / 1000);
    for (int code : exit_codes) std::printf(" %d", code);
    std::printf("\n");

    result_value("cluster/join_key_to_first_request_ms", sj.median, "ms", "<= 10000", sj.max <= 10000, sj.min, sj.max,
                 sj.n);
    result_value("cluster/kill9_to_router_leave_ms", slr.median, "ms",
                 "<= " + std::to_string((k_ttl + 1) * 1000) + " (TTL + 1 s)", slr.max <= (k_ttl + 1) * 1000, slr.min,
                 slr.max, slr.n);
    result_value("cluster/kill9_to_etcd_key_gone_ms", sle.median, "ms", "info", true, sle.min, sle.max, sle.n);
    for (const auto & [tag, p] :
         std::vector<std::pair<std::string, const phase *>>{{"steady", &steady}, {"rolling", &rolling}}) {
        const stats st = summarize(p->total);
        const std::string series = tag == "steady" ? "steady state" : "rolling restart";
        result_at("cluster/" + tag + "/latency_p50", {percentile(p->total, 50), st.min, st.max, st.n}, "ms", "info",
                  true, {10, series, 0});
        result_at("cluster/" + tag + "/latency_p99", {percentile(p->total, 99), st.min, st.max, st.n}, "ms", "info",
                  true, {10, series, 1});
        const stats sf = summarize(p->ttft);
        result_value("cluster/" + tag + "/ttft_p99", percentile(p->ttft, 99), "ms", "info", true, sf.min, sf.max, sf.n);
        result_value("cluster/" + tag + "/failed", p->failed, "errors", "== 0", p->failed == 0, p->failed, p->failed,
                     size_t(p->n));
    }
    const double ratio =
        percentile(steady.total, 99) > 0 ? percentile(rolling.total, 99) / percentile(steady.total, 99) : 0;
    result_value("cluster/rolling_vs_steady_p99_ratio", ratio, "x", "info", true, ratio, ratio, 1);
    result_value("cluster/drained_nodes_exit_0", drained_ok ? 1 : 0, "bool", "== 1", drained_ok, drained_ok, drained_ok,
                 exit_codes.size());
    const int failed = steady.failed + rolling.failed;
    headline(10, "cluster_rolling_restart_failed_requests",
             {double(failed), double(failed), double(failed), size_t(steady.n + rolling.n)}, "errors",
             "== 0 (steady and during a rolling restart of the decode pool)", failed == 0 && drained_ok);
    return 0;
} catch (const std::exception & e) {
    std::fprintf(stderr, "cluster_bench: %s\n", e.what());
    return 1;
}
