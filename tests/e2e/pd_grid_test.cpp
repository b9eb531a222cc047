// pd_grid_test.cpp — the equivalence grid (docs/engine.md, "The equivalence grid"): for every family mkmodel
// makes x {f16, q8_0 KV} x {flash attention off, on} x {CPU, the Vulkan device}, PD through real processes
// (`baton prefill` writes the blob, `baton decode` restores it in another process) prints exactly what a
// single node (`baton generate`) prints with the same flags, greedy and seeded, with a prompt that crosses
// several batch boundaries (-b 32). q8_0 V without flash attention is not a valid cell: libllama refuses it,
// and Baton says so with exit 2 (checked below). Vulkan cells run on llvmpipe (GGML_VK_VISIBLE_DEVICES=0 in
// the children only), with every layer and the KV cache on the device; CPU cells pass -dev none.
//
// Each cell prints one "GRID ..." line (what docs/engine.md's table lists).
#include <gtest/gtest.h>

#include <cstdio>

#include "baton/testmodel/mkmodel.h"
#include "support/test_support.h"

namespace baton {
namespace {

using test::baton_bin;
using test::run_process;

struct grid_cell {
    std::string arch, kv, fa, device;
    std::string wtype = "f32", vocab = "spm";  // the weights' type and the vocabulary (mkmodel --wtype/--vocab)
};

std::string cell_name(const grid_cell & c) {
    std::string n = c.arch + "_" + c.kv + "_fa" + c.fa + "_" + c.device;
    if (c.wtype != "f32") n += "_w" + c.wtype;
    if (c.vocab != "spm") n += "_" + c.vocab;
    return n;
}

std::vector<grid_cell> grid_cells() {
    std::vector<grid_cell> out;
    for (const auto & arch : mkmodel_archs())
        for (const char * kv : {"f16", "q8_0"})
            for (const char * fa : {"off", "on"})
                for (const char * dev : {"cpu", "vulkan"}) {
                    if (std::string(kv) == "q8_0" && std::string(fa) == "off") continue;  // not a valid cell
                    out.push_back({arch, kv, fa, dev});
                }
    return out;
}

// Quantized weights (q8_0; q4_K, which at 256 wide is real Q4_K blocks) and the byte-level BPE vocabulary, so
// the quantized kernels and the BPE tokenizer go through PD too (f16 KV, flash attention on).
std::vector<grid_cell> weight_cells() {
    std::vector<grid_cell> out;
    for (const char * dev : {"cpu", "vulkan"}) {
        out.push_back({"llama", "f16", "on", dev, "q4_K", "bpe"});
        out.push_back({"llama", "f16", "on", dev, "q8_0", "spm"});
        out.push_back({"qwen3moe", "f16", "on", dev, "q4_K", "spm"});
        out.push_back({"gemma3", "f16", "on", dev, "q8_0", "bpe"});
    }
    return out;
}

// A prompt of ~110 tokens: with -b 32 it is fed in four chunks (and cut at checkpoints on partial-state models).
// The Vulkan cells take its first ~55 tokens in chunks of 16 (four chunks again) and generate 12 tokens:
// llvmpipe computes about 10x slower than the CPU backend, and those cells were 355 of the release suite's
// 630 s of test time with the whole prompt (the state's layout on the device, not its length, is what they
// check).
const char * k_long_prompt =
    "the state of the model and the node is written by the prefill node and read by the decode node, which "
    "restores it through one routine and then generates token for token what a single node would have "
    "produced, on every family, with every cache type and with flash attention on or off, on the CPU and on "
    "the device, and the blob carries the checkpoints the sequence needs";

class PdGrid : public ::testing::TestWithParam<grid_cell> {
  protected:
    bool on_device() const { return GetParam().device == "vulkan"; }
    // argv prefix: the Vulkan cells see the software device, the CPU cells see none.
    std::vector<std::string> baton(const std::string & sub) const {
        if (on_device()) return {"/usr/bin/env", "GGML_VK_VISIBLE_DEVICES=0", baton_bin(), sub};
        return {baton_bin(), sub};
    }
    std::vector<std::string> flags() const {
        const grid_cell & c = GetParam();
        const char * batch = on_device() ? "16" : "32";
        std::vector<std::string> f = {"-ctk", c.kv, "-ctv", c.kv, "-fa", c.fa, "-b", batch, "-ub", batch, "-c", "512"};
        if (on_device()) f.insert(f.end(), {"-dev", "Vulkan0", "-ngl", "all"});
        else f.insert(f.end(), {"-dev", "none"});
        return f;
    }
};

TEST_P(PdGrid, DecodeInAnotherProcessPrintsWhatASingleNodePrints) {
    const grid_cell & c = GetParam();
    // Under ASan/TSan every child is instrumented (and llvmpipe's JIT is not): those builds check memory and
    // races on the CPU f16 cells; the release suite runs every cell.
    if (test::k_sanitized && (c.device != "cpu" || c.kv != "f16"))
        GTEST_SKIP() << "sanitized build: only the CPU f16 cells (the release suite runs this one)";
    // 256 wide: 64-wide attention heads, whole blocks of the quantized cache types.
    const std::string m = test::test_model_path(c.arch, 1, 256, 4, c.wtype, c.vocab);
    const std::string d = test::temp_dir();
    const std::string whole = k_long_prompt;
    const std::string prompt = on_device() ? whole.substr(0, whole.size() / 2) : whole;
    const std::string n = on_device() ? "12" : "24";
    // The Vulkan cells run the greedy case only: what the device changes is where the cells live and how the
    // state is read from and written to it, which greedy decoding shows as well as sampling; the sampler's
    // state (its RNG) lives on the host and is restored the same way whatever the device, and the CPU cells
    // check it with the seeded case on every family and cache type. (Both cases on the device were 404 of the
    // release suite's 903 s of test time on a 2-core machine, the Vulkan cells' process starts mostly.)
    std::vector<std::vector<std::string>> cases = {{"-p", prompt, "-n", n, "--temp", "0"}};
    if (!on_device()) cases.push_back({"-p", prompt, "-n", n, "--temp", "0.8", "--seed", "77", "--top-p", "0.9"});
    size_t blob_bytes = 0;
    for (const auto & args : cases) {
        auto gen = baton("generate");
        gen.insert(gen.end(), {"-m", m});
        gen.insert(gen.end(), args.begin(), args.end());
        for (const auto & f : flags()) gen.push_back(f);
        auto want = run_process(gen, 300);
        ASSERT_EQ(want.exit_code, 0) << want.err;
        ASSERT_FALSE(want.out.empty());

        auto pre = baton("prefill");
        pre.insert(pre.end(), {"-m", m, "-o", d + "/b.blob"});
        pre.insert(pre.end(), args.begin(), args.end());
        for (const auto & f : flags()) pre.push_back(f);
        auto p = run_process(pre, 300);
        ASSERT_EQ(p.exit_code, 0) << p.err;
        const size_t at = p.err.find("wrote ");
        if (at != std::string::npos) blob_bytes = std::stoul(p.err.substr(at + 6));

        auto dec = baton("decode");
        dec.insert(dec.end(), {"-m", m, "--blob", d + "/b.blob"});
        for (const auto & f : flags()) dec.push_back(f);
        auto got = run_process(dec, 300);
        ASSERT_EQ(got.exit_code, 0) << got.err;
        EXPECT_EQ(got.out, want.out) << cell_name(c) << (args[5] == "0" ? " greedy" : " seeded");
    }
    if (!HasFailure())
        std::printf(
            "GRID %s%s KV %s, flash attention %s, %s: PD == single node (%s), blob %zu bytes\n",
            c.arch.c_str(),
            (c.wtype == "f32" && c.vocab == "spm" ? "" : " (" + c.wtype + " weights, " + c.vocab + " vocab)").c_str(),
            c.kv.c_str(), c.fa.c_str(), c.device == "cpu" ? "CPU" : "Vulkan0 (llvmpipe)",
            on_device() ? "greedy" : "greedy and seeded", blob_bytes);
}

INSTANTIATE_TEST_SUITE_P(Grid, PdGrid, ::testing::ValuesIn(grid_cells()),
                         [](const auto & info) { return cell_name(info.param); });
INSTANTIATE_TEST_SUITE_P(Weights, PdGrid, ::testing::ValuesIn(weight_cells()),
                         [](const auto & info) { return cell_name(info.param); });

TEST(PdGridInvalid, QuantizedVCacheWithoutFlashAttentionIsAUsageError) {
    const std::string m = test::test_model_path("llama");
    for (const char * sub : {"generate", "prefill", "serve"}) {
        std::vector<std::string> argv = {baton_bin(), sub, "-m", m, "-ctv", "q8_0", "-fa", "off", "-dev", "none"};
        if (std::string(sub) != "serve") argv.insert(argv.end(), {"-p", "x", "-o", "/dev/null"});
        if (std::string(sub) == "generate") argv.resize(argv.size() - 2);
        auto r = run_process(argv, 60);
        EXPECT_EQ(r.exit_code, 2) << sub << ": " << r.err;
        EXPECT_NE(r.err.find("-fa on"), std::string::npos) << r.err;
    }
}

// A decode side whose KV type or flash attention differs from the blob's refuses it, naming the flag to change;
// a different device placement is not a difference (CrossDevice and the grid's cells).
TEST(PdGridMismatch, DecodeWithAnotherKvTypeOrFlashAttentionNamesTheFlag) {
    const std::string m = test::test_model_path("llama", 1, 256);
    const std::string blob = test::temp_dir() + "/q8.blob";
    auto p = run_process({baton_bin(), "prefill", "-m", m, "-p", "Hello world", "-o", blob, "-ctk", "q8_0", "-ctv",
                          "q8_0", "-fa", "on", "-dev", "none"});
    ASSERT_EQ(p.exit_code, 0) << p.err;
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"-fa", "on"}, "restart the node with -ctk q8_0"},
        {{"-fa", "on", "-ctk", "q8_0"}, "restart the node with -ctv q8_0"},
        {{"-fa", "off", "-ctk", "q8_0"}, "restart the node with -ctv q8_0"},
    };
    for (const auto & [flags, want] : cases) {
        std::vector<std::string> argv = {baton_bin(), "decode", "-m", m, "--blob", blob, "-dev", "none"};
        argv.insert(argv.end(), flags.begin(), flags.end());
        auto r = run_process(argv, 60);
        EXPECT_EQ(r.exit_code, 1) << r.err;
        EXPECT_NE(r.err.find(want), std::string::npos) << r.err;
    }
    auto ok =
        run_process({baton_bin(), "decode", "-m", m, "--blob", blob, "-ctk", "q8_0", "-ctv", "q8_0", "-fa", "on"});
    EXPECT_EQ(ok.exit_code, 0) << ok.err;
    const std::string f16 = test::temp_dir() + "/f16.blob";
    ASSERT_EQ(run_process({baton_bin(), "prefill", "-m", m, "-p", "Hello world", "-o", f16, "-fa", "on"}).exit_code, 0);
    auto fa = run_process({baton_bin(), "decode", "-m", m, "--blob", f16, "-fa", "off"});
    EXPECT_EQ(fa.exit_code, 1);
    EXPECT_NE(fa.err.find("restart the node with -fa on"), std::string::npos) << fa.err;
}

}  // namespace
}  // namespace baton
