// capacity_gate.h — requests waiting at the router until a node of a pool has room.
//
// The router lets each node hold at most its capacity (its slots plus a small queue, node_pool); a request
// that finds every node full waits here instead of being bounced with 503, and is woken in arrival order
// as requests end. The queue is bounded (--queue-max: beyond it, 503 at once) and every wait has the
// request's deadline; a waiter that leaves after being woken (deadline, client gone) passes its wake-up on.
// Thread-safety: every method is safe from any thread (one mutex); waiters wait on their own strands.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>

#include "baton/base/thread_annotations.h"
#include "baton/http/async_notify.h"

namespace baton {

class capacity_gate {
  public:
    explicit capacity_gate(size_t max_waiting) : max_waiting_(max_waiting) {}

    // enter queues a waiter notified on ex's strand; null when max_waiting requests wait already.
    notify_ptr enter(net::any_io_executor ex);
    // requeue puts a woken waiter back at the front (it found no room after all).
    void requeue(const notify_ptr & w);
    // leave removes w; if it had been woken without using the room, the next waiter is woken instead.
    void leave(const notify_ptr & w, bool was_woken);
    // wake_one: a request ended (room for one); wake_all: nodes changed (health, capacity).
    void wake_one();
    void wake_all();
    size_t waiting() const;

  private:
    const size_t max_waiting_;
    mutable mutex mu_;
    std::list<notify_ptr> q_ BATON_GUARDED_BY(mu_);  // arrival order
};

}  // namespace baton
