// prefix_routing_bench.cpp — figure 15: a multi-tenant shared-prefix trace (llm-d's shape, scaled to 2 cores):
// precise prefix routing (the nodes' KV events) vs today's affinity vs round-robin.
//
// 8 tenants, each with a system prompt of 2,048 tokens: a 150-token preamble every tenant shares, then the
// tenant's own text. Requests are a tenant's system prompt plus a fresh 32-token question, 8 tokens generated,
// arriving as a Poisson process (seeded; the same arrival times and requests for every policy). 4 `both` nodes
// (4 slots each: together the cluster holds 16 prefixes, room for every tenant's even when the placement is
// uneven, while no single node can hold all 8), one thread each. Three policies,
// each with fresh nodes (nothing cached from the previous one):
//   precise: `baton route -m` over the 4 nodes — the node whose cache holds the longest prefix of the prompt
//            (KV events), within --load-cap of the least loaded; no PD (no prefill pool);
//   affinity: `baton route` without -m — today's rendezvous hashing of the request's first 256 bytes (64
//            token ids here): they lie in the shared preamble, so every tenant has the same key, as chat requests
//            whose system prompts share their first 256 bytes do (the measurement); the load cap spreads
//            the overflow;
//   round-robin: the client sends request i to node i mod 4 (a plain L4 balancer), no router.
// Per policy: P50/P90 TTFT (client side, streaming) and prompt tokens computed by all nodes (every node's
// baton_prompt_tokens_total - baton_cached_tokens_total). Target: P90 TTFT of precise >= 5x better than
// round-robin. --quick: a 128x2 model, 2 tenants of 256 tokens, 2 nodes, 6 requests.
#include <atomic>
#include <map>

#include "bench_net.h"

using namespace baton;
using namespace baton::bench;

namespace {

struct trace_request {
    double at_ms = 0;  // arrival, from the trace's start
    int tenant = 0;
    std::vector<int> prompt;
};

struct outcome {
    std::vector<double> ttft;
    std::vector<int> cached;  // per request: prompt tokens its node had cached
    double computed = 0;
};

enum class policy { precise, affinity, round_robin };
const char * policy_name(policy p) {
    return p == policy::precise ? "precise" : p == policy::affinity ? "affinity" : "round-robin";
}

outcome run_policy(policy pol, const std::string & model, int n_nodes, int slots, int n_ctx,
                   const std::vector<trace_request> & trace, int gen) {
    std::vector<std::unique_ptr<bench_process>> nodes;
    std::string urls;
    for (int i = 0; i < n_nodes; ++i) {
        nodes.push_back(bench_process::start(node_args(model, "both", 1, slots, n_ctx), "node " + std::to_string(i)));
        urls += (i ? "," : "") + nodes.back()->url();
    }
    std::unique_ptr<bench_process> route;
    if (pol != policy::round_robin) {
        std::vector<std::string> ra = {baton_exe(), "route", "--decode", urls, "--health-interval", "0.2"};
        if (pol == policy::precise) ra.insert(ra.end(), {"-m", model});
        route = bench_process::start(ra, policy_name(pol));
    }
    std::vector<stream_timing> r(trace.size());
    std::vector<std::thread> th;
    const double t0 = now_ms();
    for (size_t i = 0; i < trace.size(); ++i) {
        const double wait = trace[i].at_ms - (now_ms() - t0);
        if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(wait));
        const bench_process & to = route ? *route : *nodes[i % nodes.size()];
        th.emplace_back([&, i, host = to.host(), port = to.port()] {
            r[i] = stream_completion(host, port, trace[i].prompt, gen, 600);
        });
    }
    for (auto & x : th) x.join();
    outcome o;
    for (size_t i = 0; i < r.size(); ++i) {
        if (!r[i].ok)
            throw std::runtime_error(std::string(policy_name(pol)) + " request " + std::to_string(i) + ": " +
                                     r[i].error);
        o.ttft.push_back(r[i].ttft_ms);
        o.cached.push_back(r[i].cached_tokens);
    }
    if (route && pol == policy::precise) {
        double cached = 0;
        for (const auto & x : r) cached += x.cached_tokens;
        std::printf("  router: %.0f hits, %.0f misses, %.0f tokens believed held; nodes had %.0f cached\n",
                    process_metric(*route, "baton_router_kv_routes_total{result=\"hit\"}"),
                    process_metric(*route, "baton_router_kv_routes_total{result=\"miss\"}"),
                    process_metric(*route, "baton_router_kv_held_tokens_total"), cached);
    }
    for (const auto & n : nodes)
        o.computed += process_metric(*n, "baton_prompt_tokens_total") - process_metric(*n, "baton_cached_tokens_total");
    return o;
}

}  // namespace

int main(int argc, char ** argv) try {
    const bool quick = quick_mode(argc, argv);
    const int tenants = quick ? 2 : 8, system_tokens = quick ? 256 : 2048, preamble = quick ? 32 : 150;
    const int n_nodes = quick ? 2 : 4, n_requests = quick ? 6 : 128, gen = 8, question = 32;
    const double rate_per_s = quick ? 4 : 1.0;
    const std::string model = bench_model("llama", quick ? 128 : 256, quick ? 2 : 4);
    const int n_vocab = model_n_vocab(model);
    const int slots = 4, n_ctx = slots * (system_tokens + 256);
    // The tenants' system prompts: a shared preamble, then each tenant's own tokens.
    const std::vector<int> shared = random_prompt(size_t(preamble), 7, n_vocab);
    std::vector<std::vector<int>> systems;
    for (int t = 0; t < tenants; ++t) {
        std::vector<int> s = shared;
        const auto own = random_prompt(size_t(system_tokens - preamble) + 1, uint32_t(100 + t), n_vocab);
        s.insert(s.end(), own.begin() + 1, own.end());
        systems.push_back(std::move(s));
    }
    // The trace: Poisson arrivals, tenants uniform, fresh questions; the same for every policy.
    std::mt19937 rng(20261203);
    std::exponential_distribution<double> gap(rate_per_s / 1000.0);
    std::uniform_int_distribution<int> who(0, tenants - 1);
    std::vector<trace_request> trace;
    double at = 0;
    for (int i = 0; i < n_requests; ++i) {
        trace_request q;
        q.at_ms = at;
        at += gap(rng);
        q.tenant = who(rng);
        q.prompt = systems[size_t(q.tenant)];
        const auto ask = random_prompt(size_t(question) + 1, uint32_t(9000 + i), n_vocab);
        q.prompt.insert(q.prompt.end(), ask.begin() + 1, ask.end());
        trace.push_back(std::move(q));
    }
    std::printf(
        "multi-tenant trace: %d tenants x %d-token system prompts (%d-token shared preamble), %d requests at %.1f/s "
        "(Poisson), %d nodes x %d slots, %d generated\n",
        tenants, system_tokens, preamble, n_requests, rate_per_s, n_nodes, slots, gen);
    std::printf("%-12s %10s %10s %16s\n", "policy", "P50 ms", "P90 ms", "tokens computed");
    std::map<policy, outcome> res;
    // --precise-only: the precise policy alone (diagnosing its misses; no ratio is reported).
    bool precise_only = false;
    for (int i = 1; i < argc; ++i) precise_only = precise_only || std::string(argv[i]) == "--precise-only";
    for (policy p : {policy::precise, policy::affinity, policy::round_robin}) {
        if (precise_only && p != policy::precise) continue;
        res[p] = run_policy(p, model, n_nodes, slots, n_ctx, trace, gen);
        const outcome & o = res[p];
        std::printf("%-12s %10.0f %10.0f %16.0f\n", policy_name(p), percentile(o.ttft, 50), percentile(o.ttft, 90),
                    o.computed);
        const std::string tag =
            std::string("prefix_routing/") + (p == policy::round_robin ? "round_robin" : policy_name(p));
        result_value(tag + "/ttft_p50", percentile(o.ttft, 50), "ms", "info", true, percentile(o.ttft, 0),
                     percentile(o.ttft, 100), o.ttft.size());
        result_value(tag + "/ttft_p90", percentile(o.ttft, 90), "ms", "info", true, percentile(o.ttft, 0),
                     percentile(o.ttft, 100), o.ttft.size());
        result_value(tag + "/tokens_computed", o.computed, "tokens", "info", true, 0, 0, o.ttft.size());
        // Misses (less than the system prompt cached), by kind: a tenant's first request (cold), one arriving
        // while an earlier request of its tenant was still in flight (concurrent), or a later one (lost: its
        // prefix was evicted, or routing sent it elsewhere).
        int cold = 0, concurrent = 0, lost = 0;
        std::map<int, double> last_done;  // tenant -> when its latest request so far got its first token
        for (size_t i = 0; i < trace.size(); ++i) {
            const trace_request & q = trace[i];
            const auto prev = last_done.find(q.tenant);
            if (o.cached[i] < system_tokens) {
                if (prev == last_done.end()) ++cold;
                else if (prev->second > q.at_ms) ++concurrent;
                else ++lost;
            }
            const double done = q.at_ms + o.ttft[i];
            if (prev == last_done.end() || prev->second < done) last_done[q.tenant] = done;
        }
        std::printf("%-12s misses: %d cold, %d concurrent with their tenant's previous request, %d lost\n", "", cold,
                    concurrent, lost);
        result_value(tag + "/misses_lost", lost, "requests", "info", true, 0, 0, o.ttft.size());
    }
    if (precise_only) return 0;
    const double p90_precise = percentile(res[policy::precise].ttft, 90);
    const double gain_rr = p90_precise > 0 ? percentile(res[policy::round_robin].ttft, 90) / p90_precise : 0;
    const double gain_aff = p90_precise > 0 ? percentile(res[policy::affinity].ttft, 90) / p90_precise : 0;
    std::printf("P90 TTFT: round-robin / precise = %.1fx, affinity / precise = %.1fx\n", gain_rr, gain_aff);
    result_value("prefix_routing/p90_round_robin_vs_precise", gain_rr, "x", ">= 5", quick || gain_rr >= 5, 0, 0,
                 size_t(n_requests));
    result_value("prefix_routing/p90_affinity_vs_precise", gain_aff, "x", "info", true, 0, 0, size_t(n_requests));
    return 0;
} catch (const std::exception & e) {
    std::fprintf(stderr, "prefix_routing_bench: %s\n", e.what());
    return 1;
}
