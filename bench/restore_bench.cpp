// restore_bench.cpp — restore (verify + apply) time vs prefill time, side by side in one run.
//
// For each model and prompt length: prefill the prompt in a fresh slot (engine prefill task; the figure is
// the prompt-processing time the engine reports), then restore the blob it produced into another engine's
// slot: verify = validated_blob::parse (checksums, structure) + apply = the one restore routine (compat
// check, llama_state_seq_set_data, position check, checkpoints). Target: restore <= 1% of prefill at
// >= 512 tokens. The headline (figure 1) is the worst median over both models at >= 512 tokens.
#include "baton/engine.h"
#include "baton/model.h"
#include "bench_engine.h"
#include "bench_util.h"

using namespace baton;
using namespace baton::bench;

int main(int argc, char ** argv) {
    const bool quick = quick_mode(argc, argv);
    const int runs = quick ? 2 : 5;
    std::vector<size_t> lengths = quick ? std::vector<size_t>{128, 512} : std::vector<size_t>{128, 512, 2048, 4096};
    const int n_embd = quick ? 128 : 512, n_layer = quick ? 2 : 8;
    std::printf("%-16s %6s %12s %12s %12s %10s %12s\n", "model", "tokens", "prefill ms", "verify ms", "apply ms", "restore %", "blob MiB");
    stats worst;  // the largest median restore/prefill ratio at >= 512 tokens (the headline)
    for (const std::string arch : {"llama", "granitehybrid"}) {
        auto lm = loaded_model::load(bench_model(arch, n_embd, n_layer));
        if (!lm.ok()) return std::fprintf(stderr, "bench: %s\n", lm.status().to_string().c_str()), 1;
        std::shared_ptr<const loaded_model> m(std::move(lm.value()));
        engine_config cfg;
        cfg.ctx.n_ctx = 4608;
        auto src = engine::create(m, cfg);
        auto dst = engine::create(m, cfg);
        if (!src.ok() || !dst.ok()) return std::fprintf(stderr, "bench: engine creation failed\n"), 1;
        for (size_t n : lengths) {
            std::vector<double> prefill_ms, verify_ms, apply_ms, ratio, restore_ms;
            size_t blob_bytes = 0;
            for (int r = 0; r < runs; ++r) {
                engine_run_or_exit(*src.value(), task_slot_erase{0});  // cold prefill: no prefix reuse
                gen_request req;
                req.prompt = engine_prompt_of(n, int32_t(m->identity().n_vocab));
                req.n_predict = 0;
                engine_result pre = engine_run_or_exit(*src.value(), task_prefill{req});
                if (!pre.done.ok()) return std::fprintf(stderr, "bench: %s\n", pre.done.status().to_string().c_str()), 1;
                blob_bytes = pre.done->blob.size();
                const double t0 = now_ms();
                auto blob = validated_blob::parse(std::move(pre.done->blob), cfg.limits);
                const double t1 = now_ms();
                if (!blob.ok()) return std::fprintf(stderr, "bench: %s\n", blob.status().to_string().c_str()), 1;
                engine_result put = engine_run_or_exit(*dst.value(), task_slot_restore{0, blob.value()});
                const double t2 = now_ms();
                if (!put.done.ok()) return std::fprintf(stderr, "bench: %s\n", put.done.status().to_string().c_str()), 1;
                prefill_ms.push_back(pre.done->ms_prompt);
                verify_ms.push_back(t1 - t0);
                apply_ms.push_back(t2 - t1);
                ratio.push_back(100.0 * (t2 - t0) / pre.done->ms_prompt);
                restore_ms.push_back(t2 - t0);
            }
            const stats sp = summarize(prefill_ms), sv = summarize(verify_ms), sa = summarize(apply_ms), sr = summarize(ratio);
            std::printf("%-16s %6zu %12.2f %12.3f %12.3f %10.3f %12.2f\n", (arch + " " + std::to_string(n_embd) + "x" + std::to_string(n_layer)).c_str(),
                        n, sp.median, sv.median, sa.median, sr.median, double(blob_bytes) / (1 << 20));
            const std::string name = "restore_vs_prefill/" + arch + "/" + std::to_string(n);
            result_at(name, sr, "% of prefill", n >= 512 ? "<= 1%" : "info", n < 512 || sr.median <= 1.0, {1, arch + " restore % of prefill", double(n)});
            result_at("prefill_ms/" + arch + "/" + std::to_string(n), sp, "ms", "info", true, {1, arch + " prefill ms", double(n)});
            result_at("restore_ms/" + arch + "/" + std::to_string(n), summarize(restore_ms), "ms", "info", true, {1, arch + " restore ms", double(n)});
            if (n >= 512 && sr.median > worst.median) worst = sr;
        }
    }
    headline(1, "restore_vs_prefill_worst_ge512", worst, "% of prefill", "<= 1% at >= 512 tokens", worst.median <= 1.0);
    return 0;
}
