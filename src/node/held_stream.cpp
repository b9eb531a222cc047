// held_stream.cpp — the frames of a state stream held for its fetches (held_stream.h).
#include "held_stream.h"

#include <algorithm>

namespace baton {

void held_stream::wake() {
    std::erase_if(watchers_, [](const std::weak_ptr<async_notify> & w) { return w.expired(); });
    for (const auto & w : watchers_)
        if (auto n = w.lock()) n->notify();
}

void held_stream::append(std::vector<uint8_t> bytes) {
    lock_guard lk(mu_);
    if (closed_) return;
    bytes_ += bytes.size();
    frames_.push_back(std::make_shared<const std::vector<uint8_t>>(std::move(bytes)));
    wake();
}

void held_stream::close() {
    lock_guard lk(mu_);
    closed_ = true;
    wake();
}

void held_stream::abandon() {
    std::function<void()> fn;
    {
        lock_guard lk(mu_);
        if (closed_) return;
        closed_ = true;
        fn = std::move(on_abandon_);
        wake();
    }
    if (fn) fn();
}

void held_stream::set_on_abandon(std::function<void()> fn) {
    lock_guard lk(mu_);
    on_abandon_ = std::move(fn);
}

bool held_stream::closed() const {
    lock_guard lk(mu_);
    return closed_;
}

bool held_stream::frames_from(size_t i, std::vector<frame> & out) const {
    lock_guard lk(mu_);
    for (size_t k = i; k < frames_.size(); ++k) out.push_back(frames_[k]);
    return closed_;
}

void held_stream::watch(const notify_ptr & n) {
    lock_guard lk(mu_);
    watchers_.push_back(n);
}

void held_stream::unwatch(const notify_ptr & n) {
    lock_guard lk(mu_);
    std::erase_if(watchers_, [&](const std::weak_ptr<async_notify> & w) { return w.expired() || w.lock() == n; });
}

uint64_t held_stream::bytes() const {
    lock_guard lk(mu_);
    return bytes_;
}

}  // namespace baton
