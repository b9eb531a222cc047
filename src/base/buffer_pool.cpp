// buffer_pool.cpp — see buffer_pool.h.
#include "baton/base/buffer_pool.h"

#include <algorithm>

namespace baton {

buffer_pool::buffer_pool(size_t max_bytes, size_t max_buffers, size_t min_pooled)
    : max_bytes_(max_bytes), max_buffers_(max_buffers), min_pooled_(min_pooled) {}

std::vector<uint8_t> buffer_pool::take(size_t min_capacity) {
    {
        lock_guard lk(mu_);
        auto it =
            std::find_if(free_.begin(), free_.end(), [&](const auto & b) { return b.capacity() >= min_capacity; });
        if (it != free_.end()) {
            std::vector<uint8_t> out = std::move(*it);
            free_.erase(it);
            bytes_ -= out.capacity();
            return out;
        }
    }
    std::vector<uint8_t> out;
    out.reserve(min_capacity);
    return out;
}

void buffer_pool::give(std::vector<uint8_t> && buf) {
    std::vector<uint8_t> b = std::move(buf);
    const size_t cap = b.capacity();
    if (cap < min_pooled_ || cap > max_bytes_) return;
    b.clear();
    std::vector<uint8_t> dropped;  // freed outside the lock
    lock_guard lk(mu_);
    // Make room by dropping the smallest buffers, but never for a buffer smaller than what it would drop.
    while (!free_.empty() && (free_.size() >= max_buffers_ || bytes_ + cap > max_bytes_)) {
        if (free_.front().capacity() > cap) return;
        bytes_ -= free_.front().capacity();
        dropped = std::move(free_.front());
        free_.erase(free_.begin());
    }
    if (free_.size() >= max_buffers_ || bytes_ + cap > max_bytes_) return;
    auto pos =
        std::lower_bound(free_.begin(), free_.end(), cap, [](const auto & x, size_t c) { return x.capacity() < c; });
    free_.insert(pos, std::move(b));
    bytes_ += cap;
}

size_t buffer_pool::pooled_bytes() const {
    lock_guard lk(mu_);
    return bytes_;
}

size_t buffer_pool::pooled_buffers() const {
    lock_guard lk(mu_);
    return free_.size();
}

buffer_pool & buffer_pool::shared() {
    static buffer_pool pool(size_t(512) << 20, 8);
    return pool;
}

}  // namespace baton
