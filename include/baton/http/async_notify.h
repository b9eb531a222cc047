// async_notify.h — wake one coroutine from any thread.
//
// The engine's scheduler thread, another connection's strand or a relay producer call notify(); the one
// coroutine that owns the notifier waits in wait_until() on the strand it was made for, without blocking
// the event loop. A notify() that comes before the wait is not lost (it is remembered until the next
// wait), and several notify() calls before a wait coalesce into one wake-up.
// Thread-safety: notify() from any thread; wait_until() only from the owner's strand, one waiter at a time.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>

#include "baton/http/net.h"

namespace baton {

class async_notify : public std::enable_shared_from_this<async_notify> {
  public:
    // make: a notifier whose waiter runs on ex (the owning coroutine's strand).
    static std::shared_ptr<async_notify> make(net::any_io_executor ex) {
        return std::shared_ptr<async_notify>(new async_notify(std::move(ex)));
    }

    void notify() {
        if (pending_.exchange(true)) return;
        net::post(timer_.get_executor(), [self = shared_from_this()] { self->timer_.cancel(); });
    }

    // wait_until returns true once notified (possibly already before the call), false when `until` passed.
    net::awaitable<bool> wait_until(std::chrono::steady_clock::time_point until) {
        for (;;) {
            if (pending_.exchange(false)) co_return true;
            if (std::chrono::steady_clock::now() >= until) co_return false;
            timer_.expires_at(until);
            error_code ec;
            co_await timer_.async_wait(net::redirect_error(net::use_awaitable, ec));
        }
    }

  private:
    explicit async_notify(net::any_io_executor ex) : timer_(std::move(ex)) {}
    net::steady_timer timer_;
    std::atomic<bool> pending_{false};
};
using notify_ptr = std::shared_ptr<async_notify>;

}  // namespace baton
