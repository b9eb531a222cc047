// blob_bench.cpp — state blob costs: the blob pipeline against memcpy (figure 3) and blob size per token
// against the theoretical KV size (figure 6), plus the format's framing overhead and the loopback transfer
// of blobs against raw TCP.
//
// 1. Figure 3. A 16 MiB blob (random state bytes, 4096 tokens, 32000 logits). Each run times, on the same
//    bytes: serialize (blob_write into a pre-faulted buffer), checksum (XXH3-64 over all bytes, the hash the
//    format uses), verify (blob_parse: every checksum verified, the state viewed in place), loopback
//    transfer (POST of the blob to an in-process cpp-httplib server on 127.0.0.1 set up the way a Baton node
//    is, see blob_http_server), and memcpy. Each stage's throughput is divided by that run's memcpy
//    throughput (pair by pair); median/min/max over the runs. Target: verify >= 0.5x memcpy.
// 2. Figure 6. Real blobs of a 512x8 llama model from the engine's prefill (512 and 2048 tokens): blob
//    bytes per token / theoretical KV bytes per token (2 x n_layer x n_embd_kv x bytes per element of the
//    K/V cache type) - 1. Target: <= 2%. Also: header and section framing as % of the state bytes of a
//    512-token state (<= 1%).
// 3. Transfers (figure 3's table, blob_pipeline/transfer/...). For the 16 MiB blob and the two real blob
//    sizes of (2): raw TCP (raw_tcp.h: a loopback socket pair, warm buffers, both directions), blob upload
//    (POST /blob, the size of a /v1/decode body) and blob download (GET /blob/<n>), each with the
//    cpp-httplib client and with raw_tcp.h's minimal HTTP client; every HTTP figure is divided by the raw
//    TCP figure of the same direction in the same run (pair by pair). One more row times the old method
//    (cpp-httplib's default server and client, a fresh body per request) to show what it measured.
//    Why the old loopback figure (0.11 GB/s recorded, 0.26 GB/s on a quiet machine) was wrong: cpp-httplib's
//    client sends "Expect: 100-continue" with any body over 1 KiB and holds the body until the server's
//    "100 Continue"; cpp-httplib's server leaves TCP_NODELAY off by default, so on a keep-alive connection
//    that small interim response waits in Nagle for the client's delayed ACK of the previous response:
//    ~40 ms per POST on top of ~10 ms of transfer. A Baton node sets TCP_NODELAY on every socket and
//    receives into a pooled buffer, so the server here does both.
// Prints a table and RESULT/FIGURE lines (bench_util.h).
#include <ggml.h>
#include <httplib.h>
#include <llama.h>
#include <xxhash.h>

#include <cstring>
#include <functional>
#include <random>
#include <thread>

#include "baton/blob.h"
#include "baton/engine.h"
#include "baton/model.h"
#include "bench_util.h"
#include "raw_tcp.h"

using namespace baton;
using namespace baton::bench;

namespace {

double gbps(size_t bytes, double ms) { return double(bytes) / (ms / 1000.0) / 1e9; }

// blob_http_server: an in-process cpp-httplib server on 127.0.0.1 (stopped on destruction).
//   POST /blob      receives a body and answers with its size;
//   GET /blob/<n>   answers with the first n bytes of `out` (at most out_len).
// node_like (what a Baton node does): TCP_NODELAY on, POST bodies read into one reused pre-faulted buffer
// of max_bytes (a node's pooled blob buffer), GET served from `out` without a copy, and no keep-alive
// request limit (a reconnect would land inside a timed transfer). Otherwise cpp-httplib's defaults, the
// old method of this bench: Nagle on, each body received into a fresh std::string.
struct blob_http_server {
    httplib::Server http;
    std::thread th;
    int port = 0;
    std::vector<char> in;  // [max_bytes], node_like only
    const char * out = nullptr;
    size_t out_len = 0;

    blob_http_server(bool node_like, size_t max_bytes, const void * out_data, size_t out_bytes)
        : out(static_cast<const char *>(out_data)), out_len(out_bytes) {
        http.set_payload_max_length(size_t(1) << 30);
        if (node_like) {
            in.assign(max_bytes, 1);
            http.set_tcp_nodelay(true);
            http.set_keep_alive_max_count(1 << 30);  // cpp-httplib closes after 100 requests by default
            http.Post("/blob", [this](const httplib::Request &, httplib::Response & res, const httplib::ContentReader & read) {
                size_t n = 0;
                const bool ok = read([&](const char * d, size_t len) {
                    if (len > in.size() - n) return false;
                    std::memcpy(in.data() + n, d, len);
                    n += len;
                    return true;
                });
                if (!ok) res.status = 413;
                res.set_content(std::to_string(n), "text/plain");
            });
        } else {
            http.Post("/blob", [](const httplib::Request & req, httplib::Response & res) { res.set_content(std::to_string(req.body.size()), "text/plain"); });
        }
        http.Get(R"(/blob/(\d+))", [this](const httplib::Request & req, httplib::Response & res) {
            const size_t n = std::min<size_t>(std::strtoull(req.matches[1].str().c_str(), nullptr, 10), out_len);
            res.set_content_provider(n, "application/octet-stream", [this](size_t off, size_t len, httplib::DataSink & sink) {
                return sink.write(out + off, len);
            });
        });
        port = http.bind_to_any_port("127.0.0.1");
        th = std::thread([this] { http.listen_after_bind(); });
        http.wait_until_ready();
    }
    ~blob_http_server() {
        http.stop();
        th.join();
    }
};

// node_like_client: a keep-alive cpp-httplib client with TCP_NODELAY, as the router's upstream client.
std::unique_ptr<httplib::Client> node_like_client(int port) {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", port);
    c->set_read_timeout(std::chrono::seconds(60));
    c->set_write_timeout(std::chrono::seconds(60));
    c->set_keep_alive(true);
    c->set_tcp_nodelay(true);
    return c;
}

// httplib_post sends n bytes of data straight from the caller's buffer (a content provider: no copy into
// the request) and checks the echoed size.
bool httplib_post(httplib::Client & c, const void * data, size_t n) {
    const char * p = static_cast<const char *>(data);
    auto res = c.Post("/blob", n, [p](size_t off, size_t len, httplib::DataSink & sink) { return sink.write(p + off, len); },
                      "application/octet-stream");
    return res && res->status == 200 && res->body == std::to_string(n);
}

// httplib_get reads GET /blob/<n> into dst (warm, at least n bytes).
bool httplib_get(httplib::Client & c, size_t n, std::vector<char> & dst) {
    size_t got = 0;
    auto res = c.Get("/blob/" + std::to_string(n), [&](const char * d, size_t len) {
        if (len > dst.size() - got) return false;
        std::memcpy(dst.data() + got, d, len);
        got += len;
        return true;
    });
    return res && res->status == 200 && got == n;
}

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
    blob_http_server server(true, blob_bytes, blob.data(), blob.size());
    auto client = node_like_client(server.port);

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
        const bool posted = httplib_post(*client, blob.data(), blob.size());
        ms[S_TRANSFER] = now_ms() - t0;
        if (!posted)
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

// bench_size also returns the sizes of the blobs it made (bytes, with their token counts) for bench_transfer.
int bench_size(bool quick, std::vector<std::pair<size_t, size_t>> & blob_sizes) {
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
        if (!pre.done.ok()) return std::fprintf(stderr, "blob_bench: %s\n", pre.done.status().to_string().c_str()), 1;
        const std::vector<uint8_t> & b = pre.done->blob;
        auto v = blob_parse(b);
        if (!v.ok()) return std::fprintf(stderr, "blob_bench: %s\n", v.status().to_string().c_str()), 1;
        const double per_token = double(b.size()) / double(n);
        const double overhead = 100.0 * (per_token / kv_per_token - 1.0);
        // Framing: everything that is not state, tokens, logits, checkpoints or the embedded request.
        size_t content = v->state.size() + v->tokens.size() * 4 + (v->logits ? v->logits->size() * 4 : 0) +
                         (v->request ? v->request->size() : 0);
        for (const auto & c : v->checkpoints) content += c.data.size();
        const double framing_pct = 100.0 * double(b.size() - std::min(b.size(), content)) / double(v->state.size());
        std::printf("%8zu %14zu %16.1f %12.3f %14.3f\n", n, b.size(), per_token, overhead, framing_pct);
        blob_sizes.emplace_back(n, b.size());
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

// bench_transfer: for each size, runs (after one unmeasured warm-up) raw TCP up/down, upload and download
// with the cpp-httplib client and with the raw HTTP client against a node-like server; ratios are taken
// run by run against raw TCP in the same direction. Then, for 16 MiB only, back-to-back uploads with
// cpp-httplib's defaults (the old method), each paired with a raw TCP upload right before it.
int bench_transfer(bool quick, const std::vector<std::pair<std::string, size_t>> & sizes) {
    size_t max_bytes = 0;
    for (const auto & s : sizes) max_bytes = std::max(max_bytes, s.second);
    std::vector<char> src(max_bytes), dst(max_bytes, 1);
    std::mt19937_64 rng(11);
    for (auto & c : src) c = char(rng());
    raw_tcp_pair raw(max_bytes);
    blob_http_server node(true, max_bytes, src.data(), src.size());
    blob_http_server defaults(false, max_bytes, src.data(), src.size());
    auto client = node_like_client(node.port);
    raw_http_client raw_client(node.port);
    httplib::Client old_client("127.0.0.1", defaults.port);  // the old bench's client: defaults + keep-alive
    old_client.set_read_timeout(std::chrono::seconds(60));
    old_client.set_write_timeout(std::chrono::seconds(60));
    old_client.set_keep_alive(true);

    enum { T_RAW_UP, T_RAW_DOWN, T_UP, T_UP_RAWCLIENT, T_DOWN, T_DOWN_RAWCLIENT, T_UP_DEFAULTS, T_N };
    const char * names[T_N] = {"raw_tcp_up", "raw_tcp_down", "upload", "upload_rawclient", "download", "download_rawclient",
                               "upload_httplib_defaults"};
    const int runs = quick ? 2 : 21;  // cheap (~10 ms a run at 16 MiB); more runs steady the medians
    std::printf("\n%-38s %10s %10s %10s %14s\n", "loopback transfers, GB/s", "median", "min", "max", "x raw TCP");
    for (const auto & [label, n] : sizes) {
        std::vector<double> g[T_N], ratio[T_N];
        std::string echoed;
        for (int r = -1; r < runs; ++r) {
            double ms[T_N] = {};
            size_t got = 0;
            // timed runs one transfer into ms[t]; false (naming it) when it failed.
            auto timed = [&](int t, const std::function<bool()> & f) {
                const double t0 = now_ms();
                const bool ok = f();
                ms[t] = now_ms() - t0;
                if (!ok) std::fprintf(stderr, "blob_bench: loopback %s of %zu bytes failed (run %d)\n", names[t], n, r);
                return ok;
            };
            const bool ok = timed(T_RAW_UP, [&] { return raw.up(n); }) && timed(T_RAW_DOWN, [&] { return raw.down(n); }) &&
                            timed(T_UP, [&] { return httplib_post(*client, src.data(), n); }) &&
                            timed(T_UP_RAWCLIENT, [&] { return raw_client.post("/blob", src.data(), n, echoed) == 200 && echoed == std::to_string(n); }) &&
                            timed(T_DOWN, [&] { return httplib_get(*client, n, dst); }) &&
                            timed(T_DOWN_RAWCLIENT, [&] { return raw_client.get("/blob/" + std::to_string(n), dst, got) == 200 && got == n; });
            if (!ok) return 1;
            if (r < 0) continue;
            for (int t = 0; t < T_UP_DEFAULTS; ++t) {
                const int base = (t == T_DOWN || t == T_DOWN_RAWCLIENT || t == T_RAW_DOWN) ? T_RAW_DOWN : T_RAW_UP;
                g[t].push_back(gbps(n, ms[t]));
                ratio[t].push_back(ms[base] / ms[t]);
            }
        }
        if (n == (size_t(16) << 20)) {  // the old method: back to back, as the old bench's loop sent them
            const std::string body(src.data(), n);  // posted as a std::string (copied into the request)
            for (int r = -1; r < runs; ++r) {
                double t0 = now_ms();
                bool ok = raw.up(n);
                const double raw_ms = now_ms() - t0;
                t0 = now_ms();
                auto res = old_client.Post("/blob", body, "application/octet-stream");
                const double old_ms = now_ms() - t0;
                if (!ok || !res || res->status != 200 || res->body != std::to_string(n))
                    return std::fprintf(stderr, "blob_bench: old-method POST of %zu bytes failed (run %d)\n", n, r), 1;
                if (r < 0) continue;
                g[T_UP_DEFAULTS].push_back(gbps(n, old_ms));
                ratio[T_UP_DEFAULTS].push_back(raw_ms / old_ms);
            }
        }
        for (int t = 0; t < T_N; ++t) {
            if (g[t].empty()) continue;
            const stats sg = summarize(g[t]), sr = summarize(ratio[t]);
            const std::string row = label + " " + names[t];
            std::printf("%-38s %10.3f %10.3f %10.3f %14.3f\n", row.c_str(), sg.median, sg.min, sg.max, sr.median);
            const std::string base = "blob_pipeline/transfer/" + label + "/";
            result(base + names[t] + "_gbps", sg, "GB/s", "info", true);
            if (t != T_RAW_UP && t != T_RAW_DOWN) result(base + names[t] + "_vs_raw_tcp", sr, "x", "info", true);
        }
    }
    std::printf("(%d runs; raw TCP: loopback socket pair, warm buffers; HTTP against an in-process node-like cpp-httplib server;\n"
                " upload_httplib_defaults: the old method, cpp-httplib defaults without TCP_NODELAY)\n", runs);
    return 0;
}

std::string size_label(size_t bytes) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1fMiB", double(bytes) / double(1 << 20));
    return buf;
}

}  // namespace

int main(int argc, char ** argv) {
    llama_quiet_logs();
    llama_backend_once();
    const bool quick = quick_mode(argc, argv);
    if (bench_pipeline(quick) != 0) return 1;
    std::vector<std::pair<size_t, size_t>> blob_sizes;
    if (bench_size(quick, blob_sizes) != 0) return 1;
    std::vector<std::pair<std::string, size_t>> sizes = {{"16MiB", size_t(16) << 20}};
    for (const auto & [n_tokens, bytes] : blob_sizes) sizes.emplace_back("blob_" + std::to_string(n_tokens) + "tok_" + size_label(bytes), bytes);
    if (bench_transfer(quick, sizes) != 0) return 1;
    return 0;
}
