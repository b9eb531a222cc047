// pd_ttft_bench.cpp — figure 2: time to first token through the router's PD path vs a single `both` node.
//
// Four processes serve PD (a prefill node, a decode node, and two `baton route`s over them: direct transfer,
// the default, and --pd-transfer relay) and one `both` node serves the baseline, all on the same model, threads and cores (unpinned), on loopback. For each prompt length a
// fresh random token-array prompt (exact length, never seen before, so no prefix cache helps) is sent as
// a streaming completion to the direct router and to the single node, and another fresh prompt of the same
// length to the relay router (the prefill node serves both routers: the same prompt would be a prefix hit);
// TTFT is the time to the first SSE data chunk. Overhead = TTFT_pd / TTFT_single - 1, computed triple by
// triple; median/min/max over 7 triples. Target: <= 5% at 2048 tokens (direct, the default).
//
// Steady state is measured: one unmeasured triple per length first (the first prompt of a new length
// touches KV cells and blob buffers that were never used, and on a VM a fresh page costs ~3 ms/MiB), and
// the order inside a triple rotates so no path always runs right after another's work.
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
    // Two routers over the same nodes: direct transfer (the default: the decode node fetches the state from
    // the prefill node) and the relay through the router (--pd-transfer relay), measured side by side.
    auto route = bench_process::start(route_args(pre->url(), dec->url(), model), "router (direct)");
    auto relay_args = route_args(pre->url(), dec->url(), model);
    relay_args.insert(relay_args.end(), {"--pd-transfer", "relay"});
    auto relay = bench_process::start(relay_args, "router (relay)");
    // Warm up every path once (first-use allocations, page faults of the weights).
    for (auto * p : {single.get(), route.get(), relay.get()}) {
        auto w = stream_completion(p->host(), p->port(), random_prompt(256, 99, n_vocab), 4);
        if (!w.ok) throw std::runtime_error("warm-up: " + w.error);
    }
    std::printf("%8s %14s %14s %14s %12s %12s\n", "tokens", "TTFT PD ms", "TTFT relay ms", "TTFT 1 ms", "overhead %",
                "relay ovh %");
    for (size_t n : lengths) {
        std::vector<double> pd_ms, relay_ms, single_ms, overhead, relay_overhead;
        for (int r = -1; r < pairs; ++r) {  // r == -1: the unmeasured warm-up triple of this length
            const auto prompt = random_prompt(n, uint32_t(n * 1000 + 500 + r), n_vocab);
            // The relay router's prompt is another of the same length: the prefill node serves both routers,
            // and the direct path's prompt would be a prefix hit there.
            const auto prompt_relay = random_prompt(n, uint32_t(n * 1000 + 700 + r), n_vocab);
            stream_timing a, b, c;  // direct PD, single, relay PD
            // The order rotates, so no path always runs right after another's work.
            const int order = ((r % 3) + 3) % 3;
            for (int k = 0; k < 3; ++k) {
                const int which = (order + k) % 3;
                if (which == 0) a = stream_completion(route->host(), route->port(), prompt, 4);
                else if (which == 1) b = stream_completion(single->host(), single->port(), prompt, 4);
                else c = stream_completion(relay->host(), relay->port(), prompt_relay, 4);
            }
            if (!a.ok) throw std::runtime_error("PD request: " + a.error);
            if (!b.ok) throw std::runtime_error("single request: " + b.error);
            if (!c.ok) throw std::runtime_error("PD request (relay): " + c.error);
            if (r < 0) continue;
            pd_ms.push_back(a.ttft_ms);
            single_ms.push_back(b.ttft_ms);
            relay_ms.push_back(c.ttft_ms);
            overhead.push_back(100.0 * (a.ttft_ms / b.ttft_ms - 1.0));
            relay_overhead.push_back(100.0 * (c.ttft_ms / b.ttft_ms - 1.0));
        }
        const stats sp = summarize(pd_ms), ss = summarize(single_ms), so = summarize(overhead);
        const stats sr = summarize(relay_ms), sro = summarize(relay_overhead);
        std::printf("%8zu %14.1f %14.1f %14.1f %12.2f %12.2f\n", n, sp.median, sr.median, ss.median, so.median,
                    sro.median);
        const std::string N = std::to_string(n);
        const bool gated = n >= 2048;
        result_at("pd_ttft_overhead/" + N, so, "%", gated ? "<= 5%" : "info", !gated || so.median <= 5.0, {2, "overhead %", double(n)});
        result_at("pd_ttft_overhead_relay/" + N, sro, "%", "info", true, {2, "overhead % (relay)", double(n)});
        result_at("pd_ttft_ms/pd/" + N, sp, "ms", "info", true, {2, "PD (router) TTFT ms", double(n)});
        result_at("pd_ttft_ms/relay/" + N, sr, "ms", "info", true, {2, "PD (relay) TTFT ms", double(n)});
        result_at("pd_ttft_ms/single/" + N, ss, "ms", "info", true, {2, "single node TTFT ms", double(n)});
        if (n == lengths.back()) headline(2, "pd_ttft_overhead_" + N + "tok", so, "%", "<= 5% at 2048 tokens", so.median <= 5.0);
    }
    return 0;
} catch (const std::exception & e) {
    std::fprintf(stderr, "pd_ttft_bench: %s\n", e.what());
    return 1;
}
