// pd_ttft_bench.cpp — figure 2: time to first token through the router's PD path vs a single `both` node.
//
// Three processes serve PD (a prefill node, a decode node, `baton route`) and one `both` node serves the
// baseline, all on the same model, threads and cores (unpinned), on loopback. For each prompt length a
// fresh random token-array prompt (exact length, never seen before, so no prefix cache helps) is sent as
// a streaming completion to the router and then the same prompt to the single node; TTFT is the time to
// the first SSE data chunk. Overhead = TTFT_pd / TTFT_single - 1, computed pair by pair; median/min/max
// over 7 pairs. Target: <= 5% at 2048 tokens.
//
// Steady state is measured: one unmeasured pair per length first (the first prompt of a new length
// touches KV cells and blob buffers that were never used, and on a VM a fresh page costs ~3 ms/MiB), and
// the order inside a pair alternates (PD first, then single first) so neither side always runs right
// after the other's work.
#include "bench_net.h"

using namespace baton;
using namespace baton::bench;

int main(int argc, char ** argv) try {
    const bool quick = quick_mode(argc, argv);
    const int pairs = quick ? 2 : 7;
    const std::vector<size_t> lengths = quick ? std::vector<size_t>{128, 256} : std::vector<size_t>{128, 512, 2048};
    const int n_embd = quick ? 128 : 512, n_layer = quick ? 2 : 8;
    const std::string model = bench_model("llama", n_embd, n_layer);
    const int n_vocab = model_n_vocab(model);
    const int threads = quick ? 1 : 2, n_ctx = 4096;  // quick: 1 thread, robust on a loaded CI machine
    auto single = bench_process::start(node_args(model, "both", threads, 1, n_ctx), "single");
    auto pre = bench_process::start(node_args(model, "prefill", threads, 1, n_ctx), "prefill");
    auto dec = bench_process::start(node_args(model, "decode", threads, 1, n_ctx), "decode");
    auto route = bench_process::start(route_args(pre->url(), dec->url(), model), "router");
    // Warm up every path once (first-use allocations, page faults of the weights).
    for (auto * p : {single.get(), route.get()}) {
        auto w = stream_completion(p->host(), p->port(), random_prompt(256, 99, n_vocab), 4);
        if (!w.ok) throw std::runtime_error("warm-up: " + w.error);
    }
    std::printf("%8s %14s %14s %12s\n", "tokens", "TTFT PD ms", "TTFT 1 ms", "overhead %");
    for (size_t n : lengths) {
        std::vector<double> pd_ms, single_ms, overhead;
        for (int r = -1; r < pairs; ++r) {  // r == -1: the unmeasured warm-up pair of this length
            const auto prompt = random_prompt(n, uint32_t(n * 1000 + 500 + r), n_vocab);
            stream_timing a, b;
            if (r % 2 == 0) {
                a = stream_completion(route->host(), route->port(), prompt, 4);
                b = stream_completion(single->host(), single->port(), prompt, 4);
            } else {
                b = stream_completion(single->host(), single->port(), prompt, 4);
                a = stream_completion(route->host(), route->port(), prompt, 4);
            }
            if (!a.ok) throw std::runtime_error("PD request: " + a.error);
            if (!b.ok) throw std::runtime_error("single request: " + b.error);
            if (r < 0) continue;
            pd_ms.push_back(a.ttft_ms);
            single_ms.push_back(b.ttft_ms);
            overhead.push_back(100.0 * (a.ttft_ms / b.ttft_ms - 1.0));
        }
        const stats sp = summarize(pd_ms), ss = summarize(single_ms), so = summarize(overhead);
        std::printf("%8zu %14.1f %14.1f %12.2f\n", n, sp.median, ss.median, so.median);
        const std::string N = std::to_string(n);
        const bool gated = n >= 2048;
        result_at("pd_ttft_overhead/" + N, so, "%", gated ? "<= 5%" : "info", !gated || so.median <= 5.0, {2, "overhead %", double(n)});
        result_at("pd_ttft_ms/pd/" + N, sp, "ms", "info", true, {2, "PD (router) TTFT ms", double(n)});
        result_at("pd_ttft_ms/single/" + N, ss, "ms", "info", true, {2, "single node TTFT ms", double(n)});
        if (n == lengths.back()) headline(2, "pd_ttft_overhead_" + N + "tok", so, "%", "<= 5% at 2048 tokens", so.median <= 5.0);
    }
    return 0;
} catch (const std::exception & e) {
    std::fprintf(stderr, "pd_ttft_bench: %s\n", e.what());
    return 1;
}
