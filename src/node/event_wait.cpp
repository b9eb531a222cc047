// event_wait.cpp — see event_wait.h.
#include "event_wait.h"

#include <string>

namespace baton {

event_watch::event_watch(request_ptr h, net::any_io_executor ex)
    : h_(std::move(h)), n_(async_notify::make(std::move(ex))) {
    h_->set_notify([n = n_] { n->notify(); });
}

event_watch::~event_watch() { h_->set_notify(nullptr); }

net::awaitable<Status> event_wait(event_watch & w, engine_event & ev, const event_wait_limits & lim,
                                  http_exchange * ex) {
    using std::chrono::steady_clock;
    request_handle & h = w.handle();
    for (;;) {
        if (steady_clock::now() >= lim.deadline) {
            h.cancel();
            co_return Status(status_code::deadline_exceeded,
                             "request exceeded the node's --timeout of " + std::to_string(int(lim.timeout_s)) + " s");
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

event_group::event_group(std::vector<request_ptr> hs, net::any_io_executor ex)
    : hs_(std::move(hs)), n_(async_notify::make(std::move(ex))) {
    for (auto & h : hs_) h->set_notify([n = n_] { n->notify(); });
}

event_group::~event_group() {
    for (auto & h : hs_) h->set_notify(nullptr);
}

void event_group::cancel_all() {
    for (auto & h : hs_) h->cancel();
}

net::awaitable<Status> event_wait_any(event_group & g, const std::vector<bool> & finished, size_t & which,
                                      engine_event & ev, const event_wait_limits & lim, http_exchange * ex) {
    using std::chrono::steady_clock;
    for (;;) {
        if (steady_clock::now() >= lim.deadline) {
            g.cancel_all();
            co_return Status(status_code::deadline_exceeded,
                             "request exceeded the node's --timeout of " + std::to_string(int(lim.timeout_s)) + " s");
        }
        if ((lim.client_gone && lim.client_gone()) || (ex && ex->client_gone())) {
            g.cancel_all();
            co_return Status(status_code::cancelled, "the client went away");
        }
        for (size_t k = 0; k < g.size(); ++k) {
            const size_t i = (g.next_ + k) % g.size();
            if (i < finished.size() && finished[i]) continue;
            if (g.handle(i).try_next(ev)) {
                which = i;
                g.next_ = (i + 1) % g.size();
                co_return Status();
            }
        }
        if (ex) co_await ex->wait(g.notifier(), lim.deadline);
        else co_await g.notifier().wait_until(lim.deadline);
    }
}

}  // namespace baton
