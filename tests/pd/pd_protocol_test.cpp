// pd_protocol_test.cpp — what a node's answer means to the router: the table of pd_classify_node_answer.
#include <gtest/gtest.h>

#include "baton/pd/pd_protocol.h"

namespace baton {
namespace {

struct answer_case {
    pd_hop hop;
    int status;
    bool draining;
    pd_answer want;
};

TEST(PdProtocol, NodeAnswersClassifyAsTheRouterActsOnThem) {
    const answer_case cases[] = {
        {pd_hop::prefill, 200, false, pd_answer::ok},
        {pd_hop::decode, 200, false, pd_answer::ok},
        {pd_hop::prefill, 503, true, pd_answer::draining},
        {pd_hop::decode, 503, true, pd_answer::draining},
        {pd_hop::prefill, 503, false, pd_answer::busy},
        {pd_hop::decode, 503, false, pd_answer::busy},
        {pd_hop::decode, 422, false, pd_answer::blob_rejected},  // the blob itself was refused: run it locally
        {pd_hop::prefill, 422, false, pd_answer::node_error},    // a prefill node gets no blob
        {pd_hop::decode, 424, false, pd_answer::state_lost},     // the held state could not be fetched
        {pd_hop::prefill, 424, false, pd_answer::node_error},
        {pd_hop::prefill, 400, false, pd_answer::client_error},  // no other node would take the request
        {pd_hop::decode, 400, false, pd_answer::node_error},     // relayed to the client as it is
        {pd_hop::prefill, 500, false, pd_answer::node_error},
        {pd_hop::decode, 504, false, pd_answer::node_error},
        {pd_hop::prefill, 404, false, pd_answer::node_error},
        {pd_hop::decode, 200, true, pd_answer::ok},  // the header means something only on a 503
    };
    for (const answer_case & c : cases) {
        EXPECT_EQ(pd_answer_name(pd_classify_node_answer(c.hop, c.status, c.draining)),
                  std::string(pd_answer_name(c.want)))
            << (c.hop == pd_hop::prefill ? "prefill " : "decode ") << c.status << (c.draining ? " draining" : "");
    }
}

TEST(PdProtocol, PathsAndHeadersAreTheDocumentedOnes) {
    EXPECT_EQ(pd_path_prefill, "/v1/prefill");
    EXPECT_EQ(pd_path_decode, "/v1/decode");
    EXPECT_EQ(pd_path_slot_state, "/v1/slots/{id}/state");
    EXPECT_EQ(pd_header_draining, "X-Baton-Draining");
    EXPECT_TRUE(pd_header_route.starts_with("X-Baton-") && pd_header_decode_node.starts_with("X-Baton-") &&
                pd_header_prompt_tokens.starts_with("X-Baton-") && pd_header_cached_tokens.starts_with("X-Baton-"));
}

}  // namespace
}  // namespace baton
