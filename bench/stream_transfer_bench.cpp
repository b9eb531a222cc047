// stream_transfer_bench.cpp — figure 23: TTFT of PD with the state sent whole after the prompt vs streamed
// while the prompt computes (--state-stream-tokens, state_stream.h), against a single node, every process
// behind its own tc-shaped link, side by side in one run.
//
// Topology (bench_netns.h): namespaces for the routers (r), a prefill node that sends states whole (p0) and
// one that streams them (p1), a decode node for each (d0, d1) and a single node (s), on one bridge; every
// link shaped with tbf to the same rate each way. Router 0 pairs p0 with d0, router 1 p1 with d1 (direct
// transfer; no -m, so no KV routing: every request is a PD request). The client sits in the hub.
//
// What is timed: TTFT on the client (send -> first streamed token) of a fresh random prompt (never cached
// anywhere) with max_tokens 1, one request at a time, the three modes in rotating order per round (single,
// whole, streamed; then whole, streamed, single; ...), median over rounds. Every node runs 1 thread (two
// cores: the decode node's joins then do not take the prefill node's core; between machines they would not
// share one at all), micro-batch 128 (-ub 128) and batch 2048 on every node alike, so the streamed prefill's
// parts (128 tokens, at least the prompt's 1/16) stop where its micro-batches end anyway and the prompt
// computes the same on all of them. A 512x8 llama with an f32 K/V cache: 16 KiB of state per token.
//
// Link rates: 1000 Mbit/s, and the "matched" rate at which the link moves the whole state in the single node's
// TTFT (measured first at 1000 Mbit/s: rate = state bits / single TTFT), where a whole-state transfer roughly
// doubles TTFT; --rate adds another. The goal: streamed PD's TTFT overhead <= 15% at the matched rate.
// No added delay: this kernel has no sch_netem (tc says "qdisc kind is unknown"), so links are rate-shaped only;
// a few ms of delay would add a few ms to each mode's TTFT alike (one more round trip for the fetch).
//
// --quick (CI smoke): 512-token prompts, 1 round, the 1000 Mbit/s rate only; no target enforced. Without
// CAP_NET_ADMIN or iproute2, --quick prints why and exits 0. Every loop is bounded; every namespace deleted.
#include <algorithm>
#include <cmath>

#include "bench_net.h"
#include "bench_netns.h"

using namespace baton;
using namespace baton::bench;

namespace {

double metric_of(const bench_process & p, const std::string & name) {
    const double v = process_metric(p, name);
    if (v < 0) throw std::runtime_error("metric " + name + " missing at " + p.url());
    return v;
}

struct mode_times {
    std::vector<double> single, whole, streamed;
};

}  // namespace

int main(int argc, char ** argv) try {
    const bool quick = quick_mode(argc, argv);
    const int rounds = arg_int(argc, argv, "--rounds", quick ? 1 : 5);
    const size_t n_prompt = size_t(arg_int(argc, argv, "--prompt", quick ? 512 : 2048));
    const int extra_rate = arg_int(argc, argv, "--rate", 0);
    if (rounds < 1 || rounds > 20 || n_prompt < 256 || n_prompt > 16384 || extra_rate < 0 || extra_rate > 100000)
        throw std::runtime_error("bad arguments (--rounds 1..20 --prompt 256..16384 --rate 1..100000)");

    const std::string ip = find_tool("ip"), tc = find_tool("tc"), nsenter = find_tool("nsenter");
    if (ip.empty() || tc.empty() || nsenter.empty()) {
        const std::string why = "ip/tc (iproute2) or nsenter (util-linux) not found";
        if (quick) {
            std::printf("stream_transfer_bench: skipped: %s\n", why.c_str());
            return 0;
        }
        throw std::runtime_error(why);
    }
    const int n_embd = 512, n_layer = 8;
    const std::string model = bench_model("llama", n_embd, n_layer);
    const int n_vocab = model_n_vocab(model);

    lab L(ip, tc, nsenter);
    if (!lab_usable(L, quick, "stream_transfer_bench")) return 0;
    netns_cleanup_on_signals();
    int rate = 1000;
    L.build({"r", "p0", "p1", "d0", "d1", "s"}, rate);
    L.enter_hub();

    const int n_ctx = int(n_prompt) + 64;
    const auto node = [&](const std::string & suffix, const std::string & role, std::vector<std::string> extra) {
        auto a = node_args(model, role, 1, 1, n_ctx);
        a.insert(a.end(), {"--host", L.at(suffix).addr, "-ctk", "f32", "-ctv", "f32", "-b", "2048", "-ub", "128"});
        a.insert(a.end(), extra.begin(), extra.end());
        return bench_process::start(L.in(L.at(suffix).ns, a), role + " " + suffix);
    };
    auto single = node("s", "both", {});
    auto p_whole = node("p0", "prefill", {});
    auto p_stream = node("p1", "prefill", {"--state-stream-tokens", "128"});
    auto d_whole = node("d0", "decode", {});
    auto d_stream = node("d1", "decode", {});
    const auto router = [&](const bench_process & p, const bench_process & d, const std::string & name) {
        std::vector<std::string> a = {baton_exe(), "route",      "--prefill", p.url(),  "--decode",
                                      d.url(),     "--fallback", "fail",      "--host", L.at("r").addr};
        return bench_process::start(L.in(L.at("r").ns, a), name);
    };
    auto r_whole = router(*p_whole, *d_whole, "router whole");
    auto r_stream = router(*p_stream, *d_stream, "router streamed");

    uint32_t seed = 2300;
    const auto ttft = [&](const bench_process & target) {
        const auto p = random_prompt(n_prompt, seed++, n_vocab);
        auto t = stream_completion(target.host(), target.port(), p, 1, 300);
        if (!t.ok) throw std::runtime_error("request to " + target.url() + ": " + t.error);
        return t.ttft_ms;
    };
    // Warm-up: every path once (first-use buffers, connections, the decode nodes' first restore).
    for (const bench_process * t : {single.get(), r_whole.get(), r_stream.get()}) ttft(*t);
    const double fetched0 = metric_of(*d_whole, "baton_state_fetch_bytes_total");
    ttft(*r_whole);
    const double state_bytes = metric_of(*d_whole, "baton_state_fetch_bytes_total") - fetched0;
    if (state_bytes <= 0) throw std::runtime_error("no state bytes fetched by the whole-state decode node");
    std::printf("state per request: %.1f MB (%zu-token prompt, %dx%d llama, f32 K/V); %d rounds per rate\n",
                state_bytes / 1e6, n_prompt, n_embd, n_layer, rounds);

    const auto run_rate = [&](int mbit, const std::string & label) {
        if (mbit != rate) {
            L.set_rate(mbit);
            rate = mbit;
        }
        mode_times m;
        const double parts0 = metric_of(*d_stream, "baton_state_stream_parts_total");
        const double streams0 = metric_of(*d_stream, "baton_state_streams_fetched_total");
        for (int round = 0; round < rounds; ++round)
            for (int k = 0; k < 3; ++k) {
                switch ((round + k) % 3) {
                    case 0: m.single.push_back(ttft(*single)); break;
                    case 1: m.whole.push_back(ttft(*r_whole)); break;
                    default: m.streamed.push_back(ttft(*r_stream)); break;
                }
            }
        const double streams = metric_of(*d_stream, "baton_state_streams_fetched_total") - streams0;
        if (streams != rounds) throw std::runtime_error("the streamed router's requests did not all stream");
        const double parts = (metric_of(*d_stream, "baton_state_stream_parts_total") - parts0) / streams;
        const stats s = summarize(m.single), w = summarize(m.whole), st = summarize(m.streamed);
        const double link_ms = state_bytes * 8 / (double(mbit) * 1e6) * 1e3;
        std::printf("%s: %d Mbit/s (the whole state takes %.0f ms on the link): TTFT single %.0f ms, PD whole %.0f ms "
                    "(%.2fx), PD streamed %.0f ms (%.2fx) in %.1f parts\n",
                    label.c_str(), mbit, link_ms, s.median, w.median, w.median / s.median, st.median,
                    st.median / s.median, parts);
        std::fflush(stdout);
        const std::string n = "stream_transfer/" + label;
        result_at(n + "/single_ttft", s, "ms", "info", true, {23, "single node", double(mbit)});
        result_at(n + "/whole_ttft", w, "ms", "info", true, {23, "PD, state whole", double(mbit)});
        result_at(n + "/streamed_ttft", st, "ms", "info", true, {23, "PD, state streamed", double(mbit)});
        result_value(n + "/whole_overhead", 100 * (w.median / s.median - 1), "%", "info", true,
                     100 * (w.min / s.median - 1), 100 * (w.max / s.median - 1), w.n);
        return std::pair<double, double>(100 * (st.median / s.median - 1), s.median);
    };
    const auto [over_1g, single_ms] = run_rate(1000, "1000mbit");
    result_value("stream_transfer/1000mbit/streamed_overhead", over_1g, "%", "info", true, over_1g, over_1g, 1);
    if (!quick) {
        // The link moves the whole state in the single node's TTFT: whole-state PD about doubles it.
        const int matched = std::max(10, int(std::lround(state_bytes * 8 / (single_ms / 1e3) / 1e6)));
        const auto [over_m, ignored] = run_rate(matched, "matched");
        (void)ignored;
        result_value("stream_transfer/matched/link_rate", matched, "Mbit/s", "info", true, matched, matched, 1);
        result_value("stream_transfer/matched/streamed_overhead", over_m, "%", "<= 15%", over_m <= 15, over_m, over_m,
                     1);
        stats h;
        h.median = h.min = h.max = over_m;
        h.n = size_t(rounds);
        headline(23, "stream_transfer_overhead_matched_link", h, "%",
                 "<= 15% TTFT over a single node where the link moves the state in the prefill's time", over_m <= 15);
        if (extra_rate > 0) run_rate(extra_rate, std::to_string(extra_rate) + "mbit");
    }
    return 0;
} catch (const std::exception & e) {
    std::fprintf(stderr, "stream_transfer_bench: %s\n", e.what());
    return 1;
}
