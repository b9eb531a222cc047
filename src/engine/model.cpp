// model.cpp — model loading, identity (fingerprint, version, shape) and the model_info read from libllama.
#include "baton/model.h"

#include "baton/base/log.h"
#include "baton/blob.h"

#include <llama.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

namespace baton {

Result<std::array<uint8_t, 16>> model_fingerprint_file(const std::string & path) {
    struct file_closer {
        void operator()(FILE * f) const { std::fclose(f); }
    };
    std::unique_ptr<FILE, file_closer> f(std::fopen(path.c_str(), "rb"));
    if (!f) return Status(status_code::io_error, "cannot read '" + path + "': " + std::strerror(errno));
    std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> st(XXH3_createState(), XXH3_freeState);
    XXH3_128bits_reset(st.get());
    std::vector<unsigned char> buf(1 << 20);
    size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), f.get())) > 0) XXH3_128bits_update(st.get(), buf.data(), n);
    if (std::ferror(f.get())) return Status(status_code::io_error, "cannot read '" + path + "': read error");
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits_digest(st.get()));
    std::array<uint8_t, 16> out{};
    std::memcpy(out.data(), c.digest, 16);
    return out;
}

namespace {
// libllama's and ggml's messages go to Baton's logger as "llama: TEXT", one line per message (a message
// continued with GGML_LOG_LEVEL_CONT, ggml's progress dots, becomes a line of its own at debug level).
void log_drop(ggml_log_level level, const char * text, void *) {
    static const bool all = std::getenv("BATON_LLAMA_LOG") != nullptr;
    if (level != GGML_LOG_LEVEL_ERROR && !all) return;
    std::string_view t = text ? text : "";
    while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.remove_suffix(1);
    if (t.empty()) return;
    switch (level) {
        case GGML_LOG_LEVEL_ERROR: log_error("llama: {}", t); break;
        case GGML_LOG_LEVEL_WARN: log_warn("llama: {}", t); break;
        case GGML_LOG_LEVEL_INFO: log_info("llama: {}", t); break;
        default: log_debug("llama: {}", t); break;
    }
}

// token_text: a special token's text, "" for none (LLAMA_TOKEN_NULL) or a vocabulary without text for it.
std::string token_text(const llama_vocab * vocab, llama_token t) {
    if (t == LLAMA_TOKEN_NULL) return {};
    const char * s = llama_vocab_get_text(vocab, t);
    return s ? s : "";
}

model_info read_info(const llama_model * m) {
    const llama_vocab * vocab = llama_model_get_vocab(m);
    model_info info;
    info.bos_text = token_text(vocab, llama_vocab_bos(vocab));
    info.eos_text = token_text(vocab, llama_vocab_eos(vocab));
    info.add_bos = llama_vocab_get_add_bos(vocab);
    info.add_eos = llama_vocab_get_add_eos(vocab);
    if (const char * t = llama_model_chat_template(m, nullptr); t && *t) info.chat_template = t;
    info.n_ctx_train = uint32_t(std::max<int32_t>(0, llama_model_n_ctx_train(m)));
    return info;
}

}  // namespace

std::string libllama_version() { return llama_version(); }

void llama_quiet_logs() {
    llama_log_set(log_drop, nullptr);
    ggml_log_set(log_drop, nullptr);  // the backends' own messages (loading, device discovery)
}

void llama_backend_once() {
    static std::once_flag once;
    std::call_once(once, [] {
        llama_quiet_logs();
        llama_backend_init();
    });
}

loaded_model::~loaded_model() {
    if (model_) llama_model_free(model_);
}

Result<std::unique_ptr<loaded_model>> loaded_model::load(const std::string & path, const model_load_params & params) {
    if (params.quiet) llama_quiet_logs();
    llama_backend_once();
    std::array<uint8_t, 16> fingerprint{};
    if (!params.vocab_only) {
        auto fp = model_fingerprint_file(path);
        if (!fp.ok()) return fp.status();
        fingerprint = fp.value();
    } else if (std::FILE * f = std::fopen(path.c_str(), "rb")) {
        std::fclose(f);
    } else {
        return Status(status_code::io_error, "cannot read '" + path + "': " + std::strerror(errno));
    }

    llama_model_params mp = llama_model_default_params();
    offload_storage storage;
    auto placement = offload_apply(params.offload, mp, storage);
    if (!placement.ok()) return placement.status();
    mp.vocab_only = params.vocab_only;
    llama_model * m = llama_model_load_from_file(path.c_str(), mp);
    if (!m) return Status(status_code::invalid_argument, "cannot load model '" + path + "': libllama rejected it (set BATON_LLAMA_LOG=1 for details)");

    std::unique_ptr<loaded_model> lm(new loaded_model());
    lm->model_ = m;
    lm->path_ = path;
    lm->placement_ = placement.value();
    offload_place(lm->placement_, llama_model_n_layer(m));
    auto & id = lm->identity_;
    id.fingerprint = fingerprint;
    id.llama_version = llama_version();
    char buf[256];
    if (llama_model_meta_val_str(m, "general.architecture", buf, sizeof buf) >= 0) id.arch = buf;
    id.n_layer = uint32_t(llama_model_n_layer(m));
    id.n_embd = uint32_t(llama_model_n_embd(m));
    id.n_vocab = uint32_t(llama_vocab_n_tokens(llama_model_get_vocab(m)));
    lm->info_ = read_info(m);
    return lm;
}

const llama_vocab * loaded_model::vocab() const { return llama_model_get_vocab(model_); }
bool loaded_model::is_recurrent() const { return llama_model_is_recurrent(model_); }
bool loaded_model::is_hybrid() const { return llama_model_is_hybrid(model_); }
int32_t loaded_model::n_swa() const { return llama_model_n_swa(model_); }
bool loaded_model::positions_2d() const {
    const llama_rope_type t = llama_model_rope_type(model_);
    return t == LLAMA_ROPE_TYPE_MROPE || t == LLAMA_ROPE_TYPE_IMROPE;
}

}  // namespace baton
