// device_bench.cpp — what the KV cache type and the device do to a blob (figure 13).
//
// 1. Blob bytes per prompt token with an f16 and a q8_0 KV cache (flash attention on for both, CPU), on a
//    512x8 llama (64-wide heads) at 512 and 2048 tokens. Headline: q8_0 bytes / f16 bytes at 2048 tokens;
//    expected about 0.53 (q8_0 stores 34 bytes per 32 values, f16 64; cell metadata and the request are the
//    same in both). Target: <= 0.56.
// 2. Restore (verify + apply through the one restore routine) into an engine whose KV cache lives on the
//    Vulkan device (llvmpipe, every layer offloaded) vs one on the CPU, same blob, same model, 512 tokens:
//    the state is written into device memory instead of host memory. Info only (a software device's
//    "device memory" is host memory behind Vulkan's copy path); also the prefill time on each.
//
// The software Vulkan device is visible only with GGML_VK_VISIBLE_DEVICES=0 (set here before ggml loads its
// backends). Usage: device_bench [--quick]
#include "baton/engine.h"
#include "baton/model.h"
#include "bench_engine.h"
#include "bench_util.h"

using namespace baton;
using namespace baton::bench;

namespace {

std::shared_ptr<const loaded_model> load(const std::string & path, bool device) {
    model_load_params p;
    if (device) p.offload = offload_all_on("Vulkan0");
    auto m = loaded_model::load(path, p);
    if (!m.ok()) {
        std::fprintf(stderr, "bench: %s\n", m.status().to_string().c_str());
        std::exit(1);
    }
    return std::shared_ptr<const loaded_model>(std::move(m.value()));
}

engine_config config(int32_t kv_type) {
    engine_config cfg;
    cfg.ctx.n_ctx = 2304;
    cfg.ctx.flash_attn = true;
    cfg.ctx.type_k = cfg.ctx.type_v = kv_type;
    return cfg;
}

}  // namespace

int main(int argc, char ** argv) {
    ::setenv("GGML_VK_VISIBLE_DEVICES", "0", 1);
    const bool quick = quick_mode(argc, argv);
    const int runs = quick ? 1 : 3;
    const int n_embd = quick ? 256 : 512, n_layer = quick ? 2 : 8;
    const std::string path = bench_model("llama", n_embd, n_layer);
    const std::string shape = std::to_string(n_embd) + "x" + std::to_string(n_layer);
    constexpr int32_t k_f16 = 1, k_q8_0 = 8;  // ggml_type

    // 1. bytes per token
    auto cpu = load(path, false);
    std::printf("%-22s %6s %14s %14s\n", "cache", "tokens", "blob bytes", "bytes/token");
    double ratio_2048 = 0;
    for (size_t n : quick ? std::vector<size_t>{128, 512} : std::vector<size_t>{512, 2048}) {
        double per_token[2] = {0, 0};
        for (int i = 0; i < 2; ++i) {
            const int32_t type = i == 0 ? k_f16 : k_q8_0;
            auto e = engine::create(cpu, config(type));
            if (!e.ok()) return std::fprintf(stderr, "bench: %s\n", e.status().to_string().c_str()), 1;
            gen_request req;
            req.prompt = engine_prompt_of(n, int32_t(cpu->identity().n_vocab));
            req.n_predict = 0;
            engine_result pre = engine_run_or_exit(*e.value(), task_prefill{req});
            if (!pre.done.ok()) return std::fprintf(stderr, "bench: %s\n", pre.done.status().to_string().c_str()), 1;
            per_token[i] = double(pre.done->blob.size()) / double(n);
            std::printf("%-22s %6zu %14zu %14.1f\n",
                        (std::string(i == 0 ? "f16" : "q8_0") + " KV, llama " + shape).c_str(), n,
                        pre.done->blob.size(), per_token[i]);
            stats s;
            s.median = s.min = s.max = per_token[i];
            s.n = 1;
            result_at(std::string("blob_bytes_per_token/") + (i == 0 ? "f16/" : "q8_0/") + std::to_string(n), s,
                      "bytes/token", "info", true,
                      {13, std::string(i == 0 ? "f16" : "q8_0") + " KV bytes/token", double(n)});
        }
        ratio_2048 = per_token[1] / per_token[0];
    }
    stats rs;
    rs.median = rs.min = rs.max = ratio_2048;
    rs.n = 1;

    // 2. restore into a device-resident cache vs a host one
    auto dev = load(path, true);
    const size_t n = quick ? 128 : 512;
    std::printf("\n%-22s %6s %12s %12s %12s\n", "restore into", "tokens", "prefill ms", "verify ms", "apply ms");
    for (const bool on_device : {false, true}) {
        const auto & m = on_device ? dev : cpu;
        auto src = engine::create(m, config(k_f16));
        auto dst = engine::create(m, config(k_f16));
        if (!src.ok() || !dst.ok()) return std::fprintf(stderr, "bench: engine creation failed\n"), 1;
        std::vector<double> prefill_ms, verify_ms, apply_ms;
        for (int r = 0; r < runs + 1; ++r) {  // the first run warms the device's pipelines; not counted
            engine_run_or_exit(*src.value(), task_slot_erase{0});
            gen_request req;
            req.prompt = engine_prompt_of(n, int32_t(m->identity().n_vocab));
            req.n_predict = 0;
            engine_result pre = engine_run_or_exit(*src.value(), task_prefill{req});
            if (!pre.done.ok()) return std::fprintf(stderr, "bench: %s\n", pre.done.status().to_string().c_str()), 1;
            const double t0 = now_ms();
            auto blob = validated_blob::parse(std::move(pre.done->blob), blob_limits{});
            const double t1 = now_ms();
            if (!blob.ok()) return std::fprintf(stderr, "bench: %s\n", blob.status().to_string().c_str()), 1;
            engine_result put = engine_run_or_exit(*dst.value(), task_slot_restore{0, blob.value()});
            const double t2 = now_ms();
            if (!put.done.ok()) return std::fprintf(stderr, "bench: %s\n", put.done.status().to_string().c_str()), 1;
            if (r == 0 && runs > 1) continue;
            prefill_ms.push_back(pre.done->ms_prompt);
            verify_ms.push_back(t1 - t0);
            apply_ms.push_back(t2 - t1);
        }
        const char * where = on_device ? "vulkan" : "cpu";
        const stats sp = summarize(prefill_ms), sv = summarize(verify_ms), sa = summarize(apply_ms);
        std::printf("%-22s %6zu %12.1f %12.3f %12.3f\n", on_device ? "Vulkan0 (llvmpipe)" : "CPU", n, sp.median,
                    sv.median, sa.median);
        result(std::string("device_restore_apply_ms/") + where, sa, "ms", "info", true);
        result(std::string("device_restore_verify_ms/") + where, sv, "ms", "info", true);
        result(std::string("device_prefill_ms/") + where, sp, "ms", "info", true);
    }
    headline(13, "blob_bytes_q8_0_over_f16", rs, "x", "<= 0.56 (about 0.53)", ratio_2048 <= 0.56);
    return 0;
}
