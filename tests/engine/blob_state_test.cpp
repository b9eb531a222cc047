// blob_state_test.cpp — round trip of real libllama state through a blob, for every test architecture:
// decode a prompt, write the sequence state (and a partial checkpoint for recurrent/hybrid memory) into a
// blob, parse it, restore the state into a fresh context and check the next token's logits bit for bit.
#include <gtest/gtest.h>
#include <llama.h>

#include <cstring>

#include "baton/blob.h"
#include "baton/context.h"
#include "baton/model.h"
#include "baton/testmodel/mkmodel.h"
#include "baton/text.h"
#include "support/test_support.h"

namespace baton {
namespace {

// decode feeds tokens at positions pos.. into seq 0 and returns the last token's logits.
std::vector<float> decode(llama_context * ctx, const std::vector<int32_t> & tokens, int32_t pos, int32_t n_vocab) {
    llama_batch b = llama_batch_init(int32_t(tokens.size()), 0, 1);
    for (size_t i = 0; i < tokens.size(); ++i) {
        b.token[i] = tokens[i];
        b.pos[i] = pos + int32_t(i);
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = i + 1 == tokens.size();
    }
    b.n_tokens = int32_t(tokens.size());
    const int rc = llama_decode(ctx, b);
    llama_batch_free(b);
    if (rc != 0) return {};
    const float * l = llama_get_logits_ith(ctx, -1);
    return std::vector<float>(l, l + n_vocab);
}

class BlobState : public ::testing::TestWithParam<std::string> {};

TEST_P(BlobState, RealStateRoundTripsAndRestoresBitForBit) {
    auto m = loaded_model::load(test::test_model_path(GetParam()));
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    const loaded_model & model = *m.value();
    context_config cfg;
    cfg.n_ctx = 256;
    cfg.n_batch = 256;
    cfg.n_ubatch = 256;
    auto c1 = context_make(model, cfg);
    ASSERT_TRUE(c1.ok()) << c1.status().to_string();
    llama_context * ctx = c1.value().get();
    const int32_t n_vocab = llama_vocab_n_tokens(model.vocab());

    auto toks = text_tokenize(model.vocab(), "The baton passes from prefill to decode.", true, false);
    ASSERT_TRUE(toks.ok());
    const std::vector<int32_t> prompt = toks.value();
    const int32_t n = int32_t(prompt.size());
    std::vector<float> last_logits = decode(ctx, prompt, 0, n_vocab);
    ASSERT_EQ(last_logits.size(), size_t(n_vocab));

    std::vector<uint8_t> state(llama_state_seq_get_size(ctx, 0));
    ASSERT_GT(state.size(), 0u);
    ASSERT_EQ(llama_state_seq_get_data(ctx, state.data(), state.size(), 0), state.size());
    std::vector<uint8_t> partial;
    blob_checkpoint_view cp;
    if (model.has_partial_state()) {
        partial.resize(llama_state_seq_get_size_ext(ctx, 0, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY));
        ASSERT_GT(partial.size(), 0u);
        ASSERT_EQ(
            llama_state_seq_get_data_ext(ctx, partial.data(), partial.size(), 0, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY),
            partial.size());
        llama_memory_t mem = llama_get_memory(ctx);
        cp.pos_min = llama_memory_seq_pos_min(mem, 0);
        cp.pos_max = llama_memory_seq_pos_max(mem, 0);
        cp.n_tokens = uint32_t(n);
        cp.data = partial;
    }
    const int32_t next = 42 % n_vocab;
    const std::vector<float> want = decode(ctx, {next}, n, n_vocab);
    ASSERT_EQ(want.size(), size_t(n_vocab));

    const model_identity & mi = model.identity();
    blob_parts parts;
    parts.identity = mi;
    parts.context = cfg;  // the kv_layout part of the context config
    parts.tokens = prompt;
    parts.state = state;
    if (!partial.empty()) parts.checkpoints.push_back(cp);
    parts.logits = last_logits;
    parts.request = R"({"prompt":"The baton","n_predict":8})";
    blob_buffer_sink sink;
    Status st = blob_write(parts, sink);
    ASSERT_TRUE(st.ok()) << st.to_string();
    const std::vector<uint8_t> bytes = sink.bytes();  // a copy: the view must not depend on the writer's memory

    auto r = blob_parse(bytes);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const blob_view & v = r.value();
    ASSERT_TRUE(blob_check_compatible(v, parts.identity, parts.context).ok());
    EXPECT_EQ(v.tokens, prompt);
    ASSERT_EQ(v.state.size(), state.size());
    EXPECT_EQ(0, std::memcmp(v.state.data(), state.data(), state.size()));
    ASSERT_EQ(v.checkpoints.size(), partial.empty() ? 0u : 1u);
    if (!partial.empty()) {
        EXPECT_EQ(v.checkpoints[0].pos_max, n - 1);
        EXPECT_EQ(0, std::memcmp(v.checkpoints[0].data.data(), partial.data(), partial.size()));
    }
    ASSERT_TRUE(v.logits.has_value());
    EXPECT_EQ(0, std::memcmp(v.logits->data(), last_logits.data(), last_logits.size() * sizeof(float)));

    auto c2 = context_make(model, cfg);
    ASSERT_TRUE(c2.ok());
    ASSERT_EQ(llama_state_seq_set_data(c2.value().get(), v.state.data(), v.state.size(), 0), v.state.size());
    const std::vector<float> got = decode(c2.value().get(), {next}, n, n_vocab);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)))
        << "logits after restoring the blob's state differ from the uninterrupted run";
}

INSTANTIATE_TEST_SUITE_P(Archs, BlobState, ::testing::ValuesIn(mkmodel_archs()),
                         [](const auto & info) { return std::string(info.param); });

}  // namespace
}  // namespace baton
