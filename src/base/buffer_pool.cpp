// buffer_pool.cpp — see buffer_pool.h.
#include "baton/base/buffer_pool.h"

#include <algorithm>

#if defined(__linux__)
#include <sys/resource.h>
#include <unistd.h>
#endif

namespace baton {

buffer_pool::buffer_pool(size_t max_bytes, size_t max_buffers, size_t min_pooled, bool warm)
    : max_bytes_(max_bytes), max_buffers_(max_buffers), min_pooled_(min_pooled), warm_(warm) {
    if (warm) warmer_ = std::thread([this] { warm_loop(); });
}

buffer_pool::~buffer_pool() {
    {
        lock_guard lk(mu_);
        warm_stop_ = true;
    }
    warm_cv_.notify_all();
    if (warmer_.joinable()) warmer_.join();
}

bool buffer_pool::holds_at_least(size_t capacity) const {
    return std::any_of(free_.begin(), free_.end(), [&](const auto & b) { return b.capacity() >= capacity; });
}

void buffer_pool::warm_loop() {
#if defined(__linux__)
    // Nice 19 (this thread only, on Linux): the pages are touched with ~1.5% of a contended CPU's time, so the
    // requests' threads barely notice, yet the buffer is ready within seconds on a loaded machine (SCHED_IDLE,
    // tried first, let a loaded test machine starve it past 10 s).
    (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 19);
#endif
    for (;;) {
        size_t want = 0;
        {
            lock_guard lk(mu_);
            warm_busy_ = false;
            warm_cv_.notify_all();  // (buffer_pool_settle_for_test)
            warm_cv_.wait(mu_, [&]() BATON_REQUIRES(mu_) { return warm_stop_ || warm_want_ != 0; });
            if (warm_stop_) return;
            want = warm_want_;
            warm_want_ = 0;
            // Only when a take of that size would miss, and within the bounds (give would drop it otherwise).
            if (holds_at_least(want) || want > max_bytes_) continue;
            warm_busy_ = true;
        }
        std::vector<uint8_t> b;
        b.resize(want);  // every page touched (zeroed)
        b.clear();       // the capacity and its pages stay
        const bool kept = keep(std::move(b));
        lock_guard lk(mu_);
        warmed_ += kept ? 1 : 0;
    }
}

std::vector<uint8_t> buffer_pool::take(size_t min_capacity) {
    std::vector<uint8_t> out;
    {
        lock_guard lk(mu_);
        auto it =
            std::find_if(free_.begin(), free_.end(), [&](const auto & b) { return b.capacity() >= min_capacity; });
        if (it != free_.end()) {
            out = std::move(*it);
            free_.erase(it);
            bytes_ -= out.capacity();
        }
        if (warm_ && min_capacity >= k_warm_min) {  // the next take of this size finds one warm
            warm_want_ = std::max(warm_want_, min_capacity + min_capacity / 4);
            warm_cv_.notify_all();
        }
    }
    if (out.capacity() < min_capacity) out.reserve(min_capacity);
    return out;
}

void buffer_pool::give(std::vector<uint8_t> && buf) { (void)keep(std::move(buf)); }

bool buffer_pool::keep(std::vector<uint8_t> && buf) {
    std::vector<uint8_t> b = std::move(buf);
    const size_t cap = b.capacity();
    if (cap < min_pooled_ || cap > max_bytes_) return false;
    b.clear();
    std::vector<uint8_t> dropped;  // freed outside the lock
    lock_guard lk(mu_);
    // Make room by dropping the smallest buffers, but never for a buffer smaller than what it would drop.
    while (!free_.empty() && (free_.size() >= max_buffers_ || bytes_ + cap > max_bytes_)) {
        if (free_.front().capacity() > cap) return false;
        bytes_ -= free_.front().capacity();
        dropped = std::move(free_.front());
        free_.erase(free_.begin());
    }
    if (free_.size() >= max_buffers_ || bytes_ + cap > max_bytes_) return false;
    auto pos =
        std::lower_bound(free_.begin(), free_.end(), cap, [](const auto & x, size_t c) { return x.capacity() < c; });
    free_.insert(pos, std::move(b));
    bytes_ += cap;
    return true;
}

size_t buffer_pool::pooled_bytes() const {
    lock_guard lk(mu_);
    return bytes_;
}

size_t buffer_pool::pooled_buffers() const {
    lock_guard lk(mu_);
    return free_.size();
}

size_t buffer_pool::warmed() const {
    lock_guard lk(mu_);
    return warmed_;
}

buffer_pool & buffer_pool::shared() {
    static buffer_pool pool(size_t(512) << 20, 8, size_t(1) << 20, true);
    return pool;
}

}  // namespace baton
