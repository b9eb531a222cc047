// device_test.cpp — llama-server's placement and KV flags: parsing, checks before anything is loaded, and
// the placement a load reports. (The Vulkan device itself: cross_device_test.cpp and tests/e2e/pd_grid_test.cpp.)
#include <ggml.h>
#include <gtest/gtest.h>

#include "baton/context.h"
#include "baton/device.h"
#include "baton/model.h"
#include "support/test_support.h"

namespace baton {
namespace {

void expect_invalid(const Status & st, const std::string & needle) {
    EXPECT_EQ(st.code(), status_code::invalid_argument) << st.to_string();
    EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
}

TEST(Device, GpuLayersParseCountsAutoAndAll) {
    EXPECT_EQ(gpu_layers_parse("0").value(), 0);
    EXPECT_EQ(gpu_layers_parse("99").value(), 99);
    EXPECT_EQ(gpu_layers_parse("all").value(), k_gpu_layers_all);
    EXPECT_EQ(gpu_layers_parse("auto").value(), k_gpu_layers_auto);
    for (const char * bad : {"", "-1", "x", "1e3", "12a", "9999999999"})
        expect_invalid(gpu_layers_parse(bad).status(), "-ngl");
}

TEST(Device, SplitModeAndTensorSplitParse) {
    EXPECT_EQ(split_mode_parse("none").value(), split_mode::none);
    EXPECT_EQ(split_mode_parse("row").value(), split_mode::row);
    expect_invalid(split_mode_parse("rows").status(), "-sm");
    EXPECT_EQ(tensor_split_parse("3,1").value(), (std::vector<float>{3, 1}));
    EXPECT_EQ(tensor_split_parse("3/1").value(), (std::vector<float>{3, 1}));
    for (const char * bad : {"", "a", "1,,2", "-1,2", "0,0", "nan"})
        expect_invalid(tensor_split_parse(bad).status(), "-ts");
}

TEST(Device, DeviceListParseAndCheck) {
    offload_config c = offload_cli_default();
    ASSERT_TRUE(devices_parse("none", c).ok());
    EXPECT_TRUE(c.no_devices);
    ASSERT_TRUE(devices_parse("A,B", c).ok());
    EXPECT_FALSE(c.no_devices);
    EXPECT_EQ(c.devices, (std::vector<std::string>{"A", "B"}));
    expect_invalid(devices_parse("A,", c), "empty device name");
    // Names are checked against ggml's registry, which lists what it found.
    expect_invalid(offload_check(c), "no device 'A' (available: ");
    c.devices = {"CPU"};
    expect_invalid(offload_check(c), "is the CPU");
    c = offload_cli_default();
    c.no_devices = true;
    c.tensor_split = {1, 1};
    expect_invalid(offload_check(c), "-ts");
    c.tensor_split.clear();
    c.main_gpu = -1;
    expect_invalid(offload_check(c), "-mg");
    c.main_gpu = 0;
    EXPECT_TRUE(offload_check(c).ok());
}

TEST(Device, LibraryDefaultLoadsOnTheCpuAndSaysSo) {
    auto m = loaded_model::load(test::test_model_path("llama"));
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    const offload_placement & p = m.value()->placement();
    EXPECT_TRUE(p.devices.empty());
    EXPECT_EQ(p.layers_on_device, 0);
    EXPECT_EQ(p.n_layer, 4);
    EXPECT_NE(offload_placement_text(p).find("on the CPU"), std::string::npos) << offload_placement_text(p);
}

TEST(Device, PlacementFollowsLibllamasLayerRule) {
    offload_placement p;
    p.devices = {"GPU0"};
    p.n_gpu_layers = 3;
    offload_place(p, 4);
    EXPECT_EQ(p.layers_on_device, 3);
    EXPECT_FALSE(p.output_on_device);
    p.n_gpu_layers = 99;
    offload_place(p, 4);
    EXPECT_EQ(p.layers_on_device, 5);  // 4 repeating + output
    EXPECT_TRUE(p.output_on_device);
    p.n_gpu_layers = k_gpu_layers_all;
    offload_place(p, 4);
    EXPECT_EQ(p.layers_on_device, 5);
    EXPECT_NE(offload_placement_text(p).find("5/5 layers (4 repeating + output) on GPU0"), std::string::npos)
        << offload_placement_text(p);
}

TEST(Device, KvCacheTypesAndFlashAttentionFlags) {
    EXPECT_EQ(kv_cache_type_parse("q8_0", "-ctk").value(), int32_t(GGML_TYPE_Q8_0));
    EXPECT_EQ(kv_cache_type_parse("iq4_nl", "-ctk").value(), int32_t(GGML_TYPE_IQ4_NL));
    expect_invalid(kv_cache_type_parse("q4_K", "-ctv").status(), "-ctv: 'q4_K' is not one of f32, f16, bf16");
    context_config c;
    ASSERT_TRUE(flash_attn_parse("on", c).ok());
    EXPECT_TRUE(c.flash_attn && !c.flash_attn_auto);
    ASSERT_TRUE(flash_attn_parse("auto", c).ok());
    EXPECT_TRUE(!c.flash_attn && c.flash_attn_auto);
    ASSERT_TRUE(flash_attn_parse("off", c).ok());
    EXPECT_TRUE(!c.flash_attn && !c.flash_attn_auto);
    expect_invalid(flash_attn_parse("yes", c), "-fa");

    // auto: off on the CPU, on with a quantized V cache (which needs it).
    auto m = loaded_model::load(test::test_model_path("llama"));
    ASSERT_TRUE(m.ok());
    c.flash_attn_auto = true;
    EXPECT_FALSE(context_resolve(*m.value(), c).flash_attn);
    c.type_v = GGML_TYPE_Q8_0;
    EXPECT_TRUE(context_check(c).ok()) << "auto resolves to on for a quantized V cache";
    EXPECT_TRUE(context_resolve(*m.value(), c).flash_attn);
    EXPECT_FALSE(context_resolve(*m.value(), c).flash_attn_auto);

    c = context_config{};
    c.type_v = GGML_TYPE_Q8_0;
    c.flash_attn = false;
    expect_invalid(context_check(c), "needs flash attention (-fa on)");
    c.flash_attn = true;
    EXPECT_TRUE(context_check(c).ok());
    c.type_k = GGML_TYPE_Q4_K;  // a ggml type, but not a KV cache type llama-server takes
    expect_invalid(context_check(c), "-ctk");
}

// Every KV type the flags take makes a context on the CPU (quantized V with flash attention) for a model
// whose head size (64) is a multiple of the types' block sizes (32).
TEST(Device, EveryKvCacheTypeMakesAContext) {
    auto m = loaded_model::load(test::test_model_path("llama", 1, 256));
    ASSERT_TRUE(m.ok());
    for (const char * t : {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"}) {
        context_config c;
        c.n_ctx = 256;
        c.flash_attn = true;
        c.type_k = c.type_v = kv_cache_type_parse(t, "-ctk").value();
        auto ctx = context_make(*m.value(), c);
        EXPECT_TRUE(ctx.ok()) << t << ": " << ctx.status().to_string();
    }
}

// The 64-wide test models have 16-wide heads: a 32-block type cannot hold their rows; the error says so.
TEST(Device, QuantizedCacheNeedsAHeadSizeOfWholeBlocks) {
    auto m = loaded_model::load(test::test_model_path("llama"));
    ASSERT_TRUE(m.ok());
    context_config c;
    c.n_ctx = 256;
    c.flash_attn = true;
    c.type_k = GGML_TYPE_Q8_0;
    expect_invalid(context_make(*m.value(), c).status(),
                   "-ctk q8_0: its block size 32 does not divide the model's attention head size 16");
    c.type_k = GGML_TYPE_F16;
    c.type_v = GGML_TYPE_Q4_0;
    expect_invalid(context_make(*m.value(), c).status(), "-ctv q4_0");
}

}  // namespace
}  // namespace baton
