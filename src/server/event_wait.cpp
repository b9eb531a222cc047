// event_wait.cpp — see event_wait.h.
#include "event_wait.h"

#include <algorithm>
#include <string>

namespace baton {

namespace {

Status stop(request_handle & h, Status st) {
    h.cancel();
    return st;
}

}  // namespace

Status event_wait(request_handle & h, engine_event & ev, const event_wait_limits & lim) {
    using std::chrono::steady_clock;
    for (;;) {
        const auto now = steady_clock::now();
        if (now >= lim.deadline) {
            return stop(h, {status_code::deadline_exceeded,
                            "request exceeded the node's --timeout of " + std::to_string(int(lim.timeout_s)) + " s"});
        }
        if (lim.client_gone && lim.client_gone()) return stop(h, {status_code::cancelled, "the client went away"});
        auto wait = lim.poll;
        if (lim.deadline != steady_clock::time_point::max()) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(lim.deadline - now) + std::chrono::milliseconds(1);
            wait = std::min(wait, left);
        }
        if (h.next(ev, wait)) return {};
    }
}

}  // namespace baton
