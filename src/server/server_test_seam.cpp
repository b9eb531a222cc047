// server_test_seam.cpp — server_test_access, compiled only into baton_server_test_seam (tests link it).
#include "server_test_seam.h"

#include "server_impl.h"

namespace baton {

void server_test_access::install(server & s, std::shared_ptr<const server_test_seam> seam) {
    s.impl_->seam = std::move(seam);
}

}  // namespace baton
