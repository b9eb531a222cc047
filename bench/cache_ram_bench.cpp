// cache_ram_bench.cpp — figure 17: more conversations than slots on one node (issue 25's node tier): Baton's host
// prompt cache (`--cache-ram`, default 8192 MiB) against none (`--cache-ram 0`), with llama-server (its own
// `--cache-ram`, default on, same flag and meaning) on the same GGUF as the anchor.
//
// One server at a time, 4 slots, -t 2, a 512x8 llama. 16 conversations: each sends a first message of 1024 tokens
// (its own), then 3 rounds in which every conversation returns in turn with a follow-up (its previous prompt, 16
// tokens standing in for the answer, a new 64-token message), 8 tokens generated, one request at a time: when a
// conversation returns, 15 others have used the 4 slots since. Prompts are token arrays (the same for every
// server). Per server: TTFT of the returning turns (median, P90; client side, streaming) and prompt tokens computed
// (prompt - usage.prompt_tokens_details.cached_tokens, summed over the returning turns). Targets: Baton's median
// returning-turn TTFT with the cache >= 3x better than without; and >= 1.0x llama-server's (its / Baton's).
// Then the cluster tier (docs/tier.md): a real valkey-server; node A (--tier-valkey) answers every first message
// and is stopped; a fresh node B with the same tier answers the first round of follow-ups: each takes its
// conversation from the tier instead of computing it (TTFT median; target >= 3x better than the same turns on a
// fresh node without a tier, i.e. baton_cache_off's first round).
// --quick: a 128x2 model, 6 conversations of 128 tokens, 2 slots, 1 round.
#include <map>

#include "../tests/support/valkey_process.h"
#include "bench_net.h"

using namespace baton;
using namespace baton::bench;

namespace {

struct outcome {
    std::vector<double> ttft;  // returning turns
    double computed = 0;       // prompt tokens computed in returning turns
    bool cached_known = true;  // every response reported cached_tokens
};

// run_fresh_node_from_tier: the first turns on node A, then the first round of follow-ups on node B; both
// nodes with the tier at v. Returns the follow-ups' TTFTs and B's counts.
outcome run_fresh_node_from_tier(const std::vector<std::string> & node_argv, const baton::test::valkey_process & v,
                                 const std::vector<std::vector<int>> & firsts, int answer, int message, int n_vocab,
                                 int gen, double & hits) {
    std::vector<std::string> argv = node_argv;
    argv.insert(argv.end(), {"--tier-valkey", "127.0.0.1:" + std::to_string(v.port())});
    std::vector<std::vector<int>> conv = firsts;
    {
        auto a = bench_process::start(argv, "tier node A");
        for (auto & c : conv) {
            const stream_timing t = stream_completion("127.0.0.1", a->port(), c, gen, 600);
            if (!t.ok) throw std::runtime_error("tier node A: " + t.error);
        }
        // The writer is off the request path: wait (bounded) until every conversation is stored.
        for (int i = 0; i < 600 && process_metric(*a, "baton_tier_states_written_total") < double(conv.size()); ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    auto b = bench_process::start(argv, "tier node B");
    outcome o;
    for (size_t i = 0; i < conv.size(); ++i) {
        const auto add = random_prompt(size_t(answer + message) + 1, uint32_t(5000 + i), n_vocab);
        conv[i].insert(conv[i].end(), add.begin() + 1, add.end());
        const stream_timing t = stream_completion("127.0.0.1", b->port(), conv[i], gen, 600);
        if (!t.ok) throw std::runtime_error("tier node B: " + t.error);
        o.ttft.push_back(t.ttft_ms);
        o.computed += double(conv[i].size()) - std::max(0, t.cached_tokens);
    }
    hits = process_metric(*b, "baton_tier_fetch_hits_total");
    return o;
}

outcome run_server(int port, const std::vector<std::vector<int>> & firsts, int rounds, int answer, int message,
                   int n_vocab, int gen) {
    outcome o;
    std::vector<std::vector<int>> conv = firsts;
    auto send = [&](std::vector<int> & prompt, bool returning) {
        const stream_timing t = stream_completion("127.0.0.1", port, prompt, gen, 600);
        if (!t.ok) throw std::runtime_error("port " + std::to_string(port) + ": " + t.error);
        if (!returning) return;
        o.ttft.push_back(t.ttft_ms);
        if (t.cached_tokens < 0) o.cached_known = false;
        o.computed += double(prompt.size()) - std::max(0, t.cached_tokens);
    };
    for (auto & c : conv) send(c, false);
    for (int r = 0; r < rounds; ++r)
        for (size_t i = 0; i < conv.size(); ++i) {
            const auto add = random_prompt(size_t(answer + message) + 1, uint32_t(5000 + 100 * r + i), n_vocab);
            conv[i].insert(conv[i].end(), add.begin() + 1, add.end());
            send(conv[i], true);
        }
    return o;
}

}  // namespace

int main(int argc, char ** argv) try {
    bool quick = false;
    std::string llama_bin = "/usr/bin/llama-server";
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--quick") quick = true;
        else if (a == "--llama-server" && i + 1 < argc) llama_bin = argv[++i];
    }
    const int conversations = quick ? 6 : 16, first = quick ? 128 : 1024, rounds = quick ? 1 : 3, slots = quick ? 2 : 4;
    const int answer = 16, message = 64, gen = 8, threads = 2;
    const int n_ctx = slots * (first + rounds * (answer + message) + 256);
    const std::string model = bench_model("llama", quick ? 128 : 512, quick ? 2 : 8);
    const int n_vocab = model_n_vocab(model);
    std::vector<std::vector<int>> firsts;
    for (int i = 0; i < conversations; ++i) firsts.push_back(random_prompt(size_t(first), uint32_t(300 + i), n_vocab));
    std::printf("%d conversations x %d-token first messages, %d rounds of follow-ups (+%d answer, +%d message), "
                "%d slots, -t %d, %s\n",
                conversations, first, rounds, answer, message, slots, threads, model.c_str());
    std::printf("%-20s %12s %12s %16s\n", "server", "median ms", "P90 ms", "tokens computed");

    struct server {
        std::string name;
        std::vector<std::string> argv;
        bool llama = false;
    };
    const std::string t = std::to_string(threads), c = std::to_string(n_ctx), np = std::to_string(slots);
    const std::vector<server> servers = {
        {"baton_cache_off", {baton_exe(), "serve", "-m", model, "-t", t, "-np", np, "-c", c, "--cache-ram", "0"}},
        {"baton_cache_on", {baton_exe(), "serve", "-m", model, "-t", t, "-np", np, "-c", c}},
        {"llama_server",
         {llama_bin, "-m", model, "-t", t, "-tb", t, "-np", np, "-c", c, "-fa", "off", "-kvu", "--no-webui"},
         true},
    };
    std::map<std::string, outcome> res;
    for (const server & s : servers) {
        std::unique_ptr<bench_process> p;
        int port = 0;
        if (s.llama) {
            port = free_port();
            std::vector<std::string> a = s.argv;
            a.insert(a.end(), {"--host", "127.0.0.1", "--port", std::to_string(port)});
            p = bench_process::start(a, s.name, 120, "http://127.0.0.1:" + std::to_string(port));
        } else {
            p = bench_process::start(s.argv, s.name);
            port = p->port();
        }
        const outcome o = run_server(port, firsts, rounds, answer, message, n_vocab, gen);
        res[s.name] = o;
        std::printf("%-20s %12.0f %12.0f %16s\n", s.name.c_str(), percentile(o.ttft, 50), percentile(o.ttft, 90),
                    o.cached_known ? std::to_string(int64_t(o.computed)).c_str() : "(not reported)");
        const std::string tag = "cache_ram/" + s.name;
        result_value(tag + "/ttft_p50", percentile(o.ttft, 50), "ms", "info", true, percentile(o.ttft, 0),
                     percentile(o.ttft, 100), o.ttft.size());
        result_value(tag + "/ttft_p90", percentile(o.ttft, 90), "ms", "info", true, percentile(o.ttft, 0),
                     percentile(o.ttft, 100), o.ttft.size());
        if (o.cached_known)
            result_value(tag + "/tokens_computed", o.computed, "tokens", "info", true, 0, 0, o.ttft.size());
        if (!s.llama) {
            std::printf("%-20s host cache: %.0f stores, %.0f hits, %.0f entries, %.1f MiB\n", "",
                        process_metric(*p, "baton_cache_ram_stores_total"),
                        process_metric(*p, "baton_cache_ram_hits_total"), process_metric(*p, "baton_cache_ram_entries"),
                        process_metric(*p, "baton_cache_ram_bytes") / 1048576.0);
        }
    }
    // The tier: a fresh node's first round of follow-ups, against baton_cache_off's first round (a fresh node's
    // cache holds nothing of them either: they were computed).
    {
        auto v = baton::test::valkey_process::start();
        double hits = 0;
        const outcome t = run_fresh_node_from_tier(servers[1].argv, *v, firsts, answer, message, n_vocab, gen, hits);
        const std::vector<double> off_first(res["baton_cache_off"].ttft.begin(),
                                            res["baton_cache_off"].ttft.begin() + std::ptrdiff_t(conversations));
        const double tier_p50 = percentile(t.ttft, 50), recompute_p50 = percentile(off_first, 50);
        std::printf("%-20s %12.0f %12.0f %16.0f  (a fresh node's first follow-ups; %.0f tier hits)\n",
                    "baton_tier_fresh", tier_p50, percentile(t.ttft, 90), t.computed, hits);
        result_value("cache_ram/baton_tier_fresh/ttft_p50", tier_p50, "ms", "info", true, percentile(t.ttft, 0),
                     percentile(t.ttft, 100), t.ttft.size());
        result_value("cache_ram/baton_tier_fresh/tokens_computed", t.computed, "tokens", "info", true, 0, 0,
                     t.ttft.size());
        const double tier_gain = tier_p50 > 0 ? recompute_p50 / tier_p50 : 0;
        std::printf("a fresh node's follow-up median TTFT: computed / from the tier = %.1fx\n", tier_gain);
        result_value("cache_ram/tier_fresh_node_gain", tier_gain, "x", ">= 3", quick || tier_gain >= 3, 0, 0,
                     t.ttft.size());
    }
    const double on = percentile(res["baton_cache_on"].ttft, 50), off = percentile(res["baton_cache_off"].ttft, 50),
                 ls = percentile(res["llama_server"].ttft, 50);
    const double gain = on > 0 ? off / on : 0, vs_llama = on > 0 ? ls / on : 0;
    std::printf("returning-turn median TTFT: without / with the cache = %.1fx; llama-server / Baton = %.2fx\n", gain,
                vs_llama);
    result_value("cache_ram/ttft_off_vs_on", gain, "x", ">= 3", quick || gain >= 3, 0, 0,
                 res["baton_cache_on"].ttft.size());
    result_value("cache_ram/llama_server_vs_baton", vs_llama, "x", ">= 1.0", quick || vs_llama >= 1.0, 0, 0,
                 res["baton_cache_on"].ttft.size());
    return 0;
} catch (const std::exception & e) {
    std::fprintf(stderr, "cache_ram_bench: %s\n", e.what());
    return 1;
}
