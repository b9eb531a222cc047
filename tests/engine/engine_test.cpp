// engine_test.cpp — the slot engine against the oracle: equivalence of monolithic and prefill -> blob ->
// decode runs, the one restore routine's failure paths, checkpoint rollback, the invariant guard, and
// concurrency. Runs on every test architecture.
#include <llama.h>

#include "baton/testmodel/mkmodel.h"
#include "engine_fixture.h"

namespace baton {
namespace {

using namespace baton::test;

class EngineArch : public ::testing::TestWithParam<std::string> {
  protected:
    std::shared_ptr<const loaded_model> m() { return model_for(GetParam()); }
    int32_t n_vocab() { return int32_t(m()->identity().n_vocab); }
};

void expect_same_run(const std::vector<token_id> & ta, const std::vector<std::vector<float>> & la,
                     const std::vector<token_id> & tb, const std::vector<std::vector<float>> & lb, const std::string & what) {
    ASSERT_EQ(ta, tb) << what;
    ASSERT_EQ(la.size(), lb.size()) << what;
    for (size_t i = 0; i < la.size(); ++i)
        ASSERT_TRUE(la[i] == lb[i]) << what << ": logits differ at step " << i;
}

// Monolithic engine vs oracle vs prefill -> blob bytes -> restore into a fresh engine -> decode.
TEST_P(EngineArch, PrefillBlobDecodeEqualsMonolithicBitForBit) {
    const engine_config cfg = engine_cfg(1, 2048);
    for (size_t n : {10u, 100u, 600u}) {
        for (bool sampled : {false, true}) {
            gen_request req = greedy(make_prompt(n, unsigned(n), n_vocab()), 32);
            if (sampled) {
                req.sampling.temperature = 0.8f;
                req.sampling.top_p = 0.9f;
                req.sampling.seed = 4242;
            }
            const std::string what = std::string(GetParam()) + " n=" + std::to_string(n) + (sampled ? " sampled" : " greedy");
            const generate_output want = oracle(*m(), req, cfg);
            ASSERT_FALSE(want.tokens.empty()) << what;

            auto mono_engine = make_engine(m(), cfg);
            run_result mono = run_task(*mono_engine, task_generate{req});
            ASSERT_TRUE(mono.done.ok()) << mono.done.status().to_string();
            expect_same_run(want.tokens, std::vector<std::vector<float>>(want.logits.begin(), want.logits.begin() + mono.logits.size()),
                            mono.tokens, mono.logits, what + " (engine vs oracle)");
            EXPECT_EQ(mono.text, want.text) << what;

            auto prefill_engine = make_engine(m(), cfg);
            engine_result pre = run_task(*prefill_engine, task_prefill{req});
            ASSERT_TRUE(pre.done.ok()) << pre.done.status().to_string();
            ASSERT_FALSE(pre.done->blob.empty());
            auto decode_engine = make_engine(m(), cfg);  // fresh: shares nothing with the prefill side
            run_result dec = run_task(*decode_engine, task_decode{validated(pre.done->blob), req});
            ASSERT_TRUE(dec.done.ok()) << dec.done.status().to_string();
            expect_same_run(mono.tokens, mono.logits, dec.tokens, dec.logits, what + " (PD vs monolithic)");
            EXPECT_EQ(dec.text, mono.text) << what;
            EXPECT_EQ(dec.done->usage.prompt_tokens, mono.done->usage.prompt_tokens);
            EXPECT_EQ(dec.done->usage.generated_tokens, mono.done->usage.generated_tokens);
        }
    }
}

// Regression (seed review gap 1): a restore that fails after the header was accepted must leave the slot
// empty, and a later request sharing the blob's prefix must compute from scratch, not on a poisoned slot.
TEST_P(EngineArch, FailedRestoreLeavesSlotEmptyRegression) {
    const engine_config cfg = engine_cfg(1, 1024);
    const gen_request req = greedy(make_prompt(60, 7, n_vocab()), 16);
    auto src = make_engine(m(), cfg);
    engine_result pre = run_task(*src, task_prefill{req});
    ASSERT_TRUE(pre.done.ok()) << pre.done.status().to_string();

    // (a) state bytes with a valid checksum that libllama rejects: the state cut in half.
    const auto half = blob_rewrite(pre.done->blob, [](blob_parts &, std::vector<uint8_t> & state, auto &, auto &) {
        state.resize(state.size() / 2);
    });
    // (b) a state whose cell positions disagree with the token section: tokens section one token shorter.
    const auto short_tokens = blob_rewrite(pre.done->blob, [](blob_parts & p, auto &, std::vector<int32_t> & tokens, auto &) {
        tokens.pop_back();
        p.checkpoints.clear();
    });
    for (const auto * bad : {&half, &short_tokens}) {
        for (int entry = 0; entry < 2; ++entry) {
            auto dst = make_engine(m(), cfg);
            engine_result r = entry == 0 ? run_task(*dst, task_slot_restore{0, validated(*bad)})
                                         : run_task(*dst, task_decode{validated(*bad), req});
            ASSERT_FALSE(r.done.ok()) << "restore of a bad state must fail";
            const slot_info s = dst->slots()[0];
            EXPECT_EQ(s.n_tokens, 0u);
            EXPECT_EQ(s.n_checkpoints, 0u);
            EXPECT_EQ(s.pos_max, -1);
            EXPECT_FALSE(s.busy);
            EXPECT_EQ(dst->metrics().restore_failures.size(), 1u);
            // A request sharing the blob's prefix: must equal the monolithic output.
            engine_result after = run_task(*dst, task_generate{req});
            ASSERT_TRUE(after.done.ok()) << after.done.status().to_string();
            EXPECT_EQ(after.done->usage.cached_tokens, 0u);
            const generate_output want = oracle(*m(), req, cfg);
            EXPECT_EQ(after.tokens, want.tokens);
        }
    }
}

// A blob from a different architecture with a forged identity: libllama may accept part of it; Baton's
// position check must catch it and leave the slot empty.
TEST(EngineRestore, ForgedFingerprintFromOtherArchLeavesSlotEmptyRegression) {
    const engine_config cfg = engine_cfg(1, 1024);
    for (const auto & [from, to] : std::vector<std::pair<std::string, std::string>>{
             {"mamba2", "llama"}, {"llama", "granitehybrid"}, {"lfm2", "granitehybrid"}, {"granitehybrid", "lfm2"}}) {
        auto mf = model_for(from), mt = model_for(to);
        const gen_request req = greedy(make_prompt(40, 3, int32_t(mt->identity().n_vocab)), 8);
        auto src = make_engine(mf, cfg);
        engine_result pre = run_task(*src, task_prefill{req});
        ASSERT_TRUE(pre.done.ok());
        auto dst = make_engine(mt, cfg);
        const model_identity target = dst->identity();
        const auto forged = blob_rewrite(pre.done->blob, [&](blob_parts & p, auto &, auto &, auto &) { p.identity = target; });
        engine_result r = run_task(*dst, task_slot_restore{0, validated(forged)});
        EXPECT_FALSE(r.done.ok()) << from << " -> " << to;
        const slot_info s = dst->slots()[0];
        EXPECT_EQ(s.n_tokens, 0u) << from << " -> " << to;
        EXPECT_EQ(s.pos_max, -1) << from << " -> " << to;
        engine_result after = run_task(*dst, task_generate{req});
        ASSERT_TRUE(after.done.ok());
        EXPECT_EQ(after.tokens, oracle(*mt, req, cfg).tokens) << from << " -> " << to;
    }
}

TEST_P(EngineArch, IncompatibleBlobIsRejectedBeforeTouchingTheSlot) {
    const engine_config cfg = engine_cfg(1, 1024);
    const gen_request req = greedy(make_prompt(30, 5, n_vocab()), 4);
    auto e = make_engine(m(), cfg);
    engine_result pre = run_task(*e, task_prefill{req});
    ASSERT_TRUE(pre.done.ok());
    const slot_info before = e->slots()[0];
    ASSERT_EQ(before.n_tokens, 30u);
    const auto other = blob_rewrite(pre.done->blob, [](blob_parts & p, auto &, auto &, auto &) { p.identity.fingerprint[0] ^= 1; });
    engine_result r = run_task(*e, task_slot_restore{0, validated(other)});
    ASSERT_FALSE(r.done.ok());
    EXPECT_EQ(r.done.status().code(), status_code::incompatible);
    EXPECT_NE(r.done.status().message().find("fingerprint"), std::string::npos) << r.done.status().message();
    const slot_info after = e->slots()[0];
    EXPECT_EQ(after.n_tokens, before.n_tokens) << "an incompatible blob must not touch the slot";
    EXPECT_EQ(after.pos_max, before.pos_max);
}

// Regression (seed review gap 2): the blob's checkpoints must be registered, so a continuation that
// diverges a few tokens before the end rolls back through them.
TEST_P(EngineArch, DivergingContinuationRollsBackThroughBlobCheckpointRegression) {
    const engine_config cfg = engine_cfg(1, 1024);
    const std::vector<token_id> p = make_prompt(100, 11, n_vocab());
    gen_request first = greedy(p, 0);
    auto src = make_engine(m(), cfg);
    engine_result pre = run_task(*src, task_prefill{first});
    ASSERT_TRUE(pre.done.ok());

    std::vector<token_id> p2(p.begin(), p.begin() + 98);
    for (token_id t : make_prompt(20, 99, n_vocab())) p2.push_back(t == 1 ? 7 : t);
    const gen_request cont = greedy(p2, 16);
    const generate_output want = oracle(*m(), cont, cfg);
    const bool partial = m()->has_partial_state();

    for (bool with_checkpoints : {true, false}) {
        auto bytes = with_checkpoints ? pre.done->blob
                                      : blob_rewrite(pre.done->blob, [](blob_parts & bp, auto &, auto &, auto &) { bp.checkpoints.clear(); });
        auto dst = make_engine(m(), cfg);
        engine_result put = run_task(*dst, task_slot_restore{0, validated(bytes)});
        ASSERT_TRUE(put.done.ok()) << put.done.status().to_string();
        EXPECT_EQ(dst->slots()[0].n_checkpoints, with_checkpoints && partial ? 1u : 0u);
        engine_result r = run_task(*dst, task_generate{cont});
        ASSERT_TRUE(r.done.ok());
        EXPECT_EQ(r.tokens, want.tokens) << (with_checkpoints ? "via checkpoint" : "via re-prefill");
        const engine_metrics mt = dst->metrics();
        if (!partial) {  // attention-only memory is truncated at the divergence point, no checkpoint needed
            EXPECT_EQ(mt.checkpoint_restores, 0u);
            EXPECT_EQ(mt.reprefills, 0u);
            EXPECT_EQ(r.done->usage.cached_tokens, 98u);
        } else if (with_checkpoints) {
            EXPECT_EQ(mt.checkpoint_restores, 1u);
            EXPECT_EQ(r.done->usage.cached_tokens, 96u);  // the tail checkpoint: 100 - 4
        } else {
            EXPECT_EQ(mt.reprefills, 1u) << "without checkpoints the engine must say it re-prefilled";
            EXPECT_EQ(r.done->usage.cached_tokens, 0u);
        }
    }
}

// Regression (seed review gap 3): every entry point leaves identical slot state for the same blob.
TEST_P(EngineArch, SameBlobThroughEveryEntryPointGivesIdenticalSlotStateRegression) {
    const engine_config cfg = engine_cfg(1, 1024);
    const gen_request req = greedy(make_prompt(70, 21, n_vocab()), 0);
    auto src = make_engine(m(), cfg);
    engine_result pre = run_task(*src, task_prefill{req});
    ASSERT_TRUE(pre.done.ok());

    auto via_put = make_engine(m(), cfg);
    ASSERT_TRUE(run_task(*via_put, task_slot_restore{0, validated(pre.done->blob)}).done.ok());
    auto via_decode = make_engine(m(), cfg);
    ASSERT_TRUE(run_task(*via_decode, task_decode{validated(pre.done->blob), req}).done.ok());

    const slot_info a = via_put->slots()[0], b = via_decode->slots()[0];
    EXPECT_EQ(a.n_tokens, b.n_tokens);
    EXPECT_EQ(a.n_checkpoints, b.n_checkpoints);
    EXPECT_EQ(a.pos_min, b.pos_min);
    EXPECT_EQ(a.pos_max, b.pos_max);
    engine_result sa = run_task(*via_put, task_slot_save{0});
    engine_result sb = run_task(*via_decode, task_slot_save{0});
    ASSERT_TRUE(sa.done.ok());
    ASSERT_TRUE(sb.done.ok());
    EXPECT_EQ(sa.done->blob, sb.done->blob) << "the two entry points left different slot state";
    EXPECT_EQ(sa.done->blob, pre.done->blob) << "save after restore must reproduce the blob";
}

TEST_P(EngineArch, InvariantGuardRepairsDesyncedSlot) {
    const engine_config cfg = engine_cfg(1, 1024);
    gen_request req = greedy(make_prompt(50, 31, n_vocab()), 24);
    const generate_output want = oracle(*m(), req, cfg);
    auto e = make_engine(m(), cfg, [](uint64_t, uint32_t n_generated) { return n_generated == 5; });
    engine_result r = run_task(*e, task_generate{req});
    ASSERT_TRUE(r.done.ok()) << r.done.status().to_string();
    EXPECT_EQ(e->metrics().invariant_repairs, 1u);
    EXPECT_EQ(r.tokens, want.tokens);
}

TEST_P(EngineArch, FourSlotsConcurrentlyMatchSoloRunsAndPrefixReuseIsCounted) {
    const engine_config cfg = engine_cfg(4, 4096);
    std::vector<gen_request> reqs;
    for (unsigned i = 0; i < 4; ++i) reqs.push_back(greedy(make_prompt(20 + 37 * i, 100 + i, n_vocab()), 20));
    auto e = make_engine(m(), cfg);
    std::vector<request_ptr> hs;
    for (const auto & r : reqs) hs.push_back(e->submit(task_generate{r}).value());
    for (size_t i = 0; i < 4; ++i) {
        engine_result r = engine_run_to_end(hs[i], std::chrono::seconds(300));
        ASSERT_TRUE(r.done.ok()) << r.done.status().to_string();
        EXPECT_EQ(r.tokens, oracle(*m(), reqs[i], engine_cfg(1, 4096)).tokens) << "slot request " << i;
    }
    // Prefix reuse: the same conversation continued lands on the slot holding it.
    gen_request again = reqs[3];
    again.prompt.resize(again.prompt.size() - 2);
    for (token_id t : make_prompt(12, 555, n_vocab())) again.prompt.push_back(t == 1 ? 9 : t);
    const uint64_t hits_before = e->metrics().prefix_reuse_hits;
    engine_result r = run_task(*e, task_generate{again});
    ASSERT_TRUE(r.done.ok());
    EXPECT_EQ(e->metrics().prefix_reuse_hits, hits_before + 1);
    EXPECT_GT(r.done->usage.cached_tokens, 0u);
    EXPECT_EQ(r.tokens, oracle(*m(), again, engine_cfg(1, 4096)).tokens) << "reused prefix must equal a cold run";
}

INSTANTIATE_TEST_SUITE_P(AllArchs, EngineArch, ::testing::ValuesIn(mkmodel_archs()),
                         [](const auto & info) { return std::string(info.param); });

TEST(EngineSubmit, BadRequestsAreTypedErrors) {
    auto e = make_engine(model_for("llama"), engine_cfg(2, 256));
    gen_request r;
    EXPECT_EQ(e->submit(task_generate{r}).status().code(), status_code::invalid_argument);  // empty prompt
    r.prompt = {1, 100000};
    EXPECT_EQ(e->submit(task_generate{r}).status().code(), status_code::invalid_argument);  // id out of range
    r.prompt = make_prompt(300, 1, 300);
    EXPECT_EQ(e->submit(task_generate{r}).status().code(), status_code::context_exceeded);  // over the context
    EXPECT_EQ(e->submit(task_slot_save{7}).status().code(), status_code::not_found);
    EXPECT_EQ(e->submit(task_slot_erase{-1}).status().code(), status_code::not_found);
    engine_result s = run_task(*e, task_slot_save{0});
    EXPECT_EQ(s.done.status().code(), status_code::not_found);  // empty slot holds no state
}

TEST(EngineSubmit, CancelEndsTaskWithExplicitError) {
    auto e = make_engine(model_for("llama"), engine_cfg(1, 2048));
    gen_request r = greedy(make_prompt(10, 1, 300), 1500);
    auto h = e->submit(task_generate{r}).value();
    engine_event ev;
    ASSERT_TRUE(h->next(ev, std::chrono::seconds(60)));
    h->cancel();
    engine_result rest = engine_run_to_end(h, std::chrono::seconds(60));
    EXPECT_FALSE(rest.done.ok());
    EXPECT_EQ(rest.done.status().code(), status_code::cancelled);
    EXPECT_FALSE(e->slots()[0].busy);
}

TEST(EngineSubmit, StopStringsEndGenerationAndAreNotEmitted) {
    auto m = model_for("llama");
    const engine_config cfg = engine_cfg(1, 512);
    gen_request r = greedy(make_prompt(12, 2, 300), 24);
    const generate_output full = oracle(*m, r, cfg);
    ASSERT_GT(full.text.size(), 6u);
    const std::string stop = full.text.substr(3, 2);
    r.stop = {stop};
    auto e = make_engine(m, cfg);
    engine_result res = run_task(*e, task_generate{r});
    ASSERT_TRUE(res.done.ok());
    EXPECT_EQ(res.done->finish, finish_reason::stop);
    EXPECT_EQ(res.text, full.text.substr(0, full.text.find(stop)));
}

// return_progress: a progress event when the prompt starts (processed == cache) and after every chunk, counts
// rising to the prompt's length, all before the first token; the tokens are those of a run without it. A
// decode task reports its restored prompt once, whole. Without the flag, no progress event at all.
TEST(EngineSubmit, ProgressEventsCountThePromptsChunksBeforeTheFirstToken) {
    auto m = model_for("llama");
    engine_config cfg = engine_cfg(1, 512);
    cfg.ctx.n_batch = 32;
    cfg.cache_ram_mib = 0;
    auto e = make_engine(m, cfg);
    gen_request r = greedy(make_prompt(100, 3, 300), 5);
    auto events_of = [&](engine_task t) {
        std::vector<engine_event> out;
        auto h = e->submit(std::move(t)).value();
        for (;;) {
            engine_event ev;
            EXPECT_TRUE(h->next(ev, std::chrono::seconds(60)));
            const bool last = std::holds_alternative<event_done>(ev) || std::holds_alternative<event_error>(ev);
            out.push_back(std::move(ev));
            if (last) break;
        }
        return out;
    };
    auto tokens_of = [](const std::vector<engine_event> & evs) {
        std::vector<token_id> t;
        for (const auto & ev : evs)
            if (const auto * k = std::get_if<event_token>(&ev)) t.push_back(k->token);
        return t;
    };
    const auto plain = events_of(task_generate{r});
    for (const auto & ev : plain) EXPECT_FALSE(std::holds_alternative<event_progress>(ev));
    ASSERT_TRUE(run_task(*e, task_slot_erase{0}).done.ok());  // so the prompt is computed again
    r.return_progress = true;
    const auto with = events_of(task_generate{r});
    EXPECT_EQ(tokens_of(with), tokens_of(plain));
    std::vector<event_progress> ps;
    size_t first_token = with.size();
    for (size_t i = 0; i < with.size(); ++i) {
        if (const auto * p = std::get_if<event_progress>(&with[i])) {
            EXPECT_LT(i, first_token) << "progress after a token";
            ps.push_back(*p);
        } else if (std::holds_alternative<event_token>(with[i]) && first_token == with.size()) {
            first_token = i;
        }
    }
    // 100 tokens in chunks of 32: the start, then 32, 64, 96, 100.
    ASSERT_EQ(ps.size(), 5u);
    EXPECT_EQ(ps.front().processed, ps.front().cache);
    for (size_t i = 1; i < ps.size(); ++i) {
        EXPECT_EQ(ps[i].total, 100u);
        EXPECT_GT(ps[i].processed, ps[i - 1].processed);
        EXPECT_GE(ps[i].ms, ps[i - 1].ms);
    }
    EXPECT_EQ(ps.back().processed, 100u);
    // A decode task: its state holds the whole prompt, reported once.
    engine_result pre = run_task(*e, task_prefill{r});
    ASSERT_TRUE(pre.done.ok()) << pre.done.status().to_string();
    auto d = make_engine(m, cfg);
    auto h = d->submit(task_decode{validated(pre.done->blob), r}).value();
    engine_event ev;
    ASSERT_TRUE(h->next(ev, std::chrono::seconds(60)));
    ASSERT_TRUE(std::holds_alternative<event_progress>(ev));
    EXPECT_EQ(std::get<event_progress>(ev).processed, 100u);
    EXPECT_EQ(std::get<event_progress>(ev).total, 100u);
    engine_result rest = engine_run_to_end(h, std::chrono::seconds(60));
    ASSERT_TRUE(rest.done.ok());
    EXPECT_EQ(rest.tokens, tokens_of(plain));
}

}  // namespace
}  // namespace baton

namespace baton {
namespace {
using namespace baton::test;

// Regression: more concurrent requests than slots, all sharing a prefix, must all finish (they queue for
// a slot and reuse each other's prefix).
TEST(EngineQueue, MoreRequestsThanSlotsAllFinishRegression) {
    auto m = model_for("llama");
    const engine_config cfg = engine_cfg(2, 2048);
    auto e = make_engine(m, cfg);
    std::vector<gen_request> reqs;
    for (unsigned i = 0; i < 16; ++i) {
        gen_request r = greedy(make_prompt(40, 7, 300), 8);
        for (token_id t : make_prompt(6, 100 + i, 300)) r.prompt.push_back(t == 1 ? 11 : t);
        reqs.push_back(r);
    }
    std::vector<request_ptr> hs;
    for (const auto & r : reqs) hs.push_back(e->submit(task_generate{r}).value());
    for (size_t i = 0; i < hs.size(); ++i) {
        engine_result r = engine_run_to_end(hs[i], std::chrono::seconds(30));
        ASSERT_TRUE(r.done.ok()) << "request " << i << ": " << r.done.status().to_string();
        EXPECT_EQ(r.tokens, oracle(*m, reqs[i], engine_cfg(1, 2048)).tokens) << i;
    }
}

}  // namespace
}  // namespace baton
