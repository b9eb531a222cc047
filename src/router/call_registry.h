// call_registry.h — the upstream calls in flight to each node of a pool, so that ejecting a node cancels
// them at once instead of leaving each to wait for the request's --timeout.
//
// A request that has connected to a node registers the call (call_registry::enter) with a cancel action —
// closing that call's upstream socket — and the strand the call runs on. When the health checker finds a
// node dead or stalled it calls cancel_node: every call registered to that node is marked cancelled with
// the ejection's reason and its cancel action is posted to the call's own strand, so the socket is closed
// between the call's own operations, never concurrently with them; the pending read or write then fails
// and the request applies the failure policy (failure_policy.h) at once. The call asks its guard whether
// the failure was an ejection (cancelled()) and reports the ejection's reason instead of the socket error.
// A call that registers after its node's ejection is cancelled by the next failed health check (every
// failed check cancels whatever is registered to the node).
// Thread-safety: enter and cancel_node from any thread (one mutex). A call_guard belongs to its call: it
// is used and destroyed on the call's strand, and it is destroyed before whatever the cancel action
// touches (declare it after the upstream it closes).
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "baton/base/status.h"
#include "baton/base/thread_annotations.h"
#include "baton/http/net.h"

namespace baton {

class call_registry;

// call_guard: one registered call; unregisters when destroyed. Movable, not copyable; empty when
// default-constructed or moved from.
class call_guard {
  public:
    call_guard() = default;
    call_guard(call_guard && o) noexcept;
    call_guard & operator=(call_guard && o) noexcept;
    call_guard(const call_guard &) = delete;
    call_guard & operator=(const call_guard &) = delete;
    ~call_guard();

    // cancelled: the node was ejected while this call was registered (its cancel action was posted).
    bool cancelled() const;
    // reason: why the node was ejected (upstream_error naming the node); OK when not cancelled.
    Status reason() const;
    // failure: what a failed operation of this call means: the ejection's reason when the call was
    // cancelled, else st itself.
    Status failure(const Status & st) const { return cancelled() ? reason() : st; }

  private:
    friend class call_registry;
    struct entry;
    using slot = std::multimap<size_t, std::shared_ptr<entry>>::iterator;
    call_guard(call_registry * r, std::shared_ptr<entry> e, slot s) : registry_(r), entry_(std::move(e)), slot_(s) {}
    void leave();

    call_registry * registry_ = nullptr;
    std::shared_ptr<entry> entry_;
    slot slot_{};
};

class call_registry {
  public:
    call_registry() = default;
    call_registry(const call_registry &) = delete;
    call_registry & operator=(const call_registry &) = delete;

    // enter registers a call to node `node` (its node_pool index); cancel runs on ex when the node is
    // ejected while the guard lives. REQUIRES: ex is the calling coroutine's strand.
    call_guard enter(size_t node, net::any_io_executor ex, std::function<void()> cancel);
    // cancel_node cancels every call registered to node now with why (the guards report it), posting each
    // one's cancel action to its strand; returns how many calls it cancelled.
    size_t cancel_node(size_t node, const Status & why);
    // in_flight: calls registered to node now.
    size_t in_flight(size_t node) const;

  private:
    friend class call_guard;
    void leave(call_guard::slot s);

    mutable mutex mu_;
    std::multimap<size_t, std::shared_ptr<call_guard::entry>> calls_ BATON_GUARDED_BY(mu_);  // node index -> call
};

// What a registered call shares with the registry.
struct call_guard::entry {
    entry(net::any_io_executor e, std::function<void()> c) : ex(std::move(e)), cancel(std::move(c)) {}
    const net::any_io_executor ex;  // the call's strand
    // Run and cleared only on ex (by the posted cancellation and by the guard's destructor), so the two
    // never race and a cancellation that runs after the call ended does nothing.
    std::function<void()> cancel;
    std::atomic<bool> cancelled{false};
    mutable mutex mu;
    Status why BATON_GUARDED_BY(mu);
};

}  // namespace baton
