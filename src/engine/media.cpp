// media.cpp — the projector (libmtmd) and the media tokens of a prompt: see media.h.
#include "baton/media.h"

#include <llama.h>
#include <mtmd-helper.h>
#include <mtmd.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "baton/base/log.h"
#include "baton/model.h"

namespace baton {

token_id media_token_make(uint64_t content, uint32_t index) {
    const uint64_t h = XXH3_64bits_withSeed(&index, sizeof index, content);
    return media_token_min + int32_t(uint32_t(h) & (media_token_count - 1));
}

size_t media_tokens_count(const std::vector<token_id> & toks) {
    size_t n = 0;
    for (token_id t : toks) n += media_token_is(t) ? 1 : 0;
    return n;
}

Status media_spans_check(const std::vector<token_id> & tokens, const std::vector<media_span> & spans, uint32_t n_embd,
                         uint32_t n_ubatch, bool grid_positions) {
    auto bad = [](std::string m) { return Status(status_code::invalid_argument, "prompt: " + std::move(m)); };
    size_t at = 0;  // tokens before it are checked
    auto text_until = [&](size_t end) -> Status {
        for (; at < end; ++at)
            if (media_token_is(tokens[at]))
                return bad("token " + std::to_string(tokens[at]) + " at index " + std::to_string(at) +
                           " is an image's, but no image stands there");
        return {};
    };
    for (size_t i = 0; i < spans.size(); ++i) {
        const media_span & s = spans[i];
        const std::string which = "image " + std::to_string(i);
        if (s.n == 0 || s.begin < at || uint64_t(s.begin) + s.n > tokens.size())
            return bad(which + " stands outside the prompt or over another");
        if (s.n_embd != n_embd || !s.embd || s.embd->size() != uint64_t(s.n) * n_embd)
            return bad(which + ": its embeddings are not " + std::to_string(s.n) + " x " + std::to_string(n_embd));
        if (s.non_causal && s.n > n_ubatch)
            return bad(which + ": its " + std::to_string(s.n) +
                       " embeddings attend to each other and are decoded in one micro-batch, larger than this "
                       "server's --ubatch-size " +
                       std::to_string(n_ubatch));
        if (s.grid_w > 0 && !grid_positions)
            return bad(which + ": has M-RoPE grid positions, and the model takes one per token");
        if (s.grid_w > 0 && uint64_t(s.grid_w) * s.grid_h != s.n)
            return bad(which + ": a grid of " + std::to_string(s.grid_w) + " x " + std::to_string(s.grid_h) +
                       " is not its " + std::to_string(s.n) + " embeddings");
        BATON_RETURN_IF_ERROR(text_until(s.begin));
        for (; at < s.begin + s.n; ++at)
            if (!media_token_is(tokens[at]))
                return bad(which + ": token at index " + std::to_string(at) + " is not an image's");
    }
    return text_until(tokens.size());
}

bool media_looks_like_audio(std::string_view f) {
    if (f.size() >= 12 && f.substr(0, 4) == "RIFF" && f.substr(8, 4) == "WAVE") return true;
    if (f.size() >= 4 && (f.substr(0, 4) == "fLaC" || f.substr(0, 3) == "ID3")) return true;
    // An MPEG audio frame header: 11 sync bits, a version other than reserved (01), layer III (01 in bits 2..1).
    return f.size() >= 4 && uint8_t(f[0]) == 0xff && (uint8_t(f[1]) & 0xe0) == 0xe0 && (uint8_t(f[1]) & 0x18) != 0x08 &&
           (uint8_t(f[1]) & 0x06) == 0x02;
}

size_t media_keep_limit(const std::vector<media_span> & spans, size_t limit) {
    for (const media_span & s : spans)
        if (s.whole() && s.begin < limit && limit < size_t(s.begin) + s.n) return s.begin;
    return limit;
}

namespace {

void mtmd_log_drop(ggml_log_level level, const char * text, void *) {
    if (level != GGML_LOG_LEVEL_ERROR || !text) return;
    std::string_view t = text;
    while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.remove_suffix(1);
    if (!t.empty()) log_error("mtmd: {}", t);
}

struct bitmap_free {
    void operator()(mtmd_bitmap * b) const { mtmd_bitmap_free(b); }
};
struct chunks_free {
    void operator()(mtmd_input_chunks * c) const { mtmd_input_chunks_free(c); }
};
using bitmap_ptr = std::unique_ptr<mtmd_bitmap, bitmap_free>;
using chunks_ptr = std::unique_ptr<mtmd_input_chunks, chunks_free>;

size_t count_of(std::string_view text, std::string_view marker) {
    size_t n = 0;
    for (size_t at = text.find(marker); at != std::string_view::npos; at = text.find(marker, at + marker.size())) ++n;
    return n;
}

}  // namespace

Status media_count_check(size_t n, const media_config & cfg) {
    if (n <= cfg.max_images) return {};
    return Status(status_code::invalid_argument, "images: " + std::to_string(n) + " in one request, at most " +
                                                     std::to_string(cfg.max_images) + " (--mmproj-max-images)");
}

media_encoder::~media_encoder() {
    lock_guard lk(mu_);
    if (ctx_) mtmd_free(ctx_);
}

Result<std::unique_ptr<media_encoder>> media_encoder::create(const loaded_model & text, const media_config & cfg) {
    if (cfg.marker.empty()) return Status(status_code::invalid_argument, "media_config: marker is empty");
    auto fp = model_fingerprint_file(cfg.path);  // (io_error naming the file when it cannot be read)
    if (!fp.ok()) return fp.status();
    std::unique_ptr<media_encoder> e(new media_encoder());
    e->cfg_ = cfg;
    e->marker_ = cfg.marker;
    static const char * hexd = "0123456789abcdef";
    for (uint8_t b : fp.value()) e->fingerprint_ += hexd[b >> 4], e->fingerprint_ += hexd[b & 15];
    e->fingerprint_hash_ = XXH3_64bits(fp->data(), fp->size());
    e->n_embd_ = uint32_t(llama_model_n_embd_inp(text.get()));

    mtmd_log_set(mtmd_log_drop, nullptr);
    mtmd_helper_log_set(mtmd_log_drop, nullptr);
    mtmd_context_params mp = mtmd_context_params_default();
    mp.use_gpu = cfg.offload;
    mp.n_threads = cfg.n_threads;
    mp.flash_attn_type = cfg.flash_attn < 0    ? LLAMA_FLASH_ATTN_TYPE_AUTO
                         : cfg.flash_attn == 0 ? LLAMA_FLASH_ATTN_TYPE_DISABLED
                                               : LLAMA_FLASH_ATTN_TYPE_ENABLED;
    mp.print_timings = false;
    mp.warmup = false;
    mp.media_marker = e->marker_.c_str();
    mtmd_context * ctx = mtmd_init_from_file(cfg.path.c_str(), text.get(), mp);
    if (!ctx)
        return Status(status_code::invalid_argument,
                      "--mmproj '" + cfg.path +
                          "': libmtmd refused it (not a projector, or one for a text model of another width)");
    lock_guard lk(e->mu_);
    e->ctx_ = ctx;
    e->vision_ = mtmd_support_vision(ctx);
    e->audio_ = mtmd_support_audio(ctx);
    // (libmtmd gives the images M-RoPE positions when the text model takes them: llama_model_rope_type.)
    e->grid_ = mtmd_decode_use_mrope(ctx);
    const std::string why =
        !e->vision_ && !e->audio_ ? "it reads neither images nor audio"
        : e->grid_ && text.has_partial_state()
            ? "its images take M-RoPE positions, not served on a model with recurrent or sliding-window memory"
            : "";
    if (!why.empty())
        return Status(status_code::invalid_argument,
                      "--mmproj '" + cfg.path + "': this server does not serve this projector: " + why);
    return e;
}

namespace {

// image_grid: the w x h grid of an M-RoPE image chunk's n embeddings, as libmtmd places them for the decoder:
// embedding i at column i % w, row i / w, temporal offset 0, advancing the sequence by max(w, h) positions. A
// chunk placed any other way is refused rather than decoded at positions Baton's state checks would not know.
Status image_grid(const mtmd_input_chunk * c, size_t n, uint32_t & w, uint32_t & h) {
    const mtmd_image_tokens * img = mtmd_input_chunk_get_tokens_image(c);
    const Status odd(status_code::unsupported,
                     "images: this projector places an image's embeddings other than row by row on a grid, which "
                     "this server does not serve");
    if (!img || n == 0) return odd;
    std::vector<mtmd_decoder_pos> at(n);
    for (size_t i = 0; i < n; ++i) at[i] = mtmd_image_tokens_get_decoder_pos(img, 0, i);
    w = 0;
    for (const auto & d : at) w = std::max(w, d.x + 1);
    h = w > 0 ? uint32_t(n / w) : 0;
    if (w == 0 || size_t(w) * h != n || mtmd_input_chunk_get_n_pos(c) != llama_pos(std::max(w, h))) return odd;
    for (size_t i = 0; i < n; ++i)
        if (at[i].t != 0 || at[i].z != 0 || at[i].x != i % w || at[i].y != i / w) return odd;
    return {};
}

}  // namespace

Result<media_prompt> media_encoder::encode(std::string_view text, const std::vector<std::string> & images,
                                           bool add_special, bool parse_special, uint32_t n_ctx) const {
    auto bad = [](std::string m) { return Status(status_code::invalid_argument, std::move(m)); };
    BATON_RETURN_IF_ERROR(media_count_check(images.size(), cfg_));
    const size_t places = count_of(text, marker_);
    if (places != images.size())
        return bad("images: " + std::to_string(images.size()) + " given, but the prompt has places for " +
                   std::to_string(places));
    lock_guard lk(mu_);
    std::vector<bitmap_ptr> bitmaps;
    std::vector<uint64_t> content;
    for (size_t i = 0; i < images.size(); ++i) {
        const std::string & f = images[i];
        const std::string which = "image " + std::to_string(i);
        if (f.size() > cfg_.max_image_bytes)
            return bad(which + ": " + std::to_string(f.size()) + " bytes, at most " +
                       std::to_string(cfg_.max_image_bytes) + " (--mmproj-max-image-mb)");
        // libmtmd's helper reads images in process and, for bytes that are no image nor audio, launches ffprobe
        // to try them as a video: pointed at a directory that cannot hold one, no client's bytes start a program.
        mtmd_helper_init_opt opt = mtmd_helper_init_opt_default();
        opt.video_params.ffmpeg_bin_dir = "/dev/null";
        mtmd_helper_bitmap_wrapper w = mtmd_helper_bitmap_init_from_buf(
            ctx_, reinterpret_cast<const unsigned char *>(f.data()), f.size(), false, opt);
        if (w.video_ctx) mtmd_helper_video_free(w.video_ctx);
        bitmap_ptr bmp(w.bitmap);
        if ((!bmp || w.video_ctx) && !audio_ && media_looks_like_audio(f))
            return bad(which + ": is audio; audio input is not supported by this server (its projector reads images)");
        if (!bmp || w.video_ctx)
            return bad(which + ": not an image or audio clip this server can decode (PNG, JPEG, BMP, GIF; WAV, MP3, "
                               "FLAC)");
        const bool is_audio = mtmd_bitmap_is_audio(bmp.get());
        if (is_audio && !audio_)
            return bad(which + ": is audio; audio input is not supported by this server (its projector reads images)");
        if (!is_audio && !vision_)
            return bad(which + ": is an image; image input is not supported by this server (its projector reads "
                               "audio)");
        const uint32_t dims[3] = {mtmd_bitmap_get_nx(bmp.get()), mtmd_bitmap_get_ny(bmp.get()), is_audio ? 1u : 0u};
        XXH3_state_t * st = XXH3_createState();
        XXH3_64bits_reset_withSeed(st, fingerprint_hash_);
        XXH3_64bits_update(st, dims, sizeof dims);
        XXH3_64bits_update(st, mtmd_bitmap_get_data(bmp.get()), mtmd_bitmap_get_n_bytes(bmp.get()));
        content.push_back(XXH3_64bits_digest(st));
        XXH3_freeState(st);
        mtmd_bitmap_set_id(bmp.get(), std::to_string(i).c_str());  // (a long clip's chunks name their file)
        bitmaps.push_back(std::move(bmp));
    }
    std::vector<const mtmd_bitmap *> raw;
    for (const auto & b : bitmaps) raw.push_back(b.get());
    const std::string owned(text);
    mtmd_input_text in{owned.c_str(), owned.size(), add_special, parse_special};
    chunks_ptr chunks(mtmd_input_chunks_init());
    const int32_t rc = mtmd_tokenize(ctx_, chunks.get(), &in, raw.data(), raw.size());
    if (rc == 1) return bad("images: the prompt's places for images do not match the images given");
    if (rc != 0) return bad("images: libmtmd could not prepare them (" + std::to_string(rc) + ")");

    media_prompt out;
    size_t image = 0;                                // media chunks so far
    std::vector<uint32_t> taken(content.size(), 0);  // per file: embeddings so far (a clip may make several chunks)
    for (size_t i = 0; i < mtmd_input_chunks_size(chunks.get()); ++i) {
        const mtmd_input_chunk * c = mtmd_input_chunks_get(chunks.get(), i);
        const auto type = mtmd_input_chunk_get_type(c);
        if (type == MTMD_INPUT_CHUNK_TYPE_TEXT) {
            size_t n = 0;
            const llama_token * t = mtmd_input_chunk_get_tokens_text(c, &n);
            out.tokens.insert(out.tokens.end(), t, t + n);
        } else if (type == MTMD_INPUT_CHUNK_TYPE_IMAGE || type == MTMD_INPUT_CHUNK_TYPE_AUDIO) {
            const char * id = mtmd_input_chunk_get_id(c);
            size_t f = content.size();
            if (id) f = std::strtoul(id, nullptr, 10);
            if (f >= content.size()) return bad("images: libmtmd returned media that names no file given");
            const size_t n = mtmd_input_chunk_get_n_tokens(c);
            uint32_t grid_w = 0, grid_h = 0;
            // (On an M-RoPE model an image takes a grid; audio one position per embedding, as text.)
            if (grid_ && type == MTMD_INPUT_CHUNK_TYPE_IMAGE) {
                BATON_RETURN_IF_ERROR(image_grid(c, n, grid_w, grid_h));
            } else if (n == 0 || mtmd_input_chunk_get_n_pos(c) != llama_pos(n)) {
                return Status(status_code::unsupported, "images: this projector's media do not take one position "
                                                        "per embedding, which this server does not serve");
            }
            if (n_ctx > 0 && out.tokens.size() + n >= n_ctx)
                return context_exceeded_status(out.tokens.size() + n, n_ctx, true);
            if (mtmd_encode_chunk(ctx_, c) != 0)
                return Status(status_code::engine_error, (type == MTMD_INPUT_CHUNK_TYPE_AUDIO ? "audio " : "image ") +
                                                             std::to_string(f) + ": the projector failed");
            const float * e = mtmd_get_output_embd(ctx_);
            media_span s;
            s.begin = uint32_t(out.tokens.size());
            s.n = uint32_t(n);
            s.n_embd = n_embd_;
            s.embd = std::make_shared<const std::vector<float>>(e, e + n * n_embd_);
            s.non_causal = mtmd_decode_use_non_causal(ctx_, c);
            s.grid_w = grid_w;
            s.grid_h = grid_h;
            for (uint32_t k = 0; k < s.n; ++k) out.tokens.push_back(media_token_make(content[f], taken[f] + k));
            taken[f] += s.n;
            out.spans.push_back(std::move(s));
            ++image;
        } else {
            return bad("images: the prompt holds media this server does not read");
        }
    }
    if (image < content.size() || std::count(taken.begin(), taken.end(), 0u) > 0)
        return bad("images: the prompt's places for images do not match the images given");
    if (n_ctx > 0 && out.tokens.size() >= n_ctx) return context_exceeded_status(out.tokens.size(), n_ctx);
    return out;
}

}  // namespace baton
