// blob_bench.cpp — state blob costs: the blob pipeline against memcpy (figure 3) and blob size per token
// against the theoretical KV size (figure 6), plus the format's framing overhead.
//
// 1. Figure 3. A 16 MiB blob (random state bytes, 4096 tokens, 32000 logits). Each run times, on the same
//    bytes: serialize (blob_write into a pre-faulted buffer), checksum (XXH3-64 over all bytes, the hash the
//    format uses), verify (blob_parse: every checksum verified, the state viewed in place), loopback
//    transfer (POST of the blob to an in-process cpp-httplib server on 127.0.0.1 that receives the whole
//    body and answers with its size), and memcpy. Each stage's throughput is divided by that run's memcpy
//    throughput (pair by pair); median/min/max over the runs. Target: verify >= 0.5x memcpy.
// 2. Figure 6. Real blobs of a 512x8 llama model from the engine's prefill (512 and 2048 tokens): blob
//    bytes per token / theoretical KV bytes per token (2 x n_layer x n_embd_kv x bytes per element of the
//    K/V cache type) - 1. Target: <= 2%. Also: header and section framing as % of the state bytes of a
//    512-token state (<= 1%).
// Prints a table and RESULT/FIGURE lines (bench_util.h).
#include <ggml.h>
#include <httplib.h>
#include <llama.h>
#include <xxhash.h>

#include <cstring>
#include <random>
#include <thread>

#include "baton/blob.h"
#include "baton/engine.h"
#include "baton/model.h"
#include "bench_util.h"

using namespace baton;
using namespace baton::bench;

namespace {

double gbps(size_t bytes, double ms) { return double(bytes) / (ms / 1000.0) / 1e9; }

// A cpp-httplib server on 127.0.0.1 that receives a body and answers with its size (stopped on destruction).
struct sink_server {
    httplib::Server http;
    std::thread th;
    int port = 0;
    sink_server() {
        http.set_payload_max_length(size_t(1) << 30);
        http.Post("/blob", [](const httplib::Request & req, httplib::Response & res) { res.set_content(std::to_string(req.body.size()), "text/plain"); });
        port = http.bind_to_any_port("127.0.0.1");
        th = std::thread([this] { http.listen_after_bind(); });
        http.wait_until_ready();
    }
    ~sink_server() {
        http.stop();
        th.join();
    }
};

int bench_pipeline(bool quick) {
    const size_t blob_bytes = size_t(16) << 20;
    const uint32_t n_vocab = 32000;
    std::vector<int32_t> tokens(4096);
    std::vector<float> logits(n_vocab);
    std::mt19937_64 rng(7);
    for (auto & t : tokens) t = int32_t(rng() % n_vocab);
    for (auto & l : logits) l = float(int64_t(rng() % 2000) - 1000) / 100.0f;
    blob_parts parts;
    parts.identity.arch = "llama";
    parts.identity.llama_version = llama_version();
    parts.identity.n_layer = 8;
    parts.identity.n_embd = 512;
    parts.identity.n_vocab = n_vocab;
    parts.context.n_ctx = 8192;
    parts.tokens = tokens;
    parts.logits = logits;
    // Size the state so the whole blob is exactly 16 MiB.
    std::vector<uint8_t> probe(1);
    parts.state = probe;
    blob_size_sink size;
    if (!blob_write(parts, size).ok()) return 1;
    std::vector<uint8_t> state(blob_bytes - (size.size() - 1));
    for (size_t i = 0; i + 8 <= state.size(); i += 8) {
        const uint64_t r = rng();
        std::memcpy(&state[i], &r, 8);
    }
    parts.state = state;
    blob_buffer_sink sink;
    sink.bytes().reserve(blob_bytes);
    Status st = blob_write(parts, sink);
    if (!st.ok() || sink.bytes().size() != blob_bytes) {
        std::fprintf(stderr, "blob_bench: write failed: %s\n", st.to_string().c_str());
        return 1;
    }
    const std::vector<uint8_t> & blob = sink.bytes();
    std::vector<uint8_t> dst(blob.size());
    std::memset(dst.data(), 1, dst.size());  // fault the pages in before timing
    const std::string body(reinterpret_cast<const char *>(blob.data()), blob.size());
    sink_server server;
    httplib::Client client("127.0.0.1", server.port);
    client.set_read_timeout(std::chrono::seconds(60));
    client.set_write_timeout(std::chrono::seconds(60));
    client.set_keep_alive(true);

    const int runs = quick ? 2 : 11;
    enum { S_SERIALIZE, S_CHECKSUM, S_VERIFY, S_TRANSFER, S_MEMCPY, S_N };
    const char * names[S_N] = {"serialize", "checksum", "verify", "loopback_transfer", "memcpy"};
    std::vector<double> g[S_N], ratio[S_N];
    blob_buffer_sink out;
    out.bytes().assign(blob_bytes, 0);  // fault the pages in before timing, then keep the capacity
    size_t check = 0;
    for (int r = -1; r < runs; ++r) {  // r == -1 warms up
        double ms[S_N];
        out.bytes().clear();
        double t0 = now_ms();
        if (!blob_write(parts, out).ok()) return 1;
        ms[S_SERIALIZE] = now_ms() - t0;
        t0 = now_ms();
        check += size_t(XXH3_64bits(blob.data(), blob.size()) & 1);
        ms[S_CHECKSUM] = now_ms() - t0;
        t0 = now_ms();
        auto v = blob_parse(blob);
        ms[S_VERIFY] = now_ms() - t0;
        if (!v.ok()) return std::fprintf(stderr, "blob_bench: parse failed: %s\n", v.status().to_string().c_str()), 1;
        check += v->state.size();
        t0 = now_ms();
        auto res = client.Post("/blob", body, "application/octet-stream");
        ms[S_TRANSFER] = now_ms() - t0;
        if (!res || res->status != 200 || res->body != std::to_string(blob.size()))
            return std::fprintf(stderr, "blob_bench: loopback POST failed\n"), 1;
        t0 = now_ms();
        std::memcpy(dst.data(), blob.data(), blob.size());
        ms[S_MEMCPY] = now_ms() - t0;
        check += dst[size_t(r + 1) * 4099 % dst.size()];
        if (r < 0) continue;
        for (int s = 0; s < S_N; ++s) {
            g[s].push_back(gbps(blob_bytes, ms[s]));
            ratio[s].push_back(gbps(blob_bytes, ms[s]) / gbps(blob_bytes, ms[S_MEMCPY]));
        }
    }
    std::printf("%-28s %10s %10s %10s %14s\n", "16 MiB blob, GB/s", "median", "min", "max", "x memcpy");
    for (int s = 0; s < S_N; ++s) {
        const stats sg = summarize(g[s]), sr = summarize(ratio[s]);
        std::printf("%-28s %10.2f %10.2f %10.2f %14.3f\n", names[s], sg.median, sg.min, sg.max, sr.median);
        result_at(std::string("blob_pipeline/") + names[s] + "_gbps", sg, "GB/s", "info", true, {3, "GB/s", double(s)});
        if (s != S_MEMCPY)
            result(std::string("blob_pipeline/") + names[s] + "_vs_memcpy", sr, "x", s == S_VERIFY ? ">= 0.5" : "info",
                   s != S_VERIFY || sr.median >= 0.5);
    }
    std::printf("(%d runs; check %zu)\n", runs, check % 10);
    const stats sv = summarize(ratio[S_VERIFY]);
    headline(3, "blob_verify_vs_memcpy", sv, "x", ">= 0.5x", sv.median >= 0.5);
    return 0;
}

std::vector<token_id> prompt_of(size_t n, int32_t n_vocab) {
    std::mt19937 rng{uint32_t(n) + 11};
    std::vector<token_id> p = {1};
    while (p.size() < n) p.push_back(token_id(5 + rng() % uint32_t(n_vocab - 5)));
    return p;
}

int bench_size(bool quick) {
    const int n_embd = quick ? 128 : 512, n_layer = quick ? 2 : 8;
    auto lm = loaded_model::load(bench_model("llama", n_embd, n_layer));
    if (!lm.ok()) return std::fprintf(stderr, "blob_bench: %s\n", lm.status().to_string().c_str()), 1;
    std::shared_ptr<const loaded_model> m(std::move(lm.value()));
    engine_config cfg;
    cfg.ctx.n_ctx = 4096;
    auto e = engine::create(m, cfg);
    if (!e.ok()) return std::fprintf(stderr, "blob_bench: %s\n", e.status().to_string().c_str()), 1;
    const int32_t n_head = llama_model_n_head(m->get()), n_head_kv = llama_model_n_head_kv(m->get());
    const int64_t n_embd_kv = int64_t(llama_model_n_embd(m->get())) / n_head * n_head_kv;
    const double elt = (double(ggml_type_size(ggml_type(cfg.ctx.type_k))) / ggml_blck_size(ggml_type(cfg.ctx.type_k)) +
                        double(ggml_type_size(ggml_type(cfg.ctx.type_v))) / ggml_blck_size(ggml_type(cfg.ctx.type_v))) / 2;
    const double kv_per_token = 2.0 * llama_model_n_layer(m->get()) * double(n_embd_kv) * elt;
    std::printf("\nllama %dx%d: theoretical KV = 2 x %d layers x n_embd_kv %lld x %.0f bytes = %.0f bytes/token\n", n_embd, n_layer,
                llama_model_n_layer(m->get()), (long long)n_embd_kv, elt, kv_per_token);
    std::printf("%8s %14s %16s %12s %14s\n", "tokens", "blob bytes", "bytes/token", "overhead %", "framing % state");
    const std::vector<size_t> lengths = quick ? std::vector<size_t>{128, 512} : std::vector<size_t>{512, 2048};
    for (size_t n : lengths) {
        gen_request req;
        req.prompt = prompt_of(n, int32_t(m->identity().n_vocab));
        req.n_predict = 0;
        (void)engine_run_to_end(e.value()->submit(task_slot_erase{0}).value(), std::chrono::minutes(5));
        auto h = e.value()->submit(task_prefill{req});
        if (!h.ok()) return std::fprintf(stderr, "blob_bench: %s\n", h.status().to_string().c_str()), 1;
        engine_result pre = engine_run_to_end(h.value(), std::chrono::minutes(10));
        if (pre.done.type != engine_event::kind::done) return std::fprintf(stderr, "blob_bench: %s\n", pre.done.error.to_string().c_str()), 1;
        const std::vector<uint8_t> & b = pre.done.blob;
        auto v = blob_parse(b);
        if (!v.ok()) return std::fprintf(stderr, "blob_bench: %s\n", v.status().to_string().c_str()), 1;
        const double per_token = double(b.size()) / double(n);
        const double overhead = 100.0 * (per_token / kv_per_token - 1.0);
        // Framing: everything that is not state, tokens, logits, checkpoints or the embedded request.
        size_t content = v->state.size() + v->tokens.size() * 4 + v->logits.size() * 4 + v->request.size();
        for (const auto & c : v->checkpoints) content += c.data.size();
        const double framing_pct = 100.0 * double(b.size() - std::min(b.size(), content)) / double(v->state.size());
        std::printf("%8zu %14zu %16.1f %12.3f %14.3f\n", n, b.size(), per_token, overhead, framing_pct);
        const std::string N = std::to_string(n);
        const bool gated = n == lengths.back();
        const stats so = {overhead, overhead, overhead, 1};
        result_at("blob_size/overhead_vs_kv/" + N, so, "%", gated ? "<= 2%" : "info", !gated || overhead <= 2.0, {6, "overhead %", double(n)});
        result_at("blob_size/bytes_per_token/" + N, {per_token, per_token, per_token, 1}, "bytes", "info", true, {6, "bytes/token", double(n)});
        result("blob_size/framing_pct_of_state/" + N, {framing_pct, framing_pct, framing_pct, 1}, "% of state", "<= 1%", framing_pct <= 1.0);
        if (gated) headline(6, "blob_bytes_per_token_over_kv_" + N + "tok", so, "%", "<= 2%", overhead <= 2.0);
    }
    return 0;
}

}  // namespace

int main(int argc, char ** argv) {
    llama_quiet_logs();
    llama_backend_once();
    const bool quick = quick_mode(argc, argv);
    if (bench_pipeline(quick) != 0) return 1;
    if (bench_size(quick) != 0) return 1;
    return 0;
}
