// interference_bench.cpp — figure 7: decode streams under a stream of long prompts, colocated vs PD.
//
// The trace (fixed seed): 4 ongoing streams, each a closed loop of short requests (32-token prompt, 64
// generated tokens; below the router's --pd-min-tokens, so in PD they go straight to the decode node),
// while 4 long prompts (768 tokens, 24x a stream's prompt; 8 generated tokens) arrive at seeded exponential
// inter-arrival times (mean 3 s; 2048-token prompts would take ~11 s each on one core of this machine and
// would not fit 5 runs of both configurations into the suite's 15 minutes).
// The streams keep going until the last long prompt has its answer.
//   colocated: one `both` node, 2 threads, both cores.
//   PD:        a prefill node pinned to core 0 (taskset -c 0, 1 thread) and a decode node pinned to core 1
//              (taskset -c 1, 1 thread) behind `baton route` (unpinned).
// Per run and configuration: P50/P99 of the streams' per-request TPOT ((last token - first token) /
// (tokens - 1)), P99 of the per-token gaps (ITL), P50/P99 TTFT of the long prompts, and goodput: requests
// per second that meet their objective (streams: TPOT <= k_slo_tpot_ms; long prompts: TTFT <=
// k_slo_ttft_ms). The configurations alternate run by run on the same trace (arrival times and lengths;
// prompt contents change per run so no prefix cache carries over); ratio PD/colocated of P99 TPOT is taken
// pair by pair. Target: PD's P99 TPOT <= 0.5x colocated's.
#include <atomic>
#include <mutex>

#include "bench_net.h"

using namespace baton;
using namespace baton::bench;

namespace {

constexpr double k_slo_tpot_ms = 30;    // ongoing streams: per-request time per output token
constexpr double k_slo_ttft_ms = 4000;  // long prompts: time to first token

struct trace {
    std::vector<double> arrival_ms;  // long prompts, from the trace start
    size_t n_long_prompt = 768;
    int n_long_gen = 8;
    int n_streams = 4;
    size_t n_stream_prompt = 32;
    int n_stream_gen = 64;
};

struct trace_result {
    std::vector<double> tpot, itl, ttft_long;
    int errors = 0, good = 0, requests = 0;
    std::string first_error;
    double wall_ms = 0;
};

trace make_trace(bool quick) {
    trace t;
    std::mt19937 rng{20240607};
    std::exponential_distribution<double> gap(1.0 / (quick ? 300.0 : 3000.0));
    const int n = quick ? 2 : 4;
    double at = quick ? 100 : 1000;  // let the streams reach steady state first
    for (int i = 0; i < n; ++i) {
        t.arrival_ms.push_back(at);
        at += gap(rng);
    }
    if (quick) {
        t.n_long_prompt = 256;
        t.n_stream_gen = 16;
    }
    return t;
}

trace_result run_trace(const bench_process & target, const trace & tr, int run, int n_vocab) {
    trace_result out;
    std::mutex mu;
    std::atomic<size_t> long_done{0};
    const double t0 = now_ms();
    auto fail = [&](const std::string & e) {
        if (out.errors++ == 0) out.first_error = e;
    };
    std::vector<std::thread> ts;
    for (int s = 0; s < tr.n_streams; ++s) {
        ts.emplace_back([&, s] {
            for (int k = 0; long_done.load() < tr.arrival_ms.size(); ++k) {
                auto t = stream_completion(target.host(), target.port(),
                                           random_prompt(tr.n_stream_prompt, uint32_t(run * 1000003 + s * 10007 + k), n_vocab), tr.n_stream_gen);
                std::lock_guard<std::mutex> lk(mu);
                ++out.requests;
                if (!t.ok || t.completion_tokens != tr.n_stream_gen) {
                    fail(t.ok ? "short completion" : t.error);
                    continue;
                }
                out.tpot.push_back(t.tpot_ms());
                for (size_t i = 1; i < t.chunk_ms.size(); ++i) out.itl.push_back(t.chunk_ms[i] - t.chunk_ms[i - 1]);
                if (t.tpot_ms() <= k_slo_tpot_ms) ++out.good;
            }
        });
    }
    for (size_t i = 0; i < tr.arrival_ms.size(); ++i) {
        ts.emplace_back([&, i] {
            const double wait = t0 + tr.arrival_ms[i] - now_ms();
            if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(wait));
            auto t = stream_completion(target.host(), target.port(), random_prompt(tr.n_long_prompt, uint32_t(run * 7919 + i + 555555), n_vocab),
                                       tr.n_long_gen);
            std::lock_guard<std::mutex> lk(mu);
            ++out.requests;
            if (!t.ok) fail(t.error);
            else {
                out.ttft_long.push_back(t.ttft_ms);
                if (t.ttft_ms <= k_slo_ttft_ms) ++out.good;
            }
            ++long_done;
        });
    }
    for (auto & t : ts) t.join();
    out.wall_ms = now_ms() - t0;
    return out;
}

}  // namespace

int main(int argc, char ** argv) try {
    const bool quick = quick_mode(argc, argv);
    const int runs = quick ? 1 : 5;
    const int n_embd = quick ? 128 : 512, n_layer = quick ? 2 : 8;
    const std::string model = bench_model("llama", n_embd, n_layer);
    const int n_vocab = model_n_vocab(model);
    const trace tr = make_trace(quick);
    const int n_ctx = 8 * 4096;  // 8 slots of 4096 tokens (a slot holds n_ctx / slots)
    auto colo = bench_process::start(node_args(model, "both", quick ? 1 : 2, 8, n_ctx), "colocated");
    auto pre = bench_process::start(node_args(model, "prefill", 1, 2, 2 * 4096, "0"), "prefill");
    auto dec = bench_process::start(node_args(model, "decode", 1, 8, n_ctx, "1"), "decode");
    auto route = bench_process::start(route_args(pre->url(), dec->url(), model), "router");
    for (auto * p : {colo.get(), route.get()}) {
        auto w = stream_completion(p->host(), p->port(), random_prompt(tr.n_long_prompt, 3, n_vocab), 2);
        if (!w.ok) throw std::runtime_error("warm-up: " + w.error);
    }
    std::printf("trace: %zu long prompts of %zu tokens at", tr.arrival_ms.size(), tr.n_long_prompt);
    for (double a : tr.arrival_ms) std::printf(" %.0f", a);
    std::printf(" ms; %d streams of %zu+%d tokens; SLO: TPOT <= %.0f ms, TTFT(long) <= %.0f ms\n", tr.n_streams, tr.n_stream_prompt,
                tr.n_stream_gen, k_slo_tpot_ms, k_slo_ttft_ms);
    std::printf("%-10s %3s %9s %9s %9s %11s %11s %9s %7s\n", "config", "run", "TPOT p50", "TPOT p99", "ITL p99", "TTFT p50", "TTFT p99",
                "goodput", "errors");
    const char * tags[2] = {"colocated", "pd"};
    std::vector<double> m[2][6];  // per config: tpot p50, tpot p99, itl p99, ttft p50, ttft p99, goodput
    std::vector<double> ratio;
    int errors = 0;
    for (int r = 0; r < runs; ++r) {
        double p99[2] = {0, 0};
        for (int c = 0; c < 2; ++c) {
            trace_result res = run_trace(c == 0 ? *colo : *route, tr, r, n_vocab);
            errors += res.errors;
            const double v[6] = {percentile(res.tpot, 50), percentile(res.tpot, 99), percentile(res.itl, 99), percentile(res.ttft_long, 50),
                                 percentile(res.ttft_long, 99), 1000.0 * res.good / res.wall_ms};
            for (int k = 0; k < 6; ++k) m[c][k].push_back(v[k]);
            p99[c] = v[1];
            std::printf("%-10s %3d %9.2f %9.2f %9.2f %11.1f %11.1f %9.2f %7d%s%s\n", tags[c], r, v[0], v[1], v[2], v[3], v[4], v[5], res.errors,
                        res.errors ? "  first error: " : "", res.first_error.c_str());
        }
        ratio.push_back(p99[1] / p99[0]);
    }
    const char * keys[6] = {"tpot_p50", "tpot_p99", "itl_p99", "ttft_long_p50", "ttft_long_p99", "goodput"};
    const char * units[6] = {"ms", "ms", "ms", "ms", "ms", "good req/s"};
    for (int c = 0; c < 2; ++c)
        for (int k = 0; k < 6; ++k)
            result_at(std::string("interference/") + tags[c] + "/" + keys[k], summarize(m[c][k]), units[k], "info", true,
                      {7, tags[c], double(k)});
    result_value("interference/errors", errors, "errors", "== 0", errors == 0, errors, errors, size_t(runs));
    const stats sr = summarize(ratio);
    result("interference/pd_over_colocated_tpot_p99", sr, "x", "<= 0.5", sr.median <= 0.5);
    headline(7, "interference_pd_over_colocated_tpot_p99", sr, "x", "<= 0.5x", sr.median <= 0.5);
    return 0;
} catch (const std::exception & e) {
    std::fprintf(stderr, "interference_bench: %s\n", e.what());
    return 1;
}
