// event_wait.cpp — see event_wait.h.
#include "event_wait.h"

#include <string>

namespace baton {

event_watch::event_watch(request_ptr h, net::any_io_executor ex) : h_(std::move(h)), n_(async_notify::make(std::move(ex))) {
    h_->set_notify([n = n_] { n->notify(); });
}

event_watch::~event_watch() { h_->set_notify(nullptr); }

net::awaitable<Status> event_wait(event_watch & w, engine_event & ev, const event_wait_limits & lim, http_exchange * ex) {
    using std::chrono::steady_clock;
    request_handle & h = w.handle();
    for (;;) {
        if (steady_clock::now() >= lim.deadline) {
            h.cancel();
            co_return Status(status_code::deadline_exceeded, "request exceeded the node's --timeout of " + std::to_string(int(lim.timeout_s)) + " s");
        }
        if ((lim.client_gone && lim.client_gone()) || (ex && ex->client_gone())) {
            h.cancel();
            co_return Status(status_code::cancelled, "the client went away");
        }
        if (h.try_next(ev)) co_return Status();
        if (ex) co_await ex->wait(w.notifier(), lim.deadline);
        else co_await w.notifier().wait_until(lim.deadline);
    }
}

}  // namespace baton
