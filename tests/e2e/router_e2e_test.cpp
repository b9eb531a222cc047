// router_e2e_test.cpp — `baton route` end to end with real processes: 2 prefill + 2 decode nodes behind a
// router against a single `both` node; kill -9 of nodes; a prefill node that corrupts its blobs; and
// --fallback fail. Every request has a timeout; every process is reaped by its guard.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <future>
#include <sstream>

#include "baton/testmodel/mkmodel.h"
#include "e2e/serve_test_util.h"
#include "support/node_process.h"

namespace baton {
namespace {

using namespace baton::test;

struct cluster {
    std::vector<std::unique_ptr<node_process>> prefill, decode;
    std::unique_ptr<node_process> router;

    static cluster make(int n_prefill, int n_decode, std::vector<std::string> router_extra = {},
                        std::vector<std::string> prefill_extra = {}) {
        cluster c;
        for (int i = 0; i < n_prefill; ++i) {
            auto a = prefill_extra;
            a.insert(a.end(), {"--role", "prefill", "-np", "2"});
            c.prefill.push_back(node_process::start(serve_args("llama", a)));
        }
        for (int i = 0; i < n_decode; ++i)
            c.decode.push_back(node_process::start(serve_args("llama", {"--role", "decode", "-np", "4"})));
        std::string p, d;
        for (auto & n : c.prefill) p += (p.empty() ? "" : ",") + n->url();
        for (auto & n : c.decode) d += (d.empty() ? "" : ",") + n->url();
        std::vector<std::string> args = {
            "route", "--decode",          d,    "--pd-min-tokens", "16", "-m", test_model_path("llama"), "--timeout",
            "60",    "--health-interval", "0.2"};
        if (!p.empty()) args.insert(args.end(), {"--prefill", p});
        args.insert(args.end(), router_extra.begin(), router_extra.end());
        c.router = node_process::start(args);
        return c;
    }
};

// A request of the mixed workload: i picks the length (some below --pd-min-tokens), the endpoint and
// whether it streams; sampled requests carry a seed. A long prompt begins with i: two of them never share a
// leading block, so none goes as a local follow-up to the decode node that answered another (regression:
// workload_body(4k + 3) was one prompt for every k, and once the decode node's KV event reached the router
// before the next request, RouterE2E.DirectTransferMovesNoStateBytesThroughTheRouter saw "direct", not "pd").
json workload_body(int i) {
    std::string prompt = i % 4 == 0 ? "Hello world" : "Request " + std::to_string(i) + ": Hello world";
    for (int k = 0; k < (i % 4) * 6; ++k) prompt += " the model and the state " + std::to_string(k);
    json b = {{"max_tokens", 12 + i % 5},
              {"temperature", i % 3 == 0 ? 0.8 : 0.0},
              {"seed", 1000 + i},
              {"stream", i % 2 == 1}};
    if (i % 5 == 4) b["messages"] = json::array({{{"role", "user"}, {"content", prompt}}});
    else b["prompt"] = prompt;
    return b;
}

// The generated text and token count of a response, streamed or not.
struct outcome {
    int status = 0;
    std::string text;
    int64_t completion_tokens = -1;
    bool stream_error = false;
};

outcome outcome_of(const http_reply & r, bool stream) {
    outcome o;
    o.status = r.status;
    if (r.status != 200) return o;
    if (stream) {
        auto chunks = normalized_stream(r.body);
        o.text = stream_text(chunks);
        for (const auto & c : chunks) {
            if (c.is_object() && c.contains("error")) o.stream_error = true;
            if (c.is_object() && c.contains("usage") && c["usage"].is_object())
                o.completion_tokens = c["usage"]["completion_tokens"];
        }
        return o;
    }
    const json j = r.j();
    const json & ch = j["choices"][0];
    o.text = ch.contains("text") ? ch["text"].get<std::string>() : ch["message"]["content"].get<std::string>();
    o.completion_tokens = j["usage"]["completion_tokens"];
    return o;
}

json with_usage(json b) {
    if (b.value("stream", false)) b["stream_options"] = {{"include_usage", true}};
    return b;
}

// expect_pd_equals_single: b through the router takes the PD path and answers the text the single node answers.
void expect_pd_equals_single(const node_process & router, const node_process & single, const json & b) {
    const bool stream = b.value("stream", false);
    const outcome want = outcome_of(post(single, completion_path(b), b.dump()), stream);
    const http_reply r = post(router, completion_path(b), b.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.route, "pd");
    EXPECT_EQ(outcome_of(r, stream).text, want.text);
}

TEST(RouterE2E, ConcurrentMixedRequestsEqualSingleNode) {
    auto both = node_process::start(serve_args("llama", {"-np", "4"}));
    cluster c = cluster::make(2, 2);
    const int n = 64;
    std::vector<outcome> want(n);
    for (int i = 0; i < n; ++i) {
        const json b = with_usage(workload_body(i));
        want[i] = outcome_of(post(*both, completion_path(b), b.dump()), b["stream"]);
        ASSERT_EQ(want[i].status, 200) << i;
    }
    std::vector<std::future<outcome>> got;
    for (int i = 0; i < n; ++i)
        got.push_back(std::async(std::launch::async, [&, i] {
            const json b = with_usage(workload_body(i));
            auto cl = c.router->client(120);
            auto r = cl->Post(completion_path(b), b.dump(), "application/json");
            outcome o = outcome_of(to_reply(r), b["stream"]);
            if (!r) o.text = "transport error: " + httplib::to_string(r.error());
            return o;
        }));
    for (int i = 0; i < n; ++i) {
        outcome o = got[i].get();
        ASSERT_EQ(o.status, 200) << "request " << i << ": " << o.text << "\nrouter stderr:\n"
                                 << c.router->stderr_text();
        EXPECT_FALSE(o.stream_error) << i;
        EXPECT_EQ(o.text, want[i].text) << "request " << i;
        EXPECT_EQ(o.completion_tokens, want[i].completion_tokens) << "request " << i;
    }
    const std::string m = get(*c.router, "/metrics").body;
    EXPECT_GT(metric_value(m, "baton_router_mode_total{mode=\"pd\"}"), 0) << m;
    EXPECT_GT(metric_value(m, "baton_router_mode_total{mode=\"direct\"}"), 0) << m;
    // Direct transfer (the default): the states went node to node, none through the router.
    EXPECT_GT(metric_value(m, "baton_router_direct_states_total"), 0) << m;
    EXPECT_EQ(metric_value(m, "baton_router_blob_bytes_total"), 0) << m;
    EXPECT_EQ(metric_value(m, "baton_router_fallbacks_total{reason=\"prefill_failed\"}"), 0) << m;
}

// The bytes a process read and wrote through system calls (sockets included): /proc/PID/io.
uint64_t process_io_bytes(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/io");
    std::string key;
    uint64_t v = 0, sum = 0;
    while (f >> key >> v)
        if (key == "rchar:" || key == "wchar:") sum += v;
    return sum;
}

// Polls a node's metric until it equals want (the router's release runs after the client has its answer).
double metric_settles(node_process & n, const std::string & sample, double want, double seconds = 10) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    double v = -1;
    while (std::chrono::steady_clock::now() < until) {
        v = metric_value(get(n, "/metrics").body, sample);
        if (v == want) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return v;
}

// Direct transfer: the decode node fetches the state from the prefill node; the router's process moves no KV
// bytes (its own counters, and what its system calls read and wrote), the output equals one node's, and
// every lease is released once its request is answered.
TEST(RouterE2E, DirectTransferMovesNoStateBytesThroughTheRouter) {
    cluster c = cluster::make(1, 1);
    auto both = node_process::start(serve_args("llama"));
    std::vector<json> bodies;
    for (int i = 0; i < 4; ++i) {
        json b = with_usage(workload_body(4 * i + 3));  // long prompts: all take the PD path
        b["stream"] = i % 2 == 1;
        bodies.push_back(b);
    }
    std::vector<outcome> want;
    for (const json & b : bodies) want.push_back(outcome_of(post(*both, completion_path(b), b.dump()), b["stream"]));
    const uint64_t io0 = process_io_bytes(c.router->pid());
    for (size_t i = 0; i < bodies.size(); ++i) {
        const http_reply r = post(*c.router, completion_path(bodies[i]), bodies[i].dump());
        ASSERT_EQ(r.status, 200) << r.body;
        EXPECT_EQ(r.route, "pd");
        const outcome o = outcome_of(r, bodies[i]["stream"]);
        EXPECT_EQ(o.text, want[i].text) << i;
        EXPECT_EQ(o.completion_tokens, want[i].completion_tokens) << i;
    }
    // The router counts a state when its lease is released, after the client has its answer (regression: read
    // at once, under load the last request's state was not counted yet).
    EXPECT_EQ(metric_settles(*c.router, "baton_router_direct_states_total", 4), 4);
    const uint64_t io = process_io_bytes(c.router->pid()) - io0;
    const std::string m = get(*c.router, "/metrics").body;
    const double state_bytes = metric_value(m, "baton_router_direct_state_bytes_total");
    EXPECT_EQ(metric_value(m, "baton_router_blob_bytes_total"), 0) << m;
    ASSERT_GT(state_bytes, 0) << m;
    // Requests, answers, health checks and releases only: far less than the states that moved.
    EXPECT_LT(double(io), state_bytes / 4)
        << "router read+wrote " << io << " bytes for " << state_bytes << " bytes of state";
    // The prefill node served exactly what the decode node fetched, and holds nothing once released.
    const std::string pm = get(*c.prefill[0], "/metrics").body;
    const std::string dm = get(*c.decode[0], "/metrics").body;
    EXPECT_EQ(metric_value(pm, "baton_state_hold_served_bytes_total"), state_bytes) << pm;
    EXPECT_EQ(metric_value(dm, "baton_state_fetch_bytes_total"), state_bytes) << dm;
    EXPECT_EQ(metric_settles(*c.prefill[0], "baton_state_hold_states", 0), 0);
    EXPECT_EQ(metric_settles(*c.prefill[0], "baton_state_hold_released_total", 4), 4);
    EXPECT_EQ(metric_value(get(*c.router, "/metrics").body, "baton_router_state_releases_total{outcome=\"released\"}"),
              4);
}

// KV events and the prefix index: a follow-up turn goes to the decode node whose cache holds its conversation
// and, its new tokens being few, without a prefill hop ("PD where it pays"); the answer equals one node's. A
// second router over the same nodes, once its index has caught up, routes the same request to the same node.
TEST(RouterE2E, FollowUpTurnGoesLocallyToTheNodeHoldingItsConversation) {
    auto pre = node_process::start(serve_args("llama", {"--role", "prefill", "-np", "2"}));
    std::vector<std::unique_ptr<node_process>> dec;
    for (int i = 0; i < 2; ++i)
        dec.push_back(node_process::start(serve_args("llama", {"--role", "decode", "-np", "2"})));
    auto both = node_process::start(serve_args("llama"));
    auto router_args = [&] {
        return std::vector<std::string>{"route",
                                        "--prefill",
                                        pre->url(),
                                        "--decode",
                                        dec[0]->url() + "," + dec[1]->url(),
                                        "--pd-min-tokens",
                                        "128",
                                        "-m",
                                        test_model_path("llama"),
                                        "--health-interval",
                                        "0.2"};
    };
    auto r1 = node_process::start(router_args());
    std::string long_text = "Tell me about the state of the node.";
    for (int k = 0; k < 18; ++k) long_text += " The model and the state " + std::to_string(k) + ".";
    json turn1 = {
        {"messages", json::array({{{"role", "user"}, {"content", long_text}}})}, {"max_tokens", 8}, {"temperature", 0}};
    const http_reply a1 = post(*r1, "/v1/chat/completions", turn1.dump());
    ASSERT_EQ(a1.status, 200) << a1.body;
    EXPECT_EQ(a1.route, "pd");
    const std::string holder = a1.decode_node;
    ASSERT_FALSE(holder.empty());
    // The decode node publishes what its slot now holds; the router reads it with its health checks.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    while (std::chrono::steady_clock::now() < until &&
           metric_value(get(*r1, "/metrics").body, "baton_router_kv_index_blocks") < 6)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // a publish and a poll after the restore
    json turn2 = turn1;
    turn2["messages"].push_back({{"role", "assistant"}, {"content", a1.j()["choices"][0]["message"]["content"]}});
    turn2["messages"].push_back({{"role", "user"}, {"content", "And then?"}});
    const http_reply want = post(*both, "/v1/chat/completions", turn2.dump());
    ASSERT_EQ(want.status, 200) << want.body;
    const http_reply a2 = post(*r1, "/v1/chat/completions", turn2.dump());
    ASSERT_EQ(a2.status, 200) << a2.body;
    EXPECT_EQ(a2.route, "direct") << "a follow-up of few new tokens is prefilled where its conversation is";
    EXPECT_EQ(a2.decode_node, holder);
    EXPECT_EQ(normalized(a2.j()), normalized(want.j()));
    const std::string m = get(*r1, "/metrics").body;
    EXPECT_EQ(metric_value(m, "baton_router_local_followups_total"), 1) << m;
    EXPECT_GE(metric_value(m, "baton_router_kv_held_tokens_total"), 320) << m;
    EXPECT_EQ(metric_value(m, "baton_router_kv_index_nodes"), 3) << m;
    // A second router, started now, learns the same from the nodes (their snapshots) and agrees.
    auto r2 = node_process::start(router_args());
    const auto until2 = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    while (std::chrono::steady_clock::now() < until2 &&
           metric_value(get(*r2, "/metrics").body, "baton_router_kv_index_nodes") < 3)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    json turn3 = turn2;
    turn3["messages"].push_back({{"role", "assistant"}, {"content", a2.j()["choices"][0]["message"]["content"]}});
    turn3["messages"].push_back({{"role", "user"}, {"content", "Why?"}});
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // turn 2's slot published, both polled
    const http_reply b1 = post(*r1, "/v1/chat/completions", turn3.dump());
    const http_reply b2 = post(*r2, "/v1/chat/completions", turn3.dump());
    ASSERT_EQ(b1.status, 200) << b1.body;
    ASSERT_EQ(b2.status, 200) << b2.body;
    EXPECT_EQ(b1.decode_node, holder);
    EXPECT_EQ(b2.decode_node, holder) << "two routers with converged indexes pick the same node";
    EXPECT_EQ(b1.route, "direct");
    EXPECT_EQ(b2.route, "direct");
    // (The nodes' logs still hold every batch: the second router read them from the first.)
    EXPECT_GT(metric_value(get(*r2, "/metrics").body, "baton_router_kv_event_batches_total"), 0);

    // A follow-up that adds many tokens goes PD, and the prefill node ships only the cells past what the
    // holder has (a delta): the answer is still one node's, and fewer bytes moved than the whole state.
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // turn 3's slot published, r1 polled
    json turn4 = turn3;
    turn4["messages"].push_back({{"role", "assistant"}, {"content", b1.j()["choices"][0]["message"]["content"]}});
    std::string more = "Now consider this.";
    for (int k = 0; k < 14; ++k) more += " The decode node holds " + std::to_string(k) + " blocks.";
    turn4["messages"].push_back({{"role", "user"}, {"content", more}});
    const double pre_bytes_before = metric_value(get(*pre, "/metrics").body, "baton_blob_bytes_out_total");
    const http_reply want4 = post(*both, "/v1/chat/completions", turn4.dump());
    ASSERT_EQ(want4.status, 200) << want4.body;
    const http_reply a4 = post(*r1, "/v1/chat/completions", turn4.dump());
    ASSERT_EQ(a4.status, 200) << a4.body;
    EXPECT_EQ(a4.route, "pd") << "many new tokens: a prefill hop";
    EXPECT_EQ(a4.decode_node, holder);
    EXPECT_EQ(normalized(a4.j()), normalized(want4.j()));
    const std::string rm = get(*r1, "/metrics").body;
    EXPECT_EQ(metric_value(rm, "baton_router_deltas_total"), 1) << rm;
    EXPECT_GE(metric_value(rm, "baton_router_delta_base_tokens_total"), 320) << rm;
    const std::string pm = get(*pre, "/metrics").body;
    EXPECT_EQ(metric_value(pm, "baton_deltas_out_total"), 1) << pm;
    // The whole state of turn 4 would be about turn 1's bytes per token times its tokens; the delta leaves out
    // the cells of the base (at least 320 tokens, the first turn).
    const double delta_bytes = metric_value(pm, "baton_blob_bytes_out_total") - pre_bytes_before;
    const double tokens1 = a1.j()["usage"]["prompt_tokens"].get<double>();
    const double tokens4 = a4.j()["usage"]["prompt_tokens"].get<double>();
    const double base = metric_value(rm, "baton_router_delta_base_tokens_total");
    const double whole = pre_bytes_before / tokens1 * tokens4;
    EXPECT_LT(delta_bytes, whole * (tokens4 - base + 16) / tokens4)
        << "turn 1: " << pre_bytes_before << " bytes, " << tokens1 << " tokens; turn 4: " << tokens4 << " tokens, base "
        << base;
    std::string holder_metrics;
    for (const auto & d : dec)
        if (d->url() == holder) holder_metrics = get(*d, "/metrics").body;
    EXPECT_EQ(metric_value(holder_metrics, "baton_deltas_in_total"), 1) << holder_metrics;
    EXPECT_EQ(metric_value(rm, "baton_router_fallbacks_total{reason=\"blob_rejected\"}"), 0) << rm;
}

// Direct transfer: a decode node killed (kill -9) in the middle of fetching the state. The router sends the
// same state's place to the other decode node, which fetches it again: the request ends in one node's answer
// with one prefill only, the lease ends when the router releases it, and the prefill node holds nothing after.
TEST(RouterE2E, DecodeNodeKilledMidFetchIsRetriedOnAnotherWithoutAPrefill) {
    cluster c = cluster::make(1, 2, {}, {"--test-pause-held-state", "3000"});
    auto both = node_process::start(serve_args("llama"));
    json b = with_usage(workload_body(11));
    b["stream"] = false;
    const outcome want = outcome_of(post(*both, completion_path(b), b.dump()), false);
    http_reply r;
    std::thread client([&] { r = post(*c.router, completion_path(b), b.dump(), "application/json", "", 60); });
    int victim = -1;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (victim < 0 && std::chrono::steady_clock::now() < deadline) {
        for (int i = 0; i < 2 && victim < 0; ++i)
            if (metric_value(get(*c.decode[size_t(i)], "/metrics").body, "baton_state_fetches_in_flight") >= 1)
                victim = i;
        if (victim < 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (victim >= 0) ::kill(c.decode[size_t(victim)]->pid(), SIGKILL);
    client.join();
    ASSERT_GE(victim, 0) << "no decode node was ever seen fetching the state";
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.route, "pd");
    EXPECT_EQ(r.decode_node, c.decode[size_t(1 - victim)]->url());
    const outcome o = outcome_of(r, false);
    EXPECT_EQ(o.text, want.text);
    EXPECT_EQ(o.completion_tokens, want.completion_tokens);
    const std::string pm = get(*c.prefill[0], "/metrics").body;
    EXPECT_EQ(metric_value(pm, "baton_state_hold_leases_total"), 1) << "one prefill, one state: " << pm;
    // The survivor's fetch is served; the victim's counts too only when the kernel took its bytes before the
    // reset of the killed peer arrived (regression: asserting 2 failed when the reset came first).
    const double served = metric_value(pm, "baton_state_hold_served_total");
    EXPECT_GE(served, 1) << pm;
    EXPECT_LE(served, 2) << pm;
    EXPECT_EQ(metric_settles(*c.prefill[0], "baton_state_hold_states", 0), 0);
    EXPECT_EQ(metric_settles(*c.prefill[0], "baton_state_hold_bytes", 0), 0);
    const std::string sm = get(*c.decode[size_t(1 - victim)], "/metrics").body;
    EXPECT_EQ(metric_value(sm, "baton_state_fetches_in_flight"), 0) << sm;
    EXPECT_EQ(metric_value(sm, "baton_state_fetches_total"), 1) << sm;
}

// --state-compress-level: the prefill node packs the states decode nodes fetch (blob_pack.h) and the decode node
// unpacks them before the blob checks; the answers are a single node's, and the packed bytes are fewer.
TEST(RouterE2E, PackedStatesEqualSingleNodeAndShrinkTheTransfer) {
    cluster c = cluster::make(1, 1, {}, {"--state-compress-level", "3"});
    auto both = node_process::start(serve_args("llama"));
    for (int i = 0; i < 4; ++i) {
        json b = with_usage(workload_body(4 * i + 3));  // long prompts: the PD path
        b["prompt"] =
            "Packed " + std::to_string(i) + ". " + b["prompt"].get<std::string>();  // none a prefix of another
        b["stream"] = i % 2 == 1;
        const outcome want = outcome_of(post(*both, completion_path(b), b.dump()), b["stream"]);
        const http_reply r = post(*c.router, completion_path(b), b.dump());
        ASSERT_EQ(r.status, 200) << r.body;
        EXPECT_EQ(r.route, "pd");
        const outcome o = outcome_of(r, b["stream"]);
        EXPECT_EQ(o.text, want.text) << i;
        EXPECT_EQ(o.completion_tokens, want.completion_tokens) << i;
    }
    const std::string pm = get(*c.prefill[0], "/metrics").body;
    const double packs = metric_value(pm, "baton_state_packs_total");
    EXPECT_EQ(packs, 4) << pm;
    const double in = metric_value(pm, "baton_state_pack_input_bytes_total");
    const double out = metric_value(pm, "baton_state_pack_output_bytes_total");
    EXPECT_GT(in, 0) << pm;
    EXPECT_LT(out, in) << "packed states should be smaller (f16 cells in byte planes): " << pm;
    const std::string dm = get(*c.decode[0], "/metrics").body;
    EXPECT_EQ(metric_value(dm, "baton_state_unpacks_total"), 4) << dm;
    EXPECT_EQ(metric_value(dm, "baton_state_fetch_bytes_total"), out) << "the wire carried the packed bytes";
    EXPECT_EQ(metric_value(dm, "baton_restores_total"), 4) << dm;
}

// Packed states through the relay: the router asks the prefill node for a packed blob and passes it on as it
// arrives, the decode node unpacks it; a /v1/decode body whose packing is broken, or in another coding, is
// refused before any slot is touched.
TEST(RouterE2E, PackedStatesThroughTheRelayAndBrokenPackingsRefused) {
    cluster c = cluster::make(1, 1, {"--pd-transfer", "relay"}, {"--state-compress-level", "1"});
    auto both = node_process::start(serve_args("llama"));
    for (bool stream : {false, true}) {
        json b = with_usage(workload_body(7));
        b["prompt"] = std::string(stream ? "Streamed" : "Whole") + ". " + b["prompt"].get<std::string>();
        b["stream"] = stream;
        expect_pd_equals_single(*c.router, *both, b);
    }
    const std::string pm = get(*c.prefill[0], "/metrics").body;
    EXPECT_EQ(metric_value(pm, "baton_state_packs_total"), 2) << pm;
    // (the router counts a relayed state once its hop is closed, just after the answer went out)
    const double packed = metric_value(pm, "baton_state_pack_output_bytes_total");
    EXPECT_EQ(metric_settled(*c.router, "baton_router_blob_bytes_total", packed), packed)
        << "the router relayed the packed bytes";
    EXPECT_EQ(metric_value(get(*c.decode[0], "/metrics").body, "baton_state_unpacks_total"), 2);

    auto client = c.decode[0]->client(60);
    const std::string junk = "BTNZ\x01\x02" + std::string(40, 'x');
    auto bad = client->Post("/v1/decode", {{"Content-Encoding", "baton-zstd"}}, junk, "application/octet-stream");
    ASSERT_TRUE(bad);
    EXPECT_GE(bad->status, 400) << bad->body;
    EXPECT_NE(bad->body.find("packed state"), std::string::npos) << bad->body;
    auto other = client->Post("/v1/decode", {{"Content-Encoding", "gzip"}}, junk, "application/octet-stream");
    ASSERT_TRUE(other);
    EXPECT_GE(other->status, 400) << other->body;
    EXPECT_NE(other->body.find("Content-Encoding"), std::string::npos) << other->body;
    const std::string dm = get(*c.decode[0], "/metrics").body;
    EXPECT_EQ(metric_value(dm, "baton_restore_failures_total{reason=\"corrupt\"}"), 1) << dm;
    EXPECT_EQ(metric_value(dm, "baton_restore_failures_total{reason=\"unsupported\"}"), 1) << dm;
    EXPECT_EQ(metric_value(dm, "baton_restores_total"), 2) << "the refused bodies reached no slot: " << dm;
}

// --pd-transfer relay keeps the router relay (nodes that cannot reach each other): same answers, the blob
// bytes counted at the router, nothing held on the prefill node.
// Streamed transfer (state_stream.h): a prompt of ~110 tokens in parts of 16 (micro-batches of 16 on every node, so
// the parts' stops fall where a whole chunk's micro-batches end), for every family mkmodel makes: the decode node
// joins the parts as they come and answers what a single node answers, greedy and seeded, streamed and not.
const char * k_stream_prompt =
    "the state of the model and the node is written by the prefill node and read by the decode node, which "
    "restores it through one routine and then generates token for token what a single node would have "
    "produced, on every family, with every cache type and with flash attention on or off, on the CPU and on "
    "the device, and the blob carries the checkpoints the sequence needs";

struct stream_cluster {
    std::unique_ptr<node_process> single, prefill, decode, router;
    // node_extra: flags every node takes (a cache type, the device); vulkan: the nodes see the software device.
    // n_embd: the test model's width (a q8_0 cache needs heads of 32: width 256).
    static stream_cluster make(const std::string & arch, std::vector<std::string> prefill_extra = {},
                               std::vector<std::string> router_extra = {}, std::vector<std::string> node_extra = {},
                               bool vulkan = false, int n_embd = 64) {
        const std::string model = test_model_path(arch, 1, n_embd);
        std::vector<std::string> batch = {"-b", "32", "-ub", "16"};
        batch.insert(batch.end(), node_extra.begin(), node_extra.end());
        const auto start = [&](const std::vector<std::string> & extra) {
            std::vector<std::string> a = {"serve", "-m", model, "-c", "2048", "-t", "2"};
            a.insert(a.end(), extra.begin(), extra.end());
            if (!vulkan) return node_process::start(a);
            a.insert(a.begin(), {"GGML_VK_VISIBLE_DEVICES=0", baton_bin()});
            return node_process::start(a, 120, "/usr/bin/env");
        };
        stream_cluster c;
        c.single = start(batch);
        auto pa = batch;
        pa.insert(pa.end(), {"--role", "prefill", "--state-stream-tokens", "16"});
        pa.insert(pa.end(), prefill_extra.begin(), prefill_extra.end());
        c.prefill = start(pa);
        auto da = batch;
        da.insert(da.end(), {"--role", "decode"});
        c.decode = start(da);
        std::vector<std::string> ra = {"route",
                                       "--prefill",
                                       c.prefill->url(),
                                       "--decode",
                                       c.decode->url(),
                                       "--pd-min-tokens",
                                       "16",
                                       "-m",
                                       model,
                                       "--timeout",
                                       "60",
                                       "--health-interval",
                                       "0.2"};
        ra.insert(ra.end(), router_extra.begin(), router_extra.end());
        c.router = node_process::start(ra);
        return c;
    }
};

TEST(RouterE2E, StreamedStatesEqualSingleNodeOnEveryFamily) {
    // Sanitized builds check the threads, not the families: an attention model and a hybrid (checkpoints).
    const std::vector<std::string> archs = k_sanitized ? std::vector<std::string>{"llama", "lfm2"} : mkmodel_archs();
    for (const std::string & arch : archs) {
        SCOPED_TRACE(arch);
        stream_cluster c = stream_cluster::make(arch);
        for (int i = 0; i < 2; ++i) {
            json b = {{"prompt", std::string(i ? "Seeded: " : "Greedy: ") + k_stream_prompt},
                      {"max_tokens", 12},
                      {"temperature", i ? 0.8 : 0.0},
                      {"seed", 7 + i},
                      {"stream", i == 1}};
            expect_pd_equals_single(*c.router, *c.single, with_usage(b));
        }
        const std::string pm = get(*c.prefill, "/metrics").body;
        const std::string dm = get(*c.decode, "/metrics").body;
        // ~110 tokens in parts of 16: several parts each (the prompt's tokens differ a little by vocabulary).
        EXPECT_GE(metric_value(pm, "baton_state_parts_out_total"), 10) << pm;
        EXPECT_EQ(metric_value(dm, "baton_state_streams_fetched_total"), 2) << dm;
        EXPECT_EQ(metric_value(dm, "baton_state_stream_parts_total"), metric_value(pm, "baton_state_parts_out_total"))
            << dm;
        EXPECT_EQ(metric_value(dm, "baton_restores_total"), 2) << dm;
        EXPECT_EQ(metric_settles(*c.prefill, "baton_state_hold_states", 0), 0) << "every stream's lease released";
    }
}

// Streamed states of a quantized cache (q8_0 K and V, flash attention on) on the CPU, and of an f16 cache that lives
// on the Vulkan device (every layer offloaded: each part is exported from device memory) answer as a single node
// with the same flags, greedy and seeded, streamed and not. (Across devices the numerics differ, so the device is
// compared with itself, as in the equivalence grid.)
TEST(RouterE2E, StreamedStatesOfAQuantizedCacheAndOnTheDeviceEqualSingleNode) {
    struct cell {
        std::vector<std::string> flags;
        bool vulkan;
    };
    std::vector<cell> cells = {{{"-ctk", "q8_0", "-ctv", "q8_0", "-fa", "on", "-dev", "none"}, false}};
    // Under ASan/TSan llvmpipe's uninstrumented JIT threads report what is not Baton's: the release suite runs it.
    if (!k_sanitized) cells.push_back({{"-dev", "Vulkan0", "-ngl", "all"}, true});
    for (const cell & cl : cells) {
        SCOPED_TRACE(cl.flags[1]);
        stream_cluster c = stream_cluster::make("llama", {}, {}, cl.flags, cl.vulkan, cl.vulkan ? 64 : 256);
        for (int i = 0; i < 4; ++i) {
            json b = {
                {"prompt", std::string(i % 2 ? "Seeded " : "Greedy ") + std::to_string(i) + ": " + k_stream_prompt},
                {"max_tokens", 8},
                {"temperature", i % 2 ? 0.8 : 0.0},
                {"seed", 40 + i},
                {"stream", i >= 2}};
            expect_pd_equals_single(*c.router, *c.single, with_usage(b));
        }
        const std::string dm = get(*c.decode, "/metrics").body;
        EXPECT_EQ(metric_value(dm, "baton_state_streams_fetched_total"), 4) << dm;
        EXPECT_GE(metric_value(dm, "baton_state_stream_parts_total"), 16) << dm;
    }
}

// A stream cut after any frame (the prefill node dies mid-stream: --test-cut-stream N cuts its k-th stream
// after N + k frames) leaves the decode node's slot untouched: the router falls back to a local prefill, which
// answers what a single node answers, and the decode node restores only the streams that came whole. A part
// whose state bytes were changed on the way is refused as corrupt (its section checksum), never restored.
TEST(RouterE2E, StreamCutAfterAnyFrameFallsBackAndNeverRestoresAPartialState) {
    stream_cluster c = stream_cluster::make("llama", {"--test-cut-stream", "1"});
    // A stream is its head, two frames per part and the end frame: cut after 1, 2, ... frames until one comes
    // whole. Every request starts with another word (no shared block: the fallback's local prefill must not turn
    // the next request into a local follow-up).
    int k = 0;
    for (; k < 64; ++k) {
        const bool stream = k % 2 == 1;
        json b = {{"prompt", "Request " + std::to_string(k) + " of many. " + k_stream_prompt},
                  {"max_tokens", 6},
                  {"temperature", 0.0},
                  {"stream", stream}};
        SCOPED_TRACE(k);
        const outcome want = outcome_of(post(*c.single, completion_path(b), b.dump()), stream);
        const http_reply r = post(*c.router, completion_path(b), b.dump());
        ASSERT_EQ(r.status, 200) << r.body;
        EXPECT_EQ(outcome_of(r, stream).text, want.text);
        if (r.route == "pd") break;
        ASSERT_EQ(r.route, "fallback:prefill_failed") << "a cut stream is the prefill node's failure";
        const std::string dm = get(*c.decode, "/metrics").body;
        ASSERT_EQ(metric_value(dm, "baton_restores_total"), 0) << "cut after " << k + 1 << " frames: " << dm;
    }
    // (The prefill node's own part count is no measure: a cut stream's lease is released when its request falls
    // back, which cancels a prompt still computing.)
    const std::string dm = get(*c.decode, "/metrics").body;
    const double parts = metric_value(dm, "baton_state_stream_parts_total");
    EXPECT_GE(parts, 4) << dm;
    EXPECT_EQ(k + 1, 2 * parts + 2) << "the first whole stream is the one cut after its last frame: " << dm;
    EXPECT_EQ(metric_value(dm, "baton_restores_total"), 1) << dm;
    EXPECT_EQ(metric_value(dm, "baton_state_streams_fetched_total"), 1) << dm;
    EXPECT_LT(metric_value(dm, "baton_restore_failures_total{reason=\"corrupt\"}"), 1) << "a cut is no bad state";

    stream_cluster bad = stream_cluster::make("llama", {"--test-corrupt-state"});
    json b = {{"prompt", std::string("Zulu ") + k_stream_prompt}, {"max_tokens", 6}, {"temperature", 0.0}};
    const outcome want = outcome_of(post(*bad.single, "/v1/completions", b.dump()), false);
    const http_reply r = post(*bad.router, "/v1/completions", b.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(outcome_of(r, false).text, want.text);
    EXPECT_EQ(r.route.rfind("fallback:", 0), 0u) << r.route;
    const std::string bm = get(*bad.decode, "/metrics").body;
    EXPECT_GE(metric_value(bm, "baton_restore_failures_total{reason=\"corrupt\"}"), 1) << bm;
    EXPECT_EQ(metric_value(bm, "baton_restores_total"), 0) << bm;
}

TEST(RouterE2E, RelayTransferStillEqualsSingleNode) {
    cluster c = cluster::make(1, 1, {"--pd-transfer", "relay"});
    auto both = node_process::start(serve_args("llama"));
    for (bool stream : {false, true}) {
        json b = with_usage(workload_body(7));
        b["stream"] = stream;
        expect_pd_equals_single(*c.router, *both, b);
    }
    const std::string m = get(*c.router, "/metrics").body;
    EXPECT_GT(metric_value(m, "baton_router_blob_bytes_total"), 0) << m;
    EXPECT_EQ(metric_value(m, "baton_router_direct_states_total"), 0) << m;
    EXPECT_EQ(metric_value(get(*c.prefill[0], "/metrics").body, "baton_state_hold_leases_total"), 0);
}

TEST(RouterE2E, KillPrefillNodeDuringRunEveryRequestSucceeds) {
    cluster c = cluster::make(2, 2);
    auto both = node_process::start(serve_args("llama", {"-np", "2"}));
    const int n = 24;
    std::vector<std::future<outcome>> got;
    for (int i = 0; i < n; ++i) {
        if (i == 6) ::kill(c.prefill[0]->pid(), SIGKILL);
        got.push_back(std::async(std::launch::async, [&, i] {
            json b = workload_body(i * 4 + 3);  // long prompts: all take the PD path
            b["stream"] = false;
            return outcome_of(post(*c.router, completion_path(b), b.dump(), "application/json", "", 120), false);
        }));
    }
    for (int i = 0; i < n; ++i) {
        outcome o = got[i].get();
        ASSERT_EQ(o.status, 200) << "request " << i;
        json b = workload_body(i * 4 + 3);
        b["stream"] = false;
        EXPECT_EQ(o.text, outcome_of(post(*both, completion_path(b), b.dump()), false).text) << i;
    }
}

TEST(RouterE2E, CorruptBlobIsRejectedAndRouterFallsBack) {
    cluster c = cluster::make(1, 1, {}, {"--test-corrupt-state"});
    auto both = node_process::start(serve_args("llama"));
    const json b = workload_body(3);
    for (bool stream : {false, true}) {
        json body = b;
        body["stream"] = stream;
        // The fallback prefills on the decode node, whose cache then holds the first prompt: the same prompt again
        // went as a local follow-up (no PD, no blob to reject) whenever the node's KV event reached the router
        // first (regression: CI saw one rejection, not two). The second prompt shares no leading token.
        if (stream) body["prompt"] = "Another request. " + b["prompt"].get<std::string>();
        outcome want = outcome_of(post(*both, completion_path(body), body.dump()), stream);
        outcome o = outcome_of(post(*c.router, completion_path(body), body.dump()), stream);
        ASSERT_EQ(o.status, 200);
        EXPECT_EQ(o.text, want.text) << "fallback output must still be correct";
    }
    const std::string m = get(*c.router, "/metrics").body;
    EXPECT_EQ(metric_value(m, "baton_router_fallbacks_total{reason=\"blob_rejected\"}"), 2) << m;
    // The decode node counted both rejections (a checksum failure: corrupt) and never touched a slot.
    const std::string dm = get(*c.decode[0], "/metrics").body;
    EXPECT_EQ(metric_value(dm, "baton_restore_failures_total{reason=\"corrupt\"}"), 2) << dm;
    EXPECT_EQ(metric_value(dm, "baton_restores_total"), 0) << dm;
}

TEST(RouterE2E, KillDecodeNodeTrafficMovesAndInFlightStreamsEndWithError) {
    cluster c = cluster::make(1, 2);
    json body = long_stream_body();
    body["prompt"] = "Hello world the model and the state of the node is long enough";
    held_stream s(*c.router, body, "/v1/completions", 60);
    ASSERT_TRUE(s.wait_for("data: ", 60)) << "stream never started";
    // Find the decode node serving it and kill it. Polled: one /v1/slots answer can miss (a loaded machine, a
    // reply that does not parse), which once left the victim unfound in CI although the stream was running.
    int victim = -1;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (victim < 0 && std::chrono::steady_clock::now() < deadline) {
        for (int i = 0; i < 2 && victim < 0; ++i) {
            const json slots = json::parse(get(*c.decode[size_t(i)], "/v1/slots").body, nullptr, false);
            if (!slots.is_array()) continue;
            for (const auto & sl : slots)
                if (sl.is_object() && sl.value("busy", false)) victim = i;
        }
        if (victim < 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_GE(victim, 0) << "no decode node shows the stream's slot busy";
    ::kill(c.decode[size_t(victim)]->pid(), SIGKILL);
    ASSERT_TRUE(s.wait_end(30)) << "an in-flight stream must end, not hang";
    EXPECT_NE(s.received().find("\"error\""), std::string::npos) << "the stream must end with an explicit error event";
    // New traffic goes to the survivor.
    for (int i = 0; i < 4; ++i) {
        json b = workload_body(i * 4 + 3);
        b["stream"] = false;
        EXPECT_EQ(post(*c.router, completion_path(b), b.dump(), "application/json", "", 60).status, 200) << i;
    }
}

// The router relays a blob to the decode node while it still arrives from the prefill node. A blob cut off
// mid-transfer must never reach a decode slot: the decode node sees a short body (no restore), and the
// router falls back to the direct path (or, under --fallback fail, answers 502), never hangs.
TEST(RouterE2E, BlobCutOffMidTransferFallsBackAndNeverRestores) {
    {
        cluster c = cluster::make(1, 1, {}, {"--test-truncate-blob"});
        json b = workload_body(3);
        b["stream"] = false;
        const http_reply r = post(*c.router, completion_path(b), b.dump(), "application/json", "", 60);
        ASSERT_EQ(r.status, 200) << r.body;
        EXPECT_EQ(r.route, "fallback:prefill_failed");
        const std::string dm = get(*c.decode[0], "/metrics").body;
        EXPECT_EQ(metric_value(dm, "baton_restores_total"), 0) << dm;
        const std::string rm = get(*c.router, "/metrics").body;
        EXPECT_EQ(metric_value(rm, "baton_router_fallbacks_total{reason=\"prefill_failed\"}"), 1) << rm;
    }
    {
        cluster c = cluster::make(1, 1, {"--fallback", "fail"}, {"--test-truncate-blob"});
        const json b = workload_body(3);
        const http_reply r = post(*c.router, completion_path(b), b.dump(), "application/json", "", 60);
        EXPECT_EQ(r.status, 502) << r.body;
        EXPECT_NE(r.body.find("prefill failed"), std::string::npos) << r.body;
    }
}

// A prefill node that announces no blob length, or one over the router's --max-blob-mb, gets nothing
// buffered: the router refuses the blob at its headers and falls back, and never runs out of memory.
TEST(RouterE2E, BlobWithoutLengthOrOverTheCapIsRefusedAtItsHeaders) {
    for (const bool chunked : {false, true}) {
        httplib::Server fake;  // a misbehaving "prefill node"
        fake.Get("/health", [](const httplib::Request &, httplib::Response & res) {
            res.set_content("{\"status\":\"ok\"}", "application/json");
        });
        fake.Post("/v1/prefill", [chunked](const httplib::Request &, httplib::Response & res) {
            const auto junk = [](size_t, httplib::DataSink & sink) { return sink.write("xxxxxxxx", 8); };
            if (chunked)
                res.set_chunked_content_provider("application/octet-stream",
                                                 [junk](size_t o, httplib::DataSink & s) { return junk(o, s); });
            else
                res.set_content_provider(uint64_t(1) << 40, "application/octet-stream",
                                         [junk](size_t o, size_t, httplib::DataSink & s) { return junk(o, s); });
        });
        const int port = fake.bind_to_any_port("127.0.0.1");
        std::thread t([&] { fake.listen_after_bind(); });
        fake.wait_until_ready();
        auto d = node_process::start(serve_args("llama", {"--role", "decode"}));
        auto r = node_process::start({"route", "--pd-transfer", "relay", "--prefill",
                                      "http://127.0.0.1:" + std::to_string(port), "--decode", d->url(),
                                      "--pd-min-tokens", "16", "-m", test_model_path("llama"), "--max-blob-mb", "1",
                                      "--health-interval", "0.2"});
        json b = workload_body(3);
        b["stream"] = false;
        const http_reply res = post(*r, completion_path(b), b.dump(), "application/json", "", 60);
        EXPECT_EQ(res.status, 200) << res.body;
        EXPECT_EQ(res.route, "fallback:prefill_failed") << (chunked ? "chunked" : "1 TiB");
        EXPECT_NE(get(*r, "/metrics").body.find("outcome=\"blob_too_large\""), std::string::npos);
        EXPECT_EQ(metric_value(get(*d, "/metrics").body, "baton_restores_total"), 0);
        EXPECT_LT(r->rss_kb(), 1L << 20) << "the router buffered the blob";
        fake.stop();
        t.join();
    }
}

TEST(RouterE2E, FallbackFailGivesExplicitErrorsNeverHangs) {
    {
        cluster c = cluster::make(1, 1, {"--fallback", "fail"}, {"--test-corrupt-state"});
        const json b = workload_body(3);
        http_reply r = post(*c.router, completion_path(b), b.dump(), "application/json", "", 60);
        EXPECT_EQ(r.status, 502) << r.body;
        EXPECT_NE(r.body.find("rejected the blob"), std::string::npos) << r.body;
    }
    {
        cluster c = cluster::make(1, 1, {"--fallback", "fail"});
        ::kill(c.prefill[0]->pid(), SIGKILL);
        const json b = workload_body(3);
        http_reply r = post(*c.router, completion_path(b), b.dump(), "application/json", "", 60);
        EXPECT_EQ(r.status, 502) << r.body;
        EXPECT_NE(r.body.find("prefill failed"), std::string::npos) << r.body;
        // Short prompts do not need a prefill node.
        const json s = {{"prompt", "Hi"}, {"max_tokens", 4}};
        EXPECT_EQ(post(*c.router, "/v1/completions", s.dump(), "application/json", "", 60).status, 200);
    }
}

// Regression (the server's RequestOverTimeoutIs504): the router's --timeout covers the whole response, so a
// stream whose chunks keep arriving still ends at the deadline, with an explicit error event and [DONE],
// and the decode node's slot is freed.
TEST(RouterE2E, RouterTimeoutEndsAFastStream) {
    auto d = node_process::start(
        {"serve", "-m", test_model_path("llama", 1, 512, 4), "-c", "8192", "-np", "1", "-t", "2", "--role", "decode"});
    auto r = node_process::start({"route", "--decode", d->url(), "--timeout", "3", "--health-interval", "0.2"});
    json body = long_stream_body();
    body["max_tokens"] = 8000;
    const auto t0 = std::chrono::steady_clock::now();
    const http_reply s = post(*r, "/v1/completions", body.dump(), "application/json", "", 60);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s.status == 200) {
        const std::string tail = s.body.substr(s.body.size() > 400 ? s.body.size() - 400 : 0);
        EXPECT_NE(s.body.find("deadline_exceeded"), std::string::npos) << tail;
        EXPECT_NE(s.body.find("data: [DONE]"), std::string::npos) << tail;
        EXPECT_EQ(s.body.find("\"finish_reason\":\"length\""), std::string::npos)
            << "the stream ran to its end: " << tail;
    } else {
        EXPECT_EQ(s.status, 504) << s.body;
    }
    EXPECT_LT(took, 30) << "the router let the stream run far past its 3 s deadline";
    EXPECT_TRUE(wait_slot_idle(*d, 0, 10)) << "the decode node kept generating for a request the router gave up on";
}

// Requests that find every decode slot taken wait at the router (not a 503 from the node); beyond
// --queue-max they get an immediate 503 naming the router's queue. Regression: a full router queue on the
// prefill side was taken for a failed prefill node and sent to a local-prefill fallback.
TEST(RouterE2E, FullRouterQueueIs503AtOnceNeverAFallback) {
    auto d = node_process::start(serve_args("llama", {"--role", "decode", "-np", "1"}));
    auto p = node_process::start(serve_args("llama", {"--role", "prefill", "-np", "1"}));
    auto r =
        node_process::start({"route", "--prefill", p->url(), "--decode", d->url(), "--pd-min-tokens", "1",
                             "--queue-max", "1", "--node-queue", "0", "--health-interval", "0.2", "--timeout", "60"});
    held_stream first(*r, long_stream_body(), "/v1/completions", 60);  // holds the decode node's only place
    ASSERT_TRUE(first.wait_for("data: ", 30)) << first.received();
    json waiting_body = {{"prompt", "second in line"}, {"max_tokens", 2}, {"temperature", 0}, {"stream", true}};
    held_stream second(*r, waiting_body, "/v1/completions", 60);  // waits at the router
    bool queued = false;
    for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
         !queued && std::chrono::steady_clock::now() < until;) {
        queued = metric_value(get(*r, "/metrics").body, "baton_router_queue_waiting") == 1;
        if (!queued) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_TRUE(queued) << get(*r, "/metrics").body;
    const auto t0 = std::chrono::steady_clock::now();
    http_reply third =
        post(*r, "/v1/completions", "{\"prompt\":\"third\",\"max_tokens\":2}", "application/json", "", 30);
    EXPECT_EQ(third.status, 503) << third.body;
    EXPECT_NE(third.body.find("queue is full"), std::string::npos) << third.body;
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0)
        << "refused at once, not after a wait";
    first.release();  // the first client hangs up: its place goes to the one waiting
    EXPECT_TRUE(second.wait_for("[DONE]", 30)) << second.received();
    const std::string m = get(*r, "/metrics").body;
    EXPECT_EQ(metric_value(m, "baton_router_fallbacks_total{reason=\"prefill_failed\"}"), 0) << m;
    EXPECT_EQ(metric_value(d->client(10)->Get("/metrics")->body, "baton_admission_rejects_total"), 0);
}

// Regression: when the router's queue for prefill capacity was full, the request was counted as a failed
// prefill and sent to a local-prefill fallback on the (equally full) decode pool. A full queue is a 503 at
// once. The prefill node here is a fake with one slot that holds every prefill until released.
TEST(RouterE2E, FullPrefillQueueIsNotAPrefillFailure) {
    httplib::Server fake;
    std::atomic<int> calls{0};
    std::atomic<bool> release{false};
    fake.Get("/health", [](const httplib::Request &, httplib::Response & res) {
        res.set_content("{\"status\":\"ok\"}", "application/json");
    });
    fake.Get("/v1/models", [](const httplib::Request &, httplib::Response & res) {
        res.set_content("{\"object\":\"list\",\"data\":[{\"id\":\"fake\",\"meta\":{\"n_slots\":1}}]}",
                        "application/json");
    });
    fake.Post("/v1/prefill", [&](const httplib::Request &, httplib::Response & res) {
        ++calls;
        for (int i = 0; i < 3000 && !release.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        res.status = 500;
        res.set_content("{}", "application/json");
    });
    const int port = fake.bind_to_any_port("127.0.0.1");
    std::thread t([&] { fake.listen_after_bind(); });
    fake.wait_until_ready();
    auto d = node_process::start(serve_args("llama", {"--role", "decode", "-np", "2"}));
    auto r = node_process::start({"route", "--prefill", "http://127.0.0.1:" + std::to_string(port), "--decode",
                                  d->url(), "--pd-min-tokens", "1", "--queue-max", "1", "--node-queue", "0",
                                  "--health-interval", "0.2", "--timeout", "60"});
    const std::string body = "{\"prompt\":\"a prompt for the prefill node\",\"max_tokens\":2,\"temperature\":0}";
    auto first =
        std::async(std::launch::async, [&] { return post(*r, "/v1/completions", body, "application/json", "", 60); });
    for (int i = 0; i < 2000 && calls.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_EQ(calls.load(), 1) << "the first request never reached the prefill node";
    auto second =
        std::async(std::launch::async, [&] { return post(*r, "/v1/completions", body, "application/json", "", 60); });
    bool queued = false;
    for (int i = 0; i < 2000 && !queued; ++i) {
        queued = metric_value(get(*r, "/metrics").body, "baton_router_queue_waiting") == 1;
        if (!queued) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_TRUE(queued);
    const http_reply third = post(*r, "/v1/completions", body, "application/json", "", 30);
    EXPECT_EQ(third.status, 503) << third.body;
    EXPECT_NE(third.body.find("queue is full"), std::string::npos) << third.body;
    EXPECT_EQ(metric_value(get(*r, "/metrics").body, "baton_router_fallbacks_total{reason=\"prefill_failed\"}"), 0);
    release = true;
    // The two that got in end through the fallback (the fake answers 500): nothing is lost.
    EXPECT_EQ(first.get().status, 200);
    EXPECT_EQ(second.get().status, 200);
    fake.stop();
    t.join();
}

TEST(RouterE2E, ErrorsAuthAndHealth) {
    auto d = node_process::start(serve_args("llama", {"--role", "decode", "--api-key", "node-secret"}));
    auto r = node_process::start({"route", "--decode", d->url(), "--api-key", "client-secret", "--node-key",
                                  "node-secret", "--health-interval", "0.2"});
    EXPECT_EQ(post(*r, "/v1/completions", "{\"prompt\":\"hi\",\"max_tokens\":2}").status, 401);
    EXPECT_EQ(
        post(*r, "/v1/completions", "{\"prompt\":\"hi\",\"max_tokens\":2}", "application/json", "client-secret").status,
        200);
    EXPECT_EQ(post(*r, "/v1/completions", "{bad json", "application/json", "client-secret").status, 400);
    EXPECT_EQ(get(*r, "/v1/models", "client-secret").status, 200);
    EXPECT_EQ(get(*r, "/nope", "client-secret").status, 404);
    EXPECT_EQ(get(*r, "/health").status, 200);
    ::kill(d->pid(), SIGKILL);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    int h = 200;
    while (h == 200 && std::chrono::steady_clock::now() < deadline) {
        h = get(*r, "/health").status;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_EQ(h, 503) << "router must report unhealthy when no decode node is left";
    http_reply e =
        post(*r, "/v1/completions", "{\"prompt\":\"hi\",\"max_tokens\":2}", "application/json", "client-secret", 30);
    EXPECT_EQ(e.status, 503) << e.body;
    EXPECT_EQ(r->terminate(), 0);
}

// X-Request-Id: the client's id comes back on the response and is on the log lines of the router and of
// both nodes the request reached through PD; without one (or with one that is not a valid id) the router
// makes one. The router logs JSON lines here, the nodes text.
TEST(RouterE2E, RequestIdIsEchoedAndOnTheLogLinesOfEveryNodeItReaches) {
    cluster c = cluster::make(1, 1, {"--log-format", "json"});
    const std::string body =
        R"({"prompt":"The quick brown fox jumps over the lazy dog again and again and again","max_tokens":2,"temperature":0})";
    auto cl = c.router->client(60);
    auto res = cl->Post("/v1/completions", {{"X-Request-Id", "test-id-42"}}, body, "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    EXPECT_EQ(res->get_header_value("X-Baton-Route"), "pd");
    EXPECT_EQ(res->get_header_value("X-Request-Id"), "test-id-42");
    auto generated = cl->Post("/v1/completions", body, "application/json");
    ASSERT_TRUE(generated);
    const std::string id = generated->get_header_value("X-Request-Id");
    EXPECT_EQ(id.size(), 16u) << id;
    EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
    auto replaced = cl->Post("/v1/completions", {{"X-Request-Id", std::string(200, 'x')}}, body, "application/json");
    ASSERT_TRUE(replaced);
    EXPECT_EQ(replaced->get_header_value("X-Request-Id").size(), 16u);
    EXPECT_NE(replaced->get_header_value("X-Request-Id"), id);

    ASSERT_EQ(c.router->terminate(), 0);
    for (auto * n : {c.prefill[0].get(), c.decode[0].get()}) {
        ASSERT_EQ(n->terminate(), 0);
        EXPECT_NE(n->stderr_text().find("[req=test-id-42] serve: POST /v1/"), std::string::npos) << n->stderr_text();
        EXPECT_NE(n->stderr_text().find("[req=" + id + "]"), std::string::npos) << n->stderr_text();
    }
    bool router_line = false;
    std::istringstream lines(c.router->stderr_text());
    for (std::string line; std::getline(lines, line);) {
        if (line.rfind("{", 0) != 0) continue;
        const json j = json::parse(line);  // every line is one JSON object
        if (j.value("request_id", "") == "test-id-42" &&
            j.value("msg", "").find("POST /v1/completions 200") != std::string::npos)
            router_line = true;
    }
    EXPECT_TRUE(router_line) << c.router->stderr_text();
}

// A prompt over the slot's context is refused through PD as a single node refuses it: llama-server's
// exceed_context_size_error with its counts, not the prefill node's body quoted inside another error.
TEST(RouterE2E, ContextOverflowThroughPdIsTheNodesOwnError) {
    cluster c = cluster::make(1, 1);
    std::string text;
    for (int i = 0; i < 1200; ++i) text += "hello world ";
    for (const json & body : {json{{"prompt", text}, {"max_tokens", 2}},
                              json{{"messages", {{{"role", "user"}, {"content", text}}}}, {"max_tokens", 2}}}) {
        const std::string path = completion_path(body);
        const http_reply via_router = post(*c.router, path, body.dump(), "application/json", "", 60);
        const http_reply single = post(*c.decode[0], path, body.dump());
        EXPECT_EQ(via_router.status, 400) << via_router.body;
        EXPECT_EQ(via_router.j()["error"]["type"], "exceed_context_size_error") << via_router.body;
        EXPECT_EQ(via_router.j(), single.j());
    }
    // /infill goes the same way (its prompt is built on the prefill node): this model has no FIM tokens, and
    // the client gets the node's own 501, as from a single node.
    const std::string infill = R"j({"input_prefix":"def f(","input_suffix":")"})j";
    const http_reply via_router = post(*c.router, "/infill", infill, "application/json", "", 60);
    EXPECT_EQ(via_router.status, 501) << via_router.body;
    EXPECT_EQ(via_router.j(), post(*c.decode[0], "/infill", infill).j());
}

// llama-server clients use the unprefixed paths and /tokenize, /detokenize: the router answers them (the
// token calls by a node's vocabulary), through PD for a long prompt.
TEST(RouterE2E, LlamaServerAliasesAndTokenizeThroughTheRouter) {
    cluster c = cluster::make(1, 1);
    const std::string long_prompt = std::string(200, 'a');
    const json chat = {
        {"messages", {{{"role", "user"}, {"content", long_prompt}}}}, {"max_tokens", 4}, {"temperature", 0}};
    const http_reply a = post(*c.router, "/chat/completions", chat.dump(), "application/json", "", 60);
    const http_reply b = post(*c.router, "/v1/chat/completions", chat.dump(), "application/json", "", 60);
    ASSERT_EQ(a.status, 200) << a.body;
    EXPECT_EQ(normalized(a.j()), normalized(b.j()));
    const http_reply native =
        post(*c.router, "/completions", R"({"prompt":"Hi","max_tokens":2})", "application/json", "", 60);
    ASSERT_EQ(native.status, 200) << native.body;
    EXPECT_TRUE(native.j().contains("content") && !native.j().contains("choices")) << native.body;  // llama-server's
    EXPECT_EQ(get(*c.router, "/models").status, 200);
    const std::string tok = R"({"content":"Hello world","add_special":true})";
    const http_reply via_router = post(*c.router, "/tokenize", tok, "application/json", "", 60);
    ASSERT_EQ(via_router.status, 200) << via_router.body;
    EXPECT_EQ(via_router.j(), post(*c.decode[0], "/tokenize", tok).j());
    const http_reply text =
        post(*c.router, "/detokenize", json{{"tokens", via_router.j()["tokens"]}}.dump(), "application/json", "", 60);
    ASSERT_EQ(text.status, 200) << text.body;
    EXPECT_NE(text.j()["content"].get<std::string>().find("Hello world"), std::string::npos) << text.body;
    EXPECT_EQ(post(*c.router, "/detokenize", R"({"tokens":"x"})", "application/json", "", 60).status, 400)
        << "the node's 400 reaches the client as is";
}

// llama-server's /completion, /props, /apply-template and CORS through the router; a chat whose template only
// the prefill nodes have (--chat-template-file, with a forced thought) goes through PD and answers exactly
// what a single node with that template answers, reasoning split included.
TEST(RouterE2E, LlamaServerEndpointsAndPrefillOnlyTemplatesThroughPd) {
    const std::string tmpl = temp_dir() + "/think.jinja";
    std::ofstream(tmpl)
        << "{%- for m in messages -%}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}"
           "{%- endfor -%}{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n<think>\\n' }}{%- endif -%}";
    cluster c = cluster::make(1, 1, {}, {"--chat-template-file", tmpl});
    auto single = node_process::start(serve_args("llama", {"-np", "1", "--chat-template-file", tmpl}));
    for (bool stream : {false, true}) {
        SCOPED_TRACE(stream ? "stream" : "whole");
        // A new prompt for each pass: a decode node that already holds a prompt (the last pass's, learned from
        // its KV events) is sent the repeat directly (a local follow-up), not through PD — which on a slow run
        // (TSan) the router had learned by the second pass, and the decode node lacks the template.
        const std::string long_text = std::string(stream ? "Streamed: " : "Whole: ") +
                                      "Tell me about the state blob and the decode node " + std::string(40, 'x');
        const json chat = {{"messages", {{{"role", "user"}, {"content", long_text}}}},
                           {"max_tokens", 6},
                           {"temperature", 0},
                           {"stream", stream}};
        const http_reply a = post(*single, "/v1/chat/completions", chat.dump());
        const http_reply b = post(*c.router, "/v1/chat/completions", chat.dump(), "application/json", "", 60);
        ASSERT_EQ(b.status, 200) << b.body;
        EXPECT_EQ(b.route, "pd");
        if (stream) {
            EXPECT_EQ(normalized_stream(a.body), normalized_stream(b.body));
        } else {
            EXPECT_EQ(normalized(a.j()), normalized(b.j()));
            EXPECT_TRUE(b.j()["choices"][0]["message"].contains("reasoning_content")) << b.body;
        }
        const json comp = {{"prompt", long_text}, {"n_predict", 5}, {"temperature", 0}, {"stream", stream}};
        const http_reply ca = post(*single, "/completion", comp.dump());
        const http_reply cb = post(*c.router, "/completion", comp.dump(), "application/json", "", 60);
        ASSERT_EQ(cb.status, 200) << cb.body;
        EXPECT_EQ(cb.route, "pd");
        auto strip = [](json j) {
            j.erase("timings");
            j.erase("tokens_cached");
            j.erase("id_slot");
            // A slot's context is each node's -c / -np (the single node and the cluster's differ).
            if (j.contains("generation_settings")) j["generation_settings"].erase("n_ctx");
            return j;
        };
        if (stream) {
            std::vector<json> x, y;
            for (const auto & p : sse_payloads(ca.body)) x.push_back(strip(json::parse(p)));
            for (const auto & p : sse_payloads(cb.body)) y.push_back(strip(json::parse(p)));
            EXPECT_EQ(x, y);
        } else {
            EXPECT_EQ(strip(ca.j()), strip(cb.j()));
        }
    }
    {
        // return_progress through the router and PD: the decode node's one progress chunk (the whole prompt, its
        // state arrived) before the same answer a single node streams after its own progress chunks.
        const json chat = {{"messages", {{{"role", "user"}, {"content", "Progress: " + std::string(60, 'p')}}}},
                           {"max_tokens", 4},
                           {"temperature", 0},
                           {"stream", true},
                           {"return_progress", true}};
        const http_reply a = post(*single, "/v1/chat/completions", chat.dump());
        const http_reply b = post(*c.router, "/v1/chat/completions", chat.dump(), "application/json", "", 60);
        ASSERT_EQ(b.status, 200) << b.body;
        EXPECT_EQ(b.route, "pd");
        auto split = [](const std::string & body, std::vector<json> & progress) {
            std::string text;
            for (const auto & p : sse_payloads(body)) {
                if (p == "[DONE]") continue;
                const json j = json::parse(p);
                if (j.contains("prompt_progress")) {
                    EXPECT_TRUE(text.empty()) << "progress after text";
                    progress.push_back(j["prompt_progress"]);
                } else if (!j["choices"].empty() && j["choices"][0]["delta"].contains("content") &&
                           j["choices"][0]["delta"]["content"].is_string()) {
                    text += j["choices"][0]["delta"]["content"].get<std::string>();
                }
            }
            return text;
        };
        std::vector<json> pa, pb;
        EXPECT_EQ(split(b.body, pb), split(a.body, pa));
        ASSERT_GE(pa.size(), 2u) << a.body.substr(0, 400);
        ASSERT_EQ(pb.size(), 1u) << b.body.substr(0, 400);
        EXPECT_EQ(pb[0]["processed"], pb[0]["total"]);
        EXPECT_EQ(pb[0]["total"], pa.back()["total"]);
    }
    const http_reply props = get(*c.router, "/props");
    ASSERT_EQ(props.status, 200) << props.body;
    EXPECT_EQ(props.j()["router"]["prefill_nodes"], 1);
    EXPECT_EQ(props.j()["router"]["decode_nodes"], 1);
    EXPECT_EQ(props.j()["router"]["answered_by"], c.decode[0]->url());
    const http_reply tmpl_reply = post(*c.router, "/apply-template", R"({"messages":[{"role":"user","content":"Hi"}]})",
                                       "application/json", "", 60);
    ASSERT_EQ(tmpl_reply.status, 200) << tmpl_reply.body;
    EXPECT_EQ(tmpl_reply.j()["prompt"], "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
        << "a decode node's template (the model's)";
    auto cl = c.router->client(30);
    auto pre = cl->Options("/v1/chat/completions",
                           {{"Origin", "http://ui.example"}, {"Access-Control-Request-Method", "POST"}});
    ASSERT_TRUE(pre);
    EXPECT_EQ(pre->status, 200);
    // The default --cors-origins '*' answers a literal '*', never with credentials (issue 22's CORS defaults).
    EXPECT_EQ(pre->get_header_value("Access-Control-Allow-Origin"), "*");
    EXPECT_FALSE(pre->has_header("Access-Control-Allow-Credentials"));
}

// ---- stalled nodes (issue 22): a request in flight to a SIGSTOPped node waited for --timeout (300 s)
// although the health checks ejected the node within a second. Now the ejection cancels the node's calls
// in flight, and each request is fallen back, retried or ended with an explicit error at once.

// stopped_node: the node is SIGSTOPped for the scope and resumed when it ends (always before its guard
// reaps it).
class stopped_node {
  public:
    explicit stopped_node(const node_process & n) : pid_(n.pid()) { ::kill(pid_, SIGSTOP); }
    ~stopped_node() { ::kill(pid_, SIGCONT); }
    stopped_node(const stopped_node &) = delete;
    stopped_node & operator=(const stopped_node &) = delete;

  private:
    pid_t pid_;
};

// One prefill node, two decode nodes and a router with --timeout 300 and the default health checks (every
// 1 s, 1 s to answer), shared by the stall tests; each test starts with every node back in the pools.
class RouterStall : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        try {
            auto c = std::make_unique<cluster>();
            c->prefill.push_back(node_process::start(serve_args("llama", {"--role", "prefill", "-np", "2"})));
            for (int i = 0; i < 2; ++i)
                c->decode.push_back(node_process::start(serve_args("llama", {"--role", "decode", "-np", "4"})));
            // --pd-min-tokens 0: every request takes PD, also one whose prompt a decode node already holds
            // (the cases repeat a prompt: with the default rule a repeat is prefilled where it is held).
            // --pd-delta false: whole states. A repeated prompt would otherwise leave as a delta over the cells
            // of the node that held it — the stopped one — which the other node refuses (fallback:blob_rejected,
            // docs/router.md "Deltas"), or not, depending on whether the router had seen that node's KV event
            // yet (regression: SigstoppedDecodeNodeBeforeFirstTokenIsRetriedOnAnother failed when run after
            // the suite's first case).
            c->router =
                node_process::start({"route", "--prefill", c->prefill[0]->url(), "--decode",
                                     c->decode[0]->url() + "," + c->decode[1]->url(), "--pd-min-tokens", "0",
                                     "--pd-delta", "false", "-m", test_model_path("llama"), "--timeout", "300"});
            c_ = c.release();
        } catch (const std::exception & e) {
            setup_error_ = e.what();
        }
    }
    static void TearDownTestSuite() {
        delete c_;
        c_ = nullptr;
    }
    void SetUp() override {
        ASSERT_NE(c_, nullptr) << setup_error_;
        ASSERT_TRUE(all_admitted()) << "the nodes were not all back in the router's pools:\n"
                                    << get(router(), "/metrics").body;
    }

    // all_admitted polls the router until every node is in its pool (a node resumed by an earlier case is
    // re-admitted by the first health check it answers); false after 30 s.
    static bool all_admitted() {
        for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
             std::chrono::steady_clock::now() < until;) {
            const std::string m = get(router(), "/metrics").body;
            if (metric_value(m, "baton_router_nodes{role=\"prefill\"}") == 1 &&
                metric_value(m, "baton_router_nodes{role=\"decode\"}") == 2)
                return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        return false;
    }

    static node_process & router() { return *c_->router; }
    // ejected: how many calls to node the router cancelled because its health check ejected it.
    static double ejected(const node_process & node) {
        const double v = metric_value(get(router(), "/metrics").body, "baton_router_node_outcomes_total{node=\"" +
                                                                          node.url() + "\",outcome=\"ejected\"}");
        return v < 0 ? 0 : v;
    }
    // A prompt far above --pd-min-tokens (about 350 tokens: it goes through the prefill node) that still fits
    // a decode slot (2048 / 4 = 512 tokens of context).
    static std::string long_prompt() {
        std::string p = "Once upon a time";
        for (int k = 0; k < 8; ++k) p += " the prefill node computes the state of token block " + std::to_string(k);
        return p;
    }

    static cluster * c_;
    static std::string setup_error_;
};
cluster * RouterStall::c_ = nullptr;
std::string RouterStall::setup_error_;

// The prefill node is stopped with the request on its way to it: the router sends the prompt, the node
// never answers, its health check ejects it, and the call is cancelled: the request falls back to a
// local prefill on a decode node (--fallback local) and gets the same answer as through PD.
TEST_F(RouterStall, SigstoppedPrefillNodeFallsBackInsteadOfWaitingForTimeout) {
    const json b = {{"prompt", long_prompt()}, {"max_tokens", 8}, {"temperature", 0}};
    const http_reply want = post(router(), "/v1/completions", b.dump(), "application/json", "", 60);
    ASSERT_EQ(want.status, 200) << want.body;
    ASSERT_EQ(want.route, "pd");
    const double before = ejected(*c_->prefill[0]);
    http_reply got;
    double took = 0;
    {
        stopped_node stop(*c_->prefill[0]);
        const auto t0 = std::chrono::steady_clock::now();
        got = post(router(), "/v1/completions", b.dump(), "application/json", "", 120);
        took = seconds_since(t0);
    }
    ASSERT_EQ(got.status, 200) << got.body;
    EXPECT_EQ(got.route, "fallback:prefill_failed");
    EXPECT_EQ(got.j()["choices"][0]["text"], want.j()["choices"][0]["text"]);
    EXPECT_LT(took, 30) << "the request waited on the stopped prefill node (--timeout 300)";
    EXPECT_EQ(ejected(*c_->prefill[0]), before + 1)
        << "the call in flight to the stopped node must be the one cancelled";
}

// The decode node the request's prefix maps to is stopped before the request's first token: its call is
// cancelled at the ejection and the same request (through PD: the same blob) goes to the other decode
// node, streamed or not; the client sees one clean answer.
TEST_F(RouterStall, SigstoppedDecodeNodeBeforeFirstTokenIsRetriedOnAnother) {
    for (const bool stream : {false, true}) {
        SCOPED_TRACE(stream ? "stream" : "whole");
        ASSERT_TRUE(all_admitted()) << "the node stopped for the first round is not back";
        const json b = {{"prompt", long_prompt()}, {"max_tokens", 8}, {"temperature", 0}, {"stream", stream}};
        auto cl = router().client(120);
        auto want = cl->Post("/v1/completions", b.dump(), "application/json");
        ASSERT_TRUE(want);
        ASSERT_EQ(want->status, 200) << want->body;
        const std::string victim_url = want->get_header_value("X-Baton-Decode-Node");
        const int victim = victim_url == c_->decode[0]->url() ? 0 : 1;
        ASSERT_EQ(victim_url, c_->decode[size_t(victim)]->url());
        const double before = ejected(*c_->decode[size_t(victim)]);
        httplib::Result got;
        double took = 0;
        {
            stopped_node stop(*c_->decode[size_t(victim)]);
            const auto t0 = std::chrono::steady_clock::now();
            got = cl->Post("/v1/completions", b.dump(), "application/json");
            took = seconds_since(t0);
        }
        ASSERT_TRUE(got) << httplib::to_string(got.error());
        ASSERT_EQ(got->status, 200) << got->body;
        EXPECT_EQ(got->get_header_value("X-Baton-Route"), "pd");
        EXPECT_EQ(got->get_header_value("X-Baton-Decode-Node"), c_->decode[size_t(1 - victim)]->url())
            << "retried on the other node";
        const outcome w = outcome_of(to_reply(want), stream), g = outcome_of(to_reply(got), stream);
        EXPECT_FALSE(g.stream_error) << got->body;
        EXPECT_EQ(g.text, w.text);
        if (stream) {
            EXPECT_NE(got->body.find("data: [DONE]"), std::string::npos) << got->body;
        }
        EXPECT_LT(took, 30) << "the request waited on the stopped decode node (--timeout 300)";
        EXPECT_EQ(ejected(*c_->decode[size_t(victim)]), before + 1);
    }
}

// The decode node is stopped while it streams to the client: the router cannot take back what it sent,
// so the stream ends at the ejection with an explicit error event naming it, then [DONE].
TEST_F(RouterStall, SigstoppedDecodeNodeMidStreamEndsWithAnErrorEvent) {
    json body = long_stream_body();
    body["prompt"] = "A stream that the decode node will not finish";
    auto probe = body;  // the same prefix maps to the same decode node: this one learns which
    probe["stream"] = false;
    probe["max_tokens"] = 1;
    auto cl = router().client(60);
    auto p = cl->Post("/v1/completions", probe.dump(), "application/json");
    ASSERT_TRUE(p);
    ASSERT_EQ(p->status, 200) << p->body;
    const int victim = p->get_header_value("X-Baton-Decode-Node") == c_->decode[0]->url() ? 0 : 1;
    const double before = ejected(*c_->decode[size_t(victim)]);
    held_stream s(router(), body, "/v1/completions", 120);
    ASSERT_TRUE(s.wait_for("\"text\"", 60)) << "the stream never started: " << s.received();
    stopped_node stop(*c_->decode[size_t(victim)]);
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(s.wait_end(60)) << "the stream to the stopped node never ended";
    EXPECT_LT(seconds_since(t0), 30) << "the stream waited on the stopped decode node (--timeout 300)";
    const std::string got = s.received();
    const std::string tail = got.substr(got.size() > 600 ? got.size() - 600 : 0);
    EXPECT_NE(got.find("\"error\""), std::string::npos) << tail;
    EXPECT_NE(got.find("was ejected by the router's health check"), std::string::npos) << tail;
    EXPECT_NE(got.find("data: [DONE]"), std::string::npos) << tail;
    EXPECT_EQ(got.find("\"finish_reason\":\"length\""), std::string::npos)
        << "the stream ran to its end before the stop: " << tail;
    EXPECT_EQ(ejected(*c_->decode[size_t(victim)]), before + 1);
}

}  // namespace
}  // namespace baton
