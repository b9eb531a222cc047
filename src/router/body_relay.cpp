// body_relay.cpp — see body_relay.h.
#include "body_relay.h"

#include "baton/base/buffer_pool.h"

namespace baton {

body_relay::body_relay(uint64_t length) : length_(length), bytes_(buffer_pool::shared().take(size_t(length))) {
    bytes_.resize(size_t(length));
}

body_relay::~body_relay() {
    bytes_.clear();
    buffer_pool::shared().give(std::move(bytes_));
}

void body_relay::commit(size_t n) {
    if (ended_) return;
    size_ += std::min<uint64_t>(n, room());
    wake();
}

void body_relay::finish(Status st) {
    if (ended_) return;
    if (st.ok() && size_ != length_)
        st = Status(status_code::upstream_error, "body: " + std::to_string(size_) + " of " + std::to_string(length_) + " bytes arrived");
    status_ = std::move(st);
    ended_ = true;
    ended_at_ = std::chrono::steady_clock::now();
    wake();
}

}  // namespace baton
