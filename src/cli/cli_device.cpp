// cli_device.cpp — llama-server's device, KV cache and batch flags (see cli.h), shared by every subcommand
// that loads a model.
#include <CLI/CLI.hpp>

#include "baton/context.h"
#include "baton/device.h"
#include "cli.h"

namespace baton {

void cli_add_device_flags(CLI::App & sub, cli_device_flags & f, context_config & ctx) {
    sub.allow_non_standard_option_names();  // -ngl, -ctk, -ub, ...
    sub.footer(cli_short_forms_footer());
    sub.add_option("-ngl,--n-gpu-layers,--gpu-layers", f.n_gpu_layers,
                   "Layers to put on the GPU devices: a count, 'all', or 'auto' (all when a GPU device is in use)")
        ->capture_default_str();
    sub.add_option("-dev,--device", f.devices,
                   "Comma-separated devices to offload to, or 'none' (default: every GPU device; see `baton devices`)");
    sub.add_option("-sm,--split-mode", f.split_mode, "How to split the model across devices: none, layer, row, tensor")
        ->capture_default_str();
    sub.add_option("-ts,--tensor-split", f.tensor_split, "Proportion of the model per device, e.g. 3,1");
    sub.add_option("-mg,--main-gpu", f.main_gpu, "The device (index) for split mode none")->capture_default_str();
    sub.add_flag("--mlock", f.mlock, "Keep the model in RAM (no swapping)");
    sub.add_flag("--no-mmap", f.no_mmap, "Read the model into memory instead of mapping it");
    sub.add_option("-fa,--flash-attn", f.flash_attn,
                   "Flash attention: on, off, auto (on when layers are on a GPU device or -ctv is quantized). Part of "
                   "the KV layout a blob must match")
        ->capture_default_str();
    sub.add_option("-ctk,--cache-type-k", f.cache_type_k,
                   "K cache type: f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1")
        ->capture_default_str();
    sub.add_option("-ctv,--cache-type-v", f.cache_type_v,
                   "V cache type (quantized needs -fa on): f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1")
        ->capture_default_str();
    sub.add_option("-b,--batch-size", ctx.n_batch, "Tokens per llama_decode (prompts are fed in chunks of this size)")
        ->capture_default_str();
    sub.add_option("-ub,--ubatch-size", ctx.n_ubatch, "Physical micro-batch, tokens")->capture_default_str();
    sub.add_option("-tb,--threads-batch", ctx.n_threads_batch, "Threads for prompt batches (0: same as -t)")
        ->capture_default_str();
}

Status cli_device_resolve(const cli_device_flags & f, offload_config & o, context_config & ctx) {
    o = offload_cli_default();
    auto ngl = gpu_layers_parse(f.n_gpu_layers);
    if (!ngl.ok()) return ngl.status();
    o.n_gpu_layers = ngl.value();
    if (!f.devices.empty()) BATON_RETURN_IF_ERROR(devices_parse(f.devices, o));
    auto sm = split_mode_parse(f.split_mode);
    if (!sm.ok()) return sm.status();
    o.split = sm.value();
    if (!f.tensor_split.empty()) {
        auto ts = tensor_split_parse(f.tensor_split);
        if (!ts.ok()) return ts.status();
        o.tensor_split = ts.value();
    }
    o.main_gpu = f.main_gpu;
    o.mlock = f.mlock;
    o.mmap = !f.no_mmap;
    BATON_RETURN_IF_ERROR(offload_check(o));
    BATON_RETURN_IF_ERROR(flash_attn_parse(f.flash_attn, ctx));
    auto k = kv_cache_type_parse(f.cache_type_k, "-ctk/--cache-type-k");
    if (!k.ok()) return k.status();
    ctx.type_k = k.value();
    auto v = kv_cache_type_parse(f.cache_type_v, "-ctv/--cache-type-v");
    if (!v.ok()) return v.status();
    ctx.type_v = v.value();
    return {};
}

}  // namespace baton
