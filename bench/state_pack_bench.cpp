// state_pack_bench.cpp — figure 22: packed states (--state-compress-level, blob_pack.h). On which links does
// packing a state for the wire pay?
//
// States: real blobs from the engine's prefill of a 2048-token random prompt (a 512x8 llama with an f16 and with a
// q8_0 KV cache, flash attention on; and the hybrid lfm2 256x4, whose recurrent state is f32). Random weights:
// a real model's KV may compress otherwise (docs/benchmarks.md says so). For each state and each setting
// (zstd level 1 and 3 over byte planes; level 1 without planes) the bench times blob_pack and blob_unpack (the
// median of --runs, 5) and reports the packed size / the blob size, and from those:
//   the break-even link rate = 8 x (blob bytes - packed bytes) / (pack time + unpack time): on a slower link
//   the bytes saved take longer to send than packing and unpacking take, so packing pays; on a faster one it
//   costs. (Node to node the fetch does pack, send, unpack one after the other, as timed here.)
//   the transfer time of the state at 100 Mbit/s, 1 Gbit/s and 10 Gbit/s, packed (pack + send + unpack) / as it
//   is (send): below 1.0 packing wins on that link.
// Headline: the break-even rate of the f16 llama state at level 1. No target: the figure is what the
// documentation's advice (when to set --state-compress-level) rests on; the default stays 0.
// --quick: a 128x2 llama and 512 tokens, 2 runs.
#include <llama.h>

#include <random>

#include "baton/blob_pack.h"
#include "baton/engine.h"
#include "baton/model.h"
#include "bench_util.h"

using namespace baton;
using namespace baton::bench;

namespace {

struct state_case {
    std::string name, arch;
    int n_embd, n_layer;
    int32_t kv_type;  // ggml_type: 1 f16, 8 q8_0
};

Result<std::vector<uint8_t>> make_state(const state_case & c, size_t n_tokens) {
    auto lm = loaded_model::load(bench_model(c.arch, c.n_embd, c.n_layer));
    if (!lm.ok()) return lm.status();
    std::shared_ptr<const loaded_model> m(std::move(lm.value()));
    engine_config cfg;
    cfg.ctx.n_ctx = 4096;
    cfg.ctx.type_k = cfg.ctx.type_v = c.kv_type;
    cfg.ctx.flash_attn = true;
    auto e = engine::create(m, cfg);
    if (!e.ok()) return e.status();
    std::mt19937 rng{uint32_t(n_tokens) + 5};
    gen_request req;
    req.prompt = {1};
    const uint32_t n_vocab = m->identity().n_vocab;
    while (req.prompt.size() < n_tokens) req.prompt.push_back(token_id(5 + rng() % (n_vocab - 5)));
    req.n_predict = 0;
    auto h = e.value()->submit(task_prefill{req});
    if (!h.ok()) return h.status();
    engine_result pre = engine_run_to_end(h.value(), std::chrono::minutes(10));
    if (!pre.done.ok()) return pre.done.status();
    return pre.done->blob;
}

struct timing {
    double ratio = 0, pack_ms = 0, unpack_ms = 0;
};

Result<timing> time_pack(const std::vector<uint8_t> & blob, int level, uint8_t width, int runs) {
    std::vector<double> pack, unpack;
    size_t packed_bytes = 0;
    for (int r = 0; r < runs; ++r) {
        double t0 = now_ms();
        auto p = blob_pack(blob, level, width);
        pack.push_back(now_ms() - t0);
        if (!p.ok()) return p.status();
        packed_bytes = p->size();
        t0 = now_ms();
        auto u = blob_unpack(p.value(), blob.size());
        unpack.push_back(now_ms() - t0);
        if (!u.ok()) return u.status();
        if (u.value() != blob) return Status(status_code::internal, "a packed state unpacked to other bytes");
    }
    return timing{double(packed_bytes) / double(blob.size()), summarize(pack).median, summarize(unpack).median};
}

}  // namespace

int main(int argc, char ** argv) try {
    const bool quick = quick_mode(argc, argv);
    const int runs = quick ? 2 : 5;
    const size_t n_tokens = quick ? 512 : 2048;
    std::vector<state_case> cases = {{"llama512x8_f16", "llama", 512, 8, 1},
                                     {"llama512x8_q8_0", "llama", 512, 8, 8},
                                     {"lfm2_256x4_f16", "lfm2", 256, 4, 1}};
    if (quick) cases = {{"llama128x2_f16", "llama", 128, 2, 1}};
    struct setting {
        std::string name;
        int level;
        uint8_t width;
    };
    const std::vector<setting> settings = {{"l1_planes", 1, 2}, {"l3_planes", 3, 2}, {"l1_bytes", 1, 0}};
    const double links_mbit[] = {100, 1000, 10000};
    std::printf("state_pack_bench: %zu-token states, %d runs each; break-even = the link rate below which packing "
                "pays\n",
                n_tokens, runs);
    std::printf("%-18s %-10s %10s %8s %9s %10s %12s %8s %8s %8s\n", "state", "setting", "bytes", "packed", "pack ms",
                "unpack ms", "break-even", "@100M", "@1G", "@10G");
    bool headline_done = false;
    for (const auto & c : cases) {
        auto blob = make_state(c, n_tokens);
        if (!blob.ok()) {
            std::fprintf(stderr, "state_pack_bench: %s: %s\n", c.name.c_str(), blob.status().to_string().c_str());
            return 1;
        }
        const double bytes = double(blob->size());
        for (size_t si = 0; si < settings.size(); ++si) {
            const setting & s = settings[si];
            auto t = time_pack(blob.value(), s.level, s.width, runs);
            if (!t.ok()) {
                std::fprintf(stderr, "state_pack_bench: %s\n", t.status().to_string().c_str());
                return 1;
            }
            const double saved = bytes * (1.0 - t->ratio), cost_s = (t->pack_ms + t->unpack_ms) / 1000.0;
            const double break_even_mbit = saved > 0 ? 8.0 * saved / cost_s / 1e6 : 0;
            double rel[3];
            for (int k = 0; k < 3; ++k) {
                const double bps = links_mbit[k] * 1e6 / 8;
                rel[k] = (cost_s + bytes * t->ratio / bps) / (bytes / bps);
            }
            std::printf("%-18s %-10s %10.0f %8.3f %9.1f %10.1f %9.0f Mb/s %8.3f %8.3f %8.3f\n", c.name.c_str(),
                        s.name.c_str(), bytes, t->ratio, t->pack_ms, t->unpack_ms, break_even_mbit, rel[0], rel[1],
                        rel[2]);
            const std::string n = "state_pack/" + c.name + "/" + s.name;
            const auto one = [](double v) { return stats{v, v, v, 1}; };
            result_at(n + "/packed_over_blob", one(t->ratio), "x", "info", true, {22, c.name, double(si)});
            result(n + "/pack_ms", one(t->pack_ms), "ms", "info", true);
            result(n + "/unpack_ms", one(t->unpack_ms), "ms", "info", true);
            result(n + "/break_even_link", one(break_even_mbit), "Mbit/s", "info", true);
            for (int k = 0; k < 3; ++k)
                result(n + "/transfer_packed_over_plain_at_" + std::to_string(int(links_mbit[k])) + "Mbit", one(rel[k]),
                       "x", "info", true);
            if (!headline_done && s.level == 1 && s.width == 2) {
                headline(22, "state_pack_break_even_link_" + c.name + "_l1", one(break_even_mbit), "Mbit/s",
                         "info: packing pays on slower links", true);
                headline_done = true;
            }
        }
    }
    return 0;
} catch (const std::exception & e) {
    std::fprintf(stderr, "state_pack_bench: %s\n", e.what());
    return 1;
}
