// capacity_gate.cpp — see capacity_gate.h.
#include "capacity_gate.h"

#include <algorithm>

namespace baton {

notify_ptr capacity_gate::enter(net::any_io_executor ex) {
    lock_guard lk(mu_);
    if (q_.size() >= max_waiting_) return nullptr;
    q_.push_back(async_notify::make(std::move(ex)));
    return q_.back();
}

void capacity_gate::requeue(const notify_ptr & w) {
    lock_guard lk(mu_);
    if (std::find(q_.begin(), q_.end(), w) == q_.end()) q_.push_front(w);
}

void capacity_gate::leave(const notify_ptr & w, bool was_woken) {
    bool pass_on = false;
    {
        lock_guard lk(mu_);
        auto it = std::find(q_.begin(), q_.end(), w);
        if (it != q_.end()) q_.erase(it);
        else pass_on = was_woken;
    }
    if (pass_on) wake_one();
}

void capacity_gate::wake_one() {
    notify_ptr w;
    {
        lock_guard lk(mu_);
        if (q_.empty()) return;
        w = std::move(q_.front());
        q_.pop_front();
    }
    w->notify();
}

void capacity_gate::wake_all() {
    std::list<notify_ptr> all;
    {
        lock_guard lk(mu_);
        all.swap(q_);
    }
    for (auto & w : all) w->notify();
}

size_t capacity_gate::waiting() const {
    lock_guard lk(mu_);
    return q_.size();
}

}  // namespace baton
