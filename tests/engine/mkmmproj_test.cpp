// mkmmproj_test.cpp — the random-weight projector (testmodel/mkmmproj.h) is one libmtmd loads with a mkmodel
// text model and computes with: an image becomes (image_size / patch_size)^2 finite embeddings of the text
// model's width, the same image the same embeddings, another image others; a projector of another width is
// refused by libmtmd's own check; files are deterministic; bad parameters are errors naming the field.
#include <gtest/gtest.h>
#include <mtmd.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <memory>
#include <vector>

#include "baton/model.h"
#include "baton/testmodel/mkmmproj.h"
#include "baton/testmodel/mkmodel.h"
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

// encode_one tokenizes "<text> <marker> ..." with one image and encodes its image chunk: the embeddings.
std::vector<float> encode_one(mtmd_context * ctx, const std::vector<unsigned char> & px, uint32_t w, uint32_t h,
                              size_t & n_tokens, size_t & n_chunks) {
    std::unique_ptr<mtmd_bitmap, mtmd_free_of> bmp(mtmd_bitmap_init(w, h, px.data()));
    std::unique_ptr<mtmd_input_chunks, mtmd_free_of> chunks(mtmd_input_chunks_init());
    const std::string prompt = std::string("Here is a picture: ") + mtmd_default_marker() + " What is in it?";
    mtmd_input_text text{prompt.c_str(), prompt.size(), true, true};
    const mtmd_bitmap * bitmaps[] = {bmp.get()};
    EXPECT_EQ(mtmd_tokenize(ctx, chunks.get(), &text, bitmaps, 1), 0);
    n_chunks = mtmd_input_chunks_size(chunks.get());
    for (size_t i = 0; i < n_chunks; ++i) {
        const mtmd_input_chunk * c = mtmd_input_chunks_get(chunks.get(), i);
        if (mtmd_input_chunk_get_type(c) != MTMD_INPUT_CHUNK_TYPE_IMAGE) continue;
        n_tokens = mtmd_input_chunk_get_n_tokens(c);
        EXPECT_EQ(mtmd_encode_chunk(ctx, c), 0);
        const float * e = mtmd_get_output_embd(ctx);
        return std::vector<float>(e, e + n_tokens * 64);
    }
    ADD_FAILURE() << "no image chunk";
    return {};
}

TEST(MkMmproj, LibmtmdLoadsItAndAnImageBecomesEmbeddingsOfTheTextWidth) {
    mkmodel_params tp;
    tp.n_embd = 64;
    tp.n_layer = 2;
    const std::string text_path = test::scratch_dir() + "/mmproj-text-llama.gguf";
    ASSERT_TRUE(mkmodel_write(tp, text_path).ok());
    mkmmproj_params pp;
    pp.text_n_embd = 64;
    const std::string proj_path = test::scratch_dir() + "/mmproj-mlp.gguf";
    ASSERT_TRUE(mkmmproj_write(pp, proj_path).ok());
    auto text = loaded_model::load(text_path);
    ASSERT_TRUE(text.ok()) << text.status().to_string();

    mtmd_ptr ctx = open_projector(proj_path, *text.value());
    ASSERT_TRUE(ctx) << "libmtmd refused the projector";
    EXPECT_TRUE(mtmd_support_vision(ctx.get()));
    EXPECT_FALSE(mtmd_support_audio(ctx.get()));
    EXPECT_FALSE(mtmd_decode_use_mrope(ctx.get()));

    size_t n_tokens = 0, n_chunks = 0;
    const auto a = encode_one(ctx.get(), rgb(40, 24, 1), 40, 24, n_tokens, n_chunks);  // resized to 32 x 32
    EXPECT_EQ(n_chunks, 3u);                                                           // text, image, text
    EXPECT_EQ(n_tokens, size_t(mkmmproj_image_tokens(pp)));
    ASSERT_EQ(a.size(), n_tokens * 64);
    float lo = a[0], hi = a[0];
    for (float v : a) {
        ASSERT_TRUE(std::isfinite(v));
        lo = std::min(lo, v), hi = std::max(hi, v);
    }
    EXPECT_LT(lo, hi);
    EXPECT_EQ(encode_one(ctx.get(), rgb(40, 24, 1), 40, 24, n_tokens, n_chunks), a);  // deterministic
    EXPECT_NE(encode_one(ctx.get(), rgb(40, 24, 2), 40, 24, n_tokens, n_chunks), a);  // the image matters

    // libmtmd's own width check: a projector for a 96-wide text model does not open with this one.
    mkmmproj_params wide = pp;
    wide.text_n_embd = 96;
    const std::string wide_path = test::scratch_dir() + "/mmproj-mlp-96.gguf";
    ASSERT_TRUE(mkmmproj_write(wide, wide_path).ok());
    EXPECT_FALSE(open_projector(wide_path, *text.value()));
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
    refused([](mkmmproj_params & q) { q.projector = "qwen2vl_merger"; }, "projector");
    refused([](mkmmproj_params & q) { q.text_n_embd = 48; }, "text-n-embd");
    refused([](mkmmproj_params & q) { q.n_embd = 16; }, "n-embd");
    refused([](mkmmproj_params & q) { q.n_layer = 1; }, "n-layer");
    refused([](mkmmproj_params & q) { q.patch_size = 1; }, "patch-size");
    refused([](mkmmproj_params & q) { q.image_size = 36; }, "image-size");
    EXPECT_EQ(mkmmproj_write(p, "/nonexistent-dir/x.gguf").code(), status_code::io_error);
}

}  // namespace
}  // namespace baton
