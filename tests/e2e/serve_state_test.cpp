// serve_state_test.cpp — slot state moved between two nodes with GET/PUT, then a request that reuses it;
// DELETE empties a slot; an idle slot parked while another works is the same state over HTTP; a conversation
// whose only slot another took comes back from the host prompt cache (--cache-ram), and the node's KV events
// count the cached state as held.
#include "serve_test_util.h"

namespace baton::test {
namespace {

TEST(ServeState, SlotStateMovesBetweenNodesAndIsReused) {
    auto a = node_process::start(serve_args("llama", {"-np", "1"}));
    auto b = node_process::start(serve_args("llama", {"-np", "2"}));
    const json body = {{"prompt", "A shared system prompt that many requests start with, followed by a question"},
                       {"max_tokens", 4},
                       {"temperature", 0}};
    const http_reply first = post(*a, "/v1/completions", body.dump());
    ASSERT_EQ(first.status, 200) << first.body;
    const int n_prompt = first.j()["usage"]["prompt_tokens"].get<int>();

    const http_reply state = get(*a, "/v1/slots/0/state");
    ASSERT_EQ(state.status, 200) << state.body;
    EXPECT_EQ(state.content_type, "application/octet-stream");

    auto c = b->client(60);
    const http_reply put = to_reply(c->Put("/v1/slots/1/state", state.body, "application/octet-stream"));
    ASSERT_EQ(put.status, 200) << put.body;
    const int n_restored = put.j()["n_tokens"].get<int>();
    EXPECT_GE(n_restored, n_prompt);
    const json slots = json::parse(get(*b, "/v1/slots").body);
    EXPECT_EQ(slots[1]["n_tokens"].get<int>(), n_restored);
    EXPECT_EQ(slots[0]["n_tokens"].get<int>(), 0);

    const double cached_before = metric_value(get(*b, "/metrics").body, "baton_cached_tokens_total");
    const http_reply again = post(*b, "/v1/completions", body.dump());
    ASSERT_EQ(again.status, 200) << again.body;
    EXPECT_EQ(again.j()["usage"]["prompt_tokens"].get<int>(), n_prompt);
    const std::string m = get(*b, "/metrics").body;
    // The request ran in the restored slot and recomputed at most the last prompt token.
    EXPECT_GE(metric_value(m, "baton_cached_tokens_total") - cached_before, n_prompt - 1) << m;
    EXPECT_GE(metric_value(m, "baton_restores_total"), 1);

    // DELETE empties the slot; exporting an empty slot is 404.
    const http_reply del = to_reply(c->Delete("/v1/slots/1/state"));
    ASSERT_EQ(del.status, 200) << del.body;
    EXPECT_EQ(json::parse(get(*b, "/v1/slots").body)[1]["n_tokens"].get<int>(), 0);
    EXPECT_EQ(get(*b, "/v1/slots/1/state").status, 404);
}

// While one slot works, the other's idle state leaves the unified KV cache (parked): /v1/slots says so,
// GET returns the same blob as before, and the conversation's next turn gets it back (cached tokens).
TEST(ServeState, IdleSlotParkedWhileAnotherWorksKeepsItsStateAndPrefix) {
    auto n = node_process::start(serve_args("llama", {"-np", "2"}));
    const json first = {{"prompt", "A shared system prompt that many requests start with, followed by a question"},
                        {"max_tokens", 4},
                        {"temperature", 0}};
    ASSERT_EQ(post(*n, "/v1/completions", first.dump()).status, 200);
    json slots = json::parse(get(*n, "/v1/slots").body);
    const int held = slots[0]["n_tokens"].get<int>() > 0 ? 0 : 1;
    ASSERT_GT(slots[held]["n_tokens"].get<int>(), 0);
    EXPECT_FALSE(slots[held]["parked"].get<bool>()) << "nothing else ran: the state stays in the cache";
    const http_reply before = get(*n, "/v1/slots/" + std::to_string(held) + "/state");
    ASSERT_EQ(before.status, 200);

    const json other = {{"prompt", "Something else entirely"}, {"max_tokens", 8}, {"temperature", 0}};
    ASSERT_EQ(post(*n, "/v1/completions", other.dump()).status, 200);
    slots = json::parse(get(*n, "/v1/slots").body);
    EXPECT_TRUE(slots[held]["parked"].get<bool>()) << slots.dump();
    EXPECT_EQ(slots[held]["pos_max"].get<int>(), -1) << slots.dump();
    const http_reply after = get(*n, "/v1/slots/" + std::to_string(held) + "/state");
    ASSERT_EQ(after.status, 200);
    EXPECT_EQ(after.body, before.body) << "a parked slot must export the same state";
    std::string m = get(*n, "/metrics").body;
    EXPECT_EQ(metric_value(m, "baton_slot_parks_total"), 1) << m;
    EXPECT_GT(metric_value(m, "baton_parked_bytes"), 0) << m;

    json next = first;
    next["prompt"] = first["prompt"].get<std::string>() + " and a follow-up";
    const double cached_before = metric_value(m, "baton_cached_tokens_total");
    const http_reply r = post(*n, "/v1/completions", next.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    m = get(*n, "/metrics").body;
    EXPECT_EQ(metric_value(m, "baton_slot_unparks_total"), 1) << m;
    EXPECT_GE(metric_value(m, "baton_cached_tokens_total") - cached_before, 16) << m;
    EXPECT_EQ(metric_value(m, "baton_invariant_repairs_total"), 0) << m;
    EXPECT_FALSE(json::parse(get(*n, "/v1/slots").body)[held]["parked"].get<bool>());
}

// One slot: conversation A, then B takes the slot (A's state goes to host memory), then A's next turn is
// restored from there (its prompt cached, the same answer as a node that never evicted it); the KV snapshot
// holds A's blocks while the slot holds only B. With --cache-ram 0 the next turn computes A again.
TEST(ServeState, ConversationBackFromTheHostPromptCache) {
    std::string sys;
    for (int i = 0; i < 12; ++i) sys += "Rule " + std::to_string(i) + ": answer briefly and cite the manual. ";
    const json a = {{"prompt", sys + "Question: what is a slot?"}, {"max_tokens", 6}, {"temperature", 0}};
    const json b = {{"prompt", "Something else entirely"}, {"max_tokens", 4}, {"temperature", 0}};
    json a2 = a;
    a2["prompt"] = sys + "Question: what is a slot? And a follow-up question.";
    for (const char * mib : {"64", "0"}) {
        auto n = node_process::start(serve_args("llama", {"-np", "1", "--cache-ram", mib}));
        const http_reply ra = post(*n, "/v1/completions", a.dump());
        ASSERT_EQ(ra.status, 200) << ra.body;
        const int n_a = ra.j()["usage"]["prompt_tokens"].get<int>();
        ASSERT_GE(n_a, 128) << "the prompt must span whole 64-token KV blocks";
        ASSERT_EQ(post(*n, "/v1/completions", b.dump()).status, 200);
        const bool on = std::string(mib) != "0";
        std::string m = get(*n, "/metrics").body;
        EXPECT_EQ(metric_value(m, "baton_cache_ram_entries"), on ? 1 : 0) << m;
        if (on) {  // the KV events are taken each second: the snapshot holds A's blocks within ~2 s
            size_t blocks = 0;
            for (int i = 0; i < 40 && blocks == 0; ++i) {
                blocks = json::parse(get(*n, "/v1/kv/snapshot").body)["blocks"].size();
                if (blocks == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
            }
            EXPECT_GE(blocks, size_t(n_a / 64)) << "the cached state's blocks are published";
        }
        const http_reply r2 = post(*n, "/v1/completions", a2.dump());
        ASSERT_EQ(r2.status, 200) << r2.body;
        const int cached = r2.j()["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
        if (on) EXPECT_GE(cached, n_a - 8) << "A's prompt (but its last tokens) comes back from host memory";
        else EXPECT_LE(cached, 1) << "nothing kept: A is computed again";
        m = get(*n, "/metrics").body;
        EXPECT_EQ(metric_value(m, "baton_cache_ram_hits_total"), on ? 1 : 0) << m;
        EXPECT_EQ(metric_value(m, "baton_invariant_repairs_total"), 0) << m;
        auto fresh = node_process::start(serve_args("llama", {"-np", "1"}));
        const http_reply want = post(*fresh, "/v1/completions", a2.dump());
        ASSERT_EQ(want.status, 200);
        EXPECT_EQ(r2.j()["choices"][0]["text"], want.j()["choices"][0]["text"]) << "--cache-ram " << mib;
    }
}

}  // namespace
}  // namespace baton::test
