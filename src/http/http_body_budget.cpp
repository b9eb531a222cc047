// http_body_budget.cpp — see include/baton/http/http_body_budget.h.
#include "baton/http/http_body_budget.h"

namespace baton {

bool http_body_budget::try_commit(uint64_t n) {
    uint64_t cur = committed_.load(std::memory_order_relaxed);
    do {
        if (n > cap_ || cur > cap_ - n) {
            refusals_.fetch_add(1, std::memory_order_relaxed);
            return false;
        }
    } while (!committed_.compare_exchange_weak(cur, cur + n, std::memory_order_relaxed));
    return true;
}

void http_body_budget::release(uint64_t n) { committed_.fetch_sub(n, std::memory_order_relaxed); }

http_body_hold & http_body_hold::operator=(http_body_hold && o) noexcept {
    if (this != &o) {
        reset();
        budget_ = o.budget_;
        bytes_ = o.bytes_;
        o.bytes_ = 0;
    }
    return *this;
}

bool http_body_hold::grow(uint64_t n) {
    if (budget_ && !budget_->try_commit(n)) return false;
    bytes_ += n;
    return true;
}

void http_body_hold::reset() {
    if (budget_ && bytes_ > 0) budget_->release(bytes_);
    bytes_ = 0;
}

}  // namespace baton
