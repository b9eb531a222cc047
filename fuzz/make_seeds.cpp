// make_seeds.cpp — write valid state blobs of every test architecture into a corpus directory.
//
// usage: make_seeds OUT_DIR MODEL_DIR
// For each architecture a small model (n_embd 64, 4 layers) is made in MODEL_DIR (unless present), a short
// prompt is decoded in two halves with a partial checkpoint after each half for recurrent/hybrid memory,
// and the sequence state, checkpoints, last logits and a request are written as OUT_DIR/<arch>.blob. The
// blobs are a few KB to ~100 KB: large enough to reach every section, small enough to mutate quickly.
#include <llama.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>

#include "baton/blob.h"
#include "baton/blob_pack.h"
#include "baton/context.h"
#include "baton/model.h"
#include "baton/testmodel/mkmodel.h"
#include "baton/text.h"

namespace {

using namespace baton;

bool decode(llama_context * ctx, const std::vector<int32_t> & tokens, int32_t pos) {
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
    return rc == 0;
}

int make_seed(const std::string & arch, const std::string & out_dir, const std::string & model_dir) {
    const std::string model_path = model_dir + "/" + arch + "-e64-l4.gguf";
    mkmodel_params p;
    p.arch = arch;
    if (Status s = mkmodel_ensure(p, model_path); !s.ok()) return std::fprintf(stderr, "make_seeds: %s\n", s.to_string().c_str()), 1;
    auto m = loaded_model::load(model_path);
    if (!m.ok()) return std::fprintf(stderr, "make_seeds: %s\n", m.status().to_string().c_str()), 1;
    const loaded_model & model = *m.value();
    context_config cfg;
    cfg.n_ctx = 64;
    cfg.n_batch = 64;
    cfg.n_ubatch = 64;
    auto c = context_make(model, cfg);
    if (!c.ok()) return std::fprintf(stderr, "make_seeds: %s\n", c.status().to_string().c_str()), 1;
    llama_context * ctx = c.value().get();
    auto toks = text_tokenize(model.vocab(), "Seed the fuzzer with a state.", true, false);
    if (!toks.ok() || toks->size() < 2) return std::fprintf(stderr, "make_seeds: tokenize failed\n"), 1;
    const std::vector<int32_t> & prompt = toks.value();
    const size_t half = prompt.size() / 2;

    std::vector<std::vector<uint8_t>> partial;
    std::vector<blob_checkpoint_view> checkpoints;
    auto checkpoint = [&](uint32_t n_tokens) {
        if (!model.has_partial_state()) return;
        std::vector<uint8_t> d(llama_state_seq_get_size_ext(ctx, 0, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY));
        llama_state_seq_get_data_ext(ctx, d.data(), d.size(), 0, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
        partial.push_back(std::move(d));
        llama_memory_t mem = llama_get_memory(ctx);
        checkpoints.push_back({llama_memory_seq_pos_min(mem, 0), llama_memory_seq_pos_max(mem, 0), n_tokens, {}});
    };
    if (!decode(ctx, {prompt.begin(), prompt.begin() + long(half)}, 0)) return 1;
    checkpoint(uint32_t(half));
    if (!decode(ctx, {prompt.begin() + long(half), prompt.end()}, int32_t(half))) return 1;
    checkpoint(uint32_t(prompt.size()));
    for (size_t i = 0; i < checkpoints.size(); ++i) checkpoints[i].data = partial[i];

    const int32_t n_vocab = llama_vocab_n_tokens(model.vocab());
    const float * l = llama_get_logits_ith(ctx, -1);
    std::vector<float> logits(l, l + n_vocab);
    std::vector<uint8_t> state(llama_state_seq_get_size(ctx, 0));
    llama_state_seq_get_data(ctx, state.data(), state.size(), 0);

    const model_identity & mi = model.identity();
    blob_parts parts;
    parts.identity = mi;
    parts.context = cfg;  // the kv_layout part of the context config
    parts.tokens = prompt;
    parts.state = state;
    parts.checkpoints = checkpoints;
    parts.logits = logits;
    parts.request = R"({"prompt":"Seed the fuzzer with a state.","n_predict":8,"temperature":0})";
    blob_buffer_sink sink;
    Status s = blob_write(parts, sink);
    if (!s.ok()) return std::fprintf(stderr, "make_seeds: %s\n", s.to_string().c_str()), 1;
    const std::string out = out_dir + "/" + arch + ".blob";
    std::ofstream(out, std::ios::binary)
        .write(reinterpret_cast<const char *>(sink.bytes().data()), std::streamsize(sink.bytes().size()));
    std::printf("make_seeds: %s (%zu bytes, %zu tokens, %zu checkpoints)\n", out.c_str(), sink.bytes().size(),
                prompt.size(), checkpoints.size());
    // A delta (format 1.2: the base section) over the first half, with the checkpoints past it.
    blob_parts delta = parts;
    delta.base_tokens = uint32_t(half);
    std::erase_if(delta.checkpoints, [&](const blob_checkpoint_view & c) { return c.n_tokens <= half; });
    blob_buffer_sink delta_sink;
    if (Status d = blob_write(delta, delta_sink); !d.ok())
        return std::fprintf(stderr, "make_seeds: %s\n", d.to_string().c_str()), 1;
    std::ofstream(out_dir + "/" + arch + "-delta.blob", std::ios::binary)
        .write(reinterpret_cast<const char *>(delta_sink.bytes().data()), std::streamsize(delta_sink.bytes().size()));
    // Format 1.3: the same state with an image's media tokens in its token list.
    std::vector<int32_t> media_tokens(parts.tokens.begin(), parts.tokens.end());
    for (size_t i = 1; i < media_tokens.size() && i < 5; ++i) media_tokens[i] = media_token_min + int32_t(i);
    blob_parts media = parts;
    media.tokens = media_tokens;
    blob_buffer_sink media_sink;
    if (Status m = blob_write(media, media_sink); !m.ok())
        return std::fprintf(stderr, "make_seeds: %s\n", m.to_string().c_str()), 1;
    std::ofstream(out_dir + "/" + arch + "-media.blob", std::ios::binary)
        .write(reinterpret_cast<const char *>(media_sink.bytes().data()), std::streamsize(media_sink.bytes().size()));
    // Format 1.4: the same state as a generation in progress (the generation section): its second half
    // generated, one prompt token reused from memory.
    blob_parts generation = parts;
    generation.generation = blob_generation{uint32_t(prompt.size() - half), 1};
    blob_buffer_sink generation_sink;
    if (Status g = blob_write(generation, generation_sink); !g.ok())
        return std::fprintf(stderr, "make_seeds: %s\n", g.to_string().c_str()), 1;
    std::ofstream(out_dir + "/" + arch + "-generation.blob", std::ios::binary)
        .write(reinterpret_cast<const char *>(generation_sink.bytes().data()),
               std::streamsize(generation_sink.bytes().size()));
    // The blob packed for the wire (blob_pack.h), byte planes and not: blob_fuzz unpacks every input.
    for (uint8_t width : {uint8_t(0), uint8_t(2)}) {
        auto packed = blob_pack(sink.bytes(), 3, width);
        if (!packed.ok()) return std::fprintf(stderr, "make_seeds: %s\n", packed.status().to_string().c_str()), 1;
        std::ofstream(out_dir + "/" + arch + "-w" + std::to_string(width) + ".packed", std::ios::binary)
            .write(reinterpret_cast<const char *>(packed->data()), std::streamsize(packed->size()));
    }
    // A minimal variant without the optional parts reaches the absent-section paths directly.
    parts.checkpoints.clear();
    parts.logits = {};
    parts.request = {};
    blob_buffer_sink minimal;
    if (!blob_write(parts, minimal).ok()) return 1;
    std::ofstream(out_dir + "/" + arch + "-minimal.blob", std::ios::binary)
        .write(reinterpret_cast<const char *>(minimal.bytes().data()), std::streamsize(minimal.bytes().size()));
    return 0;
}

}  // namespace

int main(int argc, char ** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: make_seeds OUT_DIR MODEL_DIR\n");
        return 2;
    }
    llama_quiet_logs();
    llama_backend_once();
    ::mkdir(argv[1], 0755);
    ::mkdir(argv[2], 0755);
    int rc = 0;
    for (const char * arch : {"llama", "mamba2", "granitehybrid", "lfm2"}) rc |= make_seed(arch, argv[1], argv[2]);
    return rc;
}
