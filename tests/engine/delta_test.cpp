// delta_test.cpp — deltas (blob format 1.2, state_splice.h) through the engine, on every family, with unified
// and non-unified KV: a follow-up turn shipped as a delta decodes exactly as a single node answers it, a
// follow-up handled locally too (tokens and every sampled position's logits, bit for bit), and a delta whose base the receiver does not hold is refused with the slot
// untouched. The decode engine is another engine than the prefill engine (nothing shared but the bytes).
#include <llama.h>

#include "baton/testmodel/mkmodel.h"
#include "engine_fixture.h"

namespace baton {
namespace {

using namespace baton::test;

class Delta : public family_test {
  protected:
    engine_config cfg() {
        engine_config c = family_cfg(2, 2048);
        c.park_idle = false;
        return c;
    }
};

// Turn 1 (a prompt and its greedy answer) on `e`; returns the conversation so far (prompt + answer tokens).
std::vector<token_id> turn_one(engine & e, const std::vector<token_id> & prompt) {
    run_result r = run_task(e, task_generate{greedy(prompt, 12)});
    if (!r.done.ok()) throw std::runtime_error(r.done.status().to_string());
    return concat(prompt, r.tokens);
}

// The tokens the busiest slot of e holds (the answer's last token is sampled, never fed: one less).
uint32_t held_tokens(const engine & e) {
    uint32_t n = 0;
    for (const auto & s : e.slots()) n = std::max(n, s.n_tokens);
    return n;
}

TEST_P(Delta, FollowUpTurnAsADeltaDecodesAsASingleNodeAnswersIt) {
    const engine_config c = cfg();
    const std::vector<token_id> p1 = make_prompt(150, 11, n_vocab());
    // The decode engine holds turn 1 (its prompt and its answer), as a decode node does after answering it.
    auto dec = make_engine(m(), c);
    const std::vector<token_id> held = turn_one(*dec, p1);
    const uint32_t n_held = held_tokens(*dec);
    ASSERT_EQ(n_held + 1, held.size()) << what();
    const std::vector<token_id> p2 = concat(held, make_prompt(70, 12, n_vocab()));
    const gen_request req = greedy(p2, 16);

    // The reference: one node given the follow-up with nothing cached.
    auto single = make_engine(m(), c);
    run_result want = run_task(*single, task_generate{req});
    ASSERT_TRUE(want.done.ok()) << want.done.status().to_string();

    // A follow-up handled locally: the node holding the conversation prefills only what is new.
    auto local_engine = make_engine(m(), c);
    turn_one(*local_engine, p1);
    run_result local = run_task(*local_engine, task_generate{req});
    ASSERT_TRUE(local.done.ok()) << local.done.status().to_string();
    EXPECT_EQ(local.done->usage.cached_tokens, n_held) << what();
    EXPECT_EQ(local.tokens, want.tokens) << what() << ": local follow-up";
    EXPECT_TRUE(local.logits == want.logits) << what() << ": local follow-up, logits";

    // Deltas over bases below and at what the decode engine holds (a router's index counts whole 64-token
    // blocks, so the base is usually below it): only the cells past the base move.
    for (uint32_t base : {64u, 128u, n_held}) {
        auto pre_engine = make_engine(m(), c);
        gen_request preq = req;
        preq.delta_base = base;
        engine_result pre = run_task(*pre_engine, task_prefill{preq});
        ASSERT_TRUE(pre.done.ok()) << pre.done.status().to_string();
        blob_ptr delta = validated(pre.done->blob);
        ASSERT_EQ(delta->view().base_tokens, base) << what();
        ASSERT_EQ(delta->view().tokens.size(), p2.size());

        // The whole state, for its size.
        gen_request freq = req;
        engine_result full = run_task(*pre_engine, task_prefill{freq});
        ASSERT_TRUE(full.done.ok());
        if (GetParam().arch != "mamba2") {  // a purely recurrent state does not split: its delta is the whole state
            EXPECT_LT(pre.done->blob.size(), full.done->blob.size()) << what() << " base " << base;
        }

        auto d = make_engine(m(), c);
        turn_one(*d, p1);
        run_result got = run_task(*d, task_decode{delta, req});
        ASSERT_TRUE(got.done.ok()) << what() << " base " << base << ": " << got.done.status().to_string();
        EXPECT_EQ(got.tokens, want.tokens) << what() << ": delta over " << base << " tokens";
        ASSERT_EQ(got.logits.size(), want.logits.size());
        for (size_t i = 0; i < got.logits.size(); ++i)
            EXPECT_TRUE(got.logits[i] == want.logits[i])
                << what() << ": delta over " << base << ": logits differ at step " << i;
        EXPECT_EQ(got.text, want.text) << what();
        EXPECT_EQ(d->metrics().deltas_in, 1u);
        EXPECT_EQ(d->metrics().delta_base_tokens_in, base);
        EXPECT_EQ(pre_engine->metrics().deltas_out, 1u);
    }
}

TEST_P(Delta, DeltaOntoABaseTheSlotDoesNotHoldIsRefusedWithTheSlotUntouched) {
    const engine_config c = cfg();
    const std::vector<token_id> p1 = make_prompt(150, 21, n_vocab());
    auto dec = make_engine(m(), c);
    const std::vector<token_id> held = turn_one(*dec, p1);
    // A follow-up of another conversation: same length, other tokens.
    const std::vector<token_id> other = concat(make_prompt(150, 22, n_vocab()), make_prompt(40, 23, n_vocab()));
    gen_request preq = greedy(other, 8);
    preq.delta_base = 128;
    auto pre_engine = make_engine(m(), c);
    engine_result pre = run_task(*pre_engine, task_prefill{preq});
    ASSERT_TRUE(pre.done.ok()) << pre.done.status().to_string();

    const std::vector<slot_info> before = dec->slots();
    run_result got = run_task(*dec, task_decode{validated(pre.done->blob), greedy(other, 8)});
    ASSERT_FALSE(got.done.ok()) << what();
    EXPECT_EQ(got.done.status().code(), status_code::incompatible) << got.done.status().to_string();
    EXPECT_NE(got.done.status().message().find("base"), std::string::npos) << got.done.status().message();
    // Through the slot-state entry point too, into the slot that holds turn 1.
    int32_t slot = -1;
    for (const auto & s : before)
        if (s.n_tokens > 0) slot = s.id;
    ASSERT_GE(slot, 0);
    engine_result r = run_task(*dec, task_slot_restore{slot, validated(pre.done->blob)});
    ASSERT_FALSE(r.done.ok());
    EXPECT_EQ(r.done.status().code(), status_code::incompatible) << r.done.status().to_string();
    const std::vector<slot_info> after = dec->slots();
    ASSERT_EQ(after.size(), before.size());
    for (size_t i = 0; i < after.size(); ++i) {
        EXPECT_EQ(after[i].n_tokens, before[i].n_tokens) << what() << " slot " << i;
        EXPECT_EQ(after[i].pos_max, before[i].pos_max) << what() << " slot " << i;
        EXPECT_EQ(after[i].n_checkpoints, before[i].n_checkpoints) << what() << " slot " << i;
    }
    EXPECT_EQ(dec->metrics().deltas_in, 0u);
    // The conversation is still there, whole: its follow-up reuses all of it.
    run_result next = run_task(*dec, task_generate{greedy(concat(held, make_prompt(20, 24, n_vocab())), 4)});
    ASSERT_TRUE(next.done.ok());
    EXPECT_EQ(next.done->usage.cached_tokens, held.size() - 1) << what();
}

// Under ASan/TSan (whose engine tests already cover every family's restore routine) a dense and a hybrid family
// check the delta path's memory and races; the release suite runs every family.
INSTANTIATE_TEST_SUITE_P(AllArchs, Delta, ::testing::ValuesIn(family_cases(true)), family_case_name);

}  // namespace
}  // namespace baton
