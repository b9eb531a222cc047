// park_test.cpp — idle slots parked in host memory while another slot works (unified KV), and brought
// back through the restore routine when a prompt reuses them. Runs on every test architecture.
#include "baton/testmodel/mkmodel.h"
#include "engine_fixture.h"
#include "engine_test_seam.h"

#include <atomic>
#include <chrono>
#include <thread>

namespace baton {
namespace {

using namespace baton::test;

class ParkArch : public ::testing::TestWithParam<std::string> {
  protected:
    std::shared_ptr<const loaded_model> m() { return model_for(GetParam()); }
    int32_t n_vocab() { return int32_t(m()->identity().n_vocab); }
};

// The slot that served a finished request: the one holding tokens.
int32_t holder(engine & e) {
    for (const slot_info & s : e.slots())
        if (s.n_tokens > 0) return s.id;
    return -1;
}

// A idles on its slot while B works on another: A's state leaves the KV cache (parked) byte for byte, and
// a continuation of A gets it back through the restore routine with the same tokens as a cold run. A
// purely recurrent model (mamba2) has no shared cache to relieve: its idle slots stay where they are.
TEST_P(ParkArch, IdleSlotParksWhileAnotherWorksAndComesBackExactly) {
    const engine_config cfg = engine_cfg(2, 2048);
    ASSERT_TRUE(cfg.ctx.kv_unified && cfg.park_idle) << "parking is the default on a unified cache";
    auto e = make_engine(m(), cfg);
    const gen_request a = greedy(make_prompt(60, 1, n_vocab()), 8);
    ASSERT_TRUE(run_task(*e, task_generate{a}).done.ok());
    const int32_t sa = holder(*e);
    ASSERT_GE(sa, 0);
    const slot_info before = e->slots()[size_t(sa)];
    EXPECT_FALSE(before.parked) << "nothing else works: A's state stays in the cache";
    engine_result saved = run_task(*e, task_slot_save{sa});
    ASSERT_TRUE(saved.done.ok());

    const gen_request b = greedy(make_prompt(40, 2, n_vocab()), 16);
    engine_result rb = run_task(*e, task_generate{b});
    ASSERT_TRUE(rb.done.ok());
    EXPECT_NE(rb.done->slot, sa) << "a prompt sharing only BOS must not evict A's cache";
    const bool parks = !m()->is_recurrent();
    const slot_info parked = e->slots()[size_t(sa)];
    EXPECT_EQ(parked.parked, parks);
    EXPECT_EQ(parked.n_tokens, before.n_tokens);
    EXPECT_EQ(parked.n_checkpoints, before.n_checkpoints);
    EXPECT_EQ(parked.pos_max, parks ? -1 : before.pos_max) << "a parked slot holds no cells";
    EXPECT_EQ(e->metrics().parks, parks ? 1u : 0u);
    engine_result again = run_task(*e, task_slot_save{sa});
    ASSERT_TRUE(again.done.ok());
    EXPECT_EQ(again.done->blob, saved.done->blob) << "parking must keep the slot's state byte for byte";

    gen_request cont = a;
    cont.prompt.resize(58);
    for (token_id t : make_prompt(12, 77, n_vocab())) cont.prompt.push_back(t == 1 ? 7 : t);
    engine_result rc = run_task(*e, task_generate{cont});
    ASSERT_TRUE(rc.done.ok()) << rc.done.status().to_string();
    EXPECT_EQ(rc.done->slot, sa) << "the continuation goes to the slot that holds its prefix";
    EXPECT_EQ(e->metrics().unparks, parks ? 1u : 0u);
    EXPECT_GE(rc.done->usage.cached_tokens, 16u);
    EXPECT_EQ(rc.tokens, oracle(*m(), cont, engine_cfg(1, 2048)).tokens) << "an unparked prefix must equal a cold run";
    EXPECT_EQ(e->metrics().invariant_repairs, 0u);
    EXPECT_EQ(e->metrics().restores_ok, 0u) << "unparking is not a blob restore from outside";
}

INSTANTIATE_TEST_SUITE_P(AllArchs, ParkArch, ::testing::ValuesIn(mkmodel_archs()),
                         [](const auto & info) { return std::string(info.param); });

// Runs A, then B on the other slot; returns A's slot.
int32_t run_a_then_b(engine & e, int32_t n_vocab) {
    EXPECT_TRUE(run_task(e, task_generate{greedy(make_prompt(40, 1, n_vocab), 4)}).done.ok());
    const int32_t sa = holder(e);
    EXPECT_TRUE(run_task(e, task_generate{greedy(make_prompt(30, 2, n_vocab), 8)}).done.ok());
    return sa;
}

TEST(Park, OffOrPerSequenceCacheKeepsIdleSlotsResident) {
    auto m = model_for("llama");
    const int32_t nv = int32_t(m->identity().n_vocab);
    engine_config off = engine_cfg(2, 1024);
    off.park_idle = false;
    engine_config per_seq = engine_cfg(2, 1024);
    per_seq.ctx.kv_unified = false;  // each sequence attends only over its own stream: nothing to gain
    for (const engine_config & cfg : {off, per_seq}) {
        auto e = make_engine(m, cfg);
        const int32_t sa = run_a_then_b(*e, nv);
        ASSERT_GE(sa, 0);
        EXPECT_FALSE(e->slots()[size_t(sa)].parked);
        EXPECT_GE(e->slots()[size_t(sa)].pos_max, 0);
        EXPECT_EQ(e->metrics().parks, 0u);
    }
}

// The state endpoints act on a parked slot as on a resident one: erase drops it, restore replaces it.
TEST(Park, EraseAndRestoreReplaceAParkedSlot) {
    auto m = model_for("granitehybrid");
    const int32_t nv = int32_t(m->identity().n_vocab);
    auto e = make_engine(m, engine_cfg(2, 1024));
    const int32_t sa = run_a_then_b(*e, nv);
    ASSERT_TRUE(e->slots()[size_t(sa)].parked);
    ASSERT_TRUE(run_task(*e, task_slot_erase{sa}).done.ok());
    EXPECT_FALSE(e->slots()[size_t(sa)].parked);
    EXPECT_EQ(e->slots()[size_t(sa)].n_tokens, 0u);
    EXPECT_EQ(e->metrics().parked_bytes, 0u);

    const int32_t sa2 = run_a_then_b(*e, nv);
    ASSERT_TRUE(e->slots()[size_t(sa2)].parked);
    auto src = make_engine(m, engine_cfg(2, 1024));
    engine_result pre = run_task(*src, task_prefill{greedy(make_prompt(25, 3, nv), 0)});
    ASSERT_TRUE(pre.done.ok());
    ASSERT_TRUE(run_task(*e, task_slot_restore{sa2, validated(pre.done->blob)}).done.ok());
    const slot_info s = e->slots()[size_t(sa2)];
    EXPECT_FALSE(s.parked);
    EXPECT_EQ(s.n_tokens, 25u);
    EXPECT_EQ(s.pos_max, 24);
}

// A slot's idle snapshot (made while the engine waits) is dropped when the slot's state is replaced: parking
// it later parks the restored state, never the one it replaced.
TEST(Park, IdleSnapshotIsDroppedWhenTheSlotIsRestored) {
    auto m = model_for("llama");
    const int32_t nv = int32_t(m->identity().n_vocab);
    auto e = make_engine(m, engine_cfg(2, 1024));
    const int32_t sa = run_a_then_b(*e, nv);  // A parked while B worked; B idle in memory: two conversations
    const int32_t sb = 1 - sa;
    for (int i = 0; i < 1000 && e->metrics().idle_snapshots < 1; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_EQ(e->metrics().idle_snapshots, 1u) << "B's idle slot is snapshot while the engine waits";

    auto src = make_engine(m, engine_cfg(1, 1024));
    const gen_request x = greedy(make_prompt(25, 3, nv), 0);
    engine_result pre = run_task(*src, task_prefill{x});
    ASSERT_TRUE(pre.done.ok());
    ASSERT_TRUE(run_task(*e, task_slot_restore{sb, validated(pre.done->blob)}).done.ok());
    // C goes to A's slot (it holds the older state) and works: B's slot, now X, is parked.
    ASSERT_TRUE(run_task(*e, task_generate{greedy(make_prompt(20, 4, nv), 4)}).done.ok());
    const slot_info s = e->slots()[size_t(sb)];
    EXPECT_TRUE(s.parked);
    ASSERT_TRUE(s.tokens);
    EXPECT_EQ(*s.tokens, x.prompt) << "the restored state was parked, not B's old snapshot";
    gen_request cont = x;
    for (token_id t : make_prompt(10, 5, nv)) cont.prompt.push_back(t == 1 ? 7 : t);
    cont.n_predict = 6;
    engine_result rc = run_task(*e, task_generate{cont});
    ASSERT_TRUE(rc.done.ok());
    EXPECT_EQ(rc.done->slot, sb);
    EXPECT_EQ(rc.tokens, oracle(*m, cont, engine_cfg(1, 1024)).tokens);
    EXPECT_EQ(e->metrics().invariant_repairs, 0u);
}

// Regression (figure 17, llama-server parity): a state restored into a slot while another idle slot still held
// its cells went to the cells above them, and the park phase moved the idle slot out only afterwards, so every
// decode of the task attended over both ranges (returning turns ~40 ms slower). Idle slots now leave the cache
// before a state is restored into the slot that is about to work.
TEST(Park, IdleSlotsLeaveTheCacheBeforeAStateIsRestored) {
    auto m = model_for("llama");
    const int32_t nv = int32_t(m->identity().n_vocab);
    std::atomic<engine *> self{nullptr};
    std::atomic<int64_t> parks_at_restore{-1};
    auto seam = std::make_shared<engine_test_seam>();
    seam->restore_fail_after = [&](restore_step st) {
        if (st == restore_step::cleared && parks_at_restore.load() < 0 && self.load())
            parks_at_restore = int64_t(self.load()->metrics().parks);
        return false;
    };
    auto made = engine_test_access::create(m, engine_cfg(2, 1024), seam);
    ASSERT_TRUE(made.ok()) << made.status().to_string();
    engine & e = *made.value();
    self = &e;
    ASSERT_TRUE(run_task(e, task_generate{greedy(make_prompt(40, 1, nv), 4)}).done.ok());  // A idles in memory
    ASSERT_EQ(e.metrics().parks, 0u);

    auto src = make_engine(m, engine_cfg(1, 1024));
    const gen_request x = greedy(make_prompt(30, 2, nv), 6);
    engine_result pre = run_task(*src, task_prefill{x});
    ASSERT_TRUE(pre.done.ok());
    engine_result got = run_task(e, task_decode{validated(pre.done->blob), x});
    ASSERT_TRUE(got.done.ok()) << got.done.status().to_string();
    EXPECT_EQ(parks_at_restore.load(), 1) << "A's slot must be parked before the decode's state is restored";
    EXPECT_EQ(got.tokens, oracle(*m, x, engine_cfg(1, 1024)).tokens);
    EXPECT_EQ(e.metrics().invariant_repairs, 0u);
}

}  // namespace
}  // namespace baton
