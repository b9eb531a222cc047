// failure_policy.cpp — see failure_policy.h.
#include "failure_policy.h"

namespace baton {

call_fault router_call_fault(const Status & st, bool ejected) {
    if (ejected) return call_fault::ejected;
    switch (st.code()) {
        case status_code::deadline_exceeded: return call_fault::deadline;
        case status_code::upstream_error: return call_fault::transport;
        default: return call_fault::other;
    }
}

call_action router_call_action(const call_failure & f) {
    if (f.client_begun) return f.stream ? call_action::error_event : call_action::abort;
    const bool node_gone = f.fault == call_fault::ejected || f.fault == call_fault::transport;
    return node_gone ? call_action::next_node : call_action::respond_error;
}

const char * call_action_name(call_action a) {
    switch (a) {
        case call_action::next_node: return "next_node";
        case call_action::respond_error: return "respond_error";
        case call_action::error_event: return "error_event";
        case call_action::abort: return "abort";
    }
    return "?";
}

}  // namespace baton
