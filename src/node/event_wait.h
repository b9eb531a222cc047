// event_wait.h — waiting for a generation's next event under a deadline and a client that may leave,
// without holding a thread.
//
// The engine's scheduler thread notifies the handle's async_notify for every event; the HTTP coroutine
// waits on it (and, through http_exchange::wait, on the client's socket). Every handler that consumes
// engine events goes through event_wait, so the deadline and the client check run on every event, not
// only when the engine is slow: a stream whose tokens arrive faster than they are consumed still ends at
// --timeout (regression: a fast stream used to run past it because the deadline was checked only after an
// idle poll).
#pragma once

#include <chrono>
#include <functional>
#include <vector>

#include "baton/base/status.h"
#include "baton/engine.h"
#include "baton/http/async_notify.h"
#include "baton/http/http_server.h"

namespace baton {

struct event_wait_limits {
    std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
    double timeout_s = 0;               // only for the error message
    std::function<bool()> client_gone;  // checked before every event; may be empty
};

// event_watch: a handle whose events wake a coroutine on the strand of `ex`. The notify callback is
// removed when the watch is destroyed, so the engine never wakes a finished request.
class event_watch {
  public:
    event_watch(request_ptr h, net::any_io_executor ex);
    ~event_watch();
    event_watch(const event_watch &) = delete;
    event_watch & operator=(const event_watch &) = delete;
    request_handle & handle() { return *h_; }
    const request_ptr & ptr() const { return h_; }
    async_notify & notifier() { return *n_; }

  private:
    request_ptr h_;
    notify_ptr n_;
};

// event_wait stores the next event of w in ev. It fails with deadline_exceeded once the deadline has
// passed, or cancelled when the client went away (lim.client_gone, or the socket of ex when ex is set);
// in both cases it cancels the task first, so the slot frees.
net::awaitable<Status> event_wait(event_watch & w, engine_event & ev, const event_wait_limits & lim,
                                  http_exchange * ex = nullptr);

// event_group: the handles of one request's choices (n > 1), all waking one coroutine through one notifier.
class event_group {
  public:
    event_group(std::vector<request_ptr> hs, net::any_io_executor ex);
    ~event_group();
    event_group(const event_group &) = delete;
    event_group & operator=(const event_group &) = delete;
    size_t size() const { return hs_.size(); }
    request_handle & handle(size_t i) { return *hs_[i]; }
    void cancel_all();  // asks every task to stop (each still ends with a terminal event)
    async_notify & notifier() { return *n_; }

  private:
    std::vector<request_ptr> hs_;
    notify_ptr n_;
    size_t next_ = 0;  // where the next round-robin scan starts
    friend net::awaitable<Status> event_wait_any(event_group &, const std::vector<bool> &, size_t &, engine_event &,
                                                 const event_wait_limits &, http_exchange *);
};

// event_wait_any stores in ev the next event of a member whose `finished` entry is false, and its index in
// which, scanning the members round robin so no choice starves another. Deadline and client as event_wait;
// on failure every task is cancelled. REQUIRES: some member is not finished.
net::awaitable<Status> event_wait_any(event_group & g, const std::vector<bool> & finished, size_t & which,
                                      engine_event & ev, const event_wait_limits & lim, http_exchange * ex = nullptr);

}  // namespace baton
