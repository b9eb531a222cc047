// cross_device_test.cpp — state handed between the Vulkan device (llvmpipe) and the CPU, both ways.
//
// The KV cache of an offloaded model lives in device memory; libllama's state export reads it back and its
// import writes into whatever memory the destination context has, so the bytes are the same format either
// way. Numerics differ across backends (other kernels, other summation orders), so equality is not asserted:
// each test measures, over 64 teacher-forced steps after the handoff, how often the handed-off side's top-1
// token agrees with the reference (the side that ran the prompt, continuing on its own device) and the
// largest |logit difference|, prints both ("CROSS ..." lines, quoted in docs/engine.md), and asserts that the
// state was accepted and the logits stay finite. A blob between the two engines goes through the engine's
// one restore routine (task_decode) and generates.
#include <gtest/gtest.h>
#include <llama.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "baton/context.h"
#include "baton/device.h"
#include "baton/engine.h"
#include "baton/model.h"
#include "baton/text.h"
#include "support/test_support.h"

namespace baton {
namespace {

// The Vulkan device must be visible before ggml loads its backends (the first model load in this process:
// ctest runs every test in its own process; run by hand, give these tests a process of their own with
// --gtest_filter='*CrossDevice*', or "no device 'Vulkan0'" is the failure).
// Under ASan/TSan, llvmpipe's uninstrumented JIT threads make reports that are not Baton's: the release suite
// runs these.
#define BATON_SKIP_IF_SANITIZED()                                                                                      \
    if (test::k_sanitized) GTEST_SKIP() << "sanitized build: the release suite runs the Vulkan tests"

void show_software_vulkan() { ::setenv("GGML_VK_VISIBLE_DEVICES", "0", 1); }

std::unique_ptr<loaded_model> load_on(const std::string & path, bool device) {
    model_load_params p;
    if (device) p.offload = offload_all_on("Vulkan0");
    auto m = loaded_model::load(path, p);
    if (!m.ok()) {
        ADD_FAILURE() << m.status().to_string();
        return nullptr;
    }
    return std::move(m.value());
}

int argmax(const float * v, int n) {
    int best = 0;
    for (int i = 1; i < n; ++i)
        if (v[i] > v[best]) best = i;
    return best;
}

bool decode_one(llama_context * ctx, llama_token t, llama_pos pos) {
    llama_batch b = llama_batch_init(1, 0, 1);
    b.n_tokens = 1;
    b.token[0] = t;
    b.pos[0] = pos;
    b.n_seq_id[0] = 1;
    b.seq_id[0][0] = 0;
    b.logits[0] = 1;
    const int rc = llama_decode(ctx, b);
    llama_batch_free(b);
    return rc == 0;
}

struct handoff_measure {
    int agree = 0, steps = 0;
    float max_diff = 0;
};

// Runs the prompt on `from`, hands the sequence's state to `to`, and continues both with the tokens `from`
// picks (teacher forcing), comparing the logits step by step.
handoff_measure measure_handoff(const loaded_model & from, const loaded_model & to, const context_config & cfg,
                                const std::vector<token_id> & prompt) {
    handoff_measure out;
    auto a = context_make(from, cfg), b = context_make(to, cfg);
    if (!a.ok() || !b.ok()) {
        ADD_FAILURE() << (a.ok() ? b.status().to_string() : a.status().to_string());
        return out;
    }
    llama_batch batch = llama_batch_init(int32_t(prompt.size()), 0, 1);
    batch.n_tokens = int32_t(prompt.size());
    for (size_t i = 0; i < prompt.size(); ++i) {
        batch.token[i] = prompt[i];
        batch.pos[i] = llama_pos(i);
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = i + 1 == prompt.size();
    }
    const int rc = llama_decode(a.value().get(), batch);
    llama_batch_free(batch);
    if (rc != 0) {
        ADD_FAILURE() << "prompt decode failed: " << rc;
        return out;
    }
    std::vector<uint8_t> state(llama_state_seq_get_size(a.value().get(), 0));
    EXPECT_EQ(llama_state_seq_get_data(a.value().get(), state.data(), state.size(), 0), state.size());
    EXPECT_EQ(llama_state_seq_set_data(b.value().get(), state.data(), state.size(), 0), state.size())
        << "the destination refused the other backend's state";
    if (testing::Test::HasFailure()) return out;

    const int n_vocab = int(from.identity().n_vocab);
    llama_token next = argmax(llama_get_logits_ith(a.value().get(), -1), n_vocab);
    llama_pos pos = llama_pos(prompt.size());
    for (int step = 0; step < 64; ++step, ++pos) {
        if (!decode_one(a.value().get(), next, pos) || !decode_one(b.value().get(), next, pos)) {
            ADD_FAILURE() << "decode failed at step " << step;
            return out;
        }
        const float * la = llama_get_logits_ith(a.value().get(), -1);
        const float * lb = llama_get_logits_ith(b.value().get(), -1);
        for (int i = 0; i < n_vocab; ++i) {
            EXPECT_TRUE(std::isfinite(lb[i]));
            out.max_diff = std::max(out.max_diff, std::fabs(la[i] - lb[i]));
        }
        const int ta = argmax(la, n_vocab), tb = argmax(lb, n_vocab);
        out.agree += ta == tb;
        ++out.steps;
        next = ta;
    }
    return out;
}

class CrossDevice : public ::testing::TestWithParam<const char *> {};

TEST_P(CrossDevice, StateMovesBetweenVulkanAndCpuBothWays) {
    BATON_SKIP_IF_SANITIZED();
    show_software_vulkan();
    const std::string path = test::test_model_path(GetParam());
    auto gpu = load_on(path, true);
    auto cpu = load_on(path, false);
    ASSERT_TRUE(gpu && cpu);
    ASSERT_EQ(gpu->placement().layers_on_device, gpu->placement().n_layer + 1)
        << offload_placement_text(gpu->placement());
    ASSERT_EQ(cpu->placement().layers_on_device, 0);
    auto prompt =
        text_tokenize(cpu->vocab(), "the prefill node runs the prompt on the device and the decode node", true, false);
    ASSERT_TRUE(prompt.ok());
    context_config cfg;
    cfg.n_ctx = 512;
    cfg.flash_attn = true;
    for (bool device_first : {true, false}) {
        const handoff_measure m = device_first ? measure_handoff(*gpu, *cpu, cfg, prompt.value())
                                               : measure_handoff(*cpu, *gpu, cfg, prompt.value());
        ASSERT_EQ(m.steps, 64);
        std::printf("CROSS %s %s: top-1 agreement %d/64, max |logit difference| %.3g\n", GetParam(),
                    device_first ? "Vulkan0 -> CPU" : "CPU -> Vulkan0", m.agree, double(m.max_diff));
        RecordProperty(device_first ? "vulkan_to_cpu_agree" : "cpu_to_vulkan_agree", m.agree);
    }
}

TEST_P(CrossDevice, BlobFromTheDeviceRestoresThroughTheEngineOnTheCpu) {
    BATON_SKIP_IF_SANITIZED();
    show_software_vulkan();
    const std::string path = test::test_model_path(GetParam());
    std::shared_ptr<const loaded_model> gpu = load_on(path, true), cpu = load_on(path, false);
    ASSERT_TRUE(gpu && cpu);
    engine_config cfg;
    cfg.ctx.n_ctx = 512;
    cfg.ctx.flash_attn = true;
    auto prompt = text_tokenize(cpu->vocab(), "Hello world, the prefill node on the device", true, false);
    ASSERT_TRUE(prompt.ok());
    for (bool device_first : {true, false}) {
        auto src = engine::create(device_first ? gpu : cpu, cfg);
        auto dst = engine::create(device_first ? cpu : gpu, cfg);
        ASSERT_TRUE(src.ok() && dst.ok());
        gen_request req;
        req.prompt = prompt.value();
        req.n_predict = 16;
        req.ignore_eos = true;
        req.sampling.temperature = 0;
        auto h = src.value()->submit(task_prefill{req});
        ASSERT_TRUE(h.ok());
        engine_result pre = engine_run_to_end(h.value());
        ASSERT_TRUE(pre.done.ok()) << pre.done.status().to_string();
        auto blob = validated_blob::parse(std::vector<uint8_t>(pre.done->blob), blob_limits{});
        ASSERT_TRUE(blob.ok()) << blob.status().to_string();
        auto d = dst.value()->submit(task_decode{blob.value(), req});
        ASSERT_TRUE(d.ok());
        engine_result r = engine_run_to_end(d.value());
        ASSERT_TRUE(r.done.ok()) << (device_first ? "Vulkan0 -> CPU: " : "CPU -> Vulkan0: ")
                                 << r.done.status().to_string();
        EXPECT_EQ(r.tokens.size(), 16u);
    }
}

INSTANTIATE_TEST_SUITE_P(Families, CrossDevice, ::testing::Values("llama", "granitehybrid"),
                         [](const auto & info) { return std::string(info.param); });

}  // namespace
}  // namespace baton
