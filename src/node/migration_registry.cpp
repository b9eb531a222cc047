// migration_registry.cpp — see migration_registry.h.
#include "migration_registry.h"

namespace baton {

migration_registry::entry & migration_registry::entry::operator=(entry && o) noexcept {
    if (this != &o) {
        if (r_) r_->leave(key_);
        r_ = o.r_;
        key_ = o.key_;
        o.r_ = nullptr;
    }
    return *this;
}

migration_registry::entry::~entry() {
    if (r_) r_->leave(key_);
}

migration_registry::entry migration_registry::enter(const request_ptr & h) {
    lock_guard lk(mu_);
    const uint64_t key = next_++;
    running_.emplace(key, h);
    return entry(this, key);
}

size_t migration_registry::migrate(size_t n) {
    lock_guard lk(mu_);
    size_t asked = 0;
    for (auto & [key, w] : running_) {
        if (n != 0 && asked >= n) break;
        auto h = w.lock();
        if (!h || h->migrate_requested() || h->cancelled()) continue;
        h->migrate();
        ++asked;
    }
    return asked;
}

size_t migration_registry::size() const {
    lock_guard lk(mu_);
    return running_.size();
}

void migration_registry::leave(uint64_t key) {
    lock_guard lk(mu_);
    running_.erase(key);
}

}  // namespace baton
