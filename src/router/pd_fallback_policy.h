// pd_fallback_policy.h — what the router does with each outcome of the PD flow: pure functions of typed
// inputs, tabled by their unit test (tests/router/pd_fallback_policy_test.cpp), whose decisions the request's
// coroutines execute (prefill_hop.cpp, decode_relay.cpp, pd_flow.cpp).
//
// Two kinds of outcome:
//   pd_prefill_answer_decide, pd_decode_answer_decide — a node answered a hop with an HTTP status: take the
//     blob, relay the answer to the client (streamed or whole), try the next node, answer the client, or end
//     the decode hop because the node refused the blob;
//   pd_fallback_decide — a hop ended: the prefill hop without a blob, the decode relay of a blob, or the
//     direct relay of the client's body. The request is done, or its error is answered as is, or it falls
//     back to local prefill on a decode node (--fallback local), or that fallback is refused with an
//     explicit 502 (--fallback fail).
// pd_no_node_error says which error a hop reports when no node is left. A call that failed at the transport
// level (no answer) is failure_policy.h's; what a status means is pd_classify_node_answer's (pd_protocol.h).
// The rules in prose: docs/router.md, "Failure policy".
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "baton/base/status.h"
#include "baton/pd/pd_protocol.h"
#include "baton/router/router.h"

namespace baton {

// ---- a node's answer on a hop ----

// pd_prefill_reply: a prefill node's answer to POST /v1/prefill (its head, and when refused what it said).
struct pd_prefill_reply {
    int status = 200;
    bool draining = false;                   // the answer carried X-Baton-Draining
    std::string_view node;                   // the node's URL, named in errors ("http://10.0.0.1:8081")
    std::optional<uint64_t> content_length;  // the blob's announced length; nullopt: none (chunked)
    uint64_t max_blob_bytes = 0;             // --max-blob-mb, bytes
    std::string_view said;                   // not 200: the answer's body (quoted in a 400's error)
};

// pd_decode_reply: a decode node's answer to a blob (POST /v1/decode) or to a forwarded client request.
struct pd_decode_reply {
    int status = 200;
    bool draining = false;     // the answer carried X-Baton-Draining
    bool carries_blob = true;  // the call sent a blob or a held state's place; false: the client's own body
    bool stream = false;       // the client asked for server-sent events
};

enum class pd_node_action : uint8_t {
    take_blob,      // prefill: a blob of a known length within --max-blob-mb: relay it to a decode node
    relay_stream,   // decode: a 200 to a streaming request, relayed to the client piece by piece
    relay_whole,    // decode: any other answer the client gets, read whole and relayed as it is
    next_node,      // another node of the pool; `error` is what the hop reports when none is left
    answer_client,  // prefill 400: the request is at fault, no other node would take it: `error` to the client
    blob_rejected,  // decode 422 to a blob: the hop ends, and pd_fallback_decide says what follows
    state_lost,     // decode 424: the held state could not be fetched (prefill node gone, lease ended): as a
                    // blob that never arrived, pd_fallback_decide says what follows
};

struct pd_node_decision {
    pd_node_action action = pd_node_action::next_node;
    bool mark_draining = false;  // the node leaves the cluster: not selected again until it rejoins
    std::string outcome;         // the node's outcome in baton_router_node_outcomes_total; empty: none counted here
    Status error;                // next_node: the hop's error if no node is left; answer_client: the answer
};

// pd_prefill_answer_decide, pd_decode_answer_decide: what to do with a node's answer r on that hop.
pd_node_decision pd_prefill_answer_decide(const pd_prefill_reply & r);
pd_node_decision pd_decode_answer_decide(const pd_decode_reply & r);

// pd_no_node_error: the error a hop reports when acquiring a node failed with why, after last (the error of
// the nodes tried so far; tried_any: at least one was). A first failure, a client gone or a deadline passed
// is reported as it is; otherwise what the nodes tried said.
Status pd_no_node_error(const Status & why, const Status & last, bool tried_any);

const char * pd_node_action_name(pd_node_action a);  // for test output: "take_blob", ...

// ---- the end of a hop ----

// How the relay to a decode node ended (decode_relay.cpp).
enum class relay_outcome : uint8_t {
    done,           // the client has its answer (or has what it could get: a stream ended by an error event)
    blob_rejected,  // the decode node refused the blob (422)
    blob_failed,    // the blob never fully arrived from the prefill node: not the decode node's fault
    failed,         // no node could answer, nothing reached the client: the error to answer
};

// The prefill hop ended without a blob.
struct pd_prefill_failed {
    Status error;
    bool router_full = false;  // the router's queue was full (--queue-max): a 503 at once, never a fallback
};

// The relay of a prefill node's blob to a decode node ended.
struct pd_decode_ended {
    relay_outcome outcome = relay_outcome::done;
    Status error;               // failed: the error; blob_failed: why the blob did not arrive
    bool client_begun = false;  // bytes of the response already went to the client
};

// The relay of the client's own body to a decode node ended (the direct route, or a fallback).
struct pd_direct_ended {
    relay_outcome outcome = relay_outcome::done;
    Status error;  // failed: the error
    bool client_begun = false;
};

using pd_hop_end = std::variant<pd_prefill_failed, pd_decode_ended, pd_direct_ended>;

enum class pd_fallback_reason : uint8_t {
    prefill_failed,  // no prefill node gave a whole blob
    blob_rejected,   // the decode node refused the blob
};

struct pd_finish {};  // nothing more to do: the client has its answer, or all it can get
struct pd_answer_client {
    Status error;  // answered as is (its HTTP status from the one error map)
};
struct pd_fall_back {  // counted; the client's own body goes to a decode node (local prefill)
    pd_fallback_reason reason;
};
struct pd_fallback_refused {  // counted; --fallback fail: error (502) is the answer
    pd_fallback_reason reason;
    Status error;
};
using pd_fallback_decision = std::variant<pd_finish, pd_answer_client, pd_fall_back, pd_fallback_refused>;

// pd_fallback_decide: what follows the hop's end e under the --fallback policy.
pd_fallback_decision pd_fallback_decide(const pd_hop_end & e, fallback_policy policy);

// The reason's name: the label of baton_router_fallbacks_total and X-Baton-Route's "fallback:<reason>".
const char * pd_fallback_reason_name(pd_fallback_reason r);

}  // namespace baton
