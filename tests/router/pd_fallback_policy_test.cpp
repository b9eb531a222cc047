// pd_fallback_policy_test.cpp — the PD flow's decisions as tables: every node answer on each hop (prefill,
// decode with a blob, a forwarded request), and every way a hop ends under each --fallback policy, before
// and after bytes reached the client. No process, no socket: the policy is a pure function.
#include <gtest/gtest.h>

#include <string>

#include "baton/http/http_errors.h"
#include "pd_fallback_policy.h"

namespace baton {
namespace {

constexpr uint64_t k_cap = uint64_t(8) << 20;  // --max-blob-mb 8
constexpr const char * k_node = "http://n:1";

// ---- node answers ----

struct answer_row {
    pd_hop hop;
    int status;
    bool draining;
    std::optional<uint64_t> content_length;  // prefill only
    bool carries_blob;                       // decode only
    bool stream;                             // decode only
    pd_node_action want;
    bool want_mark_draining;
    const char * want_outcome;
    status_code want_error;  // ok: no error (the answer is used)
};

// decide: the row's answer through its hop's function.
pd_node_decision decide(const answer_row & r) {
    if (r.hop == pd_hop::prefill) {
        pd_prefill_reply in;
        in.status = r.status;
        in.draining = r.draining;
        in.node = k_node;
        in.content_length = r.content_length;
        in.max_blob_bytes = k_cap;
        in.said = "bad field";
        return pd_prefill_answer_decide(in);
    }
    pd_decode_reply in;
    in.status = r.status;
    in.draining = r.draining;
    in.carries_blob = r.carries_blob;
    in.stream = r.stream;
    return pd_decode_answer_decide(in);
}

std::string describe(const answer_row & r) {
    return std::string(r.hop == pd_hop::prefill ? "prefill " : "decode ") + std::to_string(r.status) +
           (r.draining ? " draining" : "") +
           (r.hop == pd_hop::prefill
                ? (r.content_length ? " length " + std::to_string(*r.content_length) : " no length")
                : std::string(r.carries_blob ? " blob" : " forwarded") + (r.stream ? " stream" : " whole"));
}

TEST(PdFallbackPolicy, TableOfEveryNodeAnswerOnEachHop) {
    using a = pd_node_action;
    constexpr auto P = pd_hop::prefill;
    constexpr auto D = pd_hop::decode;
    constexpr auto none = std::nullopt;
    const answer_row table[] = {
        // Prefill: a blob of a known length within the cap is taken (its outcome is counted when it is in).
        {P, 200, false, 1000, true, false, a::take_blob, false, "", status_code::ok},
        {P, 200, false, k_cap, true, false, a::take_blob, false, "", status_code::ok},
        // ... without a Content-Length or over --max-blob-mb: refused at its headers, the next node.
        {P, 200, false, none, true, false, a::next_node, false, "blob_too_large", status_code::upstream_error},
        {P, 200, false, k_cap + 1, true, false, a::next_node, false, "blob_too_large", status_code::upstream_error},
        // Draining: marked (not selected until it rejoins), the next node.
        {P, 503, true, none, true, false, a::next_node, true, "draining", status_code::unavailable},
        // Busy is a failed node to the prefill hop: the next node, and a 502 if none is left.
        {P, 503, false, none, true, false, a::next_node, false, "http_503", status_code::upstream_error},
        // 400: the client's fault, no other node would take it.
        {P, 400, false, none, true, false, a::answer_client, false, "bad_request", status_code::invalid_argument},
        // Any other status: the next node (a prefill node never rejects a blob: 422 is just a failure).
        {P, 404, false, none, true, false, a::next_node, false, "http_404", status_code::upstream_error},
        {P, 409, false, none, true, false, a::next_node, false, "http_409", status_code::upstream_error},
        {P, 422, false, none, true, false, a::next_node, false, "http_422", status_code::upstream_error},
        {P, 500, false, none, true, false, a::next_node, false, "http_500", status_code::upstream_error},
        {P, 500, true, none, true, false, a::next_node, false, "http_500", status_code::upstream_error},
        // Decode with a blob: a 200 is the client's answer, streamed or whole.
        {D, 200, false, none, true, true, a::relay_stream, false, "ok", status_code::ok},
        {D, 200, false, none, true, false, a::relay_whole, false, "ok", status_code::ok},
        // 422: the node refused the blob itself (checksum, fingerprint, context): the hop ends.
        {D, 422, false, none, true, true, a::blob_rejected, false, "blob_rejected", status_code::ok},
        {D, 422, false, none, true, false, a::blob_rejected, false, "blob_rejected", status_code::ok},
        // Other 4xx and 5xx: the node's answer, relayed to the client as it is (never streamed).
        {D, 400, false, none, true, true, a::relay_whole, false, "http_400", status_code::ok},
        {D, 409, false, none, true, true, a::relay_whole, false, "http_409", status_code::ok},
        {D, 409, false, none, true, false, a::relay_whole, false, "http_409", status_code::ok},
        {D, 500, false, none, true, true, a::relay_whole, false, "http_500", status_code::ok},
        {D, 502, false, none, true, false, a::relay_whole, false, "http_502", status_code::ok},
        // 503: draining (marked) or busy, another decode node either way.
        {D, 503, true, none, true, true, a::next_node, true, "draining", status_code::unavailable},
        {D, 503, false, none, true, true, a::next_node, false, "busy", status_code::unavailable},
        {D, 503, false, none, true, false, a::next_node, false, "busy", status_code::unavailable},
        // A forwarded client request (the direct route, a fallback) carries no blob: its 422 is an answer.
        {D, 422, false, none, false, false, a::relay_whole, false, "http_422", status_code::ok},
        // 424 to a held state's place (direct transfer): the state is gone, the hop ends as a failed prefill.
        {D, 424, false, none, true, true, a::state_lost, false, "state_lost", status_code::ok},
        {D, 424, false, none, true, false, a::state_lost, false, "state_lost", status_code::ok},
        // ... and to a forwarded client request it is an answer like any other.
        {D, 424, false, none, false, false, a::relay_whole, false, "http_424", status_code::ok},
        {D, 422, false, none, false, true, a::relay_whole, false, "http_422", status_code::ok},
        {D, 200, false, none, false, true, a::relay_stream, false, "ok", status_code::ok},
        {D, 200, false, none, false, false, a::relay_whole, false, "ok", status_code::ok},
        {D, 503, true, none, false, true, a::next_node, true, "draining", status_code::unavailable},
        {D, 503, false, none, false, false, a::next_node, false, "busy", status_code::unavailable},
    };
    for (const answer_row & r : table) {
        const pd_node_decision d = decide(r);
        EXPECT_EQ(d.action, r.want) << describe(r) << ": got " << pd_node_action_name(d.action) << ", want "
                                    << pd_node_action_name(r.want);
        EXPECT_EQ(d.mark_draining, r.want_mark_draining) << describe(r);
        EXPECT_EQ(d.outcome, r.want_outcome) << describe(r);
        EXPECT_EQ(d.error.code(), r.want_error) << describe(r) << ": " << d.error.message();
    }
}

TEST(PdFallbackPolicy, NodeAnswerErrorsNameTheNodeAndTheCap) {
    answer_row r{pd_hop::prefill, 200, false, std::nullopt, true, false, {}, false, "", status_code::ok};
    EXPECT_EQ(decide(r).error.message(),
              "http://n:1/v1/prefill answered a blob without a Content-Length or over 8 MiB (--max-blob-mb)");
    r.status = 500;
    EXPECT_EQ(decide(r).error.message(), "http://n:1/v1/prefill answered 500");
    r.status = 400;
    EXPECT_EQ(decide(r).error.message(), "prefill node rejected the request: bad field");
    r.status = 503;
    r.draining = true;
    EXPECT_EQ(decide(r).error.message(), "http://n:1 is draining");
    r.hop = pd_hop::decode;
    EXPECT_EQ(decide(r).error.message(), "every decode node is busy or draining");
    r.draining = false;
    EXPECT_EQ(decide(r).error.message(), "every decode node is busy");
}

// A prefill node's own error body (a context overflow, say) reaches the client as the node said it: the same
// status, message and fields a single node answers, not a quote of the body inside another error.
TEST(PdFallbackPolicy, PrefillNodesErrorBodyIsPassedOnAsItsOwnStatus) {
    const Status said = context_exceeded_status(300, 256);
    pd_prefill_reply in;
    in.status = 400;
    in.node = k_node;
    in.max_blob_bytes = k_cap;
    const std::string body = http_error_json(said);
    in.said = body;
    const pd_node_decision d = pd_prefill_answer_decide(in);
    EXPECT_EQ(d.action, pd_node_action::answer_client);
    EXPECT_EQ(d.error.code(), status_code::context_exceeded);
    EXPECT_EQ(d.error.message(), said.message());
    EXPECT_TRUE(d.error.detail() == said.detail());
    EXPECT_EQ(http_error_json(d.error), body);
}

TEST(PdFallbackPolicy, NoNodeLeftReportsTheFirstFailureTheClientOrTheDeadlineElseTheNodesTried) {
    const Status none(status_code::unavailable, "no healthy decode node");
    const Status full(status_code::unavailable, "the router's queue is full (--queue-max 1)");
    const Status gone(status_code::cancelled, "the client went away while waiting for a node");
    const Status late(status_code::deadline_exceeded, "request deadline passed while waiting for a node with room");
    const Status last(status_code::unavailable, "every decode node is busy");
    // Nothing tried yet: why, whatever it is.
    for (const Status & why : {none, full, gone, late})
        EXPECT_EQ(pd_no_node_error(why, last, false).message(), why.message());
    // After a try: the client gone and the deadline win; otherwise what the nodes tried said.
    EXPECT_EQ(pd_no_node_error(gone, last, true).message(), gone.message());
    EXPECT_EQ(pd_no_node_error(late, last, true).message(), late.message());
    EXPECT_EQ(pd_no_node_error(none, last, true).message(), last.message());
    EXPECT_EQ(pd_no_node_error(full, last, true).message(), last.message());
}

// ---- the end of a hop ----

// "finish", "answer(<code>)", "fall_back(<reason>)" or "refused(<reason>, <code>)".
std::string describe(const pd_fallback_decision & d) {
    if (std::holds_alternative<pd_finish>(d)) return "finish";
    if (const auto * a = std::get_if<pd_answer_client>(&d))
        return std::string("answer(") + status_code_name(a->error.code()) + ")";
    if (const auto * f = std::get_if<pd_fall_back>(&d))
        return std::string("fall_back(") + pd_fallback_reason_name(f->reason) + ")";
    const auto & r = std::get<pd_fallback_refused>(d);
    return std::string("refused(") + pd_fallback_reason_name(r.reason) + ", " + status_code_name(r.error.code()) + ")";
}

const char * describe(fallback_policy p) {
    return p == fallback_policy::local ? "--fallback local" : "--fallback fail";
}

const char * describe(relay_outcome o) {
    switch (o) {
        case relay_outcome::done: return "done";
        case relay_outcome::blob_rejected: return "blob_rejected";
        case relay_outcome::blob_failed: return "blob_failed";
        case relay_outcome::failed: return "failed";
    }
    return "?";
}

TEST(PdFallbackPolicy, TableOfEveryPrefillFailureUnderEachFallbackPolicy) {
    constexpr auto L = fallback_policy::local;
    constexpr auto F = fallback_policy::fail;
    struct row {
        status_code code;
        bool router_full;
        fallback_policy policy;
        const char * want;
    };
    const row table[] = {
        // The client's fault (a prefill node's 400, a body that is no JSON object): answered as is.
        {status_code::invalid_argument, false, L, "answer(invalid_argument)"},
        {status_code::invalid_argument, false, F, "answer(invalid_argument)"},
        // The client went away, or the deadline passed: answered as is (no fallback could do better).
        {status_code::cancelled, false, L, "answer(cancelled)"},
        {status_code::cancelled, false, F, "answer(cancelled)"},
        {status_code::deadline_exceeded, false, L, "answer(deadline_exceeded)"},
        {status_code::deadline_exceeded, false, F, "answer(deadline_exceeded)"},
        // The router's queue was full: a 503 at once (a fallback would only queue again).
        {status_code::unavailable, true, L, "answer(unavailable)"},
        {status_code::unavailable, true, F, "answer(unavailable)"},
        // Every prefill node failed, or none is healthy, or draining: the --fallback rule.
        {status_code::upstream_error, false, L, "fall_back(prefill_failed)"},
        {status_code::upstream_error, false, F, "refused(prefill_failed, upstream_error)"},
        {status_code::unavailable, false, L, "fall_back(prefill_failed)"},
        {status_code::unavailable, false, F, "refused(prefill_failed, upstream_error)"},
        {status_code::internal, false, L, "fall_back(prefill_failed)"},
        {status_code::internal, false, F, "refused(prefill_failed, upstream_error)"},
    };
    for (const row & r : table) {
        const auto got = describe(pd_fallback_decide(pd_prefill_failed{Status(r.code, "x"), r.router_full}, r.policy));
        EXPECT_EQ(got, r.want) << status_code_name(r.code) << (r.router_full ? " (router full)" : "") << ", "
                               << describe(r.policy);
    }
}

TEST(PdFallbackPolicy, TableOfEveryRelayEndBeforeAndAfterTheFirstByte) {
    constexpr auto L = fallback_policy::local;
    constexpr auto F = fallback_policy::fail;
    struct row {
        bool blob;  // the decode relay of a blob; false: the client's own body (direct, or a fallback)
        relay_outcome outcome;
        bool begun;
        fallback_policy policy;
        const char * want;
    };
    const row table[] = {
        // The decode relay of a blob.
        {true, relay_outcome::done, false, L, "finish"},
        {true, relay_outcome::done, true, L, "finish"},
        {true, relay_outcome::done, true, F, "finish"},
        {true, relay_outcome::failed, false, L, "answer(unavailable)"},  // no decode node could answer
        {true, relay_outcome::failed, false, F, "answer(unavailable)"},
        {true, relay_outcome::failed, true, L, "finish"},  // the client already has what it can get
        {true, relay_outcome::blob_failed, false, L, "fall_back(prefill_failed)"},  // the blob never fully arrived
        {true, relay_outcome::blob_failed, false, F, "refused(prefill_failed, upstream_error)"},
        {true, relay_outcome::blob_rejected, false, L, "fall_back(blob_rejected)"},
        {true, relay_outcome::blob_rejected, false, F, "refused(blob_rejected, upstream_error)"},
        {true, relay_outcome::blob_rejected, true, L, "finish"},  // never a second answer
        {true, relay_outcome::blob_failed, true, F, "finish"},
        // The client's own body: nothing to fall back to; an error before the first byte is answered.
        {false, relay_outcome::done, false, L, "finish"},
        {false, relay_outcome::done, true, F, "finish"},
        {false, relay_outcome::failed, false, L, "answer(unavailable)"},
        {false, relay_outcome::failed, false, F, "answer(unavailable)"},
        {false, relay_outcome::failed, true, L, "finish"},
        {false, relay_outcome::blob_rejected, false, L, "answer(upstream_error)"},
        {false, relay_outcome::blob_rejected, true, L, "finish"},
    };
    for (const row & r : table) {
        const Status err(status_code::unavailable, "every decode node is busy");
        const pd_hop_end end = r.blob ? pd_hop_end(pd_decode_ended{r.outcome, err, r.begun})
                                      : pd_hop_end(pd_direct_ended{r.outcome, err, r.begun});
        EXPECT_EQ(describe(pd_fallback_decide(end, r.policy)), r.want)
            << (r.blob ? "decode relay " : "direct relay ") << describe(r.outcome) << (r.begun ? " begun" : "") << ", "
            << describe(r.policy);
    }
}

TEST(PdFallbackPolicy, RefusedFallbacksSayWhyAndReasonsAreTheMetricLabels) {
    const Status cut(status_code::upstream_error, "http://p:1: the body was cut off");
    auto refused = [](const pd_fallback_decision & d) { return std::get<pd_fallback_refused>(d).error.message(); };
    EXPECT_EQ(refused(pd_fallback_decide(pd_prefill_failed{cut, false}, fallback_policy::fail)),
              "prefill failed and --fallback is fail: http://p:1: the body was cut off");
    EXPECT_EQ(
        refused(pd_fallback_decide(pd_decode_ended{relay_outcome::blob_failed, cut, false}, fallback_policy::fail)),
        "prefill failed and --fallback is fail: http://p:1: the body was cut off");
    EXPECT_EQ(
        refused(pd_fallback_decide(pd_decode_ended{relay_outcome::blob_rejected, {}, false}, fallback_policy::fail)),
        "the decode node rejected the blob and --fallback is fail");
    // The error a failed relay answers is the relay's own, as is.
    const auto a = pd_fallback_decide(pd_decode_ended{relay_outcome::failed, cut, false}, fallback_policy::local);
    EXPECT_EQ(std::get<pd_answer_client>(a).error.message(), cut.message());
    EXPECT_STREQ(pd_fallback_reason_name(pd_fallback_reason::prefill_failed), "prefill_failed");
    EXPECT_STREQ(pd_fallback_reason_name(pd_fallback_reason::blob_rejected), "blob_rejected");
}

}  // namespace
}  // namespace baton
