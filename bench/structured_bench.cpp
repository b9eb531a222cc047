// structured_bench.cpp — figure 11: what a grammar costs per generated token, and n = 4 choices through PD
// (one prefill, one blob restored four times) against four separate requests.
//
// Grammar cost: a `baton serve` node and llama-server on the same GGUF, threads, context, one slot and
// flash attention off on both (`-fa off` to each: both default to on); one streaming /v1/completions at a
// time (a fresh 64-token random prompt, 128 tokens, temperature 0, the
// end-of-generation tokens forbidden through logit_bias so every run generates exactly 128 tokens), once
// without a grammar and once with a JSON-like grammar that never closes (an array of short strings); tok/s =
// (tokens - 1) / (last token chunk - first chunk). Per run and server: constrained / unconstrained; median of
// the runs. Baton applies the grammar to every candidate before sampling (the chain's order, so the
// decode node of a PD pair samples exactly as a single node); llama-server samples first and checks the
// grammar only for the chosen token, resampling when it is rejected.
//
// n = 4 through PD: `baton route` + a prefill node + a decode node (4 slots). A fresh 1024-token random
// prompt per run, 16 tokens, temperature 0.8: one request with n = 4 vs four concurrent n = 1 requests
// (seeds s..s+3, the same four samples). Measured: TTFT (request -> first SSE chunk; for the four: the
// last of their first chunks), time to the last chunk, and the prompt tokens the prefill node computed and
// the blob bytes it sent (its /metrics before and after).
#include <httplib.h>

#include <nlohmann/json.hpp>

#include <thread>

#include "bench_net.h"
#include "bench_util.h"

using namespace baton;
using namespace baton::bench;
using json = nlohmann::json;

namespace {

const char * k_grammar = R"(root ::= "[" item ("," " "? item)*
item ::= "\"" [a-z0-9 ]{0,12} "\"")";

double metric(const bench_process & p, const std::string & name) {
    httplib::Client c(p.host(), p.port());
    c.set_read_timeout(std::chrono::seconds(30));
    auto r = c.Get("/metrics");
    if (!r || r->status != 200) throw std::runtime_error("GET /metrics failed");
    const size_t at = r->body.find("\n" + name + " ");
    if (at == std::string::npos) throw std::runtime_error("no metric " + name);
    return std::atof(r->body.c_str() + at + name.size() + 2);
}

double tok_per_s(const stream_timing & t) {
    const double tpot = t.tpot_ms();
    return tpot > 0 ? 1000.0 / tpot : 0;
}

}  // namespace

int main(int argc, char ** argv) try {
    const bool quick = quick_mode(argc, argv);
    const int runs = quick ? 2 : 5, gen = quick ? 32 : 128;
    const int n_embd = quick ? 128 : 512, n_layer = quick ? 2 : 8;
    const std::string model = bench_model("llama", n_embd, n_layer);
    const int n_vocab = model_n_vocab(model);
    const int threads = quick ? 1 : 2;

    // ---- grammar cost, Baton and llama-server ----
    {
        std::vector<std::string> baton_argv = node_args(model, "both", threads, 1, 4096);
        baton_argv.insert(baton_argv.end(), {"-fa", "off"});  // the same attention path as llama-server's below
        auto baton = bench_process::start(baton_argv, "baton");
        const int lp = free_port();
        auto llama = bench_process::start({"/usr/bin/llama-server", "-m", model, "-t", std::to_string(threads), "-tb",
                                           std::to_string(threads), "-c", "4096", "-np", "1", "-fa", "off",
                                           "--no-webui", "--host", "127.0.0.1", "--port", std::to_string(lp)},
                                          "llama-server", 60, "http://127.0.0.1:" + std::to_string(lp));
        const json no_end = {{"logit_bias", {{2, false}, {4, false}}}, {"cache_prompt", false}};
        json with_grammar = no_end;
        with_grammar["grammar"] = k_grammar;
        std::printf("%-14s %12s %12s %8s\n", "server", "free tok/s", "grammar tok/s", "ratio");
        for (const auto & [name, p] : {std::pair{"baton", baton.get()}, std::pair{"llama_server", llama.get()}}) {
            std::vector<double> free_tps, gram_tps, ratio;
            for (int r = -1; r < runs; ++r) {  // r == -1: warm-up
                const auto prompt = random_prompt(64, uint32_t(7000 + r), n_vocab);
                const stream_timing a = stream_completion(p->host(), p->port(), prompt, gen, 300, no_end);
                const stream_timing b = stream_completion(p->host(), p->port(), prompt, gen, 300, with_grammar);
                if (!a.ok || !b.ok) throw std::runtime_error(std::string(name) + ": " + (a.ok ? b.error : a.error));
                if (a.completion_tokens != gen || b.completion_tokens != gen)
                    throw std::runtime_error(std::string(name) + ": a run stopped before " + std::to_string(gen) +
                                             " tokens");
                if (r < 0) continue;
                free_tps.push_back(tok_per_s(a));
                gram_tps.push_back(tok_per_s(b));
                ratio.push_back(gram_tps.back() / free_tps.back());
            }
            const stats f = summarize(free_tps), g = summarize(gram_tps), q = summarize(ratio);
            std::printf("%-14s %12.1f %12.1f %7.3fx\n", name, f.median, g.median, q.median);
            const std::string n = name;
            result_at("structured_tg_free/" + n, f, "tok/s", "info", true, {11, n, 0});
            result_at("structured_tg_grammar/" + n, g, "tok/s", "info", true, {11, n, 1});
            result("structured_grammar_ratio_" + n, q, "x", "info", true);
            if (n == "baton")
                headline(11, "structured_grammar_tg_ratio_baton", q, "x", "info (grammar / free tok/s)", true);
        }
    }

    // ---- n = 4 through PD vs four separate requests ----
    {
        auto pre = bench_process::start(node_args(model, "prefill", threads, 1, 8192), "prefill");
        auto dec = bench_process::start(node_args(model, "decode", threads, 4, 8192), "decode");
        auto route = bench_process::start(route_args(pre->url(), dec->url(), model), "router");
        const size_t n_prompt = quick ? 256 : 1024;
        const int tokens = 16;
        std::vector<double> ttft_n4, ttft_sep, total_n4, total_sep, computed_n4, computed_sep, bytes_n4, bytes_sep;
        auto prefill_work = [&] {
            return std::pair{metric(*pre, "baton_prompt_tokens_total") - metric(*pre, "baton_cached_tokens_total"),
                             metric(*pre, "baton_blob_bytes_out_total")};
        };
        for (int r = -1; r < runs; ++r) {
            for (int order = 0; order < 2; ++order) {
                const bool n4 = (order == 0) == (r % 2 == 0);
                const auto prompt = random_prompt(n_prompt, uint32_t(9000 + r * 2 + order), n_vocab);
                const auto [c0, b0] = prefill_work();
                double ttft = 0, total = 0;
                if (n4) {
                    const stream_timing t =
                        stream_completion(route->host(), route->port(), prompt, tokens, 300,
                                          {{"n", 4}, {"temperature", 0.8}, {"seed", 100 + r}, {"ignore_eos", true}});
                    if (!t.ok || t.completion_tokens != 4 * tokens) throw std::runtime_error("n=4: " + t.error);
                    ttft = t.ttft_ms, total = t.total_ms;
                } else {
                    std::vector<stream_timing> ts(4);
                    std::vector<std::thread> th;
                    const double t0 = now_ms();
                    for (int i = 0; i < 4; ++i)
                        th.emplace_back([&, i] {
                            ts[size_t(i)] =
                                stream_completion(route->host(), route->port(), prompt, tokens, 300,
                                                  {{"temperature", 0.8}, {"seed", 100 + r + i}, {"ignore_eos", true}});
                        });
                    for (auto & x : th) x.join();
                    for (const auto & t : ts) {
                        if (!t.ok || t.completion_tokens != tokens) throw std::runtime_error("n=1: " + t.error);
                        ttft = std::max(ttft, t.t_send + t.ttft_ms - t0);
                        total = std::max(total, t.t_send + t.total_ms - t0);
                    }
                }
                const auto [c1, b1] = prefill_work();
                if (r < 0) continue;
                (n4 ? ttft_n4 : ttft_sep).push_back(ttft);
                (n4 ? total_n4 : total_sep).push_back(total);
                (n4 ? computed_n4 : computed_sep).push_back(c1 - c0);
                (n4 ? bytes_n4 : bytes_sep).push_back((b1 - b0) / 1048576.0);
            }
        }
        const stats a = summarize(ttft_n4), b = summarize(ttft_sep), ta = summarize(total_n4),
                    tb = summarize(total_sep);
        const stats ca = summarize(computed_n4), cb = summarize(computed_sep), ba = summarize(bytes_n4),
                    bb = summarize(bytes_sep);
        std::printf("\n%-22s %12s %12s\n", "n=4 through PD", "one n=4", "four n=1");
        std::printf("%-22s %12.1f %12.1f\n", "TTFT ms", a.median, b.median);
        std::printf("%-22s %12.1f %12.1f\n", "last chunk ms", ta.median, tb.median);
        std::printf("%-22s %12.0f %12.0f\n", "prefill tokens computed", ca.median, cb.median);
        std::printf("%-22s %12.2f %12.2f\n", "blob MiB sent", ba.median, bb.median);
        result("structured_n4_ttft_ms_one_request", a, "ms", "info", true);
        result("structured_n4_ttft_ms_four_requests", b, "ms", "info", true);
        result("structured_n4_total_ms_one_request", ta, "ms", "info", true);
        result("structured_n4_total_ms_four_requests", tb, "ms", "info", true);
        result("structured_n4_prefill_tokens_one_request", ca, "tokens", "info", true);
        result("structured_n4_prefill_tokens_four_requests", cb, "tokens", "info", true);
        result("structured_n4_blob_mib_one_request", ba, "MiB", "info", true);
        result("structured_n4_blob_mib_four_requests", bb, "MiB", "info", true);
    }
    return 0;
} catch (const std::exception & e) {
    std::fprintf(stderr, "structured_bench: %s\n", e.what());
    return 1;
}
