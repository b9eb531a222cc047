// tier_test_seam.cpp — tier_test_access, compiled only into baton_tier_test_seam (tests link it).
#include "tier_test_seam.h"

#include "tier_store_state.h"

namespace baton {

Result<std::unique_ptr<tier_store>> tier_test_access::create(tier_config config,
                                                             std::shared_ptr<const tier_test_seam> seam) {
    auto s = tier_store_state_make(std::move(config));
    if (!s.ok()) return s.status();
    s.value()->seam = std::move(seam);
    return std::unique_ptr<tier_store>(new tier_store(std::move(s.value())));
}

}  // namespace baton
