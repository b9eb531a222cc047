// rolling_restart_bench.cpp — figure 25: a rolling restart of the decode pool under long streaming generations.
// Closed-loop clients keep long streams running through a router in front of two decode nodes; each node in
// turn is restarted (SIGTERM: its drain moves every generation to the other node — live migration,
// docs/cluster.md — and exits; then it starts again on its port). Measured against the same clients in a steady
// phase just before, with the same prompts: requests failed (the goal: 0), the P99 of the requests' time
// per token and of the gaps between two tokens, the longest gap, how many streams moved, and whether every
// stream's text is the steady phase's answer to the same prompt (none lost, repeated or changed by a move).
//
// Topology: a prefill node and two decode nodes (1 thread each; the decode nodes 4 slots of 1024 tokens,
// --drain 60, at fixed loopback ports) behind a router (--health-interval 0.2); a 512x8 llama with an f16 cache.
// Each client sends a fresh random prompt of 256 tokens for 400 tokens (greedy, ignore_eos), one after another;
// prompts are seeded by (client, request number), so the steady and the rolling phase ask the same things in
// the same order. The steady phase runs for a fixed time (25 s); the rolling phase lasts while 4 rounds of
// restarts run (a, then b, each restart waiting until the restarted node answers /health, then 1 s for the
// router's health checker to see it). A request counts in the phase it was sent in; every request in flight
// when a phase stops sending is waited for.
//
// --quick (CI smoke): 2 clients, 64-token prompts, 120 tokens, a 3 s steady phase, 1 round; no target enforced.
// Every loop is bounded.
#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "bench_net.h"

using namespace baton;
using namespace baton::bench;

namespace {

struct phase {
    std::mutex mu;
    std::vector<stream_timing> done;
    std::map<std::pair<int, int>, std::string> texts;  // (client, request number) -> text, for the answers' check
};

// run_clients: n_clients closed-loop streams against the router until keep_going() is false; every request
// started is waited for.
void run_clients(const bench_process & router, int n_clients, size_t n_prompt, int n_gen, int n_vocab,
                 const std::function<bool()> & keep_going, phase & out) {
    std::vector<std::thread> ts;
    for (int c = 0; c < n_clients; ++c)
        ts.emplace_back([&, c] {
            for (int k = 0; k < 1000 && keep_going(); ++k) {  // (bounded)
                const auto prompt = random_prompt(n_prompt, uint32_t(2500 + 1000 * c + k), n_vocab);
                stream_timing t = stream_completion(router.host(), router.port(), prompt, n_gen, 300);
                std::lock_guard<std::mutex> lock(out.mu);
                if (t.ok) out.texts[{c, k}] = t.text;
                out.done.push_back(std::move(t));
            }
        });
    for (auto & t : ts) t.join();
}

struct summary {
    int n = 0, failed = 0, short_streams = 0;
    std::vector<double> tpots, gaps;
};

summary summarize_phase(const phase & p, int n_gen) {
    summary s;
    for (const stream_timing & t : p.done) {
        ++s.n;
        if (!t.ok) {
            ++s.failed;
            std::fprintf(stderr, "failed request: %s\n", t.error.c_str());
            continue;
        }
        if (t.completion_tokens != n_gen) ++s.short_streams;
        s.tpots.push_back(t.tpot_ms());
        for (size_t i = 1; i < t.chunk_ms.size(); ++i) s.gaps.push_back(t.chunk_ms[i] - t.chunk_ms[i - 1]);
    }
    return s;
}

}  // namespace

int main(int argc, char ** argv) try {
    const bool quick = quick_mode(argc, argv);
    const int n_clients = quick ? 2 : 3, n_gen = quick ? 120 : 400;
    const size_t n_prompt = quick ? 64 : 256;
    const double steady_s = arg_int(argc, argv, "--steady-seconds", quick ? 3 : 25);
    const int rounds = arg_int(argc, argv, "--rounds", quick ? 1 : 4);
    if (steady_s < 1 || steady_s > 600 || rounds < 1 || rounds > 20)
        throw std::runtime_error("bad arguments (--steady-seconds 1..600 --rounds 1..20)");
    const std::string model = bench_model("llama", 512, 8);
    const int n_vocab = model_n_vocab(model);
    const int pa = free_port(), pb = free_port();
    const auto start_node = [&](int port, const std::string & name) {
        auto a = node_args(model, "decode", 1, 4, 4096);
        a.insert(a.end(), {"--drain", "60", "--port", std::to_string(port)});
        return bench_process::start(a, name, 120, "http://127.0.0.1:" + std::to_string(port));
    };
    auto a = start_node(pa, "decode a"), b = start_node(pb, "decode b");
    auto prefill = bench_process::start(node_args(model, "prefill", 1, 2, 2048), "prefill");
    auto router =
        bench_process::start({baton_exe(), "route", "--prefill", prefill->url(), "--decode", a->url() + "," + b->url(),
                              "--fallback", "fail", "--timeout", "300", "--health-interval", "0.2"},
                             "router");
    const auto resumed = [&] { return process_metric(*router, "baton_router_migrations_total{outcome=\"resumed\"}"); };

    // Steady state: the clients for a fixed time.
    phase steady;
    {
        const double end = now_ms() + steady_s * 1000;
        run_clients(*router, n_clients, n_prompt, n_gen, n_vocab, [&] { return now_ms() < end; }, steady);
    }
    // The rolling restart: the same clients (the same prompts in the same order) while each node in turn drains,
    // exits and comes back.
    phase rolling;
    std::atomic<bool> rolling_on{true};
    const double moved0 = resumed();
    std::vector<int> exit_codes;
    double restart_ms = 0;
    std::thread clients(
        [&] { run_clients(*router, n_clients, n_prompt, n_gen, n_vocab, [&] { return rolling_on.load(); }, rolling); });
    std::string roll_error;
    try {
        std::this_thread::sleep_for(std::chrono::milliseconds(quick ? 1000 : 3000));  // (the streams under way)
        const double t0 = now_ms();
        for (int round = 0; round < rounds; ++round)
            for (auto * n : {&a, &b}) {
                const int port = n == &a ? pa : pb;
                exit_codes.push_back((*n)->stop(90));
                *n = start_node(port, n == &a ? "decode a" : "decode b");
                // (until the router's health checker has seen it back, the other node is the only place to move to)
                std::this_thread::sleep_for(std::chrono::milliseconds(1000));
            }
        restart_ms = now_ms() - t0;
    } catch (const std::exception & e) {
        roll_error = e.what();
    }
    rolling_on = false;
    clients.join();
    if (!roll_error.empty()) throw std::runtime_error("rolling restart: " + roll_error);
    const double moved = resumed() - moved0;

    const summary st = summarize_phase(steady, n_gen), ro = summarize_phase(rolling, n_gen);
    // Every answer in the rolling phase is the steady phase's answer to the same prompt (where both asked it).
    int compared = 0, differ = 0;
    for (const auto & [key, text] : rolling.texts)
        if (auto it = steady.texts.find(key); it != steady.texts.end()) {
            ++compared;
            if (it->second != text) ++differ;
        }
    const bool exits_ok = std::all_of(exit_codes.begin(), exit_codes.end(), [](int c) { return c == 0; });
    std::printf("steady: %d requests, %d failed; rolling restart (%.1f s): %d requests, %d failed, %d short, %.0f "
                "streams moved; drained nodes' exit codes:",
                st.n, st.failed, restart_ms / 1000, ro.n, ro.failed, ro.short_streams, moved);
    for (int c : exit_codes) std::printf(" %d", c);
    std::printf("; %d answers compared with the steady phase's, %d differ\n", compared, differ);
    std::fflush(stdout);

    for (const auto & [tag, s] :
         std::vector<std::pair<std::string, const summary *>>{{"steady", &st}, {"rolling", &ro}}) {
        const std::string n = "rolling_restart/" + tag;
        result_value(n + "/requests", s->n, "requests", "info", true, s->n, s->n, 1);
        result_value(n + "/failed", s->failed, "errors", "== 0", s->failed == 0, s->failed, s->failed, size_t(s->n));
        result_value(n + "/short_streams", s->short_streams, "streams", "== 0", s->short_streams == 0, s->short_streams,
                     s->short_streams, size_t(s->n));
        result_value(n + "/tpot_p50", percentile(s->tpots, 50), "ms", "info", true, percentile(s->tpots, 0),
                     percentile(s->tpots, 100), s->tpots.size());
        result_value(n + "/tpot_p99", percentile(s->tpots, 99), "ms", "info", true, percentile(s->tpots, 0),
                     percentile(s->tpots, 100), s->tpots.size());
        result_value(n + "/gap_p99", percentile(s->gaps, 99), "ms", "info", true, percentile(s->gaps, 0),
                     percentile(s->gaps, 100), s->gaps.size());
        result_value(n + "/gap_max", percentile(s->gaps, 100), "ms", "info", true, percentile(s->gaps, 0),
                     percentile(s->gaps, 100), s->gaps.size());
    }
    const double tpot_ratio = percentile(st.tpots, 99) > 0 ? percentile(ro.tpots, 99) / percentile(st.tpots, 99) : 0;
    result_value("rolling_restart/tpot_p99_rolling_over_steady", tpot_ratio, "x", "info", true, tpot_ratio, tpot_ratio,
                 1);
    result_value("rolling_restart/streams_moved", moved, "streams", ">= 1", quick || moved >= 1, moved, moved, 1);
    result_value("rolling_restart/restart_seconds", restart_ms / 1000, "s", "info", true, restart_ms / 1000,
                 restart_ms / 1000, 1);
    result_value("rolling_restart/answers_differing", differ, "answers", "== 0", differ == 0, differ, differ,
                 size_t(compared));
    result_value("rolling_restart/drained_exit_nonzero",
                 double(std::count_if(exit_codes.begin(), exit_codes.end(), [](int c) { return c != 0; })), "nodes",
                 "== 0", exits_ok, 0, 0, exit_codes.size());
    const int failed = st.failed + ro.failed + ro.short_streams + st.short_streams;
    headline(25, "rolling_restart_failed_requests",
             {double(failed), double(failed), double(failed), size_t(st.n + ro.n)}, "errors",
             "== 0 (long streams through a rolling restart of the decode pool; none short, answers unchanged)",
             quick || (failed == 0 && differ == 0 && exits_ok && moved >= 1));
    return 0;
} catch (const std::exception & e) {
    std::fprintf(stderr, "rolling_restart_bench: %s\n", e.what());
    return 1;
}
