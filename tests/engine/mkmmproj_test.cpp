// mkmmproj_test.cpp — the random-weight projector (testmodel/mkmmproj.h) is one libmtmd loads with a mkmodel
// text model and computes with: an image becomes (image_size / patch_size)^2 finite embeddings of the text
// model's width, the same image the same embeddings, another image others; a projector of another width is
// refused by libmtmd's own check; files are deterministic; bad parameters are errors naming the field.
#include <gtest/gtest.h>
#include <mtmd-helper.h>
#include <mtmd.h>

#include <cmath>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <set>
#include <vector>

#include "baton/generate.h"
#include "baton/model.h"
#include "baton/testmodel/mkmmproj.h"
#include "baton/testmodel/mkmodel.h"
#include "support/test_audio.h"
#include "support/test_support.h"

namespace baton {
namespace {

std::string projector_file_bytes(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

struct mtmd_free_of {
    void operator()(mtmd_context * c) const { mtmd_free(c); }
    void operator()(mtmd_bitmap * b) const { mtmd_bitmap_free(b); }
    void operator()(mtmd_input_chunks * c) const { mtmd_input_chunks_free(c); }
};
using mtmd_ptr = std::unique_ptr<mtmd_context, mtmd_free_of>;

mtmd_ptr open_projector(const std::string & mmproj, const loaded_model & text) {
    mtmd_log_set([](ggml_log_level, const char *, void *) {}, nullptr);  // (libmtmd logs every chunk it makes)
    mtmd_context_params mp = mtmd_context_params_default();
    mp.use_gpu = false;
    mp.n_threads = 2;
    mp.print_timings = false;
    mp.warmup = false;
    return mtmd_ptr(mtmd_init_from_file(mmproj.c_str(), text.get(), mp));
}

// rgb: a w x h image whose pixels follow from seed (deterministic, not constant).
std::vector<unsigned char> rgb(uint32_t w, uint32_t h, uint32_t seed) {
    std::vector<unsigned char> px(size_t(w) * h * 3);
    uint32_t x = seed * 2654435761u + 17;
    for (auto & c : px) {
        x = x * 1664525u + 1013904223u;
        c = static_cast<unsigned char>(x >> 24);
    }
    return px;
}

// A text model of mkmodel's `arch` (64 wide, 2 layers) and projector pp, written to the scratch directory as
// mmproj-text-<tag>.gguf and mmproj-<tag>.gguf, the text model loaded and the pair opened by libmtmd.
struct model_pair {
    std::unique_ptr<loaded_model> text;
    std::string proj_path;
    mtmd_ptr ctx;  // null: libmtmd refused the projector
};
model_pair open_pair(const std::string & arch, const mkmmproj_params & pp, const std::string & tag) {
    model_pair out;
    mkmodel_params tp;
    tp.arch = arch;
    tp.n_embd = 64;
    tp.n_layer = 2;
    const std::string text_path = test::scratch_dir() + "/mmproj-text-" + tag + ".gguf";
    if (Status st = mkmodel_write(tp, text_path); !st.ok()) throw std::runtime_error(st.to_string());
    auto text = loaded_model::load(text_path);
    if (!text.ok()) throw std::runtime_error(text.status().to_string());
    out.text = std::move(text.value());
    out.proj_path = test::scratch_dir() + "/mmproj-" + tag + ".gguf";
    if (Status st = mkmmproj_write(pp, out.proj_path); !st.ok()) throw std::runtime_error(st.to_string());
    out.ctx = open_projector(out.proj_path, *out.text);
    return out;
}

// What one image became: its embeddings, the chunks of the prompt, the image chunk's tokens and positions, and
// each embedding's decoder position (M-RoPE) at pos_0 = 0 and 10.
struct encoded {
    std::vector<float> embd;
    size_t n_chunks = 0, n_tokens = 0;
    llama_pos n_pos = 0;
    std::vector<mtmd_decoder_pos> pos0, pos10;
};

// encode_one tokenizes "<text> <marker> <text>" with one w x h image and encodes its image chunk.
encoded encode_one(mtmd_context * ctx, const std::vector<unsigned char> & px, uint32_t w, uint32_t h, int width) {
    encoded out;
    std::unique_ptr<mtmd_bitmap, mtmd_free_of> bmp(mtmd_bitmap_init(w, h, px.data()));
    std::unique_ptr<mtmd_input_chunks, mtmd_free_of> chunks(mtmd_input_chunks_init());
    const std::string prompt = std::string("Here is a picture: ") + mtmd_default_marker() + " What is in it?";
    mtmd_input_text text{prompt.c_str(), prompt.size(), true, true};
    const mtmd_bitmap * bitmaps[] = {bmp.get()};
    EXPECT_EQ(mtmd_tokenize(ctx, chunks.get(), &text, bitmaps, 1), 0);
    out.n_chunks = mtmd_input_chunks_size(chunks.get());
    for (size_t i = 0; i < out.n_chunks; ++i) {
        const mtmd_input_chunk * c = mtmd_input_chunks_get(chunks.get(), i);
        if (mtmd_input_chunk_get_type(c) != MTMD_INPUT_CHUNK_TYPE_IMAGE) continue;
        out.n_tokens = mtmd_input_chunk_get_n_tokens(c);
        out.n_pos = mtmd_input_chunk_get_n_pos(c);
        const mtmd_image_tokens * it = mtmd_input_chunk_get_tokens_image(c);
        for (size_t k = 0; k < out.n_tokens; ++k) {
            out.pos0.push_back(mtmd_image_tokens_get_decoder_pos(it, 0, k));
            out.pos10.push_back(mtmd_image_tokens_get_decoder_pos(it, 10, k));
        }
        EXPECT_EQ(mtmd_encode_chunk(ctx, c), 0);
        const float * e = mtmd_get_output_embd(ctx);
        out.embd.assign(e, e + out.n_tokens * size_t(width));
        return out;
    }
    ADD_FAILURE() << "no image chunk";
    return out;
}

void expect_varied_and_finite(const std::vector<float> & v) {
    ASSERT_FALSE(v.empty());
    float lo = v[0], hi = v[0];
    for (float x : v) {
        ASSERT_TRUE(std::isfinite(x));
        lo = std::min(lo, x), hi = std::max(hi, x);
    }
    EXPECT_LT(lo, hi);
}

TEST(MkMmproj, LibmtmdLoadsItAndAnImageBecomesEmbeddingsOfTheTextWidth) {
    mkmmproj_params pp;
    pp.text_n_embd = 64;
    const model_pair m = open_pair("llama", pp, "mlp");
    const mtmd_ptr & ctx = m.ctx;
    ASSERT_TRUE(ctx) << "libmtmd refused the projector";
    EXPECT_TRUE(mtmd_support_vision(ctx.get()));
    EXPECT_FALSE(mtmd_support_audio(ctx.get()));
    EXPECT_FALSE(mtmd_decode_use_mrope(ctx.get()));

    const encoded a = encode_one(ctx.get(), rgb(40, 24, 1), 40, 24, 64);  // resized to 32 x 32
    EXPECT_EQ(a.n_chunks, 3u);                                            // text, image, text
    EXPECT_EQ(a.n_tokens, size_t(mkmmproj_image_tokens(pp)));
    EXPECT_EQ(a.n_pos, llama_pos(a.n_tokens));  // one position per embedding (no M-RoPE)
    ASSERT_EQ(a.embd.size(), a.n_tokens * 64);
    expect_varied_and_finite(a.embd);
    EXPECT_EQ(encode_one(ctx.get(), rgb(40, 24, 1), 40, 24, 64).embd, a.embd);  // deterministic
    EXPECT_NE(encode_one(ctx.get(), rgb(40, 24, 2), 40, 24, 64).embd, a.embd);  // the image matters

    // libmtmd's own width check: a projector for a 96-wide text model does not open with this one. (Not under
    // AddressSanitizer: libmtmd 0.7 leaks the context it was building when it refuses, ~170 MB that LeakSanitizer
    // reports at exit; the release suite runs this case.)
#if defined(__SANITIZE_ADDRESS__)
    constexpr bool k_asan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    constexpr bool k_asan = true;
#else
    constexpr bool k_asan = false;
#endif
#else
    constexpr bool k_asan = false;
#endif
    if (k_asan) return;
    mkmmproj_params wide = pp;
    wide.text_n_embd = 96;
    const std::string wide_path = test::scratch_dir() + "/mmproj-mlp-96.gguf";
    ASSERT_TRUE(mkmmproj_write(wide, wide_path).ok());
    EXPECT_FALSE(open_projector(wide_path, *m.text));
}

// Qwen2-VL's merger with mkmodel's qwen2vl text model: libllama runs the text model, libmtmd loads the pair and
// decodes with M-RoPE, and a 64 x 32 image (patches of 4, merged 2 x 2) becomes 8 x 4 = 32 embeddings on a
// grid of 8 x 4 decoder positions that take max(8, 4) = 8 positions of the sequence.
TEST(MkMmproj, Qwen2vlMergerTakesFewerPositionsThanEmbeddingsWithMrope) {
    mkmmproj_params pp;
    pp.projector = "qwen2vl_merger";
    pp.text_n_embd = 64;
    pp.n_embd = 32;
    pp.patch_size = 4;
    pp.image_size = 32;
    const model_pair m = open_pair("qwen2vl", pp, "qwen2vl");
    generate_params gp;
    gp.prompt = std::string("The state blob moves from the prefill node to the decode node.");
    gp.n_predict = 6;
    gp.sampling.temperature = 0;
    gp.record_logits = true;
    gp.ctx.n_ctx = 256;
    auto g = generate_run(*m.text, gp);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    ASSERT_GE(g->logits.size(), 2u);
    expect_varied_and_finite(g->logits[0]);

    const mtmd_ptr & ctx = m.ctx;
    ASSERT_TRUE(ctx) << "libmtmd refused the projector";
    EXPECT_TRUE(mtmd_support_vision(ctx.get()));
    EXPECT_TRUE(mtmd_decode_use_mrope(ctx.get()));

    const encoded a = encode_one(ctx.get(), rgb(64, 32, 3), 64, 32, 64);
    EXPECT_EQ(a.n_tokens, 32u);
    EXPECT_EQ(a.n_pos, 8);
    ASSERT_EQ(a.embd.size(), 32u * 64);
    expect_varied_and_finite(a.embd);
    EXPECT_NE(encode_one(ctx.get(), rgb(64, 32, 4), 64, 32, 64).embd, a.embd);
    // The decoder positions: one time step for the whole image, a distinct (x, y) cell per embedding on an 8 x 4
    // grid; pos_0 moves the time (absolute positions) or not at all (relative ones), the grid never.
    std::set<std::pair<uint32_t, uint32_t>> cells;
    uint32_t max_x = 0, max_y = 0;
    for (size_t k = 0; k < a.pos0.size(); ++k) {
        EXPECT_EQ(a.pos0[k].t, a.pos0[0].t);
        cells.insert({a.pos0[k].x, a.pos0[k].y});
        max_x = std::max(max_x, a.pos0[k].x), max_y = std::max(max_y, a.pos0[k].y);
        const uint32_t shift = a.pos10[k].t - a.pos0[k].t;
        EXPECT_TRUE(shift == 0 || shift == 10) << shift;
        EXPECT_EQ(a.pos10[k].x - a.pos0[k].x, shift);
        EXPECT_EQ(a.pos10[k].y - a.pos0[k].y, shift);
    }
    EXPECT_EQ(cells.size(), 32u);
    EXPECT_EQ(std::set<uint32_t>({max_x - a.pos0[0].x, max_y - a.pos0[0].y}), (std::set<uint32_t>{7, 3}));
}

// Gemma 3's SigLIP projector with mkmodel's gemma3 text model: libmtmd loads the pair, a 40 x 24 image (resized to
// 32 x 32, patches of 4, pooled 2 x 2) becomes 16 embeddings of one position each, and libmtmd says they are
// decoded with non-causal attention among them (the text model's own tokens stay causal).
TEST(MkMmproj, Gemma3ProjectorPoolsPatchesAndAsksForNonCausalImageAttention) {
    mkmmproj_params pp;
    pp.projector = "gemma3";
    pp.text_n_embd = 64;
    pp.patch_size = 4;
    const model_pair m = open_pair("gemma3", pp, "gemma3");
    const mtmd_ptr & ctx = m.ctx;
    ASSERT_TRUE(ctx) << "libmtmd refused the projector";
    EXPECT_TRUE(mtmd_support_vision(ctx.get()));
    EXPECT_FALSE(mtmd_decode_use_mrope(ctx.get()));
    EXPECT_TRUE(mtmd_decode_use_non_causal(ctx.get(), nullptr));

    const encoded a = encode_one(ctx.get(), rgb(40, 24, 5), 40, 24, 64);
    EXPECT_EQ(a.n_tokens, size_t(mkmmproj_image_tokens(pp)));
    EXPECT_EQ(a.n_tokens, 16u);
    EXPECT_EQ(a.n_pos, llama_pos(a.n_tokens));
    ASSERT_EQ(a.embd.size(), a.n_tokens * 64);
    expect_varied_and_finite(a.embd);
    EXPECT_EQ(encode_one(ctx.get(), rgb(40, 24, 5), 40, 24, 64).embd, a.embd);
    EXPECT_NE(encode_one(ctx.get(), rgb(40, 24, 6), 40, 24, 64).embd, a.embd);
}

// Qwen2-Audio's projector (a Whisper encoder and one linear layer) with mkmodel's llama text model: libmtmd loads it
// as an audio projector, decodes a WAV, makes its mel spectrogram and encodes it into embeddings of the text width,
// one position each; another sound, other embeddings.
TEST(MkMmproj, Qwen2aProjectorEncodesAudioIntoEmbeddingsOfTheTextWidth) {
    mkmmproj_params pp;
    pp.projector = "qwen2a";
    pp.text_n_embd = 64;
    const model_pair m = open_pair("llama", pp, "qwen2a");
    const mtmd_ptr & ctx = m.ctx;
    ASSERT_TRUE(ctx) << "libmtmd refused the projector";
    EXPECT_FALSE(mtmd_support_vision(ctx.get()));
    EXPECT_TRUE(mtmd_support_audio(ctx.get()));
    EXPECT_EQ(mtmd_get_audio_sample_rate(ctx.get()), 16000);

    auto encode_wav = [&](const std::string & wav, size_t & n_tokens, llama_pos & n_pos) {
        mtmd_helper_bitmap_wrapper w =
            mtmd_helper_bitmap_init_from_buf(ctx.get(), reinterpret_cast<const unsigned char *>(wav.data()), wav.size(),
                                             false, mtmd_helper_init_opt_default());
        EXPECT_EQ(w.video_ctx, nullptr);
        std::unique_ptr<mtmd_bitmap, mtmd_free_of> bmp(w.bitmap);
        EXPECT_TRUE(bmp && mtmd_bitmap_is_audio(bmp.get()));
        std::unique_ptr<mtmd_input_chunks, mtmd_free_of> chunks(mtmd_input_chunks_init());
        const std::string prompt = std::string("Listen: ") + mtmd_default_marker() + " What is it?";
        mtmd_input_text in{prompt.c_str(), prompt.size(), true, true};
        const mtmd_bitmap * bitmaps[] = {bmp.get()};
        EXPECT_EQ(mtmd_tokenize(ctx.get(), chunks.get(), &in, bitmaps, 1), 0);
        std::vector<float> out;
        for (size_t i = 0; i < mtmd_input_chunks_size(chunks.get()); ++i) {
            const mtmd_input_chunk * c = mtmd_input_chunks_get(chunks.get(), i);
            if (mtmd_input_chunk_get_type(c) != MTMD_INPUT_CHUNK_TYPE_AUDIO) continue;
            n_tokens = mtmd_input_chunk_get_n_tokens(c);
            n_pos = mtmd_input_chunk_get_n_pos(c);
            EXPECT_FALSE(mtmd_decode_use_non_causal(ctx.get(), c));
            EXPECT_EQ(mtmd_encode_chunk(ctx.get(), c), 0);
            const float * e = mtmd_get_output_embd(ctx.get());
            out.insert(out.end(), e, e + n_tokens * 64);
        }
        return out;
    };
    size_t n = 0;
    llama_pos n_pos = 0;
    const std::vector<float> a = encode_wav(test::test_wav(1000, 1), n, n_pos);
    EXPECT_GT(n, 0u);
    EXPECT_EQ(n_pos, llama_pos(n));
    ASSERT_EQ(a.size(), n * 64);
    expect_varied_and_finite(a);
    std::cerr << "[ info ] 1 s of audio: " << n << " embeddings\n";
    EXPECT_EQ(encode_wav(test::test_wav(1000, 1), n, n_pos), a);
    EXPECT_NE(encode_wav(test::test_wav(1000, 2), n, n_pos), a);
}

TEST(MkMmproj, FilesAreDeterministicAndBadParamsNameTheField) {
    mkmmproj_params p;
    const std::string a = test::scratch_dir() + "/mmproj-det-a.gguf", b = test::scratch_dir() + "/mmproj-det-b.gguf";
    ASSERT_TRUE(mkmmproj_write(p, a).ok());
    ASSERT_TRUE(mkmmproj_write(p, b).ok());
    EXPECT_EQ(projector_file_bytes(a), projector_file_bytes(b));
    p.seed = 2;
    ASSERT_TRUE(mkmmproj_write(p, b).ok());
    EXPECT_NE(projector_file_bytes(a), projector_file_bytes(b));
    auto refused = [](auto mutate, const std::string & field) {
        mkmmproj_params q;
        mutate(q);
        const Status st = mkmmproj_check_params(q);
        EXPECT_EQ(st.code(), status_code::invalid_argument) << field;
        EXPECT_NE(st.message().find(field), std::string::npos) << st.message();
    };
    refused([](mkmmproj_params & q) { q.projector = "idefics3"; }, "projector");
    refused([](mkmmproj_params & q) { q.text_n_embd = 48; }, "text-n-embd");
    refused([](mkmmproj_params & q) { q.n_embd = 16; }, "n-embd");
    refused([](mkmmproj_params & q) { q.n_layer = 1; }, "n-layer");
    refused([](mkmmproj_params & q) { q.patch_size = 1; }, "patch-size");
    refused([](mkmmproj_params & q) { q.image_size = 36; }, "image-size");
    refused(
        [](mkmmproj_params & q) {
            q.projector = "qwen2vl_merger";
            q.image_size = 40;  // a multiple of the patch, not of two
        },
        "image-size");
    EXPECT_EQ(mkmmproj_write(p, "/nonexistent-dir/x.gguf").code(), status_code::io_error);
}

}  // namespace
}  // namespace baton
