// chunk_plan_test.cpp — where a prompt is cut into decodes and checkpoints (chunk_plan.h): the cut points
// decide the numerics, so the oracle and the engine must agree on every one of them.
#include <gtest/gtest.h>

#include <vector>

#include "baton/chunk_plan.h"

namespace baton {
namespace {

using v = std::vector<uint32_t>;

TEST(ChunkPlan, EndsAreBatchSizedUpToThePrompt) {
    const checkpoint_policy p;
    EXPECT_EQ(chunk_plan_ends(0, 10, 4, false, p), (v{4, 8, 10}));
    EXPECT_EQ(chunk_plan_ends(0, 8, 4, false, p), (v{4, 8}));
    EXPECT_EQ(chunk_plan_ends(6, 10, 4, false, p), (v{10})) << "a reused prefix is not decoded again";
    EXPECT_EQ(chunk_plan_ends(10, 10, 4, false, p), v{}) << "nothing left to decode";
    EXPECT_EQ(chunk_plan_ends(0, 10, 0, false, p), v{}) << "no batch, no plan";
}

TEST(ChunkPlan, CheckpointsEveryNAndBeforeTheTailNeverAtTheEnd) {
    const checkpoint_policy p{.every = 4, .tail = 2, .max = 8};
    EXPECT_EQ(chunk_plan_checkpoints(0, 10, p), (v{4, 8}));  // 10 - 2 = 8 coincides with every 4
    EXPECT_EQ(chunk_plan_checkpoints(0, 11, p), (v{4, 8, 9}));
    EXPECT_EQ(chunk_plan_checkpoints(0, 8, p), (v{4, 6})) << "never at n_prompt itself";
    EXPECT_EQ(chunk_plan_checkpoints(5, 11, p), (v{8, 9})) << "none at or before where the prompt resumes";
    EXPECT_EQ(chunk_plan_checkpoints(0, 2, p), v{}) << "a prompt no longer than the tail has none";
    EXPECT_EQ(chunk_plan_checkpoints(0, 10, checkpoint_policy{.every = 0, .tail = 0, .max = 8}), v{});
}

TEST(ChunkPlan, PartialStateModelsAlsoStopAtEveryCheckpoint) {
    const checkpoint_policy p{.every = 4, .tail = 2, .max = 8};
    EXPECT_EQ(chunk_plan_ends(0, 11, 16, true, p), (v{4, 8, 9, 11}));
    EXPECT_EQ(chunk_plan_ends(0, 11, 3, true, p), (v{3, 4, 7, 8, 9, 11}));
    EXPECT_EQ(chunk_plan_ends(0, 11, 16, false, p), (v{11})) << "full-state models ignore checkpoints";
}

}  // namespace
}  // namespace baton
