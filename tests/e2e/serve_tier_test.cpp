// serve_tier_test.cpp — nodes and the shared prefix-cache tier (docs/tier.md, "A node and the tier") with a real
// valkey-server: a conversation continues on a freshly started node from the tier, answering exactly as a node
// that computed everything; the router routes on what the tier holds; a tier that is stopped, paused past its timeout or flushed is a miss (the prompt is
// computed, the answer the same, the failure counted); and the flags' mistakes exit with usage.
#include <fstream>

#include "../support/valkey_process.h"
#include "serve_test_util.h"

namespace baton::test {
namespace {

std::string long_system() {
    std::string sys;
    for (int i = 0; i < 14; ++i) sys += "Rule " + std::to_string(i) + ": answer briefly and cite the manual. ";
    return sys;
}

json completion(const std::string & prompt, int max_tokens = 6) {
    return {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}};
}

std::vector<std::string> tier_args(const valkey_process & v, std::vector<std::string> more = {}) {
    std::vector<std::string> a = {"-np", "1", "--tier-valkey", "127.0.0.1:" + std::to_string(v.port())};
    a.insert(a.end(), more.begin(), more.end());
    return serve_args("llama", a);
}

// Waits (bounded) until the node's tier writer stored at least n states.
double wait_written(const node_process & n, double at_least) {
    double w = 0;
    for (int i = 0; i < 100 && w < at_least; ++i) {
        w = metric_value(get(n, "/metrics").body, "baton_tier_states_written_total");
        if (w < at_least) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return w;
}

// Turn 1 on node A (its state goes to the tier when the answer is out); A is killed; turn 2 on a fresh node B
// with the same tier takes the whole conversation from it and answers as a node without any tier does. With a
// state secret the entries carry its MAC and B verifies it (a node with another secret would refuse them).
class ServeTierSecret : public ::testing::TestWithParam<bool> {};

TEST_P(ServeTierSecret, ConversationContinuesOnAFreshNodeFromTheTier) {
    auto v = valkey_process::start();
    std::vector<std::string> secret;
    if (GetParam()) {
        const std::string path = temp_dir() + "/tier-secret";
        std::ofstream(path, std::ios::binary) << "a tier test's state secret, long enough\n";
        secret = {"--state-secret-file", path};
    }
    auto tier_args = [&](const valkey_process & vp) { return baton::test::tier_args(vp, secret); };
    const std::string turn1 = long_system() + "Question: what is a slot?";
    std::string answer;
    int n_prompt1 = 0;
    {
        auto a = node_process::start(tier_args(*v));
        const http_reply r = post(*a, "/v1/completions", completion(turn1).dump());
        ASSERT_EQ(r.status, 200) << r.body;
        answer = r.j()["choices"][0]["text"].get<std::string>();
        n_prompt1 = r.j()["usage"]["prompt_tokens"].get<int>();
        ASSERT_GE(n_prompt1, 128);
        ASSERT_GE(wait_written(*a, 1), 1) << get(*a, "/metrics").body;
        ::kill(a->pid(), SIGKILL);
    }
    const std::string turn2 = turn1 + answer + " And a second question about slots?";
    auto b = node_process::start(tier_args(*v));
    const http_reply r2 = post(*b, "/v1/completions", completion(turn2).dump());
    ASSERT_EQ(r2.status, 200) << r2.body;
    const int cached = r2.j()["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
    EXPECT_GE(cached, n_prompt1) << "turn 1's prompt and answer come from the tier";
    const std::string m = get(*b, "/metrics").body;
    EXPECT_EQ(metric_value(m, "baton_tier_fetch_hits_total"), 1) << m;
    EXPECT_EQ(get(*b, "/health").j()["tier"]["status"], "ok");
    EXPECT_EQ(metric_value(m, "baton_cache_ram_hits_total"), 1) << m;
    EXPECT_EQ(metric_value(m, "baton_invariant_repairs_total"), 0) << m;

    auto plain = node_process::start(serve_args("llama", {"-np", "1"}));
    const http_reply want = post(*plain, "/v1/completions", completion(turn2).dump());
    ASSERT_EQ(want.status, 200);
    EXPECT_EQ(r2.j()["choices"][0]["text"], want.j()["choices"][0]["text"]);
}

INSTANTIATE_TEST_SUITE_P(Auth, ServeTierSecret, ::testing::Bool(),
                         [](const auto & info) { return info.param ? "WithStateSecret" : "WithoutStateSecret"; });

// The tier fails in every way a cache can: each request still answers exactly, the prompt computed.
TEST(ServeTier, TierStoppedPausedOrFlushedIsAMissNeverAWrongAnswer) {
    auto v = valkey_process::start();
    auto plain = node_process::start(serve_args("llama", {"-np", "1"}));
    auto n = node_process::start(tier_args(*v, {"--tier-timeout-ms", "100"}));
    const std::string sys = long_system();
    auto ask = [&](const std::string & q) {
        // A conversation of its own each time (it begins with the question), so the node holds none of it and
        // asks the tier.
        const std::string p = q + " " + sys + q;
        const auto t0 = std::chrono::steady_clock::now();
        const http_reply got = post(*n, "/v1/completions", completion(p).dump());
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        ASSERT_EQ(got.status, 200) << got.body;
        EXPECT_LT(s, 10.0) << q << ": a failing tier must not hold a request";
        const http_reply want = post(*plain, "/v1/completions", completion(p).dump());
        EXPECT_EQ(got.j()["choices"][0]["text"], want.j()["choices"][0]["text"]) << q;
    };
    ask("Question one?");  // its state is written
    wait_written(*n, 1);
    v->command({"FLUSHALL"});
    ask("Question two?");  // flushed: a miss
    v->pause();
    ask("Question three?");  // paused past --tier-timeout-ms: a timeout, computed
    v->resume();
    v->kill();
    ask("Question four?");  // gone: unreachable, computed
    const http_reply health = get(*n, "/health");
    EXPECT_EQ(health.status, 200) << "a failing tier leaves the node serving";
    EXPECT_EQ(health.j()["tier"]["status"], "failing") << health.body;
    EXPECT_FALSE(health.j()["tier"]["last_error"].get<std::string>().empty()) << health.body;
    const std::string m = get(*n, "/metrics").body;
    EXPECT_GE(metric_value(m, "baton_tier_fetch_errors_total"), 1) << m;
    EXPECT_GE(metric_value(m, "baton_tier_timeouts_total"), 1) << m;
    EXPECT_EQ(metric_value(m, "baton_invariant_repairs_total"), 0) << m;
}

// Deltas: a node writes a conversation's second turn as a delta over its entry for the first. A fresh node
// fetches the chain (the delta and the whole first turn) and joins it; a node that holds the first turn fetches
// the delta alone, fewer bytes. Both answer as a node that computed everything. (Each asks its own third
// question, more than a block long, so neither one's own write lands on the key of the turn-2 entry.)
TEST(ServeTier, NextTurnIsADeltaAFreshNodeFetchesTheChainAHolderOnlyTheDelta) {
    auto v = valkey_process::start();
    const std::string turn1 = long_system() + "Question: what is a slot?";
    std::string turn2, so_far;
    int n2 = 0;
    {
        auto a = node_process::start(tier_args(*v));
        const http_reply r1 = post(*a, "/v1/completions", completion(turn1, 8).dump());
        ASSERT_EQ(r1.status, 200) << r1.body;
        ASSERT_GE(wait_written(*a, 1), 1);
        turn2 = turn1 + r1.j()["choices"][0]["text"].get<std::string>() + long_system() + " Second: and a cache?";
        const http_reply r2 = post(*a, "/v1/completions", completion(turn2, 8).dump());
        ASSERT_EQ(r2.status, 200) << r2.body;
        n2 = r2.j()["usage"]["prompt_tokens"].get<int>();
        ASSERT_GE(wait_written(*a, 2), 2);
        const std::string m = get(*a, "/metrics").body;
        EXPECT_EQ(metric_value(m, "baton_tier_deltas_written_total"), 1) << m;
        EXPECT_GT(metric_value(m, "baton_tier_delta_bytes_saved_total"), 0) << m;
        so_far = turn2 + r2.j()["choices"][0]["text"].get<std::string>();
    }
    auto plain = node_process::start(serve_args("llama", {"-np", "1"}));
    struct asked {
        http_reply got;
        std::string metrics;
        double bytes_read = 0;
    };
    auto ask = [&](const node_process & n, const std::string & question) {
        const std::string turn3 = so_far + " Third: " + question + long_system();
        const http_reply want = post(*plain, "/v1/completions", completion(turn3).dump());
        EXPECT_EQ(want.status, 200);
        const double before = metric_value(get(n, "/metrics").body, "baton_tier_bytes_read_total");
        asked a{post(n, "/v1/completions", completion(turn3).dump()), "", 0};
        EXPECT_EQ(a.got.status, 200) << a.got.body;
        EXPECT_EQ(a.got.j()["choices"][0]["text"], want.j()["choices"][0]["text"]) << question;
        // Turn 2's prompt came from the tier (its answer too, unless its text tokenizes otherwise in this prompt;
        // the prompt's own last token may too).
        EXPECT_GE(a.got.j()["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), n2 - 1) << question;
        a.metrics = get(n, "/metrics").body;
        a.bytes_read = metric_value(a.metrics, "baton_tier_bytes_read_total") - before;
        EXPECT_EQ(metric_value(a.metrics, "baton_invariant_repairs_total"), 0) << a.metrics;
        return a;
    };
    auto fresh = node_process::start(tier_args(*v));
    const asked f = ask(*fresh, "what does a fresh node fetch?");
    EXPECT_EQ(metric_value(f.metrics, "baton_tier_chain_links_total"), 1) << f.metrics;
    EXPECT_EQ(metric_value(f.metrics, "baton_tier_fetch_hits_total"), 1) << f.metrics;

    // A node that computed turn 1 itself (writing its own entry for it: the same key, harmless).
    auto holder = node_process::start(tier_args(*v, {"--no-tier-deltas"}));
    ASSERT_EQ(post(*holder, "/v1/completions", completion(turn1, 8).dump()).status, 200);
    const asked h = ask(*holder, "and a node that holds turn one?");
    EXPECT_EQ(metric_value(h.metrics, "baton_tier_chain_links_total"), 0) << h.metrics;
    EXPECT_LT(h.bytes_read, f.bytes_read * 0.75) << "the holder reads the delta alone";
}

// The router knows what the tier holds (the decode nodes' tier_stored events): a conversation whose decode
// node is gone continues on the other decode node without a prefill hop — that node fetches it from the tier —
// and answers as one node that computed everything.
TEST(ServeTier, RouterSendsAConversationTheTierHoldsToADecodeNodeWithoutAPrefillHop) {
    auto v = valkey_process::start();
    auto pre = node_process::start(serve_args("llama", {"--role", "prefill", "-np", "1"}));
    std::vector<std::unique_ptr<node_process>> dec;
    for (int i = 0; i < 2; ++i) dec.push_back(node_process::start(tier_args(*v, {"--role", "decode"})));
    auto plain = node_process::start(serve_args("llama", {"-np", "1"}));
    auto router = node_process::start({"route", "--prefill", pre->url(), "--decode",
                                       dec[0]->url() + "," + dec[1]->url(), "--pd-min-tokens", "128", "-m",
                                       test_model_path("llama"), "--health-interval", "0.2", "--timeout", "120"});
    const std::string turn1 = long_system() + "Question: what is a slot?";
    const http_reply a1 = post(*router, "/v1/completions", completion(turn1).dump());
    ASSERT_EQ(a1.status, 200) << a1.body;
    ASSERT_EQ(a1.route, "pd");
    const int n1 = a1.j()["usage"]["prompt_tokens"].get<int>();
    ASSERT_GE(n1, 256);
    const size_t holder = a1.decode_node == dec[0]->url() ? 0 : 1;
    ASSERT_EQ(a1.decode_node, dec[holder]->url());
    ASSERT_GE(wait_written(*dec[holder], 1), 1);
    // The router learns of the entry from the node's events (a poll per health round).
    double entries = 0;
    for (int i = 0; i < 100 && entries < 1; ++i) {
        entries = metric_value(get(*router, "/metrics").body, "baton_router_kv_tier_entries");
        if (entries < 1) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ASSERT_GE(entries, 1) << get(*router, "/metrics").body;
    ::kill(dec[holder]->pid(), SIGKILL);
    const node_process & other = *dec[1 - holder];
    double usable = 2;
    for (int i = 0; i < 100 && usable != 1; ++i) {
        usable = metric_value(get(*router, "/metrics").body, "baton_router_nodes{role=\"decode\"}");
        if (usable != 1) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ASSERT_EQ(usable, 1);
    const std::string turn2 = turn1 + a1.j()["choices"][0]["text"].get<std::string>() + " And then?";
    const http_reply a2 = post(*router, "/v1/completions", completion(turn2).dump());
    ASSERT_EQ(a2.status, 200) << a2.body;
    EXPECT_EQ(a2.route, "direct") << "the tier holds all but a few tokens: no prefill hop";
    EXPECT_EQ(a2.decode_node, other.url());
    EXPECT_GE(a2.j()["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), n1 - 64);
    const http_reply want = post(*plain, "/v1/completions", completion(turn2).dump());
    ASSERT_EQ(want.status, 200);
    EXPECT_EQ(a2.j()["choices"][0]["text"], want.j()["choices"][0]["text"]);
    const std::string rm = get(*router, "/metrics").body;
    EXPECT_EQ(metric_value(rm, "baton_router_kv_routes_total{result=\"tier\"}"), 1) << rm;
    EXPECT_EQ(metric_value(rm, "baton_router_local_followups_total"), 1) << rm;
    const std::string m = get(other, "/metrics").body;
    EXPECT_EQ(metric_value(m, "baton_tier_fetch_hits_total"), 1) << m;
    EXPECT_EQ(metric_value(m, "baton_invariant_repairs_total"), 0) << m;
}

TEST(ServeTier, FlagMistakesExitWithUsage) {
    const std::vector<std::vector<std::string>> bad = {
        {"--tier-valkey", "localhost"},    // no port
        {"--tier-valkey", "127.0.0.1:0"},  // port 0
        {"--tier-user", "u"},              // no --tier-valkey
        {"--tier-valkey", "127.0.0.1:6379", "--cache-ram", "0"},
        {"--tier-valkey", "127.0.0.1:6379", "--tier-tls-cert", "c.pem"},  // TLS without a CA
    };
    for (const auto & extra : bad) {
        std::vector<std::string> argv = serve_args("llama", extra);
        argv.insert(argv.begin(), baton_bin());
        const proc_result r = run_process(argv, 30);
        EXPECT_EQ(r.exit_code, 2) << extra[0] << " " << extra[1] << ": " << r.err;
    }
}

}  // namespace
}  // namespace baton::test
