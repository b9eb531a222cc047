// failure_policy_test.cpp — the router's rules for a call that failed at the transport level, as a table:
// every combination of fault, whether the client already has bytes, and whether it streams.
#include <gtest/gtest.h>

#include "failure_policy.h"

namespace baton {
namespace {

const char * fault_name(call_fault f) {
    switch (f) {
        case call_fault::ejected: return "ejected";
        case call_fault::transport: return "transport";
        case call_fault::deadline: return "deadline";
        case call_fault::other: return "other";
    }
    return "?";
}

TEST(FailurePolicy, TableOfEveryFaultBeforeAndAfterTheFirstByte) {
    struct row {
        call_fault fault;
        bool begun, stream;
        call_action want;
    };
    const row table[] = {
        // Nothing reached the client: a node that is gone (ejected, cut off) gets the request retried on
        // another node (prefill: the --fallback rule once none is left); a passed deadline is answered.
        {call_fault::ejected, false, false, call_action::next_node},
        {call_fault::ejected, false, true, call_action::next_node},
        {call_fault::transport, false, false, call_action::next_node},
        {call_fault::transport, false, true, call_action::next_node},
        {call_fault::deadline, false, false, call_action::respond_error},
        {call_fault::deadline, false, true, call_action::respond_error},
        {call_fault::other, false, false, call_action::respond_error},
        {call_fault::other, false, true, call_action::respond_error},
        // A stream that has begun ends with an explicit error event, whatever the fault.
        {call_fault::ejected, true, true, call_action::error_event},
        {call_fault::transport, true, true, call_action::error_event},
        {call_fault::deadline, true, true, call_action::error_event},
        {call_fault::other, true, true, call_action::error_event},
        // A begun non-streamed response (the router relays those whole, so only in principle): cut off.
        {call_fault::ejected, true, false, call_action::abort},
        {call_fault::transport, true, false, call_action::abort},
        {call_fault::deadline, true, false, call_action::abort},
        {call_fault::other, true, false, call_action::abort},
    };
    for (const row & r : table) {
        const call_action got = router_call_action({r.fault, r.begun, r.stream});
        EXPECT_EQ(got, r.want) << fault_name(r.fault) << (r.begun ? " begun" : " not begun")
                               << (r.stream ? " stream" : " whole") << ": got " << call_action_name(got) << ", want "
                               << call_action_name(r.want);
    }
}

TEST(FailurePolicy, FaultOfAStatusAndAnEjectionWinsOverTheSocketError) {
    const Status cut(status_code::upstream_error, "http://n:1: the body was cut off: Operation canceled");
    const Status late(status_code::deadline_exceeded, "http://n:1: reading the response: the request deadline passed");
    const Status big(status_code::too_large, "http://n:1: response over 16 bytes");
    EXPECT_EQ(router_call_fault(cut, false), call_fault::transport);
    EXPECT_EQ(router_call_fault(late, false), call_fault::deadline);
    EXPECT_EQ(router_call_fault(big, false), call_fault::other);
    // Closing the socket of a cancelled call fails its operation with a plain socket error (or, past the
    // deadline, a timeout): the ejection is what happened.
    for (const Status & st : {cut, late, big})
        EXPECT_EQ(router_call_fault(st, true), call_fault::ejected) << st.message();
}

}  // namespace
}  // namespace baton
