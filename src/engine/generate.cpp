// generate.cpp — the single-sequence oracle loop.
#include "baton/generate.h"

#include <llama.h>

#include <algorithm>

#include "baton/chunk_plan.h"
#include "baton/model.h"

namespace baton {

Result<generate_output> generate_run(const loaded_model & model, const generate_params & params,
                                     const std::function<void(const std::string &)> & on_piece) {
    BATON_RETURN_IF_ERROR(sampling_check(params.sampling));
    if (params.n_predict < 0) return Status(status_code::invalid_argument, "n_predict: must be >= 0");
    generate_output out;
    if (const auto * ids = std::get_if<std::vector<token_id>>(&params.prompt)) {
        out.prompt_tokens = *ids;
    } else {
        auto toks = text_tokenize(model.vocab(), std::get<std::string>(params.prompt), true, false);
        if (!toks.ok()) return toks.status();
        out.prompt_tokens = std::move(toks.value());
    }
    const int32_t n_vocab = int32_t(model.identity().n_vocab);
    for (token_id t : out.prompt_tokens)
        if (t < 0 || t >= n_vocab)
            return Status(status_code::invalid_argument, "prompt: token " + std::to_string(t) + " is not in 0..n_vocab-1");
    if (out.prompt_tokens.empty()) return Status(status_code::invalid_argument, "prompt: is empty");
    const size_t need = out.prompt_tokens.size() + size_t(params.n_predict);
    if (need > params.ctx.n_ctx)
        return Status(status_code::invalid_argument, "prompt: " + std::to_string(out.prompt_tokens.size()) + " tokens + " +
                                                         std::to_string(params.n_predict) + " to generate exceed n_ctx " +
                                                         std::to_string(params.ctx.n_ctx));
    auto ctx = context_make(model, params.ctx);
    if (!ctx.ok()) return ctx.status();
    llama_context * lctx = ctx.value().get();

    const size_t n_prompt = out.prompt_tokens.size();
    const size_t n_batch = context_normalized(params.ctx).n_batch;
    llama_batch batch = llama_batch_init(int32_t(n_batch), 0, 1);
    auto feed = [&](const token_id * toks, size_t n, size_t pos0, bool last_logits) -> Status {
        batch.n_tokens = 0;
        for (size_t i = 0; i < n; ++i) {
            batch.token[i] = toks[i];
            batch.pos[i] = llama_pos(pos0 + i);
            batch.n_seq_id[i] = 1;
            batch.seq_id[i][0] = 0;
            batch.logits[i] = (last_logits && i + 1 == n) ? 1 : 0;
        }
        batch.n_tokens = int32_t(n);
        int32_t rc = llama_decode(lctx, batch);
        if (rc != 0) return Status(status_code::engine_error, "llama_decode failed with " + std::to_string(rc));
        return {};
    };
    Status st;
    size_t at = 0;
    for (uint32_t end : chunk_plan_ends(0, uint32_t(n_prompt), uint32_t(n_batch), model.has_partial_state(),
                                        params.ctx.checkpoints)) {
        if (!st.ok()) break;
        st = feed(out.prompt_tokens.data() + at, end - at, at, end == n_prompt);
        at = end;
    }
    auto made = sampling_make_chain(params.sampling, model.vocab());
    if (!made.ok()) st = made.status();
    sampler_ptr chain = made.ok() ? std::move(made.value()) : nullptr;
    for (int32_t step = 0; st.ok() && step < params.n_predict; ++step) {
        if (params.record_logits) {
            const float * lg = llama_get_logits_ith(lctx, -1);
            out.logits.emplace_back(lg, lg + n_vocab);
        }
        auto sampled = sampling_sample(chain.get(), llama_get_logits_ith(lctx, -1), size_t(n_vocab));
        if (!sampled.ok()) {
            st = sampled.status();
            break;
        }
        const token_id t = sampled.value();
        if (t < 0 || llama_vocab_is_eog(model.vocab(), t)) {
            out.stopped_eog = true;
            break;
        }
        out.tokens.push_back(t);
        const std::string piece = text_token_piece(model.vocab(), t);
        out.text += piece;
        if (on_piece) on_piece(piece);
        if (step + 1 < params.n_predict) st = feed(&t, 1, n_prompt + size_t(step), true);
    }
    llama_batch_free(batch);
    if (!st.ok()) return st;
    return out;
}

}  // namespace baton
