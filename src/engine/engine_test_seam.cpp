// engine_test_seam.cpp — engine_test_access, compiled only into baton_engine_test_seam (tests link it).
#include "engine_test_seam.h"

#include "engine_impl.h"

namespace baton {

Result<std::unique_ptr<engine>> engine_test_access::create(std::shared_ptr<const loaded_model> model,
                                                           const engine_config & cfg,
                                                           std::shared_ptr<const engine_test_seam> seam) {
    auto impl = engine_impl::create(std::move(model), cfg, std::move(seam));
    if (!impl.ok()) return impl.status();
    return std::unique_ptr<engine>(new engine(std::move(impl.value())));
}

}  // namespace baton
