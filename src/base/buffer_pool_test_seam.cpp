// buffer_pool_test_seam.cpp — see buffer_pool_test_seam.h.
#include "buffer_pool_test_seam.h"

#include <chrono>

namespace baton {

void buffer_pool_settle_for_test(buffer_pool & p) {
    lock_guard lk(p.mu_);
    (void)p.warm_cv_.wait_for(p.mu_, std::chrono::seconds(30),
                              [&]() BATON_REQUIRES(p.mu_) { return p.warm_want_ == 0 && !p.warm_busy_; });
}

}  // namespace baton
