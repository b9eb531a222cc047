// mkmodel_generate_cli_test.cpp — `baton --version`, `baton mkmodel` and `baton generate` end to end:
// exit codes, messages, determinism of the written file, no partial file on failure.
#include <gguf.h>

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "support/test_support.h"

namespace baton {
namespace {

using test::baton_bin;
using test::run_process;

std::string slurp(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

bool exists(const std::string & p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0;
}

TEST(CliVersion, NamesBatonAndLibllama) {
    auto r = run_process({baton_bin(), "--version"});
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_NE(r.out.find("baton "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("libllama 0."), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("build b"), std::string::npos) << r.out;
}

TEST(CliMkmodel, SameArgumentsGiveIdenticalBytesDifferentSeedDiffers) {
    const std::string d = test::temp_dir();
    for (const char * arch : {"llama", "mamba2", "granitehybrid", "lfm2"}) {
        const std::string a = d + "/a.gguf", b = d + "/b.gguf", c = d + "/c.gguf";
        ASSERT_EQ(run_process({baton_bin(), "mkmodel", "--arch", arch, "-o", a, "--seed", "7"}).exit_code, 0);
        ASSERT_EQ(run_process({baton_bin(), "mkmodel", "--arch", arch, "-o", b, "--seed", "7"}).exit_code, 0);
        ASSERT_EQ(run_process({baton_bin(), "mkmodel", "--arch", arch, "-o", c, "--seed", "8"}).exit_code, 0);
        const std::string ba = slurp(a);
        EXPECT_GT(ba.size(), 1000u);
        EXPECT_EQ(ba, slurp(b)) << arch;
        EXPECT_NE(ba, slurp(c)) << arch;
    }
}

TEST(CliMkmodel, SizeOptionsChangeTheModel) {
    const std::string d = test::temp_dir();
    ASSERT_EQ(run_process({baton_bin(), "mkmodel", "--arch", "llama", "-o", d + "/s.gguf"}).exit_code, 0);
    ASSERT_EQ(run_process({baton_bin(), "mkmodel", "--arch", "llama", "-o", d + "/l.gguf", "--n-embd", "128",
                           "--n-layer", "6", "--n-ctx", "2048"})
                  .exit_code,
              0);
    EXPECT_GT(slurp(d + "/l.gguf").size(), slurp(d + "/s.gguf").size());
}

TEST(CliMkmodel, BadArgumentsExitTwoWithMessage) {
    const std::string d = test::temp_dir();
    struct bad {
        std::vector<std::string> args;
        std::string needle;
    };
    const std::vector<bad> cases = {
        {{"--arch", "gpt9", "-o", d + "/x.gguf"}, "unknown architecture 'gpt9'"},
        {{"--arch", "llama"}, "--output is required"},
        {{"-o", d + "/x.gguf"}, "--arch is required"},
        {{"--arch", "llama", "-o", d + "/x.gguf", "--n-embd", "33"}, "n-embd: 33"},
        {{"--arch", "llama", "-o", d + "/x.gguf", "--n-layer", "0"}, "n-layer: 0"},
        {{"--arch", "lfm2", "-o", d + "/x.gguf", "--n-layer", "1"}, "at least 2 layers"},
        {{"--arch", "llama", "-o", d + "/x.gguf", "--n-ctx", "-5"}, "n-ctx"},
        {{"--arch", "llama", "-o", d + "/x.gguf", "--seed", "abc"}, "seed"},
        {{"--arch", "llama", "-o", d + "/x.gguf", "--mmproj-type", "qwen2a"}, "--mmproj-type: needs --mmproj"},
        {{"--arch", "llama", "-o", d + "/x.gguf", "--mmproj", d + "/p.gguf", "--mmproj-type", "whisper"},
         "unknown projector 'whisper'"},
    };
    for (const auto & c : cases) {
        std::vector<std::string> argv = {baton_bin(), "mkmodel"};
        argv.insert(argv.end(), c.args.begin(), c.args.end());
        auto r = run_process(argv);
        EXPECT_EQ(r.exit_code, 2) << c.needle << "\n" << r.err;
        EXPECT_NE(r.err.find(c.needle), std::string::npos) << "want '" << c.needle << "' in: " << r.err;
        EXPECT_FALSE(exists(d + "/x.gguf"));
    }
}

// --mmproj writes the arch's projector, --mmproj-type another (here Qwen2-Audio's, which `serve --mmproj` then
// serves as an audio projector: its /props say so).
TEST(CliMkmodel, MmprojTypeWritesTheNamedProjector) {
    const std::string d = test::temp_dir();
    auto r = run_process({baton_bin(), "mkmodel", "--arch", "llama", "-o", d + "/m.gguf", "--mmproj", d + "/a.gguf",
                          "--mmproj-type", "qwen2a"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("wrote its qwen2a projector"), std::string::npos) << r.err;
    gguf_init_params gp{true, nullptr};
    gguf_context * g = gguf_init_from_file((d + "/a.gguf").c_str(), gp);
    ASSERT_NE(g, nullptr);
    const int64_t k = gguf_find_key(g, "clip.projector_type");
    ASSERT_GE(k, 0);
    EXPECT_STREQ(gguf_get_val_str(g, k), "qwen2a");
    EXPECT_GE(gguf_find_key(g, "clip.has_audio_encoder"), 0);
    gguf_free(g);
}

TEST(CliMkmodel, UnwritablePathExitsOneAndLeavesNoFile) {
    const std::string d = test::temp_dir();
    auto r = run_process({baton_bin(), "mkmodel", "--arch", "llama", "-o", d + "/missing/dir/m.gguf"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("cannot write"), std::string::npos) << r.err;
    ASSERT_EQ(::mkdir((d + "/ro").c_str(), 0555), 0);
    if (::geteuid() != 0) {  // root ignores directory permissions
        r = run_process({baton_bin(), "mkmodel", "--arch", "llama", "-o", d + "/ro/m.gguf"});
        EXPECT_EQ(r.exit_code, 1);
    }
    // A directory as the output path: the temporary file is written, the rename fails, nothing is left.
    ASSERT_EQ(::mkdir((d + "/isdir").c_str(), 0755), 0);
    r = run_process({baton_bin(), "mkmodel", "--arch", "llama", "-o", d + "/isdir"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("cannot write"), std::string::npos) << r.err;
    auto ls = run_process({"/bin/ls", "-A", d});
    EXPECT_EQ(ls.out.find(".tmp."), std::string::npos) << "partial file left behind: " << ls.out;
}

TEST(CliGenerate, GreedyIsDeterministicAndPrintsText) {
    const std::string m = test::test_model_path("llama");
    auto a = run_process({baton_bin(), "generate", "-m", m, "-p", "Hello world", "-n", "16", "--temp", "0"});
    auto b = run_process({baton_bin(), "generate", "-m", m, "-p", "Hello world", "-n", "16", "--temp", "0"});
    ASSERT_EQ(a.exit_code, 0) << a.err;
    EXPECT_GT(a.out.size(), 1u);
    EXPECT_EQ(a.out, b.out);
    auto s1 = run_process({baton_bin(), "generate", "-m", m, "-p", "Hello world", "-n", "16", "--seed", "1", "--temp",
                           "1.5", "--top-k", "0", "--top-p", "1"});
    auto s2 = run_process({baton_bin(), "generate", "-m", m, "-p", "Hello world", "-n", "16", "--seed", "2", "--temp",
                           "1.5", "--top-k", "0", "--top-p", "1"});
    ASSERT_EQ(s1.exit_code, 0);
    EXPECT_NE(s1.out, s2.out);
}

TEST(CliGenerate, ErrorsAreClear) {
    const std::string m = test::test_model_path("llama");
    auto r = run_process({baton_bin(), "generate", "-m", "/nonexistent.gguf", "-p", "x"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("cannot read '/nonexistent.gguf'"), std::string::npos) << r.err;
    r = run_process({baton_bin(), "generate", "-m", m, "-p", "x", "--temp", "-1"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("temperature"), std::string::npos) << r.err;
    r = run_process({baton_bin(), "generate", "-m", m, "-p", "x", "--top-p", "0"});
    EXPECT_EQ(r.exit_code, 2);
    r = run_process({baton_bin(), "generate", "-m", m, "-p", "x", "-n", "5000", "-c", "64"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("exceed n_ctx"), std::string::npos) << r.err;
    r = run_process({baton_bin(), "generate", "-m", m});
    EXPECT_EQ(r.exit_code, 2);
    // A file that is not a GGUF model.
    const std::string junk = test::temp_dir() + "/junk.gguf";
    std::ofstream(junk) << "not a model";
    r = run_process({baton_bin(), "generate", "-m", junk, "-p", "x"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("cannot load model"), std::string::npos) << r.err;
    r = run_process({baton_bin(), "frobnicate"});
    EXPECT_EQ(r.exit_code, 2);
}

}  // namespace
}  // namespace baton
