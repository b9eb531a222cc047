// event_wait.h — waiting for a generation's next event under a deadline and a client that may leave.
//
// Every HTTP handler that consumes engine events goes through event_wait, so the deadline and the
// client check run on every event, not only when the engine is slow: a stream whose tokens arrive faster
// than the poll interval still ends at --timeout (regression: a fast stream used to run past it because
// the deadline was checked only after an idle poll).
#pragma once

#include <chrono>
#include <functional>

#include "baton/engine.h"
#include "baton/status.h"

namespace baton {

struct event_wait_limits {
    std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
    double timeout_s = 0;                       // only for the error message
    std::function<bool()> client_gone;          // polled between waits; may be empty
    std::chrono::milliseconds poll{50};         // how often the client is checked while idle
};

// event_wait stores the next event of h in ev. It fails with deadline_exceeded once the deadline has
// passed, or cancelled when the client went away; in both cases it cancels h first, so the slot frees.
Status event_wait(request_handle & h, engine_event & ev, const event_wait_limits & lim);

}  // namespace baton
