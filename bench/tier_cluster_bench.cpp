// tier_cluster_bench.cpp — figure 18: the shared Valkey tier in a PD cluster (issue 25): a decode pool that
// restarts a node and grows by one mid-trace, with the tier and without it.
//
// One prefill node (1 slot), a decode pool of D1 (4 slots) and D2 (4 slots, started only mid-trace), and a router
// with -m over them (--pd-min-tokens 256, --health-interval 0.2), -t 2 each, a 512x8 llama. 8 conversations: each
// sends a first message of 4096 tokens (its own; PD: prefilled on the prefill node, decoded on D1), then a round of
// follow-ups (its previous prompt, 16 tokens standing in for the answer, a new 64-token message; 8 generated; local
// follow-ups on D1). Then D1 is killed and started again on its port (a restart: its slots and host cache are
// empty) and D2 joins the pool (a new node), and every conversation sends its next follow-up: each is the first
// turn of an existing conversation on a restarted or a new node. One request at a time; token-array prompts.
//
// Variants, each on fresh processes: "recompute" (no tier; the prefill node's host cache off, so a conversation
// a node does not hold is prefilled again whole) and "tier" (every node --tier-valkey on a real valkey-server;
// the router knows what the tier holds from the nodes' KV events and sends such a turn straight to a decode
// node, which fetches the conversation). Per variant: TTFT of the warm follow-ups (D1 holds them) and of the turns
// after the restart (median, P90; client side, streaming) and the prompt tokens the cluster computed for those
// (sum over the nodes of baton_prompt_tokens_total - baton_cached_tokens_total, before and after the round).
// Target: the tier's median TTFT after the restart <= 0.2x the recompute variant's.
// --quick: a 128x2 model, 4 conversations of 512 tokens.
#include <map>

#include "../tests/support/valkey_process.h"
#include "bench_net.h"

using namespace baton;
using namespace baton::bench;

namespace {

struct round_stats {
    std::vector<double> ttft;
    double computed = 0;
};

struct variant_result {
    round_stats first, warm, after;
    double tier_hits = 0, tier_routes = 0;
};

double computed_tokens(const std::vector<const bench_process *> & nodes) {
    double sum = 0;
    for (const bench_process * n : nodes) {
        if (!n) continue;
        sum += process_metric(*n, "baton_prompt_tokens_total") - process_metric(*n, "baton_cached_tokens_total");
    }
    return sum;
}

std::vector<std::string> with_port(std::vector<std::string> a, int port) {
    a.insert(a.end(), {"--host", "127.0.0.1", "--port", std::to_string(port)});
    return a;
}

variant_result run_variant(bool tier, const std::string & model, const std::vector<std::vector<int>> & firsts,
                           int n_vocab, int slots, int n_ctx_decode, int n_ctx_prefill) {
    const int answer = 16, message = 64, gen = 8, threads = 2;
    std::unique_ptr<baton::test::valkey_process> v;
    std::vector<std::string> extra;
    if (tier) {
        v = baton::test::valkey_process::start();
        extra = {"--tier-valkey", "127.0.0.1:" + std::to_string(v->port())};
    }
    auto node = [&](const std::string & role, int np, int n_ctx) {
        std::vector<std::string> a = node_args(model, role, threads, np, n_ctx);
        a.insert(a.end(), extra.begin(), extra.end());
        if (!tier && role == "prefill") a.insert(a.end(), {"--cache-ram", "0"});
        return a;
    };
    auto pre = bench_process::start(node("prefill", 1, n_ctx_prefill), "prefill");
    const int p1 = free_port(), p2 = free_port();
    const std::string u1 = "http://127.0.0.1:" + std::to_string(p1), u2 = "http://127.0.0.1:" + std::to_string(p2);
    auto d1 = bench_process::start(with_port(node("decode", slots, n_ctx_decode), p1), "decode 1", 120, u1);
    std::unique_ptr<bench_process> d2;
    std::vector<std::string> ra = route_args(pre->url(), u1 + "," + u2, model);
    ra.insert(ra.end(), {"--pd-min-tokens", "256", "--health-interval", "0.2", "--timeout", "600"});
    auto router = bench_process::start(ra, "router");

    variant_result res;
    std::vector<std::vector<int>> conv = firsts;
    auto send = [&](std::vector<int> & prompt, round_stats & into) {
        const stream_timing t = stream_completion("127.0.0.1", router->port(), prompt, gen, 900);
        if (!t.ok) throw std::runtime_error(std::string(tier ? "tier" : "recompute") + ": " + t.error);
        into.ttft.push_back(t.ttft_ms);
    };
    auto nodes = [&] { return std::vector<const bench_process *>{pre.get(), d1.get(), d2.get()}; };
    // follow_ups: every conversation's next turn (16 answer + 64 message tokens, seeded from seed), one at a time.
    auto follow_ups = [&](uint32_t seed, round_stats & into) {
        const double before = computed_tokens(nodes());
        for (size_t i = 0; i < conv.size(); ++i) {
            const auto add = random_prompt(size_t(answer + message) + 1, seed + uint32_t(i), n_vocab);
            conv[i].insert(conv[i].end(), add.begin() + 1, add.end());
            send(conv[i], into);
        }
        into.computed = computed_tokens(nodes()) - before;
    };

    const double c0 = computed_tokens(nodes());
    for (auto & c : conv) send(c, res.first);
    res.first.computed = computed_tokens(nodes()) - c0;
    // The router learns where the conversations are from D1's KV events (a sweep and a health round).
    const double blocks = double(conv.size() * (firsts[0].size() / 64));
    for (int i = 0; i < 200 && process_metric(*router, "baton_router_kv_index_blocks") < blocks; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    follow_ups(7000, res.warm);
    if (tier) {
        // Every state written (first messages and follow-ups) and known to the router, so the restart loses nothing
        // the tier was going to have.
        for (int i = 0; i < 1200 && process_metric(*d1, "baton_tier_states_written_total") < double(2 * conv.size());
             ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        for (int i = 0; i < 200 && process_metric(*router, "baton_router_kv_tier_entries") < double(conv.size()); ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    // The restart and the new node.
    d1.reset();
    d1 = bench_process::start(with_port(node("decode", slots, n_ctx_decode), p1), "decode 1 (restarted)", 120, u1);
    d2 = bench_process::start(with_port(node("decode", slots, n_ctx_decode), p2), "decode 2", 120, u2);
    for (int i = 0; i < 200 && process_metric(*router, "baton_router_nodes{role=\"decode\"}") < 2; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // the new epochs' events read (resync)
    follow_ups(8000, res.after);
    if (tier) {
        res.tier_hits =
            process_metric(*d1, "baton_tier_fetch_hits_total") + process_metric(*d2, "baton_tier_fetch_hits_total");
        res.tier_routes = process_metric(*router, "baton_router_kv_routes_total{result=\"tier\"}");
    }
    return res;
}

}  // namespace

int main(int argc, char ** argv) try {
    bool quick = false;
    for (int i = 1; i < argc; ++i)
        if (std::string(argv[i]) == "--quick") quick = true;
    const int conversations = quick ? 4 : 8, first = quick ? 512 : 4096, slots = 4;
    const int n_ctx_decode = slots * (first + 512), n_ctx_prefill = first + 512;
    const std::string model = bench_model("llama", quick ? 128 : 512, quick ? 2 : 8);
    const int n_vocab = model_n_vocab(model);
    std::vector<std::vector<int>> firsts;
    for (int i = 0; i < conversations; ++i) firsts.push_back(random_prompt(size_t(first), uint32_t(600 + i), n_vocab));
    std::printf("%d conversations x %d-token first messages; a follow-up round on D1, then D1 restarted and D2 added, "
                "then a round on the restarted/new nodes; 1 prefill + 2 decode nodes, -t 2, %s\n",
                conversations, first, model.c_str());
    std::printf("%-10s %-28s %10s %10s %16s\n", "variant", "round", "median ms", "P90 ms", "tokens computed");
    std::map<std::string, variant_result> res;
    for (const bool tier : {false, true}) {
        const std::string name = tier ? "tier" : "recompute";
        const variant_result r = run_variant(tier, model, firsts, n_vocab, slots, n_ctx_decode, n_ctx_prefill);
        res[name] = r;
        const std::pair<const char *, const round_stats *> rounds[] = {{"first messages", &r.first},
                                                                       {"warm follow-ups (D1 holds)", &r.warm},
                                                                       {"after restart / new node", &r.after}};
        for (const auto & [label, s] : rounds)
            std::printf("%-10s %-28s %10.0f %10.0f %16.0f\n", name.c_str(), label, percentile(s->ttft, 50),
                        percentile(s->ttft, 90), s->computed);
        if (tier)
            std::printf(
                "%-10s tier: %.0f fetch hits on the decode nodes, %.0f turns the router sent on the tier's word\n", "",
                r.tier_hits, r.tier_routes);
        const std::string tag = "tier_cluster/" + name;
        for (const auto & [key, s] :
             {std::pair<const char *, const round_stats *>{"warm", &r.warm}, {"after_restart", &r.after}}) {
            result_value(tag + "/" + key + "/ttft_p50", percentile(s->ttft, 50), "ms", "info", true,
                         percentile(s->ttft, 0), percentile(s->ttft, 100), s->ttft.size());
            result_value(tag + "/" + key + "/ttft_p90", percentile(s->ttft, 90), "ms", "info", true,
                         percentile(s->ttft, 0), percentile(s->ttft, 100), s->ttft.size());
            result_value(tag + "/" + key + "/tokens_computed", s->computed, "tokens", "info", true, 0, 0,
                         s->ttft.size());
        }
    }
    const double t = percentile(res["tier"].after.ttft, 50), rc = percentile(res["recompute"].after.ttft, 50);
    const double ratio = rc > 0 ? t / rc : 0;
    std::printf("first turn on a restarted or new node, median TTFT: tier / recompute = %.3fx (target <= 0.2x)\n",
                ratio);
    const bool ok = quick || (ratio > 0 && ratio <= 0.2);
    result_value("tier_cluster/after_restart_ratio", ratio, "x", "<= 0.2", ok, 0, 0, res["tier"].after.ttft.size());
    stats hs;
    hs.median = hs.min = hs.max = ratio;
    hs.n = res["tier"].after.ttft.size();
    headline(18, "tier_cluster/after_restart_ratio", hs, "x", "<= 0.2", ok);
    return ok ? 0 : 3;
} catch (const std::exception & e) {
    std::fprintf(stderr, "tier_cluster_bench: %s\n", e.what());
    return 1;
}
