// kv_layout_bench.cpp — unified vs per-sequence (non-unified) KV cache, measured side by side.
//
// N slots each process a distinct prompt and generate concurrently (continuous batching). Reports
// aggregate generation tok/s and prompt tok/s for kv_unified = true and false, alternating the two
// layouts run by run so drift on the machine hits both equally. The engine's default layout is chosen
// from this measurement (docs/benchmarks.md); unified blobs restore into any slot count.
#include <random>

#include "baton/engine.h"
#include "baton/model.h"
#include "bench_util.h"

using namespace baton;
using namespace baton::bench;

int main(int argc, char ** argv) {
    const bool quick = quick_mode(argc, argv);
    const int runs = quick ? 1 : 5;
    const uint32_t n_slots = 4, n_prompt = quick ? 64 : 256, n_gen = quick ? 16 : 64;
    const int n_embd = quick ? 128 : 512, n_layer = quick ? 2 : 8;
    auto lm = loaded_model::load(bench_model("llama", n_embd, n_layer));
    if (!lm.ok()) return std::fprintf(stderr, "bench: %s\n", lm.status().to_string().c_str()), 1;
    std::shared_ptr<const loaded_model> m(std::move(lm.value()));
    const int32_t n_vocab = int32_t(m->identity().n_vocab);

    std::vector<double> gen_tps[2], pp_tps[2];
    for (int r = 0; r < runs; ++r) {
        for (int layout = 0; layout < 2; ++layout) {
            engine_config cfg;
            cfg.ctx.n_ctx = 4096;
            cfg.ctx.n_seq_max = n_slots;
            cfg.ctx.kv_unified = layout == 0;
            auto e = engine::create(m, cfg);
            if (!e.ok()) return std::fprintf(stderr, "bench: %s\n", e.status().to_string().c_str()), 1;
            std::vector<request_ptr> hs;
            const double t0 = now_ms();
            for (uint32_t s = 0; s < n_slots; ++s) {
                std::mt19937 rng{s * 7919u + uint32_t(r)};
                gen_request req;
                req.prompt = {1};
                while (req.prompt.size() < n_prompt) req.prompt.push_back(token_id(5 + rng() % uint32_t(n_vocab - 5)));
                req.n_predict = int32_t(n_gen);
                req.ignore_eos = true;
                req.sampling.temperature = 0;
                hs.push_back(e.value()->submit(task_generate{req}).value());
            }
            double prompt_ms = 0, gen_ms = 0;
            for (auto & h : hs) {
                engine_result res = engine_run_to_end(h, std::chrono::minutes(10));
                if (!res.done.ok()) return std::fprintf(stderr, "bench: %s\n", res.done.status().to_string().c_str()), 1;
                prompt_ms = std::max(prompt_ms, res.done->ms_prompt);
                gen_ms = std::max(gen_ms, res.done->ms_prompt + res.done->ms_generate);
            }
            const double wall = now_ms() - t0;
            (void)wall;
            pp_tps[layout].push_back(1000.0 * n_slots * n_prompt / prompt_ms);
            gen_tps[layout].push_back(1000.0 * n_slots * n_gen / (gen_ms - prompt_ms));
        }
    }
    const char * names[2] = {"unified", "per_seq"};
    std::printf("%-10s %14s %14s\n", "layout", "prompt tok/s", "gen tok/s");
    for (int l = 0; l < 2; ++l) std::printf("%-10s %14.1f %14.1f\n", names[l], summarize(pp_tps[l]).median, summarize(gen_tps[l]).median);
    for (int l = 0; l < 2; ++l) {
        result(std::string("kv_layout/") + names[l] + "/gen_tps", summarize(gen_tps[l]), "tok/s", "info", true);
        result(std::string("kv_layout/") + names[l] + "/prompt_tps", summarize(pp_tps[l]), "tok/s", "info", true);
    }
    return 0;
}
