// pd_cli_test.cpp — `baton prefill` + `baton decode` print exactly what `baton generate` prints; bad or
// incompatible blobs give the reason on stderr and exit 1.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "baton/testmodel/mkmodel.h"
#include "support/test_support.h"

namespace baton {
namespace {

using test::baton_bin;
using test::run_process;

class PdCli : public ::testing::TestWithParam<std::string> {};

TEST_P(PdCli, DecodePrintsExactlyWhatGeneratePrints) {
    const std::string m = test::test_model_path(GetParam());
    const std::string d = test::temp_dir();
    struct opts {
        std::vector<std::string> args;
    };
    const std::vector<opts> cases = {
        {{"-p", "Hello world, the prefill node", "-n", "24", "--temp", "0"}},
        {{"-p", "the state of the model and the node", "-n", "20", "--seed", "77", "--temp", "0.8", "--top-p", "0.9"}},
        {{"-p", "x", "-n", "16", "--seed", "3", "--top-k", "5"}},
    };
    for (const auto & c : cases) {
        std::vector<std::string> gen = {baton_bin(), "generate", "-m", m};
        gen.insert(gen.end(), c.args.begin(), c.args.end());
        auto want = run_process(gen);
        ASSERT_EQ(want.exit_code, 0) << want.err;
        std::vector<std::string> pre = {baton_bin(), "prefill", "-m", m, "-o", d + "/b.blob"};
        pre.insert(pre.end(), c.args.begin(), c.args.end());
        auto p = run_process(pre);
        ASSERT_EQ(p.exit_code, 0) << p.err;
        auto got = run_process({baton_bin(), "decode", "-m", m, "--blob", d + "/b.blob"});
        ASSERT_EQ(got.exit_code, 0) << got.err;
        EXPECT_EQ(got.out, want.out) << GetParam();
    }
    // -n overrides the embedded count.
    auto shorter = run_process({baton_bin(), "decode", "-m", m, "--blob", d + "/b.blob", "-n", "4"});
    ASSERT_EQ(shorter.exit_code, 0) << shorter.err;
    auto want4 = run_process({baton_bin(), "generate", "-m", m, "-p", "x", "-n", "4", "--seed", "3", "--top-k", "5"});
    EXPECT_EQ(shorter.out, want4.out);
}

INSTANTIATE_TEST_SUITE_P(AllArchs, PdCli, ::testing::ValuesIn(mkmodel_archs()),
                         [](const auto & info) { return std::string(info.param); });

TEST(PdCliErrors, BadAndIncompatibleBlobsExitOneWithReason) {
    const std::string llama = test::test_model_path("llama"), mamba = test::test_model_path("mamba2");
    const std::string other_llama = test::test_model_path("llama", 2);
    const std::string d = test::temp_dir();
    ASSERT_EQ(run_process({baton_bin(), "prefill", "-m", llama, "-p", "Hello", "-o", d + "/l.blob"}).exit_code, 0);
    // Another architecture.
    auto r = run_process({baton_bin(), "decode", "-m", mamba, "--blob", d + "/l.blob"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("arch"), std::string::npos) << r.err;
    // Same shape, different weights: only the fingerprint can tell.
    r = run_process({baton_bin(), "decode", "-m", other_llama, "--blob", d + "/l.blob"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("fingerprint"), std::string::npos) << r.err;
    // Truncated and bit-flipped files.
    std::ifstream in(d + "/l.blob", std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(d + "/t.blob", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
    r = run_process({baton_bin(), "decode", "-m", llama, "--blob", d + "/t.blob"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("invalid blob"), std::string::npos) << r.err;
    std::string flipped = bytes;
    flipped[flipped.size() / 2] ^= 0x40;
    std::ofstream(d + "/f.blob", std::ios::binary) << flipped;
    r = run_process({baton_bin(), "decode", "-m", llama, "--blob", d + "/f.blob"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("checksum"), std::string::npos) << r.err;
    r = run_process({baton_bin(), "decode", "-m", llama, "--blob", d + "/missing.blob"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("cannot read"), std::string::npos) << r.err;
    r = run_process({baton_bin(), "decode", "-m", llama});
    EXPECT_EQ(r.exit_code, 2);
    r = run_process({baton_bin(), "prefill", "-m", llama, "-p", "x", "-o", d + "/no/such/dir/x.blob"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("cannot write"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace baton
