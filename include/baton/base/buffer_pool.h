// buffer_pool.h — recycled byte buffers for blob-sized payloads.
//
// Why: the first touch of a fresh page costs a page fault, and on virtual machines that is expensive
// (measured on the CI host: filling a fresh 16 MiB buffer took ~50 ms, a warm one ~1 ms; a 16 MiB
// /v1/decode body took 65 ms to receive into a fresh buffer and 18 ms into a reused one). Every blob
// buffer (prefill output, slot exports and parks, decode and PUT input, the router's relay) comes from
// one process-wide pool and goes back to it, so steady traffic reuses pages that are already mapped.
//
// Bounds: buffers under min_pooled bytes are not kept (malloc serves them well); at most max_buffers
// buffers and max_bytes of capacity are kept (the smallest is dropped first). Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>

#include "baton/base/thread_annotations.h"
#include <vector>

namespace baton {

class buffer_pool {
  public:
    buffer_pool(size_t max_bytes, size_t max_buffers, size_t min_pooled = size_t(1) << 20);

    // take returns an empty buffer whose capacity is at least min_capacity: the smallest pooled buffer
    // that is large enough, else a freshly reserved one.
    std::vector<uint8_t> take(size_t min_capacity);
    // give returns a buffer to the pool (its contents are dropped); kept only within the bounds.
    void give(std::vector<uint8_t> && buf);

    size_t pooled_bytes() const;
    size_t pooled_buffers() const;

    // shared is the process-wide pool: at most 8 buffers and 512 MiB.
    static buffer_pool & shared();

  private:
    const size_t max_bytes_, max_buffers_, min_pooled_;
    mutable mutex mu_;
    std::vector<std::vector<uint8_t>> free_ BATON_GUARDED_BY(mu_);  // ascending capacity
    size_t bytes_ BATON_GUARDED_BY(mu_) = 0;                        // sum of capacities
};

}  // namespace baton
