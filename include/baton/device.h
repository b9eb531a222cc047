// device.h — where a model's weights and KV cache live: ggml's backend devices and llama-server's offload
// flags (-ngl, -dev, -sm, -ts, -mg, --mlock, --no-mmap), parsed and checked before anything is loaded.
//
// ggml registers one device per backend it can load (CPU, and e.g. Vulkan0 when libggml0-backend-vulkan and a
// Vulkan driver are installed; CUDA/HIP backends register the same way). libllama puts layers
// [n_layer + 1 - n_gpu_layers, n_layer] on the GPU devices (index n_layer is the output layer) and, with KV
// offload on (always, here), each layer's KV cache on its layer's device. offload_placement reports that
// placement. Where the KV cache lives is not a blob property: a blob from an offloaded node restores on a
// CPU-only node and back (docs/engine.md, "Where state lives").
// Thread-safety: free functions; devices_available reads ggml's registry (populated once at start).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "baton/base/status.h"

struct llama_model_params;
struct ggml_backend_device;

namespace baton {

inline constexpr int32_t k_gpu_layers_all = -1;   // every layer (llama-server's "all")
inline constexpr int32_t k_gpu_layers_auto = -2;  // every layer if a GPU device is in use, else none

enum class split_mode : uint8_t { none, layer, row, tensor };

// offload_config: the model-load half of llama-server's device flags.
struct offload_config {
    int32_t n_gpu_layers = 0;          // >= 0: that many layers from the top; k_gpu_layers_all / _auto
    std::vector<std::string> devices;  // -dev: device names in order; empty: every GPU device ggml found
    bool no_devices = true;            // -dev none (the library default: CPU only, whatever is installed)
    split_mode split = split_mode::layer;
    std::vector<float> tensor_split;  // -ts: proportions per device (empty: by free memory)
    int32_t main_gpu = 0;             // -mg: the device of split_mode none
    bool mlock = false;
    bool mmap = true;
};

// offload_all_on: every layer (and its KV cache) on the named device: `-dev NAME -ngl all`.
offload_config offload_all_on(const std::string & device);

// offload_cli_default: what `baton serve` and the other subcommands start from: llama-server's defaults
// (-ngl auto, every GPU device ggml found).
offload_config offload_cli_default();

struct device_info {
    std::string name;         // "CPU", "Vulkan0"
    std::string description;  // "llvmpipe (LLVM 22.1.8, 256 bits)"
    std::string kind;         // cpu | gpu | igpu | accel | meta
    size_t memory_free = 0, memory_total = 0;
};

// devices_available lists every device ggml registered (loads the backends first).
std::vector<device_info> devices_available();

// Parsers of the flags' values. invalid_argument naming the flag and the allowed values.
Result<int32_t> gpu_layers_parse(const std::string & s);               // N | auto | all
Result<split_mode> split_mode_parse(const std::string & s);            // none | layer | row | tensor
Result<std::vector<float>> tensor_split_parse(const std::string & s);  // "3,1" (also "3/1")
Status devices_parse(const std::string & s, offload_config & c);       // "none" | "Vulkan0,Vulkan1"
const char * split_mode_name(split_mode m);

// offload_check: the named devices exist and are not the CPU, -ts has at most one entry per device, -mg
// names one of them. invalid_argument naming the flag.
Status offload_check(const offload_config & c);

// offload_placement: what libllama does with the config for a model of n_layer layers.
struct offload_placement {
    std::vector<std::string> devices;  // the GPU devices in use (empty: CPU only)
    int32_t n_gpu_layers = 0;          // resolved (auto/all -> n_layer + 1)
    int32_t layers_on_device = 0;      // of n_layer + 1 (the repeating layers and the output layer)
    int32_t n_layer = 0;
    bool output_on_device = false;
};

// offload_apply fills mp's device fields (the arrays it points to live in `storage`, which must outlive the
// load) and returns the placement for a model of n_layer layers (n_layer 0: counts left 0, filled in by
// offload_place once the model is loaded). Checks c first (offload_check).
struct offload_storage {
    std::vector<ggml_backend_device *> devices;  // NULL-terminated
    std::vector<float> tensor_split;
};
Result<offload_placement> offload_apply(const offload_config & c, llama_model_params & mp, offload_storage & storage);
void offload_place(offload_placement & p, int32_t n_layer);

// offload_placement_text: "every layer on the CPU" | "4/5 layers on Vulkan0 (KV cache with its layers)".
std::string offload_placement_text(const offload_placement & p);

}  // namespace baton
