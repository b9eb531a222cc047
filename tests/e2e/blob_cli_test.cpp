// blob_cli_test.cpp — `baton blob inspect` and `baton blob verify` end to end, run as real processes.
#include <gtest/gtest.h>

#include <fstream>

#include "baton/model.h"
#include "blob/blob_test_util.h"
#include "support/test_support.h"

namespace baton {
namespace {

using namespace blob_test;

std::string write_file(const std::vector<uint8_t> & bytes, const std::string & name) {
    static const std::string dir = test::temp_dir();
    const std::string path = dir + "/" + name;
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char *>(bytes.data()), std::streamsize(bytes.size()));
    return path;
}

test::proc_result baton(std::vector<std::string> args) {
    args.insert(args.begin(), test::baton_bin());
    return test::run_process(args, 120);
}

// A blob whose identity is the real test model's, restorable under the default context config.
std::vector<uint8_t> blob_for_model(const std::string & model_path) {
    auto m = loaded_model::load(model_path);
    if (!m.ok()) return {};
    const model_identity & mi = m.value()->identity();
    synthetic s(false);
    s.parts.identity = {mi.fingerprint, mi.llama_version, mi.arch, mi.n_layer, mi.n_embd, mi.n_vocab};
    s.parts.request = R"({"n_predict":2})";
    return write_blob(s.parts);
}

TEST(BlobCli, InspectShowsEveryFieldOfAValidBlob) {
    auto path = write_file(write_blob(synthetic().parts), "valid.blob");
    auto r = baton({"blob", "inspect", path});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const char * want :
         {"magic:           BATNBLOB (ok)", "version:         1.0",
          "flags:           0x00000003 (has_logits has_request)", "n_sections:      7", "header checksum: 0x",
          "identity     at +40", "state", "OK",
          "identity:        arch llama, n_layer 4, n_embd 64, n_vocab 100, libllama 0.7.0",
          "fingerprint:     0102030405060708090a0b0c0d0e0f10", "type_k f16, type_v f16, flash_attn off, kv_unified on",
          "tokens:          10 [1 8 15 22", "state:           1000 bytes", "checkpoints:     2",
          "[1] n_tokens 8, positions 7..7, 70 bytes", "logits:          present (100 f32)",
          "request:         {\"n_predict\":4", "valid:           yes"})
        EXPECT_CONTAINS(r.out, want);
    EXPECT_EQ(r.out.find("BAD"), std::string::npos) << r.out;
}

TEST(BlobCli, InspectShowsWhatItCanOfACorruptBlob) {
    auto bytes = write_blob(synthetic().parts);
    const auto st = blob_walk(bytes).sections[3];
    bytes[st.offset + 40] ^= 1;
    auto r = baton({"blob", "inspect", write_file(bytes, "flipped.blob")});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_CONTAINS(r.out, "BAD (computed 0x");
    EXPECT_CONTAINS(r.out, "tokens       at +");
    EXPECT_CONTAINS(r.out, "valid:           no: corrupt: state: checksum mismatch");
    EXPECT_CONTAINS(r.err, "state: checksum mismatch");

    bytes.resize(bytes.size() - 30);
    r = baton({"blob", "inspect", write_file(bytes, "truncated.blob")});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_CONTAINS(r.out, "(file is shorter: truncated)");
    EXPECT_CONTAINS(r.out, "INCOMPLETE");
    EXPECT_CONTAINS(r.err, "total_bytes");
}

TEST(BlobCli, VerifyAcceptsAValidBlob) {
    auto r = baton({"blob", "verify", write_file(write_blob(synthetic().parts), "ok.blob")});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_CONTAINS(r.out, "ok (10 tokens, 1000 state bytes)");
}

TEST(BlobCli, VerifyRejectsACorruptBlobWithTheReason) {
    auto bytes = write_blob(synthetic().parts);
    bytes[3] = 'x';
    auto r = baton({"blob", "verify", write_file(bytes, "magic.blob")});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_CONTAINS(r.err, "magic: expected");
}

TEST(BlobCli, VerifyAgainstTheMatchingModel) {
    const std::string model = test::test_model_path("llama");
    auto bytes = blob_for_model(model);
    ASSERT_FALSE(bytes.empty());
    auto r = baton({"blob", "verify", write_file(bytes, "llama.blob"), "-m", model});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_CONTAINS(r.out, "compatible with the model");
}

// verify -m checks against the node the blob is meant for, described with `baton serve`'s flags.
TEST(BlobCli, VerifyTakesTheTargetNodesContext) {
    const std::string model = test::test_model_path("llama");
    auto m = loaded_model::load(model);
    ASSERT_TRUE(m.ok());
    const model_identity & mi = m.value()->identity();
    synthetic s(false);
    s.parts.identity = {mi.fingerprint, mi.llama_version, mi.arch, mi.n_layer, mi.n_embd, mi.n_vocab};
    s.parts.context.kv_unified = false;  // made on a per-sequence node with 4 slots
    s.parts.context.n_seq_max = 4;
    const std::string path = write_file(write_blob(s.parts), "perseq.blob");
    auto r = baton({"blob", "verify", path, "-m", model});
    EXPECT_EQ(r.exit_code, 1) << "the default node is unified";
    EXPECT_CONTAINS(r.err, "kv_unified off vs on");
    r = baton({"blob", "verify", path, "-m", model, "--no-kv-unified", "-np", "2"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_CONTAINS(r.err, "-np 4");
    r = baton({"blob", "verify", path, "-m", model, "--no-kv-unified", "-np", "4"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_CONTAINS(r.out, "compatible with the model");
}

TEST(BlobCli, VerifyAgainstAnotherModelNamesTheDifference) {
    const std::string path = write_file(blob_for_model(test::test_model_path("llama")), "llama2.blob");
    auto r = baton({"blob", "verify", path, "-m", test::test_model_path("llama", 2)});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_CONTAINS(r.err, "model fingerprint differs");
    r = baton({"blob", "verify", path, "-m", test::test_model_path("mamba2")});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_CONTAINS(r.err, "arch llama vs mamba2");
}

TEST(BlobCli, MissingFileIsAFailure) {
    auto r = baton({"blob", "verify", "/nonexistent/x.blob"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_CONTAINS(r.err, "cannot read '/nonexistent/x.blob'");
    r = baton({"blob", "inspect", "/nonexistent/x.blob"});
    EXPECT_EQ(r.exit_code, 1);
}

TEST(BlobCli, BadArgumentsExit2) {
    EXPECT_EQ(baton({"blob"}).exit_code, 2);
    EXPECT_EQ(baton({"blob", "verify"}).exit_code, 2);
    EXPECT_EQ(baton({"blob", "inspect"}).exit_code, 2);
    EXPECT_EQ(baton({"blob", "frobnicate", "x"}).exit_code, 2);
    EXPECT_EQ(baton({"blob", "verify", "a", "--bogus"}).exit_code, 2);
}

}  // namespace
}  // namespace baton
