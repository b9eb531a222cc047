// blob_compat_test.cpp — blob_check_compatible names the first differing identity or context field and, for
// context fields, the node flag that fixes it.
#include <gtest/gtest.h>

#include "blob_test_util.h"

namespace baton {
namespace {

using namespace blob_test;

class BlobCompat : public ::testing::Test {
  protected:
    void SetUp() override {
        bytes = write_blob(s.parts);
        auto r = blob_parse(bytes);
        ASSERT_TRUE(r.ok());
        view = r.value();
        node = s.parts.identity;
        ctx = s.parts.context;
    }
    void expect(const std::string & fragment) {
        Status st = blob_check_compatible(view, node, ctx);
        ASSERT_FALSE(st.ok()) << "compatible although it should fail with " << fragment;
        EXPECT_EQ(st.code(), status_code::incompatible);
        EXPECT_CONTAINS(st.message(), fragment);
    }
    synthetic s;
    std::vector<uint8_t> bytes;
    blob_view view;
    model_identity node;
    kv_layout ctx;
};

TEST_F(BlobCompat, SameIdentityAndContextIsCompatible) { EXPECT_TRUE(blob_check_compatible(view, node, ctx).ok()); }

TEST_F(BlobCompat, Fingerprint) {
    node.fingerprint[5] ^= 1;
    expect("model fingerprint differs: blob 0102030405060708");
}
TEST_F(BlobCompat, Arch) {
    node.arch = "mamba2";
    expect("arch llama vs mamba2");
}
TEST_F(BlobCompat, NLayer) {
    node.n_layer = 8;
    expect("n_layer 4 vs 8");
}
TEST_F(BlobCompat, NEmbd) {
    node.n_embd = 128;
    expect("n_embd 64 vs 128");
}
TEST_F(BlobCompat, NVocab) {
    node.n_vocab = 101;
    expect("n_vocab 100 vs 101");
}
TEST_F(BlobCompat, LlamaVersion) {
    node.llama_version = "0.8.0";
    expect("llama_version 0.7.0 vs 0.8.0");
}
TEST_F(BlobCompat, TypeK) {
    ctx.type_k = 8;  // GGML_TYPE_Q8_0
    expect("type_k f16 vs q8_0 (blob vs node): restart the node with -ctk f16");
}
TEST_F(BlobCompat, TypeV) {
    ctx.type_v = 0;  // GGML_TYPE_F32
    expect("type_v f16 vs f32 (blob vs node): restart the node with -ctv f16");
}
TEST_F(BlobCompat, FlashAttn) {
    ctx.flash_attn = true;
    expect("flash_attn off vs on (blob vs node): the V cache layout differs; restart the node with -fa off");
}
TEST_F(BlobCompat, KvUnifiedNamesTheFlag) {
    ctx.kv_unified = false;
    expect("kv_unified on vs off (blob vs node): restart the node with --kv-unified");
}
TEST_F(BlobCompat, NonUnifiedBlobNeedsTheSameSlotCount) {
    view.context.kv_unified = false;
    view.context.n_seq_max = 2;
    ctx.kv_unified = false;
    ctx.n_seq_max = 4;
    ctx.n_ctx = 1024;
    expect("n_seq_max 2 vs 4 (blob vs node, non-unified KV cache): restart the node with -np 2");
    ctx.kv_unified = true;
    expect("kv_unified off vs on (blob vs node): restart the node with --no-kv-unified");
}
TEST_F(BlobCompat, SlotCountIsIrrelevantWhenUnified) {
    ctx.n_seq_max = 8;
    EXPECT_TRUE(blob_check_compatible(view, node, ctx).ok());
}
TEST_F(BlobCompat, TokensMustFitTheNodeContext) {
    ctx.n_ctx = 8;
    expect("tokens: n_tokens 10 > the node's 8 cells per sequence");
}

}  // namespace
}  // namespace baton
