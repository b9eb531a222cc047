// prefix_share_test.cpp — prefix sharing between slots (scheduler.cpp, unified KV, attention-only models): a
// request whose prompt begins with what another slot holds or is still computing takes those cells with
// llama_memory_seq_cp instead of computing them again, and answers as a fresh engine does: the same tokens,
// and logits equal to the last bits a concurrent batch changes (docs/engine.md: a sequence's row in the batch
// and its cells' places in a unified cache move the last bits; two requests computed together are never bit
// equal to two computed alone, shared or not). Caches that cannot share a prefix (a non-unified cache,
// recurrent, hybrid and sliding-window models) compute it and answer the same.
#include <cmath>

#include "baton/testmodel/mkmodel.h"
#include "engine_fixture.h"

namespace baton {
namespace {

using namespace baton::test;

class PrefixShare : public family_test {
  protected:
    bool shares() { return GetParam().unified && !m()->has_partial_state(); }
    engine_config cfg() {
        engine_config c = family_cfg(3, 3072);
        c.ctx.n_batch = 64;  // a 300-token prompt takes 5 steps: the second request arrives while it computes
        return c;
    }
};

// Both requests submitted together, each run to its end; logits from the engine's recorder.
std::pair<run_result, run_result> run_together(engine & e, const gen_request & a, const gen_request & b) {
    auto ha = e.submit(task_generate{a});
    auto hb = e.submit(task_generate{b});
    if (!ha.ok() || !hb.ok()) throw std::runtime_error("submit failed");
    run_result ra, rb;
    static_cast<engine_result &>(ra) = engine_run_to_end(ha.value(), std::chrono::seconds(300));
    static_cast<engine_result &>(rb) = engine_run_to_end(hb.value(), std::chrono::seconds(300));
    ra.logits = recorders()[&e]->take(ha.value()->id());
    rb.logits = recorders()[&e]->take(hb.value()->id());
    return {std::move(ra), std::move(rb)};
}

void expect_same(const run_result & got, const run_result & want, const std::string & what) {
    ASSERT_TRUE(got.done.ok()) << what << ": " << got.done.status().to_string();
    EXPECT_EQ(got.tokens, want.tokens) << what;
    ASSERT_EQ(got.logits.size(), want.logits.size()) << what;
    double worst = 0;
    for (size_t i = 0; i < got.logits.size(); ++i)
        for (size_t k = 0; k < got.logits[i].size(); ++k)
            worst = std::max(worst, double(std::fabs(got.logits[i][k] - want.logits[i][k])));
    EXPECT_LE(worst, 1e-2) << what;
}

// Two tenants' requests with one 256-token system prompt, the second arriving while the first computes it: the
// second takes the prefix from the first's slot (waiting for it while it is computed) and computes only its
// question. A follow-up on the second's conversation, after the first's slot was erased, still finds every
// shared cell (they belong to both sequences). Everything answers as a fresh engine does.
TEST_P(PrefixShare, SecondRequestTakesThePrefixTheFirstComputesAndAnswersExactly) {
    const std::vector<token_id> system = make_prompt(256, 21, n_vocab());
    const gen_request a = greedy(concat(system, make_prompt(40, 22, n_vocab())), 24);
    const gen_request b = greedy(concat(system, make_prompt(30, 23, n_vocab())), 12);
    auto fresh = [&](const gen_request & r) {
        auto e = make_engine(m(), cfg());
        return run_task(*e, task_generate{r});
    };
    const run_result want_a = fresh(a), want_b = fresh(b);

    auto e = make_engine(m(), cfg());
    auto [got_a, got_b] = run_together(*e, a, b);
    expect_same(got_a, want_a, what() + ": first");
    expect_same(got_b, want_b, what() + ": second");
    const engine_metrics mt = e->metrics();
    if (shares()) {
        // The system prompt (and the question's first token, when it was computed before the second came in).
        EXPECT_GE(got_b.done->usage.cached_tokens, system.size()) << what();
        EXPECT_LE(got_b.done->usage.cached_tokens, system.size() + 1) << what();
        EXPECT_EQ(mt.prefix_shares, 1u) << what();
        EXPECT_EQ(mt.prefix_shared_tokens, got_b.done->usage.cached_tokens) << what();
    } else {
        EXPECT_EQ(got_b.done->usage.cached_tokens, 0u) << what();
        EXPECT_EQ(mt.prefix_shares, 0u) << what();
    }

    // The first's slot is erased (its sequence leaves the cache): the cells the second took stay with it.
    const size_t b_held = b.prompt.size() + got_b.tokens.size() - 1;
    for (const slot_info & s : e->slots()) {
        if (s.n_tokens > 0 && s.n_tokens != b_held) {
            ASSERT_TRUE(run_task(*e, task_slot_erase{s.id}).done.ok());
        }
    }
    const gen_request follow = greedy(concat(concat(b.prompt, got_b.tokens), make_prompt(25, 26, n_vocab())), 12);
    run_result got_f = run_task(*e, task_generate{follow});
    expect_same(got_f, fresh(follow), what() + ": follow-up");
    EXPECT_GE(got_f.done->usage.cached_tokens, b.prompt.size()) << what();
    EXPECT_EQ(e->metrics().invariant_repairs, 0u) << what();
}

// A prompt whose prefix nobody holds or computes shares nothing and does not wait (two unrelated prompts run
// side by side, each computing its own).
TEST_P(PrefixShare, UnrelatedPromptsShareNothing) {
    const gen_request a = greedy(make_prompt(200, 31, n_vocab()), 8);
    const gen_request b = greedy(make_prompt(200, 32, n_vocab()), 8);
    auto e = make_engine(m(), cfg());
    auto [got_a, got_b] = run_together(*e, a, b);
    ASSERT_TRUE(got_a.done.ok() && got_b.done.ok());
    EXPECT_EQ(got_b.done->usage.cached_tokens, 0u) << what();
    EXPECT_EQ(e->metrics().prefix_shares, 0u) << what();
}

// Tenants whose system prompts begin with the same preamble: a new tenant takes an empty slot (with the
// preamble's cells shared, where the cache can) and leaves the other tenant's slot whole, so that tenant's next
// request finds its whole system prompt. (Regression, prefix_routing_bench: the new tenant truncated the other's
// slot to the preamble, and every tenant's next request on that node recomputed its prompt.)
TEST_P(PrefixShare, PreambleSharedByTenantsNeverEvictsAnotherTenant) {
    const std::vector<token_id> preamble = make_prompt(40, 41, n_vocab());
    auto tenant = [&](unsigned seed) {
        std::vector<token_id> own = make_prompt(201, seed, n_vocab());
        return concat(preamble, std::vector<token_id>(own.begin() + 1, own.end()));
    };
    const std::vector<token_id> sys_a = tenant(42), sys_b = tenant(43);
    auto e = make_engine(m(), cfg());
    ASSERT_TRUE(run_task(*e, task_generate{greedy(concat(sys_a, make_prompt(10, 44, n_vocab())), 4)}).done.ok());
    run_result b = run_task(*e, task_generate{greedy(concat(sys_b, make_prompt(10, 45, n_vocab())), 4)});
    ASSERT_TRUE(b.done.ok());
    EXPECT_EQ(b.done->usage.cached_tokens, shares() ? preamble.size() : 0u) << what();
    const uint32_t a_held = uint32_t(sys_a.size() + 10 + 4 - 1);  // prompt and answer (its last token unfed)
    bool a_whole = false;
    for (const slot_info & s : e->slots()) a_whole = a_whole || s.n_tokens == a_held;
    EXPECT_TRUE(a_whole) << what() << ": tenant A's slot was truncated";
    const gen_request again = greedy(concat(sys_a, make_prompt(10, 46, n_vocab())), 4);
    run_result a2 = run_task(*e, task_generate{again});
    ASSERT_TRUE(a2.done.ok());
    // (Models with partial state roll back only to a checkpoint: these take one 4 tokens before the prompt's end.)
    if (!m()->has_partial_state()) {
        EXPECT_GE(a2.done->usage.cached_tokens, sys_a.size()) << what();
    }
    auto fresh = make_engine(m(), cfg());
    EXPECT_EQ(a2.tokens, run_task(*fresh, task_generate{again}).tokens) << what();
}

INSTANTIATE_TEST_SUITE_P(AllArchs, PrefixShare, ::testing::ValuesIn(family_cases()), family_case_name);

}  // namespace
}  // namespace baton
