// blob_bench.cpp — state blob costs: verify+parse throughput against memcpy, and the format's size overhead.
//
// 1. A 16 MiB blob (random state bytes, 4096 tokens, 32000 logits) is parsed (every checksum verified, the
//    state viewed in place) and memcpy'd, alternately in the same run; median/min/max of the runs and the
//    throughput ratio parse/memcpy (target >= 0.5).
// 2. A 512-token state of a 512x8 llama test model (made with mkmodel in a temp dir): header and section
//    framing as % of the state bytes (target <= 1%), and, for information, everything besides the state
//    (framing + tokens + logits) as %.
// Prints a table and one JSON line per figure: {"name","value","unit","target","ok"}.
#include <llama.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "baton/blob.h"
#include "baton/context.h"
#include "baton/mkmodel.h"
#include "baton/model.h"

namespace {

using namespace baton;
using clock_type = std::chrono::steady_clock;

struct stats {
    double median, min, max;
};

stats summarize(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return {v[v.size() / 2], v.front(), v.back()};
}

void json(const char * name, double value, const char * unit, const char * target, bool ok) {
    std::printf("{\"name\":\"%s\",\"value\":%.4f,\"unit\":\"%s\",\"target\":%s,\"ok\":%s}\n", name, value, unit, target,
                ok ? "true" : "false");
}

int bench_throughput(bool & all_ok) {
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

    const int runs = 11;
    std::vector<double> parse_gbps, memcpy_gbps, write_gbps;
    for (int r = -1; r < runs; ++r) {
        blob_buffer_sink out;
        out.bytes().assign(blob_bytes, 0);  // fault the pages in before timing, then keep the capacity
        out.bytes().clear();
        auto t0 = clock_type::now();
        Status ws = blob_write(parts, out);
        auto t1 = clock_type::now();
        if (!ws.ok()) return 1;
        if (r >= 0) write_gbps.push_back(double(blob_bytes) / std::chrono::duration<double>(t1 - t0).count() / 1e9);
    }
    size_t checksum = 0;
    for (int r = -1; r < runs; ++r) {  // r == -1 warms up
        auto t0 = clock_type::now();
        auto v = blob_parse(blob);
        auto t1 = clock_type::now();
        if (!v.ok()) {
            std::fprintf(stderr, "blob_bench: parse failed: %s\n", v.status().to_string().c_str());
            return 1;
        }
        checksum += v->state.size();
        auto t2 = clock_type::now();
        std::memcpy(dst.data(), blob.data(), blob.size());
        auto t3 = clock_type::now();
        checksum += dst[size_t(r + 1) * 4099 % dst.size()];
        if (r < 0) continue;
        parse_gbps.push_back(double(blob.size()) / std::chrono::duration<double>(t1 - t0).count() / 1e9);
        memcpy_gbps.push_back(double(blob.size()) / std::chrono::duration<double>(t3 - t2).count() / 1e9);
    }
    const stats p = summarize(parse_gbps), m = summarize(memcpy_gbps), w = summarize(write_gbps);
    const double ratio = p.median / m.median;
    std::printf("%-34s %10s %10s %10s\n", "16 MiB blob (GB/s)", "median", "min", "max");
    std::printf("%-34s %10.2f %10.2f %10.2f\n", "blob_parse (verify+parse)", p.median, p.min, p.max);
    std::printf("%-34s %10.2f %10.2f %10.2f\n", "memcpy", m.median, m.min, m.max);
    std::printf("%-34s %10.2f   (target >= 0.50)\n", "ratio parse/memcpy (medians)", ratio);
    std::printf("%-34s %10.2f %10.2f %10.2f\n", "blob_write (buffer sink)", w.median, w.min, w.max);
    std::printf("(%d runs; check %zu)\n", runs, checksum % 10);
    json("blob_parse_16mib", p.median, "GB/s", "null", true);
    json("memcpy_16mib", m.median, "GB/s", "null", true);
    json("blob_parse_vs_memcpy", ratio, "x", "0.5", ratio >= 0.5);
    json("blob_write_16mib", w.median, "GB/s", "null", true);
    all_ok = all_ok && ratio >= 0.5;
    return 0;
}

int bench_overhead(bool & all_ok) {
    const std::string dir = std::filesystem::temp_directory_path() / ("baton-blob-bench-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string path = dir + "/llama-512x8.gguf";
    mkmodel_params mp;
    mp.arch = "llama";
    mp.n_embd = 512;
    mp.n_layer = 8;
    Status st = mkmodel_write(mp, path);
    if (!st.ok()) return std::fprintf(stderr, "blob_bench: %s\n", st.to_string().c_str()), 1;
    auto m = loaded_model::load(path);
    std::filesystem::remove_all(dir);
    if (!m.ok()) return std::fprintf(stderr, "blob_bench: %s\n", m.status().to_string().c_str()), 1;
    const loaded_model & model = *m.value();
    context_config cfg;
    cfg.n_ctx = 1024;
    auto c = context_make(model, cfg);
    if (!c.ok()) return std::fprintf(stderr, "blob_bench: %s\n", c.status().to_string().c_str()), 1;
    llama_context * ctx = c.value().get();
    const int32_t n_vocab = llama_vocab_n_tokens(model.vocab());
    const int n = 512;
    std::vector<int32_t> tokens(n);
    std::mt19937 rng(3);
    for (auto & t : tokens) t = int32_t(rng() % uint32_t(n_vocab));
    llama_batch b = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; ++i) {
        b.token[i] = tokens[i];
        b.pos[i] = i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = i == n - 1;
    }
    b.n_tokens = n;
    const int rc = llama_decode(ctx, b);
    llama_batch_free(b);
    if (rc != 0) return std::fprintf(stderr, "blob_bench: llama_decode failed (%d)\n", rc), 1;
    const float * l = llama_get_logits_ith(ctx, -1);
    std::vector<float> logits(l, l + n_vocab);
    std::vector<uint8_t> state(llama_state_seq_get_size(ctx, 0));
    llama_state_seq_get_data(ctx, state.data(), state.size(), 0);

    const model_identity & mi = model.identity();
    blob_parts parts;
    parts.identity = {mi.fingerprint, mi.llama_version, mi.arch, mi.n_layer, mi.n_embd, mi.n_vocab};
    parts.context = {cfg.type_k, cfg.type_v, cfg.flash_attn, cfg.kv_unified, cfg.n_seq_max, cfg.n_ctx};
    parts.tokens = tokens;
    parts.state = state;
    parts.logits = logits;
    blob_size_sink size;
    st = blob_write(parts, size);
    if (!st.ok()) return std::fprintf(stderr, "blob_bench: %s\n", st.to_string().c_str()), 1;
    const double total = double(size.size());
    const double content = double(state.size()) + 4.0 * n + 4.0 * n_vocab;
    const double framing = total - content;
    const double framing_pct = 100.0 * framing / double(state.size());
    const double besides_state_pct = 100.0 * (total - double(state.size())) / double(state.size());
    std::printf("\n512-token state, llama 512x8 (n_vocab %d)\n", n_vocab);
    std::printf("%-34s %12zu bytes\n", "state", state.size());
    std::printf("%-34s %12.0f bytes\n", "blob", total);
    std::printf("%-34s %12.0f bytes  %8.4f %%  (target <= 1%%)\n", "header + section framing", framing, framing_pct);
    std::printf("%-34s %12.0f bytes  %8.4f %%\n", "framing + tokens + logits", total - double(state.size()),
                besides_state_pct);
    json("blob_overhead_512tok_llama512x8", framing_pct, "%", "1", framing_pct <= 1.0);
    json("blob_besides_state_512tok_llama512x8", besides_state_pct, "%", "null", true);
    all_ok = all_ok && framing_pct <= 1.0;
    return 0;
}

}  // namespace

int main() {
    llama_quiet_logs();
    llama_backend_once();
    bool ok = true;
    if (bench_throughput(ok) != 0) return 1;
    if (bench_overhead(ok) != 0) return 1;
    return ok ? 0 : 1;
}
