// tier_paths_test.cpp — PD equals a single node on every path a shared tier gives a prompt, on every family
// (docs/tier.md; issue 25's acceptance): the prefill engine takes the prompt's prefix from nowhere (a miss),
// from its own host cache (the node tier: its slot's state kept when another conversation took the slot),
// from another engine's state (the cluster tier: task_cache_put, as tier_warm hands it), from a chain of a
// whole state and a delta over it, or from a delta over the state its slot holds; the decode engine restores
// the blob and generates; tokens and every sampled position's logits equal a single engine's, bit for bit.
// The nodes' own path (Valkey, tier_warm, the router) is tests/e2e/serve_tier_test.cpp's, on llama.
#include "baton/testmodel/mkmodel.h"
#include "engine_fixture.h"

namespace baton {
namespace {

using namespace baton::test;

class TierPaths : public family_test {
  protected:
    engine_config cfg() {
        engine_config c = family_cfg(1, 1024);
        c.cache_ram_mib = 64;
        c.ctx.checkpoints.every = 128;
        return c;
    }
};

TEST_P(TierPaths, PdEqualsSingleNodeOnEveryTierPath) {
    const std::vector<token_id> p1 = make_prompt(150, 201, n_vocab());
    const std::vector<token_id> q = concat(p1, make_prompt(110, 202, n_vocab()));  // the conversation so far
    const gen_request r = greedy(concat(q, make_prompt(30, 203, n_vocab())), 8);   // its next turn

    auto single = make_engine(m(), cfg());
    const run_result want = run_task(*single, task_generate{r});
    ASSERT_TRUE(want.done.ok()) << want.done.status().to_string();

    // The tier's entries, as another node wrote them: the first turn's state, the conversation's, and the
    // conversation's as a delta over the first 128 tokens.
    auto writer = make_engine(m(), cfg());
    run_result s1 = run_task(*writer, task_prefill{greedy(p1, 1)});
    run_result s2 = run_task(*writer, task_prefill{greedy(q, 1)});
    ASSERT_TRUE(s1.done.ok() && s2.done.ok()) << what();
    const blob_ptr state1 = validated(std::move(s1.done->blob));
    const blob_ptr state2 = validated(std::move(s2.done->blob));
    auto d = writer->delta_of(state2->view(), 128, nullptr);
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    const blob_ptr delta = validated(std::move(d.value()));

    struct path {
        const char * name;
        std::function<void(engine &)> setup;
        size_t cached_min;  // prompt tokens the prefill must have taken rather than computed
    };
    const std::vector<path> paths = {
        {"miss", [](engine &) {}, 0},
        {"node tier (its own state, kept when another conversation took the slot)",
         [&](engine & p) {
             ASSERT_TRUE(run_task(p, task_generate{greedy(q, 1)}).done.ok());
             ASSERT_TRUE(run_task(p, task_generate{greedy(make_prompt(90, 204, n_vocab()), 1)}).done.ok());
             ASSERT_EQ(p.metrics().cache_ram_entries, 1u);
         },
         q.size() - 1},
        {"cluster tier (another node's state)",
         [&](engine & p) { ASSERT_TRUE(run_task(p, task_cache_put{state2}).done.ok()); }, q.size() - 1},
        {"cluster tier, a chain: a whole state and a delta over it",
         [&](engine & p) {
             ASSERT_TRUE(run_task(p, task_cache_put{state1}).done.ok());
             ASSERT_TRUE(run_task(p, task_cache_put{delta}).done.ok());
         },
         q.size() - 1},
        {"partial hit: the slot holds the first turn, the tier gives the delta",
         [&](engine & p) {
             ASSERT_TRUE(run_task(p, task_generate{greedy(p1, 1)}).done.ok());
             ASSERT_TRUE(run_task(p, task_cache_put{delta}).done.ok());
         },
         q.size() - 1},
    };
    for (const path & pa : paths) {
        SCOPED_TRACE(what() + ": " + pa.name);
        auto pre = make_engine(m(), cfg());
        pa.setup(*pre);
        if (HasFatalFailure()) return;
        run_result blob = run_task(*pre, task_prefill{r});
        ASSERT_TRUE(blob.done.ok()) << blob.done.status().to_string();
        EXPECT_GE(blob.done->usage.cached_tokens, pa.cached_min);
        if (pa.cached_min == 0) {
            EXPECT_LE(blob.done->usage.cached_tokens, 1u);
        }
        auto dec = make_engine(m(), cfg());
        run_result got = run_task(*dec, task_decode{validated(std::move(blob.done->blob)), r});
        ASSERT_TRUE(got.done.ok()) << got.done.status().to_string();
        EXPECT_EQ(got.tokens, want.tokens);
        EXPECT_TRUE(got.logits == want.logits) << "logits";
        EXPECT_EQ(dec->metrics().invariant_repairs, 0u);
    }
}

INSTANTIATE_TEST_SUITE_P(AllArchs, TierPaths, ::testing::ValuesIn(family_cases()), family_case_name);

}  // namespace
}  // namespace baton
