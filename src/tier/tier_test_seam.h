// tier_test_seam.h — what the tier's tests may do to a tier_store that production code cannot.
//
// Private to the tier module (only its sources and tests/tier see src/tier); tier_test_access is defined in
// baton_tier_test_seam, a library only test executables link. A production store has no seam (a null
// pointer) and never calls into one.
#pragma once

#include <functional>
#include <memory>

#include "baton/tier/tier_store.h"

namespace baton {

struct tier_test_seam {
    // after_manifest runs in get between reading the manifest and reading the parts (to kill or stop the
    // server there). Runs on the caller's thread.
    std::function<void()> after_manifest;
};

struct tier_test_access {
    // create is tier_store::create with a seam installed.
    static Result<std::unique_ptr<tier_store>> create(tier_config config, std::shared_ptr<const tier_test_seam> seam);
};

}  // namespace baton
