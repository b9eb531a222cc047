// pd_fallback_policy.cpp — see pd_fallback_policy.h.
#include "pd_fallback_policy.h"

#include "baton/http/http_errors.h"

namespace baton {

pd_node_decision pd_prefill_answer_decide(const pd_prefill_reply & r) {
    const pd_answer answer = pd_classify_node_answer(pd_hop::prefill, r.status, r.draining);
    const std::string node(r.node);
    pd_node_decision d;
    switch (answer) {
        case pd_answer::ok:
            if (!r.content_length || *r.content_length > r.max_blob_bytes) {
                // A blob without a length, or over --max-blob-mb: refused at its headers, nothing buffered.
                d.outcome = "blob_too_large";
                d.error =
                    Status(status_code::upstream_error,
                           node + std::string(pd_path_prefill) + " answered a blob without a Content-Length or over " +
                               std::to_string(r.max_blob_bytes >> 20) + " MiB (--max-blob-mb)");
                return d;
            }
            d.action = pd_node_action::take_blob;  // (its outcome is counted once the blob is in: prefill_done)
            return d;
        case pd_answer::draining:
            d.mark_draining = true;
            d.outcome = "draining";
            d.error = Status(status_code::unavailable, node + " is draining");
            return d;
        case pd_answer::client_error:  // no other node will accept it either
            d.action = pd_node_action::answer_client;
            d.outcome = "bad_request";
            // The node's own error, as it said it (type, fields, message), so a client sees what a single node
            // sends; an answer that is not one of Baton's error bodies is quoted.
            d.error = http_error_status(r.said);
            if (d.error.ok())
                d.error =
                    Status(status_code::invalid_argument, "prefill node rejected the request: " + std::string(r.said));
            return d;
        default:  // busy (no free slot) is a failed node to a prefill hop too: the next node
            d.outcome = "http_" + std::to_string(r.status);
            d.error = Status(status_code::upstream_error,
                             node + std::string(pd_path_prefill) + " answered " + std::to_string(r.status));
            return d;
    }
}

pd_node_decision pd_decode_answer_decide(const pd_decode_reply & r) {
    pd_answer answer = pd_classify_node_answer(pd_hop::decode, r.status, r.draining);
    // A forwarded request (not /v1/decode) carries no blob, so a 422 there is the node's answer.
    if ((answer == pd_answer::blob_rejected || answer == pd_answer::state_lost) && !r.carries_blob)
        answer = pd_answer::node_error;
    pd_node_decision d;
    switch (answer) {
        case pd_answer::blob_rejected:
            d.action = pd_node_action::blob_rejected;
            d.outcome = "blob_rejected";
            return d;
        case pd_answer::state_lost:
            d.action = pd_node_action::state_lost;
            d.outcome = "state_lost";
            return d;
        case pd_answer::draining:
            d.mark_draining = true;
            d.outcome = "draining";
            d.error = Status(status_code::unavailable, "every decode node is busy or draining");
            return d;
        case pd_answer::busy:  // no free slot there: try another node
            d.outcome = "busy";
            d.error = Status(status_code::unavailable, "every decode node is busy");
            return d;
        default:  // the client's answer, whatever its status
            d.action = r.status == 200 && r.stream ? pd_node_action::relay_stream : pd_node_action::relay_whole;
            d.outcome = r.status == 200 ? "ok" : "http_" + std::to_string(r.status);
            return d;
    }
}

namespace {

Status fallback_refused_error(pd_fallback_reason reason, const Status & why) {
    return Status(status_code::upstream_error, reason == pd_fallback_reason::prefill_failed
                                                   ? "prefill failed and --fallback is fail: " + why.message()
                                                   : "the decode node rejected the blob and --fallback is fail");
}

pd_fallback_decision fall_back(pd_fallback_reason reason, const Status & why, fallback_policy policy) {
    if (policy == fallback_policy::fail) return pd_fallback_refused{reason, fallback_refused_error(reason, why)};
    return pd_fall_back{reason};
}

pd_fallback_decision decide(const pd_prefill_failed & e, fallback_policy policy) {
    // The client's fault, the client gone, the deadline passed, or the router full: answered as is. Only a
    // failed or missing prefill node falls back.
    const status_code c = e.error.code();
    if (c == status_code::invalid_argument || c == status_code::cancelled || c == status_code::deadline_exceeded ||
        e.router_full)
        return pd_answer_client{e.error};
    return fall_back(pd_fallback_reason::prefill_failed, e.error, policy);
}

pd_fallback_decision decide(const pd_decode_ended & e, fallback_policy policy) {
    // (The relay ends with bytes at the client only when it is done: its failures come before the first byte.)
    if (e.outcome == relay_outcome::done || e.client_begun) return pd_finish{};
    switch (e.outcome) {
        case relay_outcome::failed: return pd_answer_client{e.error};
        case relay_outcome::blob_failed: return fall_back(pd_fallback_reason::prefill_failed, e.error, policy);
        default: return fall_back(pd_fallback_reason::blob_rejected, e.error, policy);
    }
}

pd_fallback_decision decide(const pd_direct_ended & e, fallback_policy) {
    if (e.outcome == relay_outcome::done || e.client_begun) return pd_finish{};
    // (No blob goes this way, so it is never refused as one: a failure is all that can come back.)
    if (e.outcome == relay_outcome::failed) return pd_answer_client{e.error};
    return pd_answer_client{Status(status_code::upstream_error, "the decode node rejected the request")};
}

}  // namespace

Status pd_no_node_error(const Status & why, const Status & last, bool tried_any) {
    if (!tried_any || why.code() == status_code::cancelled || why.code() == status_code::deadline_exceeded) return why;
    return last;
}

const char * pd_node_action_name(pd_node_action a) {
    switch (a) {
        case pd_node_action::take_blob: return "take_blob";
        case pd_node_action::relay_stream: return "relay_stream";
        case pd_node_action::relay_whole: return "relay_whole";
        case pd_node_action::next_node: return "next_node";
        case pd_node_action::answer_client: return "answer_client";
        case pd_node_action::blob_rejected: return "blob_rejected";
        case pd_node_action::state_lost: return "state_lost";
    }
    return "?";
}

pd_fallback_decision pd_fallback_decide(const pd_hop_end & e, fallback_policy policy) {
    return std::visit([policy](const auto & end) { return decide(end, policy); }, e);
}

const char * pd_fallback_reason_name(pd_fallback_reason r) {
    switch (r) {
        case pd_fallback_reason::prefill_failed: return "prefill_failed";
        case pd_fallback_reason::blob_rejected: return "blob_rejected";
    }
    return "?";
}

}  // namespace baton
