// embed_bench.cpp — figure 20: embeddings throughput, Baton vs Debian's llama-server on the same GGUF.
//
// A llama model (512x8; quick: 128x2) served by `baton serve --embedding --pooling mean` and by `llama-server
// --embedding --pooling mean -np 32` (its inputs of one request spread over slots that decode together), both
// 2 threads, -b/-ub 2048, flash attention off. Inputs are random 48-token arrays (no text tokenizer in the
// measurement). For batch 1 (one input per request) and batch 32 (32 inputs per request): R requests back to
// back per run, inputs/s = inputs / wall time; the servers interleave run by run; ratio Baton / llama-server
// per run pair, median of the runs. Target: >= 1.0 at both batch sizes.
// Rerank beside it: a qwen3 reranker (mkmodel --rerank: a ranking head, rank pooling; 512x8, quick: 128x2, the
// plain <s> query </s></s> document </s> layout) served by `baton serve --rerank` and `llama-server --rerank
// -np 32`, same threads and batch; /v1/rerank requests of one query and 1 or 32 documents of 12 words each (~90 tokens in the test vocabulary, within llama-server's 256-token slots)
// (text: the tokenizer is part of what is measured, on both); documents/s per run, interleaved as above.
// Reported beside the embeddings figure (target >= 1.0 too).
#include <httplib.h>

#include <functional>

#include <nlohmann/json.hpp>

#include "bench_net.h"
#include "bench_util.h"

using namespace baton;
using namespace baton::bench;
using json = nlohmann::json;

namespace {

// inputs_per_s posts `requests` /v1/embeddings requests of `batch` inputs each and returns inputs per second.
double inputs_per_s(const bench_process & p, int requests, int batch, int n_vocab, uint32_t seed) {
    httplib::Client c(p.host(), p.port());
    c.set_read_timeout(std::chrono::seconds(300));
    std::vector<std::string> bodies;
    for (int r = 0; r < requests; ++r) {
        json in = json::array();
        for (int i = 0; i < batch; ++i) in.push_back(random_prompt(48, seed + uint32_t(r * batch + i), n_vocab));
        bodies.push_back(json{{"input", in}}.dump());
    }
    const double t0 = now_ms();
    for (const auto & b : bodies) {
        auto res = c.Post("/v1/embeddings", b, "application/json");
        if (!res || res->status != 200)
            throw std::runtime_error(p.name() + ": /v1/embeddings failed: " + (res ? res->body.substr(0, 200) : "no answer"));
    }
    return double(requests) * batch / ((now_ms() - t0) / 1000.0);
}

// rerank_docs_per_s posts `requests` /v1/rerank requests of one query and `batch` documents each and returns
// documents per second.
double rerank_docs_per_s(const bench_process & p, int requests, int batch, uint32_t seed) {
    static const char * const k_words[] = {"cat",   "state", "node",  "river", "blue", "token",  "model",  "paris",
                                           "cache", "slow",  "quick", "green", "sea",  "prompt", "answer", "map"};
    uint32_t x = seed * 2654435761u + 1;
    auto text = [&](int words) {
        std::string t;
        for (int i = 0; i < words; ++i) {
            x = x * 1664525u + 1013904223u;
            if (i) t += ' ';
            t += k_words[(x >> 16) % (sizeof(k_words) / sizeof(k_words[0]))];
        }
        return t;
    };
    httplib::Client c(p.host(), p.port());
    c.set_read_timeout(std::chrono::seconds(300));
    std::vector<std::string> bodies;
    for (int r = 0; r < requests; ++r) {
        json docs = json::array();
        for (int i = 0; i < batch; ++i) docs.push_back(text(12));
        bodies.push_back(json{{"query", text(4)}, {"documents", docs}}.dump());
    }
    const double t0 = now_ms();
    for (const auto & b : bodies) {
        auto res = c.Post("/v1/rerank", b, "application/json");
        if (!res || res->status != 200)
            throw std::runtime_error(p.name() +
                                     ": /v1/rerank failed: " + (res ? res->body.substr(0, 200) : "no answer"));
    }
    return double(requests) * batch / ((now_ms() - t0) / 1000.0);
}

// reranker_model: the cached qwen3 reranker of the given size (bench_model's directory).
std::string reranker_model(int n_embd, int n_layer) {
    const std::string path =
        bench_models_dir() + "/qwen3-rerank-" + std::to_string(n_embd) + "x" + std::to_string(n_layer) + ".gguf";
    mkmodel_params p;
    p.arch = "qwen3";
    p.n_embd = n_embd;
    p.n_layer = n_layer;
    p.n_ctx = 4096;
    p.rerank = true;
    Status s = mkmodel_ensure(p, path);
    if (!s.ok()) throw std::runtime_error("mkmodel (reranker): " + s.to_string());
    return path;
}

// server_pair: `baton serve` and llama-server on the same flags (common), each with its own -c/-np.
struct server_pair {
    std::unique_ptr<bench_process> baton, llama;
};
server_pair start_pair(const std::vector<std::string> & common, const std::string & baton_ctx,
                       const std::string & llama_ctx) {
    server_pair p;
    std::vector<std::string> b = {baton_exe(), "serve", "-c", baton_ctx, "-np", "1"};
    b.insert(b.end(), common.begin(), common.end());
    p.baton = bench_process::start(b, "baton");
    const int lp = free_port();
    std::vector<std::string> l = {
        "/usr/bin/llama-server", "-c", llama_ctx, "-np", "32", "--no-webui", "--host", "127.0.0.1", "--port",
        std::to_string(lp)};
    l.insert(l.end(), common.begin(), common.end());
    p.llama = bench_process::start(l, "llama-server", 120, "http://127.0.0.1:" + std::to_string(lp));
    return p;
}

// paired: a warm-up, then `runs` measurements of each server (rate(server, seed)), who goes first alternating
// run by run; the medians of each and of the per-run ratios.
struct paired_stats {
    stats baton, llama, ratio;
};
paired_stats paired(const server_pair & p, int runs,
                    const std::function<double(const bench_process &, uint32_t)> & rate) {
    std::vector<double> b, l, ratio;
    for (int r = -1; r < runs; ++r) {  // r == -1: warm-up
        const uint32_t seed = uint32_t(1000 * (r + 2));
        double tb = 0, tl = 0;
        if (r % 2 == 0) {
            tb = rate(*p.baton, seed);
            tl = rate(*p.llama, seed);
        } else {
            tl = rate(*p.llama, seed);
            tb = rate(*p.baton, seed);
        }
        if (r < 0) continue;
        b.push_back(tb);
        l.push_back(tl);
        ratio.push_back(tb / tl);
    }
    return {summarize(b), summarize(l), summarize(ratio)};
}

}  // namespace

int main(int argc, char ** argv) try {
    const bool quick = quick_mode(argc, argv);
    bool rerank_only = false;  // --rerank-only: skip the embeddings figure
    for (int i = 1; i < argc; ++i) rerank_only = rerank_only || std::string(argv[i]) == "--rerank-only";
    const int runs = quick ? 2 : 5;
    if (!rerank_only) {
        const std::string model = quick ? bench_model("llama", 128, 2) : bench_model("llama", 512, 8);
        const int n_vocab = model_n_vocab(model);
        server_pair srv = start_pair({"-m", model, "-t", "2", "-tb", "2", "-b", "2048", "-ub", "2048", "-fa", "off",
                                      "--embedding", "--pooling", "mean"},
                                     "2048", "4096");
        std::printf("%-6s %14s %14s %8s\n", "batch", "baton in/s", "llama in/s", "ratio");
        bool all_ok = true;
        stats worst;
        for (const int batch : {1, 32}) {
            const int requests = batch == 1 ? (quick ? 16 : 64) : (quick ? 2 : 8);
            const paired_stats ps = paired(srv, runs, [&](const bench_process & p, uint32_t seed) {
                return inputs_per_s(p, requests, batch, n_vocab, seed);
            });
            std::printf("%-6d %14.1f %14.1f %7.2fx\n", batch, ps.baton.median, ps.llama.median, ps.ratio.median);
            const std::string tag = "embed/batch" + std::to_string(batch);
            result_at(tag + "/baton_inputs_per_s", ps.baton, "inputs/s", "reported", true,
                      {20, "baton", double(batch)});
            result_at(tag + "/llama_server_inputs_per_s", ps.llama, "inputs/s", "reported", true,
                      {20, "llama-server", double(batch)});
            const bool ok = ps.ratio.median >= 1.0;
            result(tag + "/ratio", ps.ratio, "x", ">= 1.0", ok);
            all_ok = all_ok && ok;
            if (worst.n == 0 || ps.ratio.median < worst.median) worst = ps.ratio;
        }
        headline(20, "embed/worst_ratio", worst, "x", ">= 1.0", all_ok);
    }

    // Rerank: the same comparison with a ranking head.
    const std::string rmodel = quick ? reranker_model(128, 2) : reranker_model(512, 8);
    server_pair rsrv = start_pair(
        {"-m", rmodel, "-t", "2", "-tb", "2", "-b", "2048", "-ub", "2048", "-fa", "off", "--rerank"}, "4096", "8192");
    std::printf("%-6s %14s %14s %8s\n", "docs", "baton docs/s", "llama docs/s", "ratio");
    for (const int batch : {1, 32}) {
        const int requests = batch == 1 ? (quick ? 8 : 48) : (quick ? 1 : 2);  // 48 or 64 documents a run
        const paired_stats ps = paired(rsrv, runs, [&](const bench_process & p, uint32_t seed) {
            return rerank_docs_per_s(p, requests, batch, seed);
        });
        std::printf("%-6d %14.1f %14.1f %7.2fx\n", batch, ps.baton.median, ps.llama.median, ps.ratio.median);
        const std::string tag = "rerank/docs" + std::to_string(batch);
        result(tag + "/baton_docs_per_s", ps.baton, "docs/s", "reported", true);
        result(tag + "/llama_server_docs_per_s", ps.llama, "docs/s", "reported", true);
        result(tag + "/ratio", ps.ratio, "x", ">= 1.0", ps.ratio.median >= 1.0);
    }
    return 0;
} catch (const std::exception & e) {
    std::fprintf(stderr, "embed_bench: %s\n", e.what());
    return 1;
}
