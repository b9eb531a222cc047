// media_test.cpp — images in prompts (media.h): the encoder turns markers and image files into media tokens and
// embeddings (and refuses what it cannot take, one case per rule); the engine decodes an image prompt as libmtmd's
// own helper does; a prompt's image cells are reused as a prefix, shipped in a blob (format 1.3) and decoded by an
// engine that has no projector exactly as a single engine answers; and a decode whose image cells were lost fails
// with the reason instead of computing garbage. Gemma 3's images (non-causal attention among an image's
// embeddings) decode as libmtmd's helper decodes them, whole, and move and are reused as any others; so do
// Qwen2-VL's (M-RoPE: a grid of embeddings at one position), also cut by the batch and as a delta inside the image.
#include <llama.h>
#include <mtmd-helper.h>
#include <mtmd.h>

#include <set>

#include "baton/media.h"
#include "baton/testmodel/mkmmproj.h"
#include "engine_fixture.h"
#include "support/test_audio.h"
#include "support/test_image.h"

namespace baton {
namespace {

using namespace baton::test;

std::shared_ptr<const loaded_model> text_model() { return model_for("llama"); }

// encoder: the projector c.path (default: the LLaVA-style test projector) opened for text model m, on the CPU.
std::unique_ptr<media_encoder> encoder(media_config c = {}, const loaded_model & m = *text_model()) {
    if (c.path.empty()) c.path = test_mmproj_path(64);
    if (c.marker.empty()) c.marker = "<__media_test_4f1c__>";
    c.offload = false;
    auto e = media_encoder::create(m, c);
    if (!e.ok()) throw std::runtime_error(e.status().to_string());
    return std::move(e.value());
}
std::unique_ptr<media_encoder> encoder_of(const std::string & projector, const loaded_model & m) {
    media_config c;
    c.path = projector;
    return encoder(c, m);
}

media_prompt encode_ok(const media_encoder & e, const std::string & text, const std::vector<std::string> & images) {
    auto p = e.encode(text, images, true, true);
    if (!p.ok()) throw std::runtime_error(p.status().to_string());
    return std::move(p.value());
}

std::string picture_prompt(const media_encoder & e) { return "Here is a picture: " + e.marker() + " What is in it?"; }

gen_request greedy_media(const media_prompt & p, int n) {
    gen_request r = greedy(p.tokens, n);
    r.media = p.spans;
    return r;
}

TEST(MediaEncoder, MarkersBecomeMediaTokensAndSpansOfEmbeddings) {
    auto e = encoder();
    const int n_img = mkmmproj_image_tokens(mkmmproj_params{});
    const std::string a = test_bmp(40, 24, 1), b = test_bmp(40, 24, 2);
    const media_prompt p = encode_ok(*e, "one " + e->marker() + " two " + e->marker() + " three", {a, a});
    ASSERT_EQ(p.spans.size(), 2u);
    EXPECT_EQ(media_tokens_count(p.tokens), size_t(2 * n_img));
    for (const auto & s : p.spans) {
        EXPECT_EQ(s.n, uint32_t(n_img));
        EXPECT_EQ(s.n_embd, 64u);
        ASSERT_EQ(s.embd->size(), size_t(n_img) * 64);
    }
    EXPECT_TRUE(media_spans_check(p.tokens, p.spans, 64, 512).ok());
    // The same image: the same tokens and embeddings; within an image every embedding its own token.
    const auto toks_of = [&](const media_prompt & q, size_t i) {
        return std::vector<token_id>(q.tokens.begin() + q.spans[i].begin,
                                     q.tokens.begin() + q.spans[i].begin + q.spans[i].n);
    };
    EXPECT_EQ(toks_of(p, 0), toks_of(p, 1));
    EXPECT_EQ(*p.spans[0].embd, *p.spans[1].embd);
    const auto first = toks_of(p, 0);
    EXPECT_EQ(std::set<token_id>(first.begin(), first.end()).size(), first.size());
    // Another image: other tokens and embeddings; the same image encoded again: the same.
    const media_prompt q = encode_ok(*e, "one " + e->marker() + " two " + e->marker() + " three", {a, b});
    EXPECT_EQ(toks_of(q, 0), first);
    EXPECT_NE(toks_of(q, 1), first);
    EXPECT_NE(*q.spans[1].embd, *p.spans[1].embd);
    EXPECT_EQ(*q.spans[0].embd, *p.spans[0].embd);
    // The text around the images is the text model's tokens, as text_tokenize makes them.
    const media_prompt t = encode_ok(*e, "just text", {});
    EXPECT_TRUE(t.spans.empty());
    EXPECT_EQ(t.tokens, text_tokenize(*text_model(), "just text", true, true).value());
}

void expect_encode_refused(const media_encoder & e, const std::string & text, const std::vector<std::string> & images,
                           status_code code, const std::string & needle, uint32_t n_ctx = 0) {
    auto p = e.encode(text, images, true, true, n_ctx);
    ASSERT_FALSE(p.ok()) << needle;
    EXPECT_EQ(p.status().code(), code) << p.status().to_string();
    EXPECT_NE(p.status().message().find(needle), std::string::npos) << p.status().to_string();
}

TEST(MediaEncoder, WhatItCannotTakeIsRefusedWithTheReason) {
    media_config c;
    c.max_images = 2;
    c.max_image_bytes = 4096;
    auto e = encoder(c);
    const std::string img = test_bmp(32, 32, 1), m = e->marker();
    expect_encode_refused(*e, "a " + m, {}, status_code::invalid_argument, "0 given, but the prompt has places for 1");
    expect_encode_refused(*e, "a", {img}, status_code::invalid_argument, "1 given, but the prompt has places for 0");
    expect_encode_refused(*e, m + m + m, {img, img, img}, status_code::invalid_argument, "at most 2");
    expect_encode_refused(*e, m, {test_bmp(64, 64, 1)}, status_code::invalid_argument,
                          "image 0: 12342 bytes, at most 4096");
    expect_encode_refused(*e, m, {std::string("not an image at all")}, status_code::invalid_argument,
                          "image 0: not an image or audio clip this server can decode");
    expect_encode_refused(*e, "a " + m + " b", {img}, status_code::context_exceeded, "", 12);
}

TEST(MediaEncoder, ProjectorsItDoesNotServeAreRefusedAtCreate) {
    media_config c;
    c.path = test_mmproj_path(64);
    auto no_marker = media_encoder::create(*text_model(), c);  // the marker is required, never made up here
    ASSERT_FALSE(no_marker.ok());
    EXPECT_EQ(no_marker.status().code(), status_code::invalid_argument);
    c.marker = "<__m__>";
    c.path = test::scratch_dir() + "/no-such-projector.gguf";
    auto missing = media_encoder::create(*text_model(), c);
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.status().code(), status_code::io_error);
    // (Not under the sanitizers: libmtmd 0.7 leaks the context it was building when it refuses a file, which
    // LeakSanitizer reports at exit; the release suite runs this case, as MkMmproj's refused-width case.)
    if (k_sanitized_build) return;
    // A GGUF that is a text model, not a projector.
    c.path = test_model_path("llama");
    auto not_proj = media_encoder::create(*text_model(), c);
    ASSERT_FALSE(not_proj.ok());
    EXPECT_NE(not_proj.status().message().find("libmtmd refused it"), std::string::npos)
        << not_proj.status().to_string();
}

// The reference: libmtmd's own helper evaluates the same prompt (its default marker) in a fresh context of the
// engine's configuration, then greedy tokens one by one.
std::vector<token_id> libmtmd_greedy(const std::string & image, int n, const engine_config & ec,
                                     const loaded_model & model = *text_model(),
                                     const std::string & projector = test_mmproj_path(64)) {
    auto lctx = context_make(model, context_resolve(model, ec.ctx));
    if (!lctx.ok()) throw std::runtime_error(lctx.status().to_string());
    mtmd_context_params mp = mtmd_context_params_default();
    mp.use_gpu = false;
    mp.print_timings = false;
    mp.warmup = false;
    mtmd_context * mctx = mtmd_init_from_file(projector.c_str(), model.get(), mp);
    if (!mctx) throw std::runtime_error("libmtmd refused the projector");
    mtmd_helper_bitmap_wrapper w =
        mtmd_helper_bitmap_init_from_buf(mctx, reinterpret_cast<const unsigned char *>(image.data()), image.size(),
                                         false, mtmd_helper_init_opt_default());
    const std::string prompt = std::string("Here is a picture: ") + mtmd_default_marker() + " What is in it?";
    mtmd_input_text text{prompt.c_str(), prompt.size(), true, true};
    mtmd_input_chunks * chunks = mtmd_input_chunks_init();
    const mtmd_bitmap * bitmaps[] = {w.bitmap};
    if (mtmd_tokenize(mctx, chunks, &text, bitmaps, 1) != 0) throw std::runtime_error("mtmd_tokenize");
    llama_pos n_past = 0;
    if (mtmd_helper_eval_chunks(mctx, lctx->get(), chunks, 0, 0, int32_t(ec.ctx.n_batch), true, &n_past) != 0)
        throw std::runtime_error("mtmd_helper_eval_chunks");
    mtmd_input_chunks_free(chunks);
    mtmd_bitmap_free(w.bitmap);
    mtmd_free(mctx);
    std::vector<token_id> out;
    const int32_t n_vocab = int32_t(model.identity().n_vocab);
    llama_batch b = llama_batch_init(1, 0, 1);
    for (int i = 0; i < n; ++i) {
        const float * lg = llama_get_logits_ith(lctx->get(), -1);
        token_id best = 0;
        for (token_id t = 1; t < n_vocab; ++t)
            if (lg[t] > lg[best]) best = t;
        if (llama_vocab_is_eog(model.vocab(), best)) break;
        out.push_back(best);
        b.n_tokens = 1;
        b.token[0] = best;
        b.pos[0] = n_past++;
        b.n_seq_id[0] = 1;
        b.seq_id[0][0] = 0;
        b.logits[0] = 1;
        if (llama_decode(lctx->get(), b) != 0) throw std::runtime_error("llama_decode");
    }
    llama_batch_free(b);
    return out;
}

// expect_reused_and_moved: p2 continues p1 with the same image. A follow-up on an engine that answered p1 reuses
// the image's cells, and p2's blob from a prefill engine decodes in an engine given no image; both answer as a
// fresh single engine, tokens and logits. Returns the fresh engine's run.
run_result expect_reused_and_moved(const std::shared_ptr<const loaded_model> & m, const engine_config & c,
                                   const media_prompt & p1, const media_prompt & p2) {
    run_result fresh = run_task(*make_engine(m, c), task_generate{greedy_media(p2, 10)});
    EXPECT_TRUE(fresh.done.ok()) << fresh.done.status().to_string();
    auto eng = make_engine(m, c);
    EXPECT_TRUE(run_task(*eng, task_generate{greedy_media(p1, 4)}).done.ok());
    run_result follow = run_task(*eng, task_generate{greedy_media(p2, 10)});
    EXPECT_TRUE(follow.done.ok()) << follow.done.status().to_string();
    if (follow.done.ok())
        EXPECT_GE(follow.done->usage.cached_tokens, p1.spans[0].begin + p1.spans[0].n) << "the image's cells reused";
    EXPECT_EQ(follow.tokens, fresh.tokens);
    EXPECT_TRUE(follow.logits == fresh.logits);
    engine_result pre = run_task(*make_engine(m, c), task_prefill{greedy_media(p2, 10)});
    EXPECT_TRUE(pre.done.ok()) << pre.done.status().to_string();
    if (!pre.done.ok()) return fresh;
    run_result got = run_task(*make_engine(m, c), task_decode{validated(pre.done->blob), greedy(p2.tokens, 10)});
    EXPECT_TRUE(got.done.ok()) << got.done.status().to_string();
    EXPECT_EQ(got.tokens, fresh.tokens);
    EXPECT_TRUE(got.logits == fresh.logits);
    return fresh;
}

// expect_answers_otherwise: the request, changed in how its image is decoded, gives another first distribution
// than got (the property the change removes matters).
void expect_answers_otherwise(const std::shared_ptr<const loaded_model> & m, const engine_config & c,
                              const gen_request & changed, const run_result & got) {
    run_result other = run_task(*make_engine(m, c), task_generate{changed});
    ASSERT_TRUE(other.done.ok()) << other.done.status().to_string();
    ASSERT_FALSE(other.logits.empty());
    ASSERT_FALSE(got.logits.empty());
    EXPECT_NE(other.logits[0], got.logits[0]);
}

TEST(MediaEngine, AnImagePromptDecodesAsLibmtmdsOwnHelperDecodesIt) {
    auto e = encoder();
    const engine_config c = engine_cfg(1, 1024);
    auto eng = make_engine(text_model(), c);
    const std::string img = test_bmp(40, 24, 1);
    run_result got = run_task(*eng, task_generate{greedy_media(encode_ok(*e, picture_prompt(*e), {img}), 12)});
    ASSERT_TRUE(got.done.ok()) << got.done.status().to_string();
    EXPECT_EQ(got.tokens, libmtmd_greedy(img, 12, c));
    // Another image, another answer (the image is read, not skipped).
    run_result other =
        run_task(*eng, task_generate{greedy_media(encode_ok(*e, picture_prompt(*e), {test_bmp(40, 24, 2)}), 12)});
    ASSERT_TRUE(other.done.ok()) << other.done.status().to_string();
    ASSERT_FALSE(other.logits.empty());
    EXPECT_NE(other.logits[0], got.logits[0]);
}

// Small batches cut an image in pieces (and a piece never mixes text and image rows): the answer does not change.
TEST(MediaEngine, ImagesCutByTheBatchDecodeAsWhole) {
    auto e = encoder();
    const media_prompt p = encode_ok(*e, picture_prompt(*e), {test_bmp(32, 32, 3)});
    engine_config whole = engine_cfg(1, 1024);
    engine_config cut = whole;
    cut.ctx.n_batch = cut.ctx.n_ubatch = 8;  // 16 embeddings per image: two pieces
    run_result a = run_task(*make_engine(text_model(), whole), task_generate{greedy_media(p, 10)});
    run_result b = run_task(*make_engine(text_model(), cut), task_generate{greedy_media(p, 10)});
    ASSERT_TRUE(a.done.ok() && b.done.ok());
    EXPECT_EQ(a.tokens, b.tokens);
}

TEST(MediaEngine, AFollowUpReusesTheImageCellsAndAnswersAsAFreshEngine) {
    auto e = encoder();
    const std::string img = test_bmp(40, 24, 5);
    expect_reused_and_moved(text_model(), engine_cfg(1, 1024), encode_ok(*e, picture_prompt(*e), {img}),
                            encode_ok(*e, picture_prompt(*e) + " Tell me more about it, please.", {img}));
}

// PD: the prefill engine encodes and computes the image; its blob (format 1.3: media tokens) decodes in an engine
// given no image at all, token for token and logit for logit as a single engine answers.
TEST(MediaEngine, ABlobWithImageCellsDecodesWithoutTheImageAsASingleEngineAnswers) {
    auto e = encoder();
    const engine_config c = engine_cfg(1, 1024);
    const media_prompt p = encode_ok(*e, picture_prompt(*e), {test_bmp(40, 24, 7)});
    run_result want = run_task(*make_engine(text_model(), c), task_generate{greedy_media(p, 12)});
    ASSERT_TRUE(want.done.ok()) << want.done.status().to_string();

    engine_result pre = run_task(*make_engine(text_model(), c), task_prefill{greedy_media(p, 12)});
    ASSERT_TRUE(pre.done.ok()) << pre.done.status().to_string();
    blob_ptr blob = validated(pre.done->blob);
    EXPECT_EQ(blob->view().version_minor, 3);
    EXPECT_EQ(media_tokens_count(blob->view().tokens), size_t(p.spans[0].n));
    run_result got = run_task(*make_engine(text_model(), c), task_decode{blob, greedy(p.tokens, 12)});
    ASSERT_TRUE(got.done.ok()) << got.done.status().to_string();
    EXPECT_EQ(got.tokens, want.tokens);
    EXPECT_TRUE(got.logits == want.logits);
}

// Regression guard: a decode task's image cells cannot be computed again (its engine was never given the image),
// so when the invariant guard drops its memory the task fails with that reason instead of decoding media ids.
TEST(MediaEngine, ADecodeWhoseImageCellsWereLostFailsWithTheReason) {
    auto e = encoder();
    const engine_config c = engine_cfg(1, 1024);
    const media_prompt p = encode_ok(*e, picture_prompt(*e), {test_bmp(40, 24, 8)});
    engine_result pre = run_task(*make_engine(text_model(), c), task_prefill{greedy_media(p, 12)});
    ASSERT_TRUE(pre.done.ok()) << pre.done.status().to_string();
    auto dec = make_engine(text_model(), c, [](uint64_t, uint32_t n) { return n == 3; });
    run_result got = run_task(*dec, task_decode{validated(pre.done->blob), greedy(p.tokens, 12)});
    ASSERT_FALSE(got.done.ok());
    EXPECT_EQ(got.done.status().code(), status_code::engine_error);
    EXPECT_NE(got.done.status().message().find("cells of an image"), std::string::npos)
        << got.done.status().to_string();
    // The engine goes on serving.
    EXPECT_TRUE(run_task(*dec, task_generate{greedy(make_prompt(20, 1, 200), 4)}).done.ok());
}

TEST(MediaEngine, MediaTokensWithoutTheirImageAreRefusedAtSubmit) {
    auto e = encoder();
    const media_prompt p = encode_ok(*e, picture_prompt(*e), {test_bmp(40, 24, 9)});
    auto eng = make_engine(text_model(), engine_cfg(1, 1024));
    run_result r = run_task(*eng, task_generate{greedy(p.tokens, 4)});  // (no spans)
    ASSERT_FALSE(r.done.ok());
    EXPECT_EQ(r.done.status().code(), status_code::invalid_argument);
    EXPECT_NE(r.done.status().message().find("is an image's, but no image stands there"), std::string::npos);
    gen_request shifted = greedy_media(p, 4);
    shifted.media[0].begin += 1;
    r = run_task(*eng, task_generate{shifted});
    ASSERT_FALSE(r.done.ok());
    EXPECT_EQ(r.done.status().code(), status_code::invalid_argument);
}

// ---- non-causal images (Gemma 3's projector: its embeddings attend to each other) ----

std::shared_ptr<const loaded_model> gemma_model() { return model_for("gemma3"); }
std::string gemma_projector() { return test_mmproj_path(64, 1, "gemma3"); }

std::unique_ptr<media_encoder> gemma_encoder() { return encoder_of(gemma_projector(), *gemma_model()); }

TEST(MediaEncoder, KeptPrefixesNeverEndInsideANonCausalImage) {
    media_span causal{10, 16, 64, nullptr, false}, whole{40, 16, 64, nullptr, true};
    const std::vector<media_span> spans{causal, whole};
    EXPECT_EQ(media_keep_limit(spans, 5), 5u);
    EXPECT_EQ(media_keep_limit(spans, 17), 17u);  // inside a causal image: its first cells stand alone
    EXPECT_EQ(media_keep_limit(spans, 40), 40u);  // at the image's start: nothing of it kept
    EXPECT_EQ(media_keep_limit(spans, 41), 40u);
    EXPECT_EQ(media_keep_limit(spans, 55), 40u);
    EXPECT_EQ(media_keep_limit(spans, 56), 56u);  // past its end: all of it kept
}

// The engine decodes Gemma 3's images as libmtmd's own helper does (non-causal attention among the image's
// embeddings, then causal again), and the flag matters: the same embeddings decoded causally answer otherwise.
TEST(MediaEngine, NonCausalImagesDecodeAsLibmtmdsOwnHelperDecodesThem) {
    auto e = gemma_encoder();
    const engine_config c = engine_cfg(1, 1024);
    const std::string img = test_bmp(40, 24, 11);
    const media_prompt p = encode_ok(*e, picture_prompt(*e), {img});
    ASSERT_EQ(p.spans.size(), 1u);
    EXPECT_TRUE(p.spans[0].non_causal);
    EXPECT_EQ(p.spans[0].n, 16u);
    auto eng = make_engine(gemma_model(), c);
    run_result got = run_task(*eng, task_generate{greedy_media(p, 12)});
    ASSERT_TRUE(got.done.ok()) << got.done.status().to_string();
    EXPECT_EQ(got.tokens, libmtmd_greedy(img, 12, c, *gemma_model(), gemma_projector()));
    gen_request causal = greedy_media(p, 12);
    causal.media[0].non_causal = false;
    expect_answers_otherwise(gemma_model(), c, causal, got);
}

// A batch budget that ends inside a non-causal image does not cut it: the image goes whole in the next step and
// the answer is the whole-batch one; an image larger than a micro-batch is refused at submit, naming the flag.
TEST(MediaEngine, NonCausalImagesAreNeverCutAndMustFitAMicroBatch) {
    auto e = gemma_encoder();
    const media_prompt p = encode_ok(*e, picture_prompt(*e), {test_bmp(32, 32, 12)});
    ASSERT_GT(p.spans[0].begin, 0u);
    engine_config whole = engine_cfg(1, 1024);
    engine_config tight = whole;
    tight.ctx.n_batch = tight.ctx.n_ubatch = 16;  // the text before the image leaves less than 16 in the first step
    run_result a = run_task(*make_engine(gemma_model(), whole), task_generate{greedy_media(p, 10)});
    run_result b = run_task(*make_engine(gemma_model(), tight), task_generate{greedy_media(p, 10)});
    ASSERT_TRUE(a.done.ok()) << a.done.status().to_string();
    ASSERT_TRUE(b.done.ok()) << b.done.status().to_string();
    EXPECT_EQ(a.tokens, b.tokens);
    EXPECT_TRUE(a.logits == b.logits);
    engine_config small = whole;
    small.ctx.n_batch = small.ctx.n_ubatch = 8;
    run_result r = run_task(*make_engine(gemma_model(), small), task_generate{greedy_media(p, 10)});
    ASSERT_FALSE(r.done.ok());
    EXPECT_EQ(r.done.status().code(), status_code::invalid_argument);
    EXPECT_NE(r.done.status().message().find("--ubatch-size 8"), std::string::npos) << r.done.status().to_string();
}

// Reuse and PD with a non-causal image: a follow-up reuses the image's cells and answers as a fresh engine; the
// prefill engine's blob decodes in an engine given no image, token for token and logit for logit as one engine.
TEST(MediaEngine, NonCausalImageCellsAreReusedAndMovedAsAnyOthers) {
    auto e = gemma_encoder();
    const std::string img = test_bmp(40, 24, 13);
    expect_reused_and_moved(gemma_model(), engine_cfg(1, 1024), encode_ok(*e, picture_prompt(*e), {img}),
                            encode_ok(*e, picture_prompt(*e) + " Tell me more about it, please.", {img}));
}

// ---- M-RoPE images (Qwen2-VL's merger on mkmodel's qwen2vl: an image is a grid of embeddings at one position) ----

std::shared_ptr<const loaded_model> qwen2vl_model() { return model_for("qwen2vl"); }
std::string qwen2vl_projector() { return test_mmproj_path(64, 1, "qwen2vl_merger"); }

std::unique_ptr<media_encoder> qwen2vl_encoder() { return encoder_of(qwen2vl_projector(), *qwen2vl_model()); }

// The engine decodes an M-RoPE image as libmtmd's own helper does: 32 embeddings on an 8 x 4 grid at one position,
// the text after it 8 positions on; the grid matters (the same embeddings on a 4 x 8 grid answer otherwise), and
// the slot's memory ends at the position the map says, 24 below its token count.
TEST(MediaEngine, MRopeImagesDecodeAsLibmtmdsOwnHelperDecodesThem) {
    const std::string img = test_bmp(64, 32, 21);
    auto e = qwen2vl_encoder();
    const media_prompt p = encode_ok(*e, picture_prompt(*e), {img});
    ASSERT_EQ(p.spans.size(), 1u);
    EXPECT_EQ(p.spans[0].n, 32u);
    EXPECT_EQ(p.spans[0].grid_w, 8u);
    EXPECT_EQ(p.spans[0].grid_h, 4u);
    const engine_config c = engine_cfg(1, 1024);
    auto eng = make_engine(qwen2vl_model(), c);
    run_result got = run_task(*eng, task_generate{greedy_media(p, 12)});
    ASSERT_TRUE(got.done.ok()) << got.done.status().to_string();
    EXPECT_EQ(got.tokens, libmtmd_greedy(img, 12, c, *qwen2vl_model(), qwen2vl_projector()));
    const slot_info si = eng->slots()[0];
    EXPECT_EQ(int64_t(si.pos_max) + 1, int64_t(si.n_tokens) - 24) << "an 8 x 4 image takes 8 positions for 32 cells";
    gen_request transposed = greedy_media(p, 12);
    std::swap(transposed.media[0].grid_w, transposed.media[0].grid_h);
    expect_answers_otherwise(qwen2vl_model(), c, transposed, got);
}

// Cut by the batch (4 pieces), reused by a follow-up, shipped to an engine without the image whole and as a delta
// over a base that ends inside the image: every path answers as a fresh single engine, tokens and logits.
TEST(MediaEngine, MRopeImageCellsAreCutReusedAndMovedAsAnyOthers) {
    auto e = qwen2vl_encoder();
    const engine_config c = engine_cfg(1, 1024);
    const std::string img = test_bmp(64, 32, 22);
    const media_prompt p1 = encode_ok(*e, picture_prompt(*e), {img});
    const media_prompt p2 = encode_ok(*e, picture_prompt(*e) + " Tell me more about it, please.", {img});
    const run_result fresh = expect_reused_and_moved(qwen2vl_model(), c, p1, p2);

    engine_config cut = c;
    cut.ctx.n_batch = cut.ctx.n_ubatch = 8;
    run_result pieces = run_task(*make_engine(qwen2vl_model(), cut), task_generate{greedy_media(p2, 10)});
    ASSERT_TRUE(pieces.done.ok()) << pieces.done.status().to_string();
    EXPECT_EQ(pieces.tokens, fresh.tokens);

    // A delta over a base that ends inside the image: the receiver holds the whole first turn.
    gen_request dreq = greedy_media(p2, 10);
    dreq.delta_base = p1.spans[0].begin + 5;
    engine_result delta = run_task(*make_engine(qwen2vl_model(), c), task_prefill{dreq});
    ASSERT_TRUE(delta.done.ok()) << delta.done.status().to_string();
    auto dec = make_engine(qwen2vl_model(), c);
    ASSERT_TRUE(run_task(*dec, task_generate{greedy_media(p1, 4)}).done.ok());
    run_result joined = run_task(*dec, task_decode{validated(delta.done->blob), greedy(p2.tokens, 10)});
    ASSERT_TRUE(joined.done.ok()) << joined.done.status().to_string();
    EXPECT_EQ(dec->metrics().deltas_in, 1u);
    EXPECT_EQ(joined.tokens, fresh.tokens);
    EXPECT_TRUE(joined.logits == fresh.logits);
}

// ---- audio (Qwen2-Audio's projector: a Whisper encoder; a clip becomes embeddings like an image's) ----

std::string audio_projector() { return test_mmproj_path(64, 1, "qwen2a"); }

std::unique_ptr<media_encoder> audio_encoder(const loaded_model & m = *text_model()) {
    return encoder_of(audio_projector(), m);
}

TEST(MediaEncoder, AudioAndImagesGoOnlyToAProjectorThatReadsThem) {
    auto a = audio_encoder();
    EXPECT_TRUE(a->audio());
    EXPECT_FALSE(a->vision());
    auto v = encoder();
    EXPECT_TRUE(v->vision());
    EXPECT_FALSE(v->audio());
    auto refused = [](const media_encoder & e, const std::string & file, const std::string & why) {
        auto p = e.encode(picture_prompt(e), {file}, true, true);
        ASSERT_FALSE(p.ok());
        EXPECT_EQ(p.status().code(), status_code::invalid_argument);
        EXPECT_NE(p.status().message().find(why), std::string::npos) << p.status().to_string();
    };
    refused(*a, test_bmp(40, 24, 1), "image input is not supported by this server");
    refused(*v, test_wav(500, 1), "audio input is not supported by this server");
    refused(*a, std::string(2000, 'x'), "not an image or audio clip");
    std::string cut = test_wav(500, 1);
    cut.resize(30);  // a WAV header cut short
    refused(*a, cut, "not an image or audio clip");
}

// An audio clip decodes as libmtmd's own helper decodes it (one position per embedding, causal; on mkmodel's
// qwen2vl, an M-RoPE model as Qwen2.5-Omni's, each embedding's four position components its position), another clip
// answers otherwise, and PD: the blob with the clip's cells decodes in an engine given no audio at all, token for
// token and logit for logit as the single engine.
TEST(MediaEngine, AnAudioPromptDecodesAsLibmtmdsOwnHelperAndMovesAsAnyState) {
    for (const auto & m : {text_model(), qwen2vl_model()}) {
        SCOPED_TRACE(m->identity().arch);
        auto e = audio_encoder(*m);
        const engine_config c = engine_cfg(1, 1024);
        const std::string clip = test_wav(1000, 3);
        const media_prompt p = encode_ok(*e, picture_prompt(*e), {clip});
        ASSERT_EQ(p.spans.size(), 1u);
        EXPECT_FALSE(p.spans[0].non_causal);
        EXPECT_EQ(p.spans[0].grid_w, 0u);
        run_result got = run_task(*make_engine(m, c), task_generate{greedy_media(p, 10)});
        ASSERT_TRUE(got.done.ok()) << got.done.status().to_string();
        EXPECT_EQ(got.tokens, libmtmd_greedy(clip, 10, c, *m, audio_projector()));
        expect_answers_otherwise(m, c, greedy_media(encode_ok(*e, picture_prompt(*e), {test_wav(1000, 4)}), 10), got);

        engine_result pre = run_task(*make_engine(m, c), task_prefill{greedy_media(p, 10)});
        ASSERT_TRUE(pre.done.ok()) << pre.done.status().to_string();
        EXPECT_EQ(media_tokens_count(validated(pre.done->blob)->view().tokens), size_t(p.spans[0].n));
        run_result dec = run_task(*make_engine(m, c), task_decode{validated(pre.done->blob), greedy(p.tokens, 10)});
        ASSERT_TRUE(dec.done.ok()) << dec.done.status().to_string();
        EXPECT_EQ(dec.tokens, got.tokens);
        EXPECT_TRUE(dec.logits == got.logits);
    }
}

}  // namespace
}  // namespace baton
