// body_relay.cpp — see body_relay.h.
#include "body_relay.h"

#include <algorithm>
#include <string>

#include "baton/buffer_pool.h"

namespace baton {

body_relay::body_relay(uint64_t length) : length_(length) { bytes_ = buffer_pool::shared().take(size_t(length)); }

body_relay::~body_relay() { buffer_pool::shared().give(std::move(bytes_)); }

void body_relay::append(const char * data, size_t n) {
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (ended_) return;
        if (n > length_ - bytes_.size()) {
            ended_ = true;
            ended_at_ = std::chrono::steady_clock::now();
            status_ = Status(status_code::upstream_error, "the body is longer than its Content-Length of " + std::to_string(length_));
        } else {
            // Readers only look at [0, size()) under the lock, and capacity was reserved for the whole
            // body, so appending never moves bytes a reader holds.
            bytes_.insert(bytes_.end(), data, data + n);
        }
    }
    cv_.notify_all();
}

void body_relay::finish(Status st) {
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (ended_) return;
        ended_ = true;
        ended_at_ = std::chrono::steady_clock::now();
        if (st.ok() && bytes_.size() != length_)
            st = Status(status_code::upstream_error, "the body ended after " + std::to_string(bytes_.size()) + " of " +
                                                         std::to_string(length_) + " bytes");
        status_ = std::move(st);
    }
    cv_.notify_all();
}

body_relay::read_result body_relay::read(uint64_t offset, size_t max_bytes, std::chrono::steady_clock::time_point until,
                                         const std::function<bool(const uint8_t *, size_t)> & out) {
    const uint8_t * p = nullptr;
    size_t n = 0;
    {
        std::unique_lock<std::mutex> lk(mu_);
        const bool ready = cv_.wait_until(lk, until, [&] { return bytes_.size() > offset || ended_; });
        if (!ready) return read_result::waiting;
        if (ended_ && !status_.ok()) return read_result::failed;
        if (bytes_.size() <= offset) return read_result::failed;  // ended intact: the caller read past the end
        p = bytes_.data() + offset;
        n = std::min<size_t>(max_bytes, bytes_.size() - size_t(offset));
    }
    // The bytes before size() never change or move (capacity is fixed), so they are read unlocked.
    return out(p, n) ? read_result::data : read_result::failed;
}

Status body_relay::wait_end(std::chrono::steady_clock::time_point deadline) {
    std::unique_lock<std::mutex> lk(mu_);
    if (!cv_.wait_until(lk, deadline, [&] { return ended_; }))
        return Status(status_code::deadline_exceeded, "the prefill node's blob did not arrive before the deadline");
    return status_;
}

std::chrono::steady_clock::time_point body_relay::ended_at() const {
    std::lock_guard<std::mutex> lk(mu_);
    return ended_at_;
}

bool body_relay::failed() const {
    std::lock_guard<std::mutex> lk(mu_);
    return ended_ && !status_.ok();
}

}  // namespace baton
