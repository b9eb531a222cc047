// failure_policy.h — what the router does when a call to a node fails at the transport level: a pure
// function of typed inputs, tabled by its unit test, called by the request's coroutines (prefill_hop.cpp,
// decode_relay.cpp).
//
// The rules (docs/router.md, "Failure policy"):
//   prefill hop, node ejected or unreachable -> the next prefill node; when none is left, --fallback
//                                              (local prefill on a decode node, or an explicit error);
//   decode hop, nothing relayed to the client yet -> the same request (the relay keeps the blob) to
//                                              another decode node;
//   decode hop, a stream already begun         -> an SSE error event, then [DONE];
//   the request's deadline passed              -> the error as is (504), or its error event mid-stream.
// A prefill call never has bytes at the client (the decode hop answers), so both hops follow one table.
// An answer the node gave (an HTTP status) is not a transport failure and is not decided here.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "baton/base/status.h"

namespace baton {

enum class call_fault : uint8_t {
    ejected,    // the health checker ejected the node while the call was in flight; the call was cancelled
    transport,  // refused, reset or cut off (upstream_error)
    deadline,   // the request's deadline passed
    other,      // anything else (a response over its cap, say): not the node's availability
};

struct call_failure {
    call_fault fault = call_fault::transport;
    bool client_begun = false;  // bytes of the response already went to the client
    bool stream = false;        // the client asked for server-sent events
};

enum class call_action : uint8_t {
    next_node,      // another node of the same pool, same body; prefill: the --fallback rule when none is left
    respond_error,  // nothing went to the client: answer the error (its status from the one error map)
    error_event,    // a stream has begun: an SSE error event, then [DONE]
    abort,          // a non-streamed response has begun: cut the connection (the client sees a short body)
};

// router_call_fault classifies a failed call's status; ejected tells whether the call's guard was
// cancelled (call_guard::cancelled), which wins over the socket error the cancellation caused.
call_fault router_call_fault(const Status & st, bool ejected);

// router_call_action: what to do about f.
call_action router_call_action(const call_failure & f);

const char * call_action_name(call_action a);  // for test output: "next_node", ...

}  // namespace baton
