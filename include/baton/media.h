// media.h — images in prompts (llama-server's --mmproj), through libmtmd's public C API.
//
// A media_encoder owns one libmtmd context: the projector (vision encoder) opened next to the text model. encode()
// takes a rendered prompt whose markers (marker()) each stand for the next image, in order, and returns a
// media_prompt: the prompt's tokens, where every embedding of an image is one *media token*, and per image a
// media_span with its embeddings (computed here, by the projector). The scheduler decodes a span's embeddings
// into the slot as it decodes text tokens (engine.md, "Images"); from then on the slot holds the media tokens like
// any other, so prefix reuse, blobs, deltas and tiers see them as tokens.
//
// Media tokens: a media token is a negative id in [media_token_min, media_token_min + media_token_count). It is
// derived from the projector's fingerprint, the image's decoded pixels and the embedding's index in the image, so
// two prompts that differ only in an image differ in their tokens (and never share cells), the same image under
// the same projector is the same tokens wherever it is encoded, and a token names where in its image it stands.
// A blob holding media tokens is format 1.3 (state-blob.md). Cells of media tokens can be moved, kept and restored,
// but not computed again from the tokens: a slot that would have to recompute them fails its task instead.
//
// What is served: projectors whose images take one sequence position per embedding, decoded with causal attention
// (LLaVA-style: mkmodel's `mlp`, ...) or with non-causal attention among the image's own embeddings (Gemma 3:
// mkmodel's `gemma3`; such an image is decoded whole, in one micro-batch, and never partly reused); images with
// M-RoPE grid positions (Qwen2-VL and kin, on an M-RoPE text model without partial state: mkmodel's
// `qwen2vl_merger`; never partly reused); and audio projectors whose clips take one position per embedding
// (Qwen2-Audio: mkmodel's `qwen2a`; on an M-RoPE text model, as Qwen2.5-Omni's, each embedding's four position
// components are its position).
// Thread-safety: encode() may be called from any thread; calls are serialized (one libmtmd context).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "baton/base/status.h"
#include "baton/base/thread_annotations.h"
#include "baton/blob.h"
#include "baton/text.h"

struct mtmd_context;

namespace baton {

class loaded_model;

// (media_token_min, media_token_count and media_token_is: blob.h, whose format 1.3 carries them.)
// media_token_make: the token of embedding `index` of the image whose content hash is `content`.
token_id media_token_make(uint64_t content, uint32_t index);
// media_tokens_count: how many tokens of toks are media tokens.
size_t media_tokens_count(const std::vector<token_id> & toks);

// media_span: one image (or 30-s chunk of an audio clip) of a prompt: its embeddings stand at prompt positions
// [begin, begin + n).
struct media_span {
    uint32_t begin = 0;
    uint32_t n = 0;
    uint32_t n_embd = 0;                                  // floats per embedding (the text model's input width)
    std::shared_ptr<const std::vector<float>> embd;       // n * n_embd floats
    bool non_causal = false;  // its embeddings attend to each other (Gemma 3): decoded whole, in one micro-batch
    // M-RoPE (Qwen2-VL and kin): the embeddings lie on a grid_w x grid_h grid (embedding i at column i % grid_w,
    // row i / grid_w) and take grid positions (position_map.h): every cell at the image's position p with the 2-D
    // position (p + column, p + row); the image advances the sequence by max(grid_w, grid_h). 0: one position
    // per embedding.
    uint32_t grid_w = 0, grid_h = 0;
    bool whole() const { return non_causal || grid_w > 0; }  // never partly kept (media_keep_limit)
    bool operator==(const media_span &) const = default;     // (the same embeddings object)
};

struct media_prompt {
    std::vector<token_id> tokens;   // text tokens and, for each span, its n media tokens
    std::vector<media_span> spans;  // in prompt order, not overlapping
};

// media_spans_check: spans are in order, inside tokens, each n >= 1 with n * n_embd floats, and the tokens they
// cover are media tokens, as every other token of tokens is not (invalid_argument naming the first that is not);
// a non-causal span fits one micro-batch of n_ubatch tokens (invalid_argument naming --ubatch-size otherwise); a
// span has a grid only when grid_positions (the model takes M-RoPE positions), holding its n embeddings.
Status media_spans_check(const std::vector<token_id> & tokens, const std::vector<media_span> & spans, uint32_t n_embd,
                         uint32_t n_ubatch, bool grid_positions = false);

// media_looks_like_audio: the file's first bytes are those of an audio file libmtmd reads (RIFF/WAVE, FLAC, MP3
// with an ID3 tag or a frame header). A sniff for routing and for naming a refusal; libmtmd decides.
bool media_looks_like_audio(std::string_view file);

// media_keep_limit: how many leading tokens of a prompt with these spans a slot may keep from what it already holds,
// at most limit: a non-causal image's cells are computed together, and an M-RoPE image's cells share one position
// (removing its tail would remove it all), so a kept prefix never ends inside either (it ends at the image's start
// instead, and the whole image is decoded again).
size_t media_keep_limit(const std::vector<media_span> & spans, size_t limit);

struct media_config {
    std::string path;     // --mmproj
    std::string marker;   // the text that stands for an image in encode()'s text (required; the node passes
                          // openai_media_marker(), a random per-process string no client can forge)
    bool offload = true;  // --no-mmproj-offload: false (the projector stays on the CPU)
    int32_t n_threads = 2;
    // The projector's flash attention (libmtmd's flash_attn_type): the node passes its -fa as llama-server does,
    // -1 auto (libmtmd decides), 0 off, 1 on.
    int32_t flash_attn = -1;
    uint32_t max_images = 16;             // per request (--mmproj-max-images)
    uint64_t max_image_bytes = 8u << 20;  // one image's file bytes (--mmproj-max-image-mb)
};

// media_count_check: n images in one request against cfg.max_images (invalid_argument naming the flag): encode's
// first rule, also checked before a node fetches a request's image URLs (so a request over it fetches nothing).
Status media_count_check(size_t n, const media_config & cfg);

class media_encoder {
  public:
    ~media_encoder();
    media_encoder(const media_encoder &) = delete;
    media_encoder & operator=(const media_encoder &) = delete;

    // create opens the projector for text. io_error if the file cannot be read; invalid_argument if the marker is
    // empty or libmtmd
    // refuses it (another text model's width, not a projector) or it is of a kind this server does not serve.
    static Result<std::unique_ptr<media_encoder>> create(const loaded_model & text, const media_config & cfg);

    const std::string & marker() const { return marker_; }  // stands for one image in a rendered prompt
    const media_config & config() const { return cfg_; }
    bool vision() const { return vision_; }  // it reads images
    bool audio() const { return audio_; }    // it reads audio (Qwen2-Audio, Ultravox, Voxtral, ...: libmtmd's)
    const std::string & fingerprint() const { return fingerprint_; }  // hex of the projector file's hash

    // encode tokenizes text (add_special/parse_special as text_tokenize) and encodes images and audio clips, one
    // per marker in order (the files' bytes: PNG, JPEG, BMP, GIF, ... as libmtmd's image loader reads them; WAV,
    // MP3, FLAC as its audio loader does). invalid_argument: the counts differ, too many or too large files, a file
    // that does not decode, an image for a projector that reads only audio or audio for one that reads only
    // images; context_exceeded when the prompt takes n_ctx or more positions (n_ctx 0: no check); engine_error
    // when the projector fails. An audio clip becomes a span like an image's (libmtmd cuts it in 30-s chunks:
    // one span each).
    Result<media_prompt> encode(std::string_view text, const std::vector<std::string> & images, bool add_special,
                                bool parse_special, uint32_t n_ctx = 0) const;

  private:
    media_encoder() = default;
    media_config cfg_;
    std::string marker_, fingerprint_;
    uint64_t fingerprint_hash_ = 0;
    bool vision_ = false, audio_ = false;
    bool grid_ = false;  // its images take M-RoPE grid positions (media_span::grid_w)
    uint32_t n_embd_ = 0;
    mutable mutex mu_;
    mtmd_context * ctx_ BATON_PT_GUARDED_BY(mu_) = nullptr;
};

}  // namespace baton
