// engine_test_seam.h — what the engine's tests may do to an engine that production code cannot.
//
// This header is private to the engine module: only the engine's sources and tests/engine see it (the build
// gives no other target src/engine as an include directory), and engine_test_access is defined in
// baton_engine_test_seam, a library only test executables link. A production engine has no seam
// (engine_impl::seam is null) and never calls into one.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "baton/engine.h"
#include "slot.h"

namespace baton {

struct engine_test_seam {
    // on_sample sees, on the scheduler thread, the logits ([n_vocab] f32) each generated token of request
    // request_id was sampled from, before the token's event is pushed. Must not block.
    std::function<void(uint64_t request_id, std::span<const float> logits)> on_sample;
    // desync_after is asked after request request_id's n_generated-th token; true removes the slot's memory
    // behind its back, so the invariant guard must find the mismatch before the next decode and repair it.
    std::function<bool(uint64_t request_id, uint32_t n_generated)> desync_after;
    // restore_fail_after is asked after each step of the restore routine (slot.h, restore_step); true makes
    // the restore fail there, as if libllama had failed, so tests see the slot left empty and consistent.
    std::function<bool(restore_step)> restore_fail_after;
};

struct engine_test_access {
    // create is engine::create with a seam installed before the scheduler thread starts.
    static Result<std::unique_ptr<engine>> create(std::shared_ptr<const loaded_model> model, const engine_config & cfg,
                                                  std::shared_ptr<const engine_test_seam> seam);
};

}  // namespace baton
