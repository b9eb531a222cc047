// chunk_plan.h — how a prompt is cut into llama_decode calls.
//
// The cut points decide the floating-point numerics of prompt processing (results differ by ~1e-4 when a
// prompt is split differently), so the oracle (generate.cpp) and the engine both use this one function:
// a single-slot engine run is then bit-identical to the oracle. For models with partial (recurrent/SWA)
// state a chunk also ends at every checkpoint position, because a checkpoint can only be taken between
// two decodes.
#pragma once

#include <cstdint>
#include <vector>

namespace baton {

struct checkpoint_policy {
    uint32_t every = 512;  // take a checkpoint each time this many prompt tokens have been processed (0: off)
    uint32_t tail = 4;     // and one this many tokens before the end of the prompt (0: off)
    uint32_t max = 8;      // at most this many per slot (oldest dropped first)
};

// chunk_plan_checkpoints lists the token counts in (0, n_prompt) at which a checkpoint is taken while a
// prompt of n_prompt tokens is processed from n_begin. Never n_prompt itself: a checkpoint at the final
// position would be a fabrication (it could not be used to roll back anything).
std::vector<uint32_t> chunk_plan_checkpoints(uint32_t n_begin, uint32_t n_prompt, const checkpoint_policy & p);

// chunk_plan_ends lists the token count after each decode when a prompt of n_prompt tokens is processed
// from n_begin in chunks of at most n_batch, also stopping at each checkpoint position when partial_state.
std::vector<uint32_t> chunk_plan_ends(uint32_t n_begin, uint32_t n_prompt, uint32_t n_batch, bool partial_state,
                                      const checkpoint_policy & p);

}  // namespace baton
