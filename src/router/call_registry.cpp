// call_registry.cpp — see call_registry.h.
#include "call_registry.h"

namespace baton {

call_guard::call_guard(call_guard && o) noexcept
    : registry_(std::exchange(o.registry_, nullptr)), entry_(std::move(o.entry_)), slot_(o.slot_) {}

call_guard & call_guard::operator=(call_guard && o) noexcept {
    if (this != &o) {
        leave();
        registry_ = std::exchange(o.registry_, nullptr);
        entry_ = std::move(o.entry_);
        slot_ = o.slot_;
    }
    return *this;
}

call_guard::~call_guard() { leave(); }

void call_guard::leave() {
    if (!registry_) return;
    registry_->leave(slot_);
    registry_ = nullptr;
    entry_->cancel = nullptr;  // (on the call's strand: a cancellation still queued there finds nothing to do)
    entry_.reset();
}

bool call_guard::cancelled() const { return entry_ && entry_->cancelled.load(std::memory_order_acquire); }

Status call_guard::reason() const {
    if (!cancelled()) return Status();
    const entry & e = *entry_;
    lock_guard lk(e.mu);
    return e.why;
}

call_guard call_registry::enter(size_t node, net::any_io_executor ex, std::function<void()> cancel) {
    auto e = std::make_shared<call_guard::entry>(std::move(ex), std::move(cancel));
    lock_guard lk(mu_);
    auto slot = calls_.emplace(node, e);
    return call_guard(this, std::move(e), slot);
}

void call_registry::leave(call_guard::slot s) {
    lock_guard lk(mu_);
    calls_.erase(s);
}

size_t call_registry::cancel_node(size_t node, const Status & why) {
    lock_guard lk(mu_);
    size_t n = 0;
    for (auto [it, end] = calls_.equal_range(node); it != end; ++it) {
        const std::shared_ptr<call_guard::entry> & e = it->second;
        call_guard::entry & call = *e;
        if (call.cancelled.load(std::memory_order_relaxed)) continue;  // an earlier ejection's, still unwinding
        {
            lock_guard elk(call.mu);
            call.why = why;
        }
        call.cancelled.store(true, std::memory_order_release);
        net::post(call.ex, [e] {
            if (e->cancel) e->cancel();
        });
        ++n;
    }
    return n;
}

size_t call_registry::in_flight(size_t node) const {
    lock_guard lk(mu_);
    return calls_.count(node);
}

}  // namespace baton
