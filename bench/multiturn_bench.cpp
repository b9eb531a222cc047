// multiturn_bench.cpp — figure 14: multi-turn chats through PD, today's routing vs KV-aware routing (issue 24).
//
// A cluster of 1 prefill node and 2 decode nodes (8 slots each) on one model, and 16 conversations of 8 turns
// run concurrently, turn by turn (every conversation sends turn t, all answers are in, then turn t+1): a long
// first message (1024 tokens), then follow-ups of F new tokens each (the previous prompt, 16 tokens standing in
// for the answer, and the new message), 16 tokens generated per turn. Prompts are token arrays, so the router
// with -m sees the exact tokens the nodes see. Two routers over the same nodes, run one after the other with
// fresh nodes for each (no cache carried over):
//   today: `baton route` without -m and with --pd-delta false — the PD decision on the whole prompt's length
//          (every turn of >= --pd-min-tokens goes PD and ships the whole conversation's state), decode affinity
//          by hashing the request's first 256 bytes (a conversation keeps its node);
//   new:   `baton route -m` — decode node by what the nodes' caches hold (KV events), PD only when the chosen
//          node misses --pd-min-tokens or more, and then a delta over what it holds.
// Follow-ups of F = 32 tokens (below --pd-min-tokens 64: handled locally where the conversation is) and of
// F = 256 (PD with a delta). Per turn, over the 16 conversations: KV bytes moved node to node (the router's
// baton_router_direct_state_bytes_total), median TTFT, and prefill tokens computed (every node's
// baton_prompt_tokens_total - baton_cached_tokens_total). Headlines: bytes moved per follow-up turn, new /
// today (target <= 0.25 with F = 256: the delta ships only the new cells), and prefill tokens computed over
// all turns, new / today (target < 1). --quick: a 128x2 model, 4 conversations, 2 turns, first message 128, and
// one crossover point.
//
// Then the measurement behind --pd-min-tokens' default (the crossover): one conversation at a time, its 1024-token
// first turn answered through PD (so a decode node holds it), then a follow-up adding m new tokens, m = 16 ... 512,
// sent through a router that prefills it locally on that decode node (--pd-min-tokens 100000) and, for a second
// conversation, through one that takes PD with a delta (--pd-min-tokens 0); 3 conversations per m and path, median
// TTFT. A local prefill of m tokens occupies the decode node for about its TTFT (every stream it serves waits that
// long for its next token); PD costs the request the hop's overhead instead. Idle cluster, one request at a time.
#include <atomic>
#include <mutex>

#include "bench_net.h"

using namespace baton;
using namespace baton::bench;

namespace {

struct params {
    std::string model;
    int n_vocab = 0;
    int conversations = 16, turns = 8, first = 1024, followup = 32, gen = 16, slots = 8, n_ctx = 32768;
};

struct turn_stats {
    double bytes = 0;           // KV bytes moved node to node in this turn, all conversations
    double prefill_tokens = 0;  // prompt tokens computed by any node in this turn
    std::vector<double> ttft;   // per conversation, ms
    int pd = 0;                 // requests that went through a prefill hop
};

struct config_stats {
    std::vector<turn_stats> turns;
    double restore_ms = 0;  // decode nodes: mean time in the restore routine per restore (a delta's join included)
    double restores = 0, deltas = 0;
    double rejected = 0;  // fallbacks: a blob (a delta whose base was gone) refused, prefilled locally instead
};

// run_config: fresh nodes and a router with extra flags, the conversations turn by turn.
config_stats run_config(const params & p, bool kv_aware) {
    auto pre = bench_process::start(node_args(p.model, "prefill", 2, p.slots, p.n_ctx), "prefill");
    auto d0 = bench_process::start(node_args(p.model, "decode", 1, p.slots, p.n_ctx), "decode 0");
    auto d1 = bench_process::start(node_args(p.model, "decode", 1, p.slots, p.n_ctx), "decode 1");
    // --fallback local (the default): a delta whose base the decode node no longer holds (another request took
    // the slot meanwhile) is refused and the request prefilled there; counted below.
    std::vector<std::string> ra = {baton_exe(),         "route",    "--prefill",
                                   pre->url(),          "--decode", d0->url() + "," + d1->url(),
                                   "--health-interval", "0.2"};
    if (kv_aware) ra.insert(ra.end(), {"-m", p.model});
    else ra.insert(ra.end(), {"--pd-delta", "false"});
    auto route = bench_process::start(ra, kv_aware ? "router (new)" : "router (today)");
    const std::vector<bench_process *> nodes = {pre.get(), d0.get(), d1.get()};
    auto computed = [&] {
        double s = 0;
        for (auto * n : nodes)
            s += process_metric(*n, "baton_prompt_tokens_total") - process_metric(*n, "baton_cached_tokens_total");
        return s;
    };
    std::vector<std::vector<int>> prompts;
    for (int c = 0; c < p.conversations; ++c)
        prompts.push_back(random_prompt(size_t(p.first), uint32_t(1000 + c), p.n_vocab));
    config_stats cs;
    std::vector<turn_stats> & out = cs.turns;
    for (int t = 0; t < p.turns; ++t) {
        if (t > 0) {
            for (int c = 0; c < p.conversations; ++c) {
                const auto more = random_prompt(size_t(16 + p.followup) + 1, uint32_t(50000 + 100 * c + t), p.n_vocab);
                prompts[size_t(c)].insert(prompts[size_t(c)].end(), more.begin() + 1, more.end());
            }
            // The nodes publish what their slots hold every second and the router polls with its health
            // checks: a turn's follow-up comes after the user read the answer.
            std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        }
        turn_stats ts;
        const double bytes0 = process_metric(*route, "baton_router_direct_state_bytes_total");
        const double pd0 = process_metric(*route, "baton_router_mode_total{mode=\"pd\"}");
        const double comp0 = computed();
        std::vector<stream_timing> r(size_t(p.conversations));
        std::vector<std::thread> th;
        for (int c = 0; c < p.conversations; ++c)
            th.emplace_back(
                [&, c] { r[size_t(c)] = stream_completion(route->host(), route->port(), prompts[size_t(c)], p.gen); });
        for (auto & x : th) x.join();
        for (const auto & x : r) {
            if (!x.ok)
                throw std::runtime_error(std::string(kv_aware ? "new" : "today") + " turn " + std::to_string(t) + ": " +
                                         x.error);
            ts.ttft.push_back(x.ttft_ms);
        }
        ts.bytes = process_metric(*route, "baton_router_direct_state_bytes_total") - bytes0;
        ts.pd = int(process_metric(*route, "baton_router_mode_total{mode=\"pd\"}") - pd0);
        ts.prefill_tokens = computed() - comp0;
        out.push_back(std::move(ts));
    }
    double seconds = 0;
    for (auto * d : {d0.get(), d1.get()}) {
        seconds += process_metric(*d, "baton_restore_seconds_total");
        cs.restores += process_metric(*d, "baton_restores_total");
        cs.deltas += process_metric(*d, "baton_deltas_in_total");
    }
    cs.restore_ms = cs.restores > 0 ? 1000 * seconds / cs.restores : 0;
    cs.rejected = process_metric(*route, "baton_router_fallbacks_total{reason=\"blob_rejected\"}");
    return cs;
}

// crossover: TTFT of a follow-up of m new tokens handled locally vs PD with a delta (see the header).
void crossover(const params & p, bool quick) {
    auto pre = bench_process::start(node_args(p.model, "prefill", 2, 4, p.n_ctx), "prefill");
    auto dec = bench_process::start(node_args(p.model, "decode", 2, 4, p.n_ctx), "decode");
    auto router = [&](const char * min_tokens) {
        return bench_process::start({baton_exe(), "route", "--prefill", pre->url(), "--decode", dec->url(),
                                     "--fallback", "fail", "--health-interval", "0.2", "-m", p.model, "--pd-min-tokens",
                                     min_tokens},
                                    std::string("router --pd-min-tokens ") + min_tokens);
    };
    auto local = router("100000");
    auto pd = router("0");
    const std::vector<int> ms = quick ? std::vector<int>{128} : std::vector<int>{16, 32, 64, 128, 256, 512};
    const int reps = quick ? 1 : 3;
    std::printf("\ncrossover: a follow-up of m new tokens after a %d-token turn the decode node holds\n", p.first);
    std::printf("%-6s %14s %14s %10s\n", "m", "TTFT local ms", "TTFT PD ms", "PD/local");
    uint32_t seed = 700000;
    for (int m : ms) {
        std::vector<double> t_local, t_pd;
        for (int r = 0; r < reps; ++r)
            for (int path = 0; path < 2; ++path) {
                std::vector<int> prompt = random_prompt(size_t(p.first), ++seed, p.n_vocab);
                auto first = stream_completion(pd->host(), pd->port(), prompt, 4);
                if (!first.ok) throw std::runtime_error("crossover first turn: " + first.error);
                std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // published and polled by both routers
                const auto more = random_prompt(size_t(m) + 1, ++seed, p.n_vocab);
                prompt.insert(prompt.end(), more.begin() + 1, more.end());
                const bench_process & via = path == 0 ? *local : *pd;
                auto t = stream_completion(via.host(), via.port(), prompt, 4);
                if (!t.ok) throw std::runtime_error("crossover follow-up: " + t.error);
                (path == 0 ? t_local : t_pd).push_back(t.ttft_ms);
            }
        const double a = percentile(t_local, 50), b = percentile(t_pd, 50);
        std::printf("%-6d %14.1f %14.1f %10.2f\n", m, a, b, a > 0 ? b / a : 0);
        const std::string tag = "multiturn/crossover/m" + std::to_string(m);
        result_value(tag + "/ttft_local", a, "ms", "info", true, percentile(t_local, 0), percentile(t_local, 100),
                     t_local.size());
        result_value(tag + "/ttft_pd_delta", b, "ms", "info", true, percentile(t_pd, 0), percentile(t_pd, 100),
                     t_pd.size());
    }
    const double deltas = process_metric(*dec, "baton_deltas_in_total");
    std::printf("decode node: %.0f deltas restored\n", deltas);
}

}  // namespace

int main(int argc, char ** argv) try {
    const bool quick = quick_mode(argc, argv);
    params base;
    base.model = bench_model("llama", quick ? 128 : 256, quick ? 2 : 4);
    base.n_vocab = model_n_vocab(base.model);
    if (quick) {
        base.conversations = 4;
        base.turns = 2;
        base.first = 128;
        base.gen = 4;
        base.slots = 4;
        base.n_ctx = 4096;
    }
    std::printf("multi-turn chats: %d conversations x %d turns, first message %d tokens, %d generated per turn, "
                "1 prefill + 2 decode nodes (%d slots each)\n",
                base.conversations, base.turns, base.first, base.gen, base.slots);
    for (int followup : {32, 256}) {
        params p = base;
        p.followup = followup;
        const config_stats today_cs = run_config(p, false);
        const config_stats fresh_cs = run_config(p, true);
        const auto & today = today_cs.turns;
        const auto & fresh = fresh_cs.turns;
        std::printf("\nfollow-ups of %d new tokens (+16 answer tokens)\n", followup);
        std::printf("%-5s %14s %14s %10s %10s %12s %12s %6s %6s\n", "turn", "MB today", "MB new", "TTFT today",
                    "TTFT new", "prefill today", "prefill new", "pd", "pd");
        double bytes_today = 0, bytes_new = 0, comp_today = 0, comp_new = 0;
        std::vector<double> ttft_ratio;
        for (size_t t = 0; t < today.size(); ++t) {
            const auto & a = today[t];
            const auto & b = fresh[t];
            const double ta = percentile(a.ttft, 50), tb = percentile(b.ttft, 50);
            std::printf("%-5zu %14.2f %14.2f %10.1f %10.1f %12.0f %12.0f %6d %6d\n", t + 1, a.bytes / 1e6,
                        b.bytes / 1e6, ta, tb, a.prefill_tokens, b.prefill_tokens, a.pd, b.pd);
            const std::string tag = "multiturn/f" + std::to_string(followup) + "/turn" + std::to_string(t + 1);
            result_value(tag + "/bytes_today", a.bytes / double(p.conversations), "bytes", "info", true, 0, 0,
                         size_t(p.conversations));
            result_value(tag + "/bytes_new", b.bytes / double(p.conversations), "bytes", "info", true, 0, 0,
                         size_t(p.conversations));
            result_value(tag + "/ttft_today", ta, "ms", "info", true, percentile(a.ttft, 0), percentile(a.ttft, 100),
                         a.ttft.size());
            result_value(tag + "/ttft_new", tb, "ms", "info", true, percentile(b.ttft, 0), percentile(b.ttft, 100),
                         b.ttft.size());
            comp_today += a.prefill_tokens;
            comp_new += b.prefill_tokens;
            if (t > 0) {
                bytes_today += a.bytes;
                bytes_new += b.bytes;
                if (ta > 0) ttft_ratio.push_back(tb / ta);
            }
        }
        const std::string f = "multiturn/f" + std::to_string(followup);
        std::printf(
            "restore routine on the decode nodes: today %.0f restores, %.2f ms each; new %.0f restores (%.0f deltas), "
            "%.2f ms each\n",
            today_cs.restores, today_cs.restore_ms, fresh_cs.restores, fresh_cs.deltas, fresh_cs.restore_ms);
        result_value(f + "/restore_ms_today", today_cs.restore_ms, "ms", "info", true, 0, 0, size_t(today_cs.restores));
        result_value(f + "/restore_ms_new", fresh_cs.restore_ms, "ms", "info", true, 0, 0, size_t(fresh_cs.restores));
        const double bytes_ratio = bytes_today > 0 ? bytes_new / bytes_today : 0;
        const double comp_ratio = comp_today > 0 ? comp_new / comp_today : 0;
        std::printf("follow-up turns: bytes moved new/today %.3f, prefill tokens computed (all turns) new/today %.3f, "
                    "median TTFT ratio new/today %.2f\n",
                    bytes_ratio, comp_ratio, percentile(ttft_ratio, 50));
        if (followup == 256)
            result_value(f + "/followup_bytes_new_vs_today", bytes_ratio, "x", "<= 0.25", bytes_ratio <= 0.25, 0, 0,
                         size_t(p.turns - 1));
        else
            result_value(f + "/followup_bytes_new_vs_today", bytes_ratio, "x", "info", true, 0, 0, size_t(p.turns - 1));
        result_value(f + "/prefill_tokens_new_vs_today", comp_ratio, "x", "< 1", comp_ratio < 1, 0, 0, size_t(p.turns));
        result_value(f + "/followup_ttft_new_vs_today", percentile(ttft_ratio, 50), "x", "info", true,
                     percentile(ttft_ratio, 0), percentile(ttft_ratio, 100), ttft_ratio.size());
    }
    crossover(base, quick);
    return 0;
} catch (const std::exception & e) {
    std::fprintf(stderr, "multiturn_bench: %s\n", e.what());
    return 1;
}
