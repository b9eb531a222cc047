// buffer_pool_test_seam.h — what tests may do to a buffer pool that production code need not: wait for its
// warming thread.
//
// Private to base (only base's sources and tests/base see src/base), and defined in baton_base_test_seam, a
// library only test executables link.
#pragma once

#include "baton/base/buffer_pool.h"

namespace baton {

// buffer_pool_settle_for_test waits (bounded: up to 30 s) until p's warming thread has nothing left to do, so a
// test can read pooled_buffers() and warmed() after a take. Test-only.
void buffer_pool_settle_for_test(buffer_pool & p);

}  // namespace baton
