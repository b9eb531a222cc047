// embedder.cpp — embeddings through libllama's pooling (see embedder.h).
#include "baton/embedder.h"

#include <gguf.h>
#include <llama.h>

#include <algorithm>
#include <cmath>

#include "baton/model.h"

namespace baton {

const char * pooling_kind_name(pooling_kind p) {
    switch (p) {
        case pooling_kind::none: return "none";
        case pooling_kind::mean: return "mean";
        case pooling_kind::cls: return "cls";
        case pooling_kind::last: return "last";
        case pooling_kind::rank: return "rank";
    }
    return "mean";
}

Result<pooling_kind> pooling_kind_parse(const std::string & s) {
    for (pooling_kind p :
         {pooling_kind::none, pooling_kind::mean, pooling_kind::cls, pooling_kind::last, pooling_kind::rank})
        if (s == pooling_kind_name(p)) return p;
    return invalid_input("pooling: \"" + s.substr(0, 32) + "\" is not none, mean, cls, last or rank");
}

void embedding_normalize(std::vector<float> & v, int32_t mode) {
    double sum = 0;
    if (mode < 0) return;
    if (mode == 0) {  // the largest magnitude maps to 32760 (int16 range)
        for (float x : v) sum = std::max(sum, double(std::fabs(x)));
        sum /= 32760.0;
    } else if (mode == 1) {
        for (float x : v) sum += std::fabs(x);
    } else if (mode == 2) {
        for (float x : v) sum += double(x) * double(x);
        sum = std::sqrt(sum);
    } else {
        for (float x : v) sum += std::pow(std::fabs(double(x)), double(mode));
        sum = std::pow(sum, 1.0 / double(mode));
    }
    const double scale = sum > 0 ? 1.0 / sum : 0.0;
    for (float & x : v) x = float(double(x) * scale);
}

namespace {

// has_ranking_head: whether the GGUF at path holds a classification head (cls.weight, BERT-style, or
// cls.output.weight) for rank pooling to put in the graph. libllama builds rank pooling on any model, and
// on one without a head hands back a hidden state's first element as if it were a score. A model split over
// several files is taken on trust (the head may sit in another part).
bool has_ranking_head(const std::string & path) {
    gguf_init_params p = {true, nullptr};
    gguf_context * g = gguf_init_from_file(path.c_str(), p);
    if (!g) return true;  // (libllama read it; let libllama's answer stand)
    bool found = gguf_find_tensor(g, "cls.weight") >= 0 || gguf_find_tensor(g, "cls.output.weight") >= 0;
    if (const int64_t k = gguf_find_key(g, "split.count");
        k >= 0 && gguf_get_kv_type(g, k) == GGUF_TYPE_UINT16 && gguf_get_val_u16(g, k) > 1)
        found = true;
    gguf_free(g);
    return found;
}

}  // namespace

embedder::~embedder() = default;

Result<std::unique_ptr<embedder>> embedder::create(const loaded_model & model, const embedder_config & cfg) {
    if (cfg.n_batch == 0 || cfg.n_seq_max == 0 || cfg.n_seq_max > 256)
        return invalid_input("embedder: n_batch must be positive and n_seq_max 1..256");
    context_config c;
    c.n_ctx = std::max<uint32_t>(cfg.n_batch, 16);  // each batch starts from an empty memory: one batch fits
    c.n_batch = cfg.n_batch;
    c.n_ubatch = cfg.n_batch;  // a non-causal model needs a whole sequence in one micro-batch
    // (libllama asserts, rather than refuses, when a context's sequences could outnumber its outputs: every
    // sequence takes at least one token, so a batch never holds more sequences than tokens.)
    c.n_seq_max = std::min(cfg.n_seq_max, cfg.n_batch);
    c.kv_unified = true;
    c.n_threads = cfg.n_threads;
    c.embeddings = true;
    c.pooling_type = cfg.pooling ? int32_t(*cfg.pooling) : -1;
    auto ctx = context_make(model, c);
    if (!ctx.ok()) return ctx.status();
    if (llama_pooling_type(ctx.value().get()) == LLAMA_POOLING_TYPE_RANK && !has_ranking_head(model.path()))
        return invalid_input(
            "pooling rank (--rerank): " + model.path() +
            " has no ranking head (no cls.weight or cls.output.weight tensor); a reranker model is needed");
    std::unique_ptr<embedder> e(new embedder());
    e->cfg_ = cfg;
    e->cfg_.n_seq_max = c.n_seq_max;
    const enum llama_pooling_type pt = llama_pooling_type(ctx.value().get());
    e->pooling_ = pt == LLAMA_POOLING_TYPE_NONE   ? pooling_kind::none
                  : pt == LLAMA_POOLING_TYPE_CLS  ? pooling_kind::cls
                  : pt == LLAMA_POOLING_TYPE_LAST ? pooling_kind::last
                  : pt == LLAMA_POOLING_TYPE_RANK ? pooling_kind::rank
                                                  : pooling_kind::mean;
    e->n_vocab_ = int32_t(model.identity().n_vocab);
    e->n_embd_ = e->pooling_ == pooling_kind::rank ? int32_t(std::max<uint32_t>(1, llama_model_n_cls_out(model.get())))
                                                   : llama_model_n_embd(model.get());
    lock_guard lk(e->mu_);
    e->ctx_ = std::move(ctx.value());
    return e;
}

Result<std::vector<embedding_result>> embedder::embed(const std::vector<std::vector<token_id>> & inputs,
                                                      int32_t normalize) {
    for (size_t i = 0; i < inputs.size(); ++i) {
        if (inputs[i].empty()) return invalid_input("input[" + std::to_string(i) + "]: is empty");
        for (token_id t : inputs[i])
            if (t < 0 || t >= n_vocab_)
                return invalid_input("input[" + std::to_string(i) + "]: token " + std::to_string(t) + " is not in 0.." +
                                     std::to_string(n_vocab_ - 1));
        if (inputs[i].size() > cfg_.n_batch)
            return invalid_input("input[" + std::to_string(i) + "]: " + std::to_string(inputs[i].size()) +
                                 " tokens, more than the batch size (-b " + std::to_string(cfg_.n_batch) +
                                 ") an input must fit; start the node with a larger -b");
    }
    std::vector<embedding_result> out(inputs.size());
    lock_guard lk(mu_);
    llama_context * ctx = ctx_.get();
    llama_batch batch = llama_batch_init(int32_t(cfg_.n_batch), 0, 1);
    Status st;
    for (size_t first = 0; first < inputs.size() && st.ok();) {
        // One batch: as many whole inputs as fit.
        size_t last = first, n_tok = 0;
        // Packing: with one unified memory every token of a batch attends over every cell the batch fills, so
        // a batch is kept to about embedder_pack_tokens_max (one long input still goes alone).
        const size_t cap = std::max<size_t>(std::min<size_t>(cfg_.n_batch, embedder_pack_tokens_max), inputs[first].size());
        while (last < inputs.size() && last - first < cfg_.n_seq_max && n_tok + inputs[last].size() <= cap)
            n_tok += inputs[last++].size();
        batch.n_tokens = 0;
        for (size_t i = first; i < last; ++i)
            for (size_t p = 0; p < inputs[i].size(); ++p) {
                const int32_t k = batch.n_tokens++;
                batch.token[k] = inputs[i][p];
                batch.pos[k] = int32_t(p);
                batch.n_seq_id[k] = 1;
                batch.seq_id[k][0] = int32_t(i - first);
                batch.logits[k] = 1;  // every token is an output (pooling reads them; none returns them)
            }
        if (llama_memory_t mem = llama_get_memory(ctx)) llama_memory_clear(mem, true);
        const int32_t rc = llama_decode(ctx, batch);
        if (rc != 0) {
            st = Status(status_code::engine_error, "embedding: llama_decode returned " + std::to_string(rc));
            break;
        }
        int32_t row = 0;
        for (size_t i = first; i < last; ++i) {
            embedding_result & r = out[i];
            r.n_tokens = uint32_t(inputs[i].size());
            if (pooling_ == pooling_kind::none) {
                for (size_t p = 0; p < inputs[i].size(); ++p, ++row) {
                    const float * v = llama_get_embeddings_ith(ctx, row);
                    if (!v) {
                        st = Status(status_code::engine_error, "embedding: no output for a token");
                        break;
                    }
                    r.vectors.emplace_back(v, v + n_embd_);
                }
            } else {
                const float * v = llama_get_embeddings_seq(ctx, int32_t(i - first));
                if (!v) {
                    st = Status(status_code::engine_error, "embedding: no pooled output for an input");
                    break;
                }
                r.vectors.emplace_back(v, v + n_embd_);
                if (pooling_ != pooling_kind::rank) embedding_normalize(r.vectors.back(), normalize);
            }
            if (!st.ok()) break;
        }
        first = last;
    }
    llama_batch_free(batch);
    if (!st.ok()) return st;
    return out;
}

}  // namespace baton
