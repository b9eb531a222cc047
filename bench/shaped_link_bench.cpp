// shaped_link_bench.cpp — figure 16: scaling past the router's link. Aggregate KV throughput of 2
// prefill -> decode pairs whose states move by direct transfer (decode node pulls from prefill node) vs
// through the router's relay, every process behind its own rate-limited network link, in one run.
//
// Topology (network namespaces made by this benchmark; nothing outside them is touched): a hub namespace
// holds a bridge; the router and each node (2 prefill, 2 decode) run in a namespace of their own
// (`baton-sl-<pid>-r`, `-p0`, `-p1`, `-d0`, `-d1`), joined to the bridge by a veth pair. Both ends of every
// veth are shaped with tc tbf to the same rate (egress inside the namespace = the process's upload, egress
// of the hub end = its download), so every process has one full-duplex link of R Mbit/s, like a host with
// one NIC. The benchmark itself (the clients, /metrics reads) joins the hub namespace; its traffic is
// prompts and 1-token answers, a few KB per request, on the router's link.
//
// Why this shape shows the claim: with relay, every KV byte of every pair goes prefill -> router -> decode,
// so all pairs share the router link's R in and R out: at most R/8 MB/s in aggregate, however many pairs.
// With direct transfer a pair uses only its own prefill node's upload and decode node's download, so 2
// pairs may reach 2 x R/8. The ideal ratio is 2.0x; the target is >= 1.8x.
//
// Pairs are pinned: each transfer mode has 2 routers (4 router processes, all in the router's one
// namespace, so their relays share the one shaped link), router i with prefill node i and decode node i.
// One router over both pairs would pick prefill nodes by outstanding prefill calls, which in direct mode end
// before the decode node's fetch, so two fetches would often land on one prefill node's upload by chance —
// that would measure the router's scheduling, not what crosses which link. Pinning keeps the figure about
// the links; what matters for relay (every byte through the router host's link) is unchanged.
//
// Transfers dominate, compute does not: a 512x8 llama with an f32 K/V cache (16 KiB per token: 8 layers x
// K and V x 256 wide x 4 bytes), a fixed random prompt per pair (2048 tokens: ~34 MB states) sent again and
// again with max_tokens 1: the prefill node (1 slot) has it in its slot's cache and recomputes 1 token, then
// exports the whole state; the decode node restores it and samples 1 token. Routers run without -m: with -m
// a decode node that already holds the prompt would be sent the request directly (or, where the router has
// deltas, be sent only the cells it lacks), moving no state. C closed-loop clients per pair (full: 3)
// stream requests for S seconds; a round's throughput = state bytes the mode's two routers report
// (baton_router_direct_state_bytes_total, resp. baton_router_blob_bytes_total) / the round's wall time
// (first send to the last answer; a round stops sending at S and waits for what is in flight). Rounds
// alternate the modes (direct, relay, relay, direct, ...) so drift hits both; median of the rounds.
//
// Rate: 1000 Mbit/s unless --rate says otherwise (2 cores drive it: a full run, warm-up prefills included,
// took 47 s of user + system CPU in 90 s for the benchmark and its 9 processes; the links, not the CPU, are
// full: direct runs at ~94% of 2 links). The link-use lines (direct / 2R, relay / R) show whether the links or the CPU
// were the limit; the prefill nodes' metrics show the prompt tokens they computed per request. --quick (CI
// smoke): 128x2 model, 512-token prompt, 100 Mbit/s, 2 clients per pair, 1 round of 2 s each; no target is
// enforced. Without CAP_NET_ADMIN (no namespaces can be made) or iproute2, --quick prints why and exits 0
// with no RESULT lines; the full run fails.
//
// Cleanup: processes die first (their owners, then PR_SET_PDEATHSIG), then every namespace of this run is
// deleted (its veths and qdiscs go with it) — at exit, on an exception, and on SIGINT, SIGTERM, SIGHUP and
// SIGPIPE (a handler). At start, namespaces `baton-sl-<pid>-*` of processes that no longer exist (a run
// killed with SIGKILL) are deleted. Every loop is bounded in count and time.
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>

#include "bench_net.h"
#include "bench_netns.h"

using namespace baton;
using namespace baton::bench;

namespace {

double read_metric(const bench_process & p, const std::string & name) {
    httplib::Client c(p.host(), p.port());
    c.set_connection_timeout(std::chrono::seconds(5));
    c.set_read_timeout(std::chrono::seconds(5));
    auto r = c.Get("/metrics");
    if (!r || r->status != 200) throw std::runtime_error("GET /metrics failed");
    const double v = metric_sum(r->body, name);
    if (v < 0) throw std::runtime_error("metric " + name + " missing");
    return v;
}

struct round_result {
    double mb_s = 0;  // aggregate state MB/s (10^6 bytes)
    double pair_mb_s[2] = {0, 0};
    double seconds = 0;
    size_t requests = 0;
};

// run_round: C clients per pair stream prompt i to router i for secs seconds (and at most max_req requests
// each); then reads the bytes the routers moved.
round_result run_round(const std::vector<bench_process *> & routers, const std::string & metric,
                       const std::vector<std::vector<int>> & prompts, int clients, double secs) {
    constexpr int max_req = 100000;
    double before[2];
    for (int i = 0; i < 2; ++i) before[i] = read_metric(*routers[i], metric);
    std::atomic<size_t> done{0};
    std::mutex mu;
    std::string error;
    const double t0 = now_ms(), stop_at = t0 + secs * 1000;
    std::vector<std::thread> ts;
    for (int i = 0; i < 2; ++i)
        for (int c = 0; c < clients; ++c)
            ts.emplace_back([&, i] {
                for (int k = 0; k < max_req && now_ms() < stop_at; ++k) {
                    auto t = stream_completion(routers[i]->host(), routers[i]->port(), prompts[i], 1, 60);
                    if (!t.ok) {
                        std::lock_guard<std::mutex> l(mu);
                        if (error.empty()) error = t.error;
                        return;
                    }
                    ++done;
                }
            });
    for (auto & t : ts) t.join();
    const double t1 = now_ms();
    if (!error.empty()) throw std::runtime_error("request failed: " + error);
    // The routers count a state when its request has ended, a moment after the client's [DONE].
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    round_result r;
    r.seconds = (t1 - t0) / 1000;
    r.requests = done.load();
    for (int i = 0; i < 2; ++i) {
        const double bytes = read_metric(*routers[i], metric) - before[i];
        r.pair_mb_s[i] = bytes / 1e6 / r.seconds;
        r.mb_s += r.pair_mb_s[i];
    }
    return r;
}

}  // namespace

int main(int argc, char ** argv) try {
    const bool quick = quick_mode(argc, argv);
    const int rate_mbit = arg_int(argc, argv, "--rate", quick ? 100 : 1000);
    const int rounds = arg_int(argc, argv, "--rounds", quick ? 1 : 4);
    const int secs = arg_int(argc, argv, "--secs", quick ? 2 : 8);
    const int clients = arg_int(argc, argv, "--clients", quick ? 2 : 3);
    const size_t n_prompt = size_t(arg_int(argc, argv, "--prompt", quick ? 512 : 2048));
    if (rate_mbit < 1 || rate_mbit > 100000 || rounds < 1 || rounds > 20 || secs < 1 || secs > 120 || clients < 1 ||
        clients > 8 || n_prompt < 128 || n_prompt > 8192)
        throw std::runtime_error(
            "bad arguments (--rate 1..100000 --rounds 1..20 --secs 1..120 --clients 1..8 --prompt 128..8192)");

    const std::string ip = find_tool("ip"), tc = find_tool("tc"), nsenter = find_tool("nsenter");
    if (ip.empty() || tc.empty() || nsenter.empty()) {
        const std::string why = "ip/tc (iproute2) or nsenter (util-linux) not found";
        if (quick) {
            std::printf("shaped_link_bench: skipped: %s\n", why.c_str());
            return 0;
        }
        throw std::runtime_error(why);
    }
    // The model first (mkmodel writes a file; no namespace needed).
    const int n_embd = quick ? 128 : 512, n_layer = quick ? 2 : 8;
    const std::string model = bench_model("llama", n_embd, n_layer);
    const int n_vocab = model_n_vocab(model);

    lab L(ip, tc, nsenter);
    if (!lab_usable(L, quick, "shaped_link_bench")) return 0;
    netns_cleanup_on_signals();
    L.build({"r", "p0", "p1", "d0", "d1"}, rate_mbit);
    L.enter_hub();
    std::printf("links: 5 namespaces on a bridge, every link shaped to %d Mbit/s each way (tbf)\n", rate_mbit);

    // Nodes: 1 thread each (5 processes share 2 cores), f32 K/V (more bytes per token at no extra compute).
    const auto in_ns = [&](const std::string & suffix, const std::vector<std::string> & args) {
        return L.in(L.at(suffix).ns, args);
    };
    const auto node = [&](const std::string & suffix, const std::string & role, int slots, int n_ctx) {
        auto a = node_args(model, role, 1, slots, n_ctx);
        a.insert(a.end(), {"--host", L.at(suffix).addr, "-ctk", "f32", "-ctv", "f32"});
        return bench_process::start(in_ns(suffix, a), role + " " + suffix);
    };
    const int ctx_one = int(n_prompt) + 64;
    std::vector<std::unique_ptr<bench_process>> pre, dec;
    for (int i = 0; i < 2; ++i) {
        pre.push_back(node("p" + std::to_string(i), "prefill", 1, ctx_one));
        dec.push_back(node("d" + std::to_string(i), "decode", clients, ctx_one * clients));
    }
    // Routers: per mode, router i serves pair i; all four in the router's namespace (one shaped link).
    std::vector<std::unique_ptr<bench_process>> routers;  // direct 0, direct 1, relay 0, relay 1
    for (const char * mode : {"direct", "relay"})
        for (int i = 0; i < 2; ++i) {
            std::vector<std::string> a = {baton_exe(),     "route",       "--prefill",  pre[i]->url(),
                                          "--decode",      dec[i]->url(), "--fallback", "fail",
                                          "--pd-transfer", mode,          "--host",     L.at("r").addr};
            routers.push_back(
                bench_process::start(in_ns("r", a), std::string("router ") + mode + " " + std::to_string(i)));
        }
    const std::vector<bench_process *> direct = {routers[0].get(), routers[1].get()},
                                       relay = {routers[2].get(), routers[3].get()};
    const std::vector<std::vector<int>> prompts = {random_prompt(n_prompt, 1601, n_vocab),
                                                   random_prompt(n_prompt, 1602, n_vocab)};

    // Warm-up: the first request of each pair prefills its prompt (the prefill node's one slot keeps it),
    // then every router once more (first-use buffers, connections).
    const char * m_direct = "baton_router_direct_state_bytes_total";
    const char * m_relay = "baton_router_blob_bytes_total";
    double state_bytes = 0;
    for (int pass = 0; pass < 2; ++pass)
        for (int i = 0; i < 2; ++i)
            for (auto * r : {direct[i], relay[i]}) {
                const bool is_direct = r == direct[i];
                const double b0 = read_metric(*r, is_direct ? m_direct : m_relay);
                auto t = stream_completion(r->host(), r->port(), prompts[i], 1, 120);
                if (!t.ok) throw std::runtime_error("warm-up: " + t.error);
                std::this_thread::sleep_for(std::chrono::milliseconds(200));
                state_bytes = read_metric(*r, is_direct ? m_direct : m_relay) - b0;
                if (state_bytes <= 0) throw std::runtime_error("warm-up: no state bytes counted by the router");
            }
    std::printf(
        "state per request: %.1f MB (%zu-token prompt, %dx%d llama, f32 K/V); %d clients per pair, %d s rounds\n",
        state_bytes / 1e6, n_prompt, n_embd, n_layer, clients, secs);

    // The prefill nodes' prompt tokens and those reused from the slot: what they computed per request.
    const auto prefill_tokens = [&](const char * name) {
        return read_metric(*pre[0], name) + read_metric(*pre[1], name);
    };
    const double prompt0 = prefill_tokens("baton_prompt_tokens_total"),
                 cached0 = prefill_tokens("baton_cached_tokens_total");
    size_t total_requests = 0;
    std::vector<double> d_mb, r_mb, ratios;
    std::printf("%6s %8s %10s %10s %10s %8s %6s\n", "round", "mode", "MB/s", "pair 0", "pair 1", "req", "s");
    for (int round = 0; round < rounds; ++round) {
        double d = 0, rl = 0;
        for (int k = 0; k < 2; ++k) {
            const bool is_direct = (k == 0) == (round % 2 == 0);  // direct, relay, relay, direct, ...
            const auto r =
                run_round(is_direct ? direct : relay, is_direct ? m_direct : m_relay, prompts, clients, secs);
            std::printf("%6d %8s %10.1f %10.1f %10.1f %8zu %6.1f\n", round, is_direct ? "direct" : "relay", r.mb_s,
                        r.pair_mb_s[0], r.pair_mb_s[1], r.requests, r.seconds);
            std::fflush(stdout);
            (is_direct ? d : rl) = r.mb_s;
            total_requests += r.requests;
        }
        d_mb.push_back(d);
        r_mb.push_back(rl);
        ratios.push_back(rl > 0 ? d / rl : 0);
    }
    const double computed = (prefill_tokens("baton_prompt_tokens_total") - prompt0) -
                            (prefill_tokens("baton_cached_tokens_total") - cached0);
    std::printf("prefill nodes computed %.1f prompt tokens per request (of %zu; the rest from the slot's cache)\n",
                computed / double(std::max<size_t>(1, total_requests)), n_prompt);
    const stats sd = summarize(d_mb), sr = summarize(r_mb), sq = summarize(ratios);
    const double ratio = sr.median > 0 ? sd.median / sr.median : 0;
    const double link_mb = rate_mbit / 8.0;
    std::printf("direct %.1f MB/s, relay %.1f MB/s (medians of %d rounds): %.2fx; link %.1f MB/s each way: direct uses "
                "%.0f%% of 2 links, "
                "relay %.0f%% of the router's\n",
                sd.median, sr.median, rounds, ratio, link_mb, 100 * sd.median / (2 * link_mb),
                100 * sr.median / link_mb);
    result_at("shaped_link/direct", sd, "MB/s", "info", true, {16, "aggregate KV MB/s", 0});
    result_at("shaped_link/relay", sr, "MB/s", "info", true, {16, "aggregate KV MB/s", 1});
    result_value("shaped_link/link_rate", link_mb, "MB/s",
                 "info (" + std::to_string(rate_mbit) + " Mbit/s per link, each way)", true, link_mb, link_mb, 1);
    result_value("shaped_link/direct_link_use", 100 * sd.median / (2 * link_mb), "%", "info (of 2 links)", true,
                 100 * sd.min / (2 * link_mb), 100 * sd.max / (2 * link_mb), sd.n);
    result_value("shaped_link/relay_link_use", 100 * sr.median / link_mb, "%", "info (of the router's link)", true,
                 100 * sr.min / link_mb, 100 * sr.max / link_mb, sr.n);
    result_value("shaped_link/direct_vs_relay", ratio, "x", ">= 1.8x", ratio >= 1.8, sq.min, sq.max, sq.n);
    stats h;
    h.median = ratio;
    h.min = sq.min;
    h.max = sq.max;
    h.n = sq.n;
    headline(16, "shaped_link_direct_vs_relay", h, "x", ">= 1.8x (2 pairs, aggregate KV MB/s)", ratio >= 1.8);
    return 0;
} catch (const std::exception & e) {
    std::fprintf(stderr, "shaped_link_bench: %s\n", e.what());
    return 1;
}
