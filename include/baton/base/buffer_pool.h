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
//
// Warming (the shared pool; off in a pool made with warm = false): a buffer that leaves the pool for good (a
// state the host prompt cache keeps, a blob a client holds) takes its pages with it, so the next take of that
// size faulted fresh pages on the request's path — on the CI host ~100-200 ms for a 66.6 MB state against ~10 ms
// into warm pages (figure 24's live-migration stall). After a take of k_warm_min bytes or more, a background
// thread at nice 19 makes sure the pool holds a buffer of that size plus a quarter (a state grows
// as its generation goes on) with every page touched, within the same bounds. Cost: up to one such buffer of
// host memory beyond what the pool would hold anyway, and the page faults, off the requests' threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>

#include "baton/base/thread_annotations.h"
#include <vector>

namespace baton {

class buffer_pool {
  public:
    static constexpr size_t k_warm_min = size_t(4) << 20;

    buffer_pool(size_t max_bytes, size_t max_buffers, size_t min_pooled = size_t(1) << 20, bool warm = false);
    ~buffer_pool();  // stops the warming thread (waits for the buffer it is touching)
    buffer_pool(const buffer_pool &) = delete;
    buffer_pool & operator=(const buffer_pool &) = delete;

    // take returns an empty buffer whose capacity is at least min_capacity: the smallest pooled buffer
    // that is large enough, else a freshly reserved one.
    std::vector<uint8_t> take(size_t min_capacity);
    // give returns a buffer to the pool (its contents are dropped); kept only within the bounds.
    void give(std::vector<uint8_t> && buf);

    size_t pooled_bytes() const;
    size_t pooled_buffers() const;
    // warmed: buffers the warming thread has put in the pool so far.
    size_t warmed() const;

    // shared is the process-wide pool: at most 8 buffers and 512 MiB.
    static buffer_pool & shared();

  private:
    friend void buffer_pool_settle_for_test(buffer_pool & p);  // src/base/buffer_pool_test_seam.h
    void warm_loop();
    bool keep(std::vector<uint8_t> && buf);  // give, telling whether the pool kept it
    bool holds_at_least(size_t capacity) const BATON_REQUIRES(mu_);

    const size_t max_bytes_, max_buffers_, min_pooled_;
    const bool warm_;
    mutable mutex mu_;
    std::vector<std::vector<uint8_t>> free_ BATON_GUARDED_BY(mu_);  // ascending capacity
    size_t bytes_ BATON_GUARDED_BY(mu_) = 0;                        // sum of capacities
    // warming: the size asked for (0: nothing), whether the thread is at work, its count, stop
    condition_variable warm_cv_;
    size_t warm_want_ BATON_GUARDED_BY(mu_) = 0;
    bool warm_busy_ BATON_GUARDED_BY(mu_) = false;
    size_t warmed_ BATON_GUARDED_BY(mu_) = 0;
    bool warm_stop_ BATON_GUARDED_BY(mu_) = false;
    std::thread warmer_;
};

}  // namespace baton
