// router_load_bench.cpp — figure 5: the router under load, PD vs a single node.
//
// Closed-loop clients (1, 4, 16 at once), each sending streaming completions back to back: a fresh random
// 256-token prompt (token array) and 32 generated tokens. PD = a prefill node (4 slots), a decode node (16
// slots) and `baton route`, the prefill node pinned to core 0 and the decode node to core 1 (1 thread each;
// the router unpinned); single = one `both` node (16 slots, 2 threads, both cores). The two configurations
// alternate level by level. Reports P50/P99 TTFT and TPOT, requests/s and errors per level.
// Target: 0 errors.
#include <atomic>
#include <mutex>

#include "bench_net.h"

using namespace baton;
using namespace baton::bench;

namespace {

struct level_result {
    std::vector<double> ttft, tpot;
    int errors = 0;
    std::string first_error;
    double wall_ms = 0;
    int done = 0;
};

level_result run_level(const bench_process & target, int clients, int per_client, int n_prompt, int n_gen, int n_vocab, uint32_t seed) {
    level_result out;
    std::mutex mu;
    std::vector<std::thread> ts;
    const double t0 = now_ms();
    for (int c = 0; c < clients; ++c) {
        ts.emplace_back([&, c] {
            for (int k = 0; k < per_client; ++k) {
                auto t = stream_completion(target.host(), target.port(), random_prompt(size_t(n_prompt), seed + uint32_t(c * 1000 + k), n_vocab), n_gen);
                std::lock_guard<std::mutex> lk(mu);
                if (!t.ok || t.completion_tokens != n_gen) {
                    if (out.errors++ == 0) out.first_error = t.ok ? "short completion" : t.error;
                    continue;
                }
                out.ttft.push_back(t.ttft_ms);
                out.tpot.push_back(t.tpot_ms());
                ++out.done;
            }
        });
    }
    for (auto & t : ts) t.join();
    out.wall_ms = now_ms() - t0;
    return out;
}

}  // namespace

int main(int argc, char ** argv) try {
    const bool quick = quick_mode(argc, argv);
    const int n_embd = quick ? 128 : 512, n_layer = quick ? 2 : 8;
    const int n_prompt = quick ? 80 : 256, n_gen = quick ? 4 : 32;
    const std::vector<int> levels = {1, 4, 16};
    const std::string model = bench_model("llama", n_embd, n_layer);
    const int n_vocab = model_n_vocab(model);
    // quick mode: 1 thread, so a loaded CI machine cannot stall ggml's spinning thread barriers.
    auto single = bench_process::start(node_args(model, "both", quick ? 1 : 2, 16, 8192), "single");
    auto pre = bench_process::start(node_args(model, "prefill", 1, 4, 4096, "0"), "prefill");
    auto dec = bench_process::start(node_args(model, "decode", 1, 16, 8192, "1"), "decode");
    auto route = bench_process::start(route_args(pre->url(), dec->url(), model), "router");
    for (auto * p : {single.get(), route.get()}) {
        auto w = stream_completion(p->host(), p->port(), random_prompt(size_t(n_prompt), 7, n_vocab), 4);
        if (!w.ok) throw std::runtime_error("warm-up: " + w.error);
    }
    int errors_total = 0, requests_total = 0;
    std::printf("%-7s %7s %5s %10s %10s %10s %10s %8s %7s\n", "config", "clients", "reqs", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99",
                "req/s", "errors");
    for (int clients : levels) {
        // At least 5 requests per level and per configuration; more at low concurrency for stable percentiles.
        const int per_client = quick ? 1 : std::max(1, 8 / clients);
        for (int cfg = 0; cfg < 2; ++cfg) {
            const bool pd = cfg == 0;
            const bench_process & target = pd ? *route : *single;
            level_result r = run_level(target, clients, per_client, n_prompt, n_gen, n_vocab, uint32_t(clients * 100000 + cfg * 50000));
            errors_total += r.errors;
            requests_total += clients * per_client;
            const double rps = 1000.0 * r.done / r.wall_ms;
            const std::string tag = pd ? "pd" : "single";
            const stats st = summarize(r.ttft), sp = summarize(r.tpot);
            std::printf("%-7s %7d %5d %10.1f %10.1f %10.2f %10.2f %8.2f %7d%s%s\n", tag.c_str(), clients, clients * per_client,
                        percentile(r.ttft, 50), percentile(r.ttft, 99), percentile(r.tpot, 50), percentile(r.tpot, 99), rps, r.errors,
                        r.errors ? "  first error: " : "", r.first_error.c_str());
            const std::string C = std::to_string(clients);
            const double x = clients;
            result_value("router_load/" + tag + "/" + C + "/ttft_p50", percentile(r.ttft, 50), "ms", "info", true, st.min, st.max, st.n);
            result_at("router_load/" + tag + "/" + C + "/ttft_p99", {percentile(r.ttft, 99), st.min, st.max, st.n}, "ms", "info", true,
                      {5, tag + " P99 TTFT ms", x});
            result_value("router_load/" + tag + "/" + C + "/tpot_p50", percentile(r.tpot, 50), "ms", "info", true, sp.min, sp.max, sp.n);
            result_at("router_load/" + tag + "/" + C + "/tpot_p99", {percentile(r.tpot, 99), sp.min, sp.max, sp.n}, "ms", "info", true,
                      {5, tag + " P99 TPOT ms", x});
            result_value("router_load/" + tag + "/" + C + "/req_per_s", rps, "req/s", "info", true, rps, rps, 1);
            result_value("router_load/" + tag + "/" + C + "/errors", r.errors, "errors", "== 0", r.errors == 0, r.errors, r.errors, size_t(clients * per_client));
        }
    }
    result_value("router_load_errors", errors_total, "errors", "== 0", errors_total == 0, errors_total, errors_total, size_t(requests_total));
    headline(5, "router_load_errors", {double(errors_total), double(errors_total), double(errors_total), size_t(requests_total)}, "errors",
             "== 0 at 1/4/16 clients", errors_total == 0);
    return 0;
} catch (const std::exception & e) {
    std::fprintf(stderr, "router_load_bench: %s\n", e.what());
    return 1;
}
