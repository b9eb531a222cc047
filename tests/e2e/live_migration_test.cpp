// live_migration_test.cpp — live migration end to end (docs/cluster.md "Live migration"): generations that move
// between decode nodes while they stream — every few tokens (the test node's --test-migrate-after), when asked
// (POST /admin/migrate) and when their node drains (SIGTERM) — answer exactly what one node answers without
// moving: the same text, token count and finish, one response id, the role sent once, nothing lost or
// repeated. Real processes; every request has a timeout; every process is reaped by its guard.
#include <gtest/gtest.h>

#include <set>

#include "baton/testmodel/mkmodel.h"
#include "e2e/serve_test_util.h"
#include "support/node_process.h"

namespace baton {
namespace {

using namespace baton::test;

// What a client saw: the text, the ids of every chunk, role chunks, errors, usage and finish.
struct seen {
    int status = 0;
    std::string text;
    std::set<std::string> ids;
    int roles = 0, errors = 0, dones = 0;
    int64_t completion_tokens = -1;
    std::string finish;
    std::string raw;
};

seen seen_of(int status, const std::string & body, bool stream) {
    seen s;
    s.status = status;
    s.raw = body;
    if (status != 200) return s;
    if (!stream) {
        const json j = json::parse(body, nullptr, false);
        if (!j.is_object() || !j.contains("choices")) return s;
        const json & ch = j["choices"][0];
        s.text = ch.contains("text") ? ch["text"].get<std::string>() : ch["message"]["content"].get<std::string>();
        s.ids.insert(j.value("id", ""));
        s.completion_tokens = j["usage"]["completion_tokens"];
        s.finish = ch.value("finish_reason", "");
        return s;
    }
    for (const std::string & p : sse_payloads(body)) {
        if (p == "[DONE]") {
            ++s.dones;
            continue;
        }
        const json c = json::parse(p, nullptr, false);
        if (!c.is_object()) continue;
        if (c.contains("error")) ++s.errors;
        if (c.contains("id")) s.ids.insert(c["id"].get<std::string>());
        if (c.contains("usage") && c["usage"].is_object()) s.completion_tokens = c["usage"]["completion_tokens"];
        if (!c.contains("choices") || c["choices"].empty()) continue;
        const json & ch = c["choices"][0];
        if (ch.contains("delta") && ch["delta"].contains("role")) ++s.roles;
        if (ch.contains("finish_reason") && ch["finish_reason"].is_string()) s.finish = ch["finish_reason"];
    }
    s.text = stream_text(normalized_stream(body));
    return s;
}

seen request(const node_process & n, const json & b) {
    const http_reply r = post(n, completion_path(b), b.dump());
    return seen_of(r.status, r.body, b.value("stream", false));
}

// expect_same: what the client saw through moves is what one node answers without them.
void expect_same(const seen & got, const seen & want, const json & b) {
    const std::string what = b.dump();
    ASSERT_EQ(got.status, 200) << what << "\n" << got.raw;
    ASSERT_EQ(want.status, 200) << what << "\n" << want.raw;
    EXPECT_EQ(got.text, want.text) << what;
    EXPECT_EQ(got.completion_tokens, want.completion_tokens) << what;
    EXPECT_EQ(got.finish, want.finish) << what;
    EXPECT_EQ(got.ids.size(), 1u) << what << ": one response id through every move\n" << got.raw;
    EXPECT_EQ(got.errors, 0) << what << "\n" << got.raw;
    if (b.value("stream", false)) {
        EXPECT_EQ(got.dones, 1) << what;
        EXPECT_EQ(got.roles, want.roles) << what << ": the role is sent once";
    }
}

std::string long_prompt(const std::string & lead) {
    std::string p = lead;
    for (int k = 0; k < 12; ++k) p += " the model and the state " + std::to_string(k);
    return p;
}

// The requests moved: through PD (a long prompt) and directly (a short one), completions and chat, greedy and
// seeded, streamed and whole, and one under a JSON schema (a grammar, rebuilt where it resumes).
std::vector<json> moved_requests() {
    std::vector<json> out;
    out.push_back({{"prompt", long_prompt("Greedy:")}, {"max_tokens", 30}, {"temperature", 0}, {"stream", true}});
    out.push_back(
        {{"prompt", long_prompt("Seeded:")}, {"max_tokens", 30}, {"temperature", 0.9}, {"seed", 11}, {"stream", true}});
    out.push_back({{"prompt", "Short and seeded"}, {"max_tokens", 30}, {"temperature", 0.9}, {"seed", 12}});
    out.push_back({{"messages", json::array({{{"role", "user"}, {"content", long_prompt("Chat:")}}})},
                   {"max_tokens", 30},
                   {"temperature", 0},
                   {"stream", true}});
    json schema = json::parse(R"({"type": "object", "properties": {"name": {"type": "string"}}})");
    json structured = {{"messages", json::array({{{"role", "user"}, {"content", "A person, as JSON"}}})},
                       {"max_tokens", 30},
                       {"temperature", 0.9},
                       {"seed", 13},
                       {"stream", true}};
    structured["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"schema", schema}}}};
    out.push_back(structured);
    for (auto & b : out)
        if (b.value("stream", false)) b["stream_options"] = {{"include_usage", true}};
    return out;
}

TEST(LiveMigration, GenerationsMovedEveryFewTokensEqualUnmovedOnEveryFamily) {
    // Sanitized builds check the threads, not the families: an attention model and a hybrid (checkpoints).
    const std::vector<std::string> archs = k_sanitized ? std::vector<std::string>{"llama", "lfm2"} : mkmodel_archs();
    for (const std::string & arch : archs) {
        SCOPED_TRACE(arch);
        // A sliding-window model's generations move only with flash attention (engine::resumes_exactly).
        const std::string fa = arch == "gemma3" ? "on" : "off";
        auto single = node_process::start(serve_args(arch, {"-np", "2", "-fa", fa}));
        auto pre = node_process::start(serve_args(arch, {"--role", "prefill", "-np", "2", "-fa", fa}));
        // Both decode nodes move every generation they can after 6 tokens: a 30-token answer crosses over 4 times.
        auto a = node_process::start(
            serve_args(arch, {"--role", "decode", "-np", "2", "-fa", fa, "--test-migrate-after", "6"}));
        auto b = node_process::start(
            serve_args(arch, {"--role", "decode", "-np", "2", "-fa", fa, "--test-migrate-after", "6"}));
        auto router = node_process::start({"route", "--prefill", pre->url(), "--decode", a->url() + "," + b->url(),
                                           "--pd-min-tokens", "16", "-m", test_model_path(arch), "--timeout", "60",
                                           "--health-interval", "0.2"});
        const std::vector<json> reqs = moved_requests();
        for (const json & body : reqs) expect_same(request(*router, body), request(*single, body), body);
        double in = 0, out = 0;
        for (const auto * n : {a.get(), b.get()}) {
            const std::string m = get(*n, "/metrics").body;
            in += metric_value(m, "baton_migrations_in_total");
            out += metric_value(m, "baton_migrations_out_total");
        }
        EXPECT_EQ(in, out);
        // (the router counts a resumed move once its stream ended: just after the answer went out)
        EXPECT_EQ(metric_settled(*router, "baton_router_migrations_total{outcome=\"resumed\"}", in), in);
        // (every answer moves at least once; a 30-token one about 4 times, one that ends early fewer)
        EXPECT_GE(in, double(reqs.size()));
        EXPECT_EQ(metric_value(get(*router, "/metrics").body, "baton_router_migrations_total{outcome=\"failed\"}"), 0);
    }
}

TEST(LiveMigration, AdminMigrateMovesARunningStreamAndRefusesBadBodies) {
    auto single = node_process::start(serve_args("llama", {"-np", "2"}));
    auto a = node_process::start(serve_args("llama", {"--role", "decode", "-np", "2"}));
    auto b = node_process::start(serve_args("llama", {"--role", "decode", "-np", "2"}));
    auto router = node_process::start(
        {"route", "--decode", a->url() + "," + b->url(), "--timeout", "60", "--health-interval", "0.2"});
    json body = long_stream_body();
    body["max_tokens"] = 400;
    const seen want = request(*single, body);
    held_stream s(*router, body);
    ASSERT_TRUE(s.wait_for("data: ", 30)) << "the stream began";
    int asked = 0;
    for (const auto * n : {a.get(), b.get()}) {
        const http_reply r = post(*n, "/admin/migrate", "");
        ASSERT_EQ(r.status, 202) << r.body;
        asked += r.j()["migrating"].get<int>();
    }
    ASSERT_TRUE(s.wait_end(60));
    EXPECT_EQ(asked, 1) << "the node running the stream paused it (400 tokens outlast the ask)";
    const seen got = seen_of(200, s.received(), true);
    expect_same(got, want, body);
    EXPECT_EQ(metric_settled(*router, "baton_router_migrations_total{outcome=\"resumed\"}", double(asked)),
              double(asked));
    EXPECT_EQ(post(*a, "/admin/migrate", "{\"count\": -1}").status, 400);
    EXPECT_EQ(post(*a, "/admin/migrate", "{\"every\": true}").status, 400);
    EXPECT_EQ(post(*a, "/admin/migrate", "[1]").status, 400);
    const http_reply none = post(*a, "/admin/migrate", "{\"count\": 3}");
    EXPECT_EQ(none.status, 202);
    EXPECT_EQ(none.j()["migrating"], 0) << "nothing runs";
}

// A rolling restart of a 2-node decode pool under long streaming generations: each node in turn drains (SIGTERM:
// its generations move to the other node, it exits 0) and comes back on its port; every stream completes with the
// single node's answer, none restarts, loses or repeats a token.
TEST(LiveMigration, RollingRestartOfTheDecodePoolLosesNoStream) {
    // (4 slots of 1024 tokens: one node holds every stream while the other restarts)
    const std::vector<std::string> node_args = {
        "serve",   "-m", test_model_path("llama"), "-c", "4096", "-t", "2", "--role", "decode", "-np", "4",
        "--drain", "30"};
    auto single = node_process::start({"serve", "-m", test_model_path("llama"), "-c", "4096", "-t", "2", "-np", "4"});
    const int pa = free_port(), pb = free_port();
    std::unique_ptr<node_process> a = node_process::start_at(node_args, pa);
    std::unique_ptr<node_process> b = node_process::start_at(node_args, pb);
    auto router = node_process::start(
        {"route", "--decode", a->url() + "," + b->url(), "--timeout", "120", "--health-interval", "0.2"});
    std::vector<json> bodies;
    for (int i = 0; i < 3; ++i) {
        json body = long_stream_body();
        body["prompt"] = "Stream " + std::to_string(i) + " tells a long story";
        body["max_tokens"] = 900;
        if (i == 1) body["temperature"] = 0.8, body["seed"] = 5;
        bodies.push_back(body);
    }
    std::vector<seen> want;
    for (const json & body : bodies) want.push_back(request(*single, body));
    std::vector<std::unique_ptr<held_stream>> streams;
    for (const json & body : bodies)
        streams.push_back(std::make_unique<held_stream>(*router, body, "/v1/completions", 120));
    for (auto & st : streams) ASSERT_TRUE(st->wait_for("data: ", 30)) << "every stream began";
    auto restart = [&](std::unique_ptr<node_process> & n, int port) {
        const int code = n->terminate(40);
        EXPECT_EQ(code, 0) << "a draining node exits 0 once its generations moved:\n" << n->stderr_text();
        n = node_process::start_at(node_args, port);
        // Until the router's health checker has seen it back, the other node is the only place to move to.
        std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    };
    restart(a, pa);
    restart(b, pb);
    for (size_t i = 0; i < streams.size(); ++i) {
        ASSERT_TRUE(streams[i]->wait_end(120)) << "stream " << i;
        expect_same(seen_of(200, streams[i]->received(), true), want[i], bodies[i]);
    }
    const std::string rm = get(*router, "/metrics").body;
    EXPECT_GE(metric_value(rm, "baton_router_migrations_total{outcome=\"resumed\"}"), 1) << rm;
    EXPECT_EQ(metric_value(rm, "baton_router_migrations_total{outcome=\"failed\"}"), 0) << rm;
}

// fetching_node: the index of the node in ns fetching a held state (baton_state_fetches_in_flight), polled for
// up to timeout_s; -1 if none was seen.
int fetching_node(const std::vector<node_process *> & ns, double timeout_s) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (std::chrono::steady_clock::now() < end) {
        for (size_t k = 0; k < ns.size(); ++k)
            if (metric_value(get(*ns[k], "/metrics").body, "baton_state_fetches_in_flight") >= 1) return int(k);
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
    }
    return -1;
}

// A node dies in the middle of a move (its state half fetched: every held state is served in two halves 3 s
// apart). The target dying: the router resumes the generation on another node, the answer is the unmoved one.
// The source dying: its state is gone, no node can resume it, and the client gets an explicit error after the
// text it already had — nothing emitted twice, one [DONE].
TEST(LiveMigration, ANodeDyingMidMoveEndsInTheAnswerOrAnExplicitError) {
    auto single = node_process::start(serve_args("llama", {"-np", "2"}));
    const std::vector<std::string> decode_args = {
        "--role", "decode", "-np", "2", "--test-migrate-after", "6", "--test-pause-held-state", "3000"};
    std::vector<std::unique_ptr<node_process>> d;
    for (int k = 0; k < 3; ++k) d.push_back(node_process::start(serve_args("llama", decode_args)));
    auto router = node_process::start({"route", "--decode", d[0]->url() + "," + d[1]->url() + "," + d[2]->url(),
                                       "--timeout", "60", "--health-interval", "0.2"});
    json body = long_stream_body();
    body["max_tokens"] = 10;  // (one move at token 6)
    body["stream_options"] = {{"include_usage", true}};
    const seen want = request(*single, body);
    ASSERT_EQ(want.status, 200);
    ASSERT_EQ(want.completion_tokens, 10);

    {  // the target dies mid-fetch: a third node resumes the generation
        held_stream s(*router, body, "/v1/completions", 60);
        const int t = fetching_node({d[0].get(), d[1].get(), d[2].get()}, 20);
        ASSERT_GE(t, 0) << "a move began";
        d[size_t(t)]->kill();
        ASSERT_TRUE(s.wait_end(60));
        expect_same(seen_of(200, s.received(), true), want, body);
        d.erase(d.begin() + t);
    }
    EXPECT_EQ(metric_settled(*router, "baton_router_migrations_total{outcome=\"resumed\"}", 1), 1);
    // (the router's health checker ejects the dead node before the next request)
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    {  // the source dies while the target fetches from it: an explicit error, the text so far a prefix
        held_stream s(*router, body, "/v1/completions", 60);
        const int t = fetching_node({d[0].get(), d[1].get()}, 20);
        ASSERT_GE(t, 0) << "a move began";
        d[size_t(1 - t)]->kill();
        ASSERT_TRUE(s.wait_end(60));
        const seen got = seen_of(200, s.received(), true);
        EXPECT_EQ(got.errors, 1) << got.raw;
        EXPECT_EQ(got.dones, 1) << got.raw;
        EXPECT_EQ(got.ids.size(), 1u) << got.raw;
        EXPECT_EQ(got.roles, 0) << "a completion stream sends no role";
        EXPECT_FALSE(got.text.empty()) << "the tokens before the move reached the client";
        EXPECT_EQ(want.text.rfind(got.text, 0), 0u) << "nothing emitted twice or changed:\n"
                                                    << got.text << "\n---\n"
                                                    << want.text;
        EXPECT_LT(got.text.size(), want.text.size());
        EXPECT_NE(got.raw.find("live migration"), std::string::npos) << got.raw;
    }
    const std::string rm2 = get(*router, "/metrics").body;
    EXPECT_EQ(metric_value(rm2, "baton_router_migrations_total{outcome=\"failed\"}"), 1) << rm2;
}

// Without a router that can splice its answer (a client talking to the node itself), nothing moves: the generation
// finishes where it is.
TEST(LiveMigration, AGenerationWithoutARouterDoesNotMove) {
    auto n = node_process::start(serve_args("llama", {"-np", "2", "--test-migrate-after", "3"}));
    json body = long_stream_body();
    body["max_tokens"] = 40;
    const seen got = request(*n, body);
    ASSERT_EQ(got.status, 200);
    EXPECT_EQ(got.errors, 0);
    EXPECT_EQ(got.dones, 1);
    EXPECT_EQ(got.finish, "length");
    EXPECT_EQ(metric_value(get(*n, "/metrics").body, "baton_migrations_out_total"), 0);
}

}  // namespace
}  // namespace baton
