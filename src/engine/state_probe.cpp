// state_probe.cpp — the probe behind state_shape: which memory parts this model has, in which order
// libllama 0.7 writes them, and what their headers hold on this node.
#include "state_probe.h"

#include <llama.h>

#include <vector>

namespace baton {

namespace {

// The parts of a full and of a partial (PARTIAL_ONLY) state, in libllama's order: a hybrid writes its
// attention cache then its recurrent state, a sliding-window model its full cache then its window cache;
// a partial state keeps only the recurrent state or the window cache (a plain attention cache writes the
// header alone).
void parts_of(const loaded_model & m, std::vector<state_part_kind> & full, std::vector<state_part_kind> & partial) {
    using k = state_part_kind;
    if (m.is_hybrid()) {
        full = {k::attention, k::recurrent};
        partial = {k::recurrent};
    } else if (m.is_recurrent()) {
        full = {k::recurrent};
        partial = {k::recurrent};
    } else if (m.n_swa() > 0) {
        full = {k::attention, k::attention};
        partial = {k::attention};
    } else {
        full = {k::attention};
        partial = {};
    }
}

Result<std::vector<uint8_t>> export_seq(llama_context * ctx, int32_t seq, llama_state_seq_flags flags) {
    const size_t n = llama_state_seq_get_size_ext(ctx, seq, flags);
    std::vector<uint8_t> b(n);
    if (n == 0 || llama_state_seq_get_data_ext(ctx, b.data(), n, seq, flags) != n)
        return Status(status_code::engine_error, "state probe: libllama could not export the probe sequence");
    return b;
}

}  // namespace

Result<state_shape> state_probe(llama_context * ctx, const loaded_model & model, int32_t seq) {
    std::vector<state_part_kind> full_kinds, partial_kinds;
    parts_of(model, full_kinds, partial_kinds);
    const llama_vocab * vocab = model.vocab();
    const llama_token bos = llama_vocab_bos(vocab);
    const llama_token t = bos >= 0 ? bos : 0;
    llama_batch batch = llama_batch_init(2, 0, 1);
    for (int32_t i = 0; i < 2; ++i) {
        batch.token[i] = t;
        batch.pos[i] = i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = seq;
        batch.logits[i] = i == 1;
    }
    batch.n_tokens = 2;
    const int32_t rc = llama_decode(ctx, batch);
    llama_batch_free(batch);
    Result<state_shape> out = Status(status_code::internal, "state probe: not run");
    if (rc != 0) {
        out = Status(status_code::engine_error, "state probe: llama_decode failed (" + std::to_string(rc) + ")");
    } else {
        auto full = export_seq(ctx, seq, 0);
        auto partial = export_seq(ctx, seq, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
        if (!full.ok()) out = full.status();
        else if (!partial.ok()) out = partial.status();
        else {
            auto f = state_shape_learn(full.value(), full_kinds, model.positions_2d());
            auto p = state_shape_learn(partial.value(), partial_kinds, model.positions_2d());
            if (!f.ok()) out = Status(f.status().code(), "state probe (full state): " + f.status().message());
            else if (!p.ok()) out = Status(p.status().code(), "state probe (partial state): " + p.status().message());
            else out = state_shape{std::move(f.value()), std::move(p.value())};
        }
    }
    llama_memory_seq_rm(llama_get_memory(ctx), seq, -1, -1);
    return out;
}

}  // namespace baton
