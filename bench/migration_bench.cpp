// migration_bench.cpp — figure 24: live migration's stall. A streaming generation at 4k tokens of context moves
// from one decode node to another (POST /admin/migrate, docs/cluster.md "Live migration") while the client
// reads it; the longest gap between two tokens the client sees (the stall) against the stream's median time per
// token, and the state bytes moved — side by side with token replay (the baseline: the generation re-prefilled on
// the other node, as Dynamo migrates), whose stall is that node's time to the first token of the prompt and the
// tokens generated so far.
//
// Topology: two decode nodes (1 thread each, f32 K/V, one slot of 8k tokens) behind a router on loopback; the
// client reads the stream through the router. A 512x8 llama: 16 KiB of state per token. What is timed, per round:
// a fresh random 4000-token prompt (never cached) generating 200 tokens greedily; when the node serving it has
// generated 60 tokens (its baton_generated_tokens_total), it is asked to move it; the client timestamps every
// token chunk; the stall is split into the source's export and the target's fetch, host-cache keep of the state its
// slot held before, and restore (their metrics). Then the
// replay baseline on the other node: a fresh prompt of the same length plus the 60 tokens, max_tokens 1 (its
// TTFT is what a re-prefill stalls the stream for). Medians over rounds.
//
// The goal is a stall <= 2x the median TPOT at 4k tokens; stop-and-copy (what is built: the whole state
// moves at the pause) is measured against it as it is — pre-copy, which moves most of the state before the pause,
// is not built yet.
//
// --quick (CI smoke): a 1000-token prompt, 80 tokens, 1 round; no target enforced. Every loop is bounded.
#include <algorithm>
#include <atomic>
#include <thread>

#include "bench_net.h"

using namespace baton;
using namespace baton::bench;

namespace {

int ask_migrate(const bench_process & p) {
    httplib::Client c(p.host(), p.port());
    c.set_read_timeout(std::chrono::seconds(5));
    auto r = c.Post("/admin/migrate", "", "application/json");
    if (!r || r->status != 202) return -1;
    return nlohmann::json::parse(r->body, nullptr, false).value("migrating", -1);
}

}  // namespace

int main(int argc, char ** argv) try {
    const bool quick = quick_mode(argc, argv);
    const int rounds = arg_int(argc, argv, "--rounds", quick ? 1 : 3);
    const size_t n_prompt = size_t(arg_int(argc, argv, "--prompt", quick ? 1000 : 4000));
    const int n_gen = quick ? 80 : 200, move_after = quick ? 20 : 60;
    if (rounds < 1 || rounds > 20 || n_prompt < 256 || n_prompt > 7800)
        throw std::runtime_error("bad arguments (--rounds 1..20 --prompt 256..7800)");
    const int n_embd = 512, n_layer = 8;
    const std::string model = bench_model("llama", n_embd, n_layer);
    const int n_vocab = model_n_vocab(model);
    const auto node = [&](const std::string & name) {
        auto a = node_args(model, "decode", 1, 1, 8192);
        a.insert(a.end(), {"-ctk", "f32", "-ctv", "f32"});
        return bench_process::start(a, name);
    };
    auto a = node("decode a"), b = node("decode b");
    auto router = bench_process::start(
        {baton_exe(), "route", "--decode", a->url() + "," + b->url(), "--fallback", "fail", "--timeout", "300"},
        "router");

    uint32_t seed = 2400;
    std::vector<double> tpots, stalls, ratios, replays, mbs, sers, fetches, restores, keeps;
    for (int round = 0; round < rounds + 1; ++round) {  // (round 0: warm-up, not counted)
        const auto prompt = random_prompt(n_prompt, seed++, n_vocab);
        stream_timing t;
        std::thread client([&] { t = stream_completion(router->host(), router->port(), prompt, n_gen, 300); });
        // Ask the node serving it to move it once it has generated move_after tokens (its generated-token
        // counter: /v1/slots shows a running slot's tokens only as its prompt goes in).
        const bench_process * from = nullptr;
        const double fetched_a = process_metric(*a, "baton_state_fetch_bytes_total");
        const double fetched_b = process_metric(*b, "baton_state_fetch_bytes_total");
        // (where the stall goes: the source's export, the target's fetch and restore)
        const auto secs = [&](const char * m) { return std::pair{process_metric(*a, m), process_metric(*b, m)}; };
        const auto ser0 = secs("baton_serialize_seconds_total"), fetch0 = secs("baton_state_fetch_seconds_total"),
                   rest0 = secs("baton_restore_seconds_total"), keep0 = secs("baton_cache_ram_store_seconds_total");
        const double gen_a = process_metric(*a, "baton_generated_tokens_total");
        const double gen_b = process_metric(*b, "baton_generated_tokens_total");
        for (int i = 0; i < 60000 && !from; ++i) {  // (bounded: 5 ms polls, at most 300 s)
            if (process_metric(*a, "baton_generated_tokens_total") - gen_a >= move_after) from = a.get();
            else if (process_metric(*b, "baton_generated_tokens_total") - gen_b >= move_after) from = b.get();
            if (!from) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        const int asked = from ? ask_migrate(*from) : -1;
        client.join();
        if (!t.ok) throw std::runtime_error("the moved stream failed: " + t.error);
        if (asked != 1)
            throw std::runtime_error("the serving node did not move the stream (" + std::to_string(asked) + ")");
        if (t.completion_tokens != n_gen) throw std::runtime_error("the moved stream lost or repeated tokens");
        const bench_process & to = from == a.get() ? *b : *a;
        const double moved = from == a.get() ? process_metric(*b, "baton_state_fetch_bytes_total") - fetched_b
                                             : process_metric(*a, "baton_state_fetch_bytes_total") - fetched_a;
        const bool from_a = from == a.get();
        const auto delta = [&](const char * m, std::pair<double, double> before, bool on_a) {
            return 1e3 * (on_a ? process_metric(*a, m) - before.first : process_metric(*b, m) - before.second);
        };
        const double ser_ms = delta("baton_serialize_seconds_total", ser0, from_a);
        const double fetch_ms = delta("baton_state_fetch_seconds_total", fetch0, !from_a);
        const double restore_ms = delta("baton_restore_seconds_total", rest0, !from_a);
        // (the target's slot held another state, which its host cache keeps before the restore)
        const double keep_ms = delta("baton_cache_ram_store_seconds_total", keep0, !from_a);
        std::vector<double> gaps;
        for (size_t i = 1; i < t.chunk_ms.size(); ++i) gaps.push_back(t.chunk_ms[i] - t.chunk_ms[i - 1]);
        const double tpot = percentile(gaps, 50), stall = *std::max_element(gaps.begin(), gaps.end());
        // The baseline: the other node re-prefills the prompt and the tokens generated so far.
        const auto replay_prompt = random_prompt(n_prompt + size_t(move_after), seed++, n_vocab);
        auto r = stream_completion(to.host(), to.port(), replay_prompt, 1, 300);
        if (!r.ok) throw std::runtime_error("replay baseline: " + r.error);
        if (round == 0) continue;
        std::printf("round %d: TPOT %.1f ms, stall %.1f ms (%.1fx: export %.0f, fetch %.0f, target's cache keep %.0f, "
                    "restore %.0f ms), state %.1f MB; token replay's stall %.0f ms\n",
                    round, tpot, stall, stall / tpot, ser_ms, fetch_ms, keep_ms, restore_ms, moved / 1e6, r.ttft_ms);
        sers.push_back(ser_ms);
        fetches.push_back(fetch_ms);
        restores.push_back(restore_ms);
        keeps.push_back(keep_ms);
        std::fflush(stdout);
        tpots.push_back(tpot);
        stalls.push_back(stall);
        ratios.push_back(stall / tpot);
        replays.push_back(r.ttft_ms);
        mbs.push_back(moved / 1e6);
    }
    const std::string n = "migration/" + std::to_string(n_prompt) + "tok";
    const stats ratio = summarize(ratios);
    result(n + "/tpot", summarize(tpots), "ms", "info", true);
    result(n + "/stall", summarize(stalls), "ms", "info", true);
    result(n + "/stall_over_tpot", ratio, "x", "<= 2 (stop-and-copy; pre-copy not built)", quick || ratio.median <= 2);
    result(n + "/stall_export", summarize(sers), "ms", "info", true);
    result(n + "/stall_fetch", summarize(fetches), "ms", "info", true);
    result(n + "/stall_target_cache_keep", summarize(keeps), "ms", "info", true);
    result(n + "/stall_restore", summarize(restores), "ms", "info", true);
    result(n + "/replay_stall", summarize(replays), "ms", "info", true);
    result(n + "/state", summarize(mbs), "MB", "info", true);
    headline(24, "migration_stall_over_tpot", ratio, "x",
             "<= 2x median TPOT at 4k tokens of context (stop-and-copy; token replay's stall alongside)",
             quick || ratio.median <= 2);
    return 0;
} catch (const std::exception & e) {
    std::fprintf(stderr, "migration_bench: %s\n", e.what());
    return 1;
}
