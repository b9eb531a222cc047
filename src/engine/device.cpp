// device.cpp — ggml's backend devices and llama-server's offload flags.
#include "baton/device.h"

#include <ggml-backend.h>
#include <llama.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "baton/model.h"

namespace baton {
namespace {

const char * kind_name(enum ggml_backend_dev_type t) {
    switch (t) {
        case GGML_BACKEND_DEVICE_TYPE_CPU: return "cpu";
        case GGML_BACKEND_DEVICE_TYPE_GPU: return "gpu";
        case GGML_BACKEND_DEVICE_TYPE_IGPU: return "igpu";
        case GGML_BACKEND_DEVICE_TYPE_ACCEL: return "accel";
        default: return "meta";
    }
}

std::vector<std::string> split_list(const std::string & s, const std::string & seps) {
    std::vector<std::string> out;
    std::string cur;
    for (char ch : s) {
        if (seps.find(ch) != std::string::npos) {
            out.push_back(cur);
            cur.clear();
        } else {
            cur += ch;
        }
    }
    out.push_back(cur);
    return out;
}

// The GPU-class devices ggml registered, in registry order (what libllama uses when given no list).
std::vector<ggml_backend_dev_t> gpu_devices() {
    std::vector<ggml_backend_dev_t> out;
    for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
        ggml_backend_dev_t d = ggml_backend_dev_get(i);
        const enum ggml_backend_dev_type t = ggml_backend_dev_type(d);
        if (t == GGML_BACKEND_DEVICE_TYPE_GPU || t == GGML_BACKEND_DEVICE_TYPE_IGPU) out.push_back(d);
    }
    return out;
}

// The devices a config offloads to (names already checked).
std::vector<ggml_backend_dev_t> chosen_devices(const offload_config & c) {
    if (c.no_devices) return {};
    if (c.devices.empty()) return gpu_devices();
    std::vector<ggml_backend_dev_t> out;
    for (const auto & n : c.devices) out.push_back(ggml_backend_dev_by_name(n.c_str()));
    return out;
}

}  // namespace

offload_config offload_cli_default() {
    offload_config c;
    c.n_gpu_layers = k_gpu_layers_auto;
    c.no_devices = false;
    return c;
}

offload_config offload_all_on(const std::string & device) {
    offload_config c;
    c.no_devices = false;
    c.devices = {device};
    c.n_gpu_layers = k_gpu_layers_all;
    return c;
}

std::vector<device_info> devices_available() {
    llama_backend_once();
    std::vector<device_info> out;
    for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
        ggml_backend_dev_t d = ggml_backend_dev_get(i);
        device_info info;
        info.name = ggml_backend_dev_name(d);
        info.description = ggml_backend_dev_description(d);
        info.kind = kind_name(ggml_backend_dev_type(d));
        ggml_backend_dev_memory(d, &info.memory_free, &info.memory_total);
        out.push_back(std::move(info));
    }
    return out;
}

Result<int32_t> gpu_layers_parse(const std::string & s) {
    if (s == "auto") return k_gpu_layers_auto;
    if (s == "all") return k_gpu_layers_all;
    if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos)
        return invalid_input("-ngl/--n-gpu-layers: '" + s + "' is not a layer count, 'auto' or 'all'");
    return int32_t(std::stol(s));
}

Result<split_mode> split_mode_parse(const std::string & s) {
    if (s == "none") return split_mode::none;
    if (s == "layer") return split_mode::layer;
    if (s == "row") return split_mode::row;
    if (s == "tensor") return split_mode::tensor;
    return invalid_input("-sm/--split-mode: '" + s + "' is not none, layer, row or tensor");
}

const char * split_mode_name(split_mode m) {
    switch (m) {
        case split_mode::none: return "none";
        case split_mode::layer: return "layer";
        case split_mode::row: return "row";
        case split_mode::tensor: return "tensor";
    }
    return "layer";
}

Result<std::vector<float>> tensor_split_parse(const std::string & s) {
    std::vector<float> out;
    for (const auto & part : split_list(s, ",/")) {
        char * end = nullptr;
        errno = 0;
        const float v = std::strtof(part.c_str(), &end);
        if (part.empty() || end != part.c_str() + part.size() || errno != 0 || !std::isfinite(v) || v < 0)
            return invalid_input("-ts/--tensor-split: '" + part + "' is not a proportion >= 0 (e.g. -ts 3,1)");
        out.push_back(v);
    }
    if (std::all_of(out.begin(), out.end(), [](float v) { return v == 0; }))
        return invalid_input("-ts/--tensor-split: the proportions are all 0");
    return out;
}

Status devices_parse(const std::string & s, offload_config & c) {
    c.devices.clear();
    c.no_devices = false;
    if (s == "none") {
        c.no_devices = true;
        return {};
    }
    for (const auto & n : split_list(s, ",")) {
        if (n.empty()) return invalid_input("-dev/--device: empty device name in '" + s + "'");
        c.devices.push_back(n);
    }
    return {};
}

Status offload_check(const offload_config & c) {
    llama_backend_once();
    if (c.n_gpu_layers < k_gpu_layers_auto) return invalid_input("-ngl/--n-gpu-layers: must be >= 0, 'auto' or 'all'");
    std::string names;
    for (const auto & d : devices_available()) names += (names.empty() ? "" : ", ") + d.name;
    for (const auto & n : c.devices) {
        ggml_backend_dev_t d = ggml_backend_dev_by_name(n.c_str());
        if (!d)
            return invalid_input("-dev/--device: no device '" + n + "' (available: " + names +
                                 "; see `baton devices`)");
        if (ggml_backend_dev_type(d) == GGML_BACKEND_DEVICE_TYPE_CPU)
            return invalid_input("-dev/--device: '" + n +
                                 "' is the CPU; layers not offloaded stay there (use -dev none for CPU only)");
    }
    const size_t n_dev = chosen_devices(c).size();
    if (c.tensor_split.size() > std::max<size_t>(n_dev, 1) || c.tensor_split.size() > llama_max_devices())
        return invalid_input("-ts/--tensor-split: " + std::to_string(c.tensor_split.size()) + " proportions for " +
                             std::to_string(n_dev) + " device(s)");
    if (c.main_gpu < 0 || (n_dev > 0 && size_t(c.main_gpu) >= n_dev))
        return invalid_input("-mg/--main-gpu: " + std::to_string(c.main_gpu) + " is not a device index in 0.." +
                             std::to_string(n_dev == 0 ? 0 : n_dev - 1));
    if (c.split == split_mode::tensor && n_dev < 2)
        return invalid_input("-sm/--split-mode tensor: needs at least two devices");
    return {};
}

Result<offload_placement> offload_apply(const offload_config & c, llama_model_params & mp, offload_storage & st) {
    BATON_RETURN_IF_ERROR(offload_check(c));
    const auto devs = chosen_devices(c);
    offload_placement p;
    st.devices.clear();
    for (auto * d : devs) {
        st.devices.push_back(d);
        p.devices.push_back(ggml_backend_dev_name(d));
    }
    st.devices.push_back(nullptr);
    // Always an explicit list: NULL would let libllama pick every GPU device whatever the config says.
    mp.devices = st.devices.data();
    if (devs.empty()) p.n_gpu_layers = 0;
    else if (c.n_gpu_layers < 0) p.n_gpu_layers = k_gpu_layers_all;
    else p.n_gpu_layers = c.n_gpu_layers;
    mp.n_gpu_layers = p.n_gpu_layers;
    switch (c.split) {
        case split_mode::none: mp.split_mode = LLAMA_SPLIT_MODE_NONE; break;
        case split_mode::layer: mp.split_mode = LLAMA_SPLIT_MODE_LAYER; break;
        case split_mode::row: mp.split_mode = LLAMA_SPLIT_MODE_ROW; break;
        case split_mode::tensor: mp.split_mode = LLAMA_SPLIT_MODE_TENSOR; break;
    }
    mp.main_gpu = c.main_gpu;
    st.tensor_split.assign(llama_max_devices(), 0.0f);
    std::copy(c.tensor_split.begin(), c.tensor_split.end(), st.tensor_split.begin());
    mp.tensor_split = c.tensor_split.empty() ? nullptr : st.tensor_split.data();
    if (c.mlock) mp.load_mode = c.mmap ? LLAMA_LOAD_MODE_MMAP_MLOCK : LLAMA_LOAD_MODE_MLOCK;
    else if (!c.mmap) mp.load_mode = LLAMA_LOAD_MODE_NONE;
    return p;
}

void offload_place(offload_placement & p, int32_t n_layer) {
    p.n_layer = n_layer;
    if (p.devices.empty()) {
        p.n_gpu_layers = 0;
        p.layers_on_device = 0;
    } else {
        // libllama's loader: layers with index >= n_layer + 1 - n_gpu_layers are offloaded, where index
        // n_layer is the output layer; a negative count means all of them.
        const int32_t total = n_layer + 1;
        p.layers_on_device = p.n_gpu_layers < 0 ? total : std::min(p.n_gpu_layers, total);
    }
    p.output_on_device = p.layers_on_device == n_layer + 1;
}

std::string offload_placement_text(const offload_placement & p) {
    if (p.devices.empty() || p.layers_on_device == 0)
        return "every layer and the KV cache on the CPU" +
               std::string(p.devices.empty() ? " (no GPU device in use)" : " (-ngl 0)");
    std::string devs;
    for (const auto & d : p.devices) devs += (devs.empty() ? "" : "+") + d;
    return std::to_string(p.layers_on_device) + "/" + std::to_string(p.n_layer + 1) + " layers (" +
           std::to_string(p.n_layer) + " repeating + output) on " + devs + ", their KV cache with them" +
           (p.output_on_device ? "" : ", the rest on the CPU");
}

}  // namespace baton
