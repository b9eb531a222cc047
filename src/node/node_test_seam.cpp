// node_test_seam.cpp — node_test_access, compiled only into baton_node_test_seam (tests link it).
#include "node_test_seam.h"

#include "node_impl.h"

namespace baton {

void node_test_access::install(node & s, std::shared_ptr<const node_test_seam> seam) {
    s.impl_->seam = std::move(seam);
}

}  // namespace baton
