// serve_pd_test.cpp — the PD reference test over HTTP: for every test architecture, a `both` node is the
// oracle, and a prefill node + a decode node joined by /v1/prefill then /v1/decode must return the same
// response (everything but "id" and "created"), for completions and chat, streamed and not, greedy and
// seeded sampling.
#include "baton/testmodel/mkmodel.h"
#include "serve_test_util.h"
#include "support/raw_http.h"

namespace baton::test {
namespace {

class ServePdTest : public ::testing::TestWithParam<std::string> {};

struct pd_case {
    bool chat = false;
    bool stream = false;
    bool sampled = false;
};

json case_body(const pd_case & c, int i) {
    json b;
    const std::string text = "Case " + std::to_string(i) + ": the quick brown fox jumps over";
    if (c.chat)
        b["messages"] =
            json::array({{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", text}}});
    else b["prompt"] = text;
    b["max_tokens"] = 24;
    b["stream"] = c.stream;
    if (c.stream) b["stream_options"] = {{"include_usage", true}};
    if (c.sampled) {
        b["temperature"] = 0.9;
        b["seed"] = 1234 + i;
    } else {
        b["temperature"] = 0;
    }
    return b;
}

TEST_P(ServePdTest, PrefillThenDecodeMatchesSingleNode) {
    const std::string arch = GetParam();
    auto both = node_process::start(serve_args(arch, {"-np", "1"}));
    auto pre = node_process::start(serve_args(arch, {"-np", "1", "--role", "prefill"}));
    // A unified blob restores into a node with another slot count.
    auto dec = node_process::start(serve_args(arch, {"-np", "2", "--role", "decode"}));
    int i = 0;
    for (bool chat : {false, true})
        for (bool stream : {false, true})
            for (bool sampled : {false, true}) {
                const pd_case c{chat, stream, sampled};
                SCOPED_TRACE(arch + (chat ? " chat" : " completions") + (stream ? " stream" : "") +
                             (sampled ? " sampled" : " greedy"));
                json body = case_body(c, i++);
                const std::string path = chat ? "/v1/chat/completions" : "/v1/completions";
                const http_reply single = post(*both, path, body.dump());
                ASSERT_EQ(single.status, 200) << single.body;

                json pbody = body;
                const http_reply blob = post_prefill(*pre, chat ? "chat" : "completions", pbody.dump());
                ASSERT_EQ(blob.status, 200) << blob.body;
                EXPECT_EQ(blob.content_type, "application/octet-stream");
                http_reply pd = post(*dec, "/v1/decode", blob.body, "application/octet-stream");
                ASSERT_EQ(pd.status, 200) << pd.body;
                if (sampled && stream) {
                    // Direct transfer: the same state held on the prefill node and fetched by the decode node
                    // answers the same (and is the same state: its size is the blob's).
                    const http_reply held = prefill_held(*pre, chat ? "chat" : "completions", pbody.dump());
                    ASSERT_EQ(held.status, 200) << held.body;
                    EXPECT_EQ(held.j()["bytes"].get<uint64_t>(), blob.body.size());
                    const http_reply direct = decode_held(*dec, pre->url(), held.j()["state"].get<std::string>());
                    ASSERT_EQ(direct.status, 200) << direct.body;
                    EXPECT_EQ(normalized_stream(direct.body), normalized_stream(pd.body));
                }

                if (!stream) {
                    const json a = normalized(single.j()), b = normalized(pd.j());
                    EXPECT_EQ(a, b);
                    EXPECT_GT(a["usage"]["prompt_tokens"].get<int>(), 0);
                    EXPECT_EQ(a["usage"]["total_tokens"].get<int>(),
                              a["usage"]["prompt_tokens"].get<int>() + a["usage"]["completion_tokens"].get<int>());
                } else {
                    EXPECT_EQ(single.content_type.rfind("text/event-stream", 0), 0u) << single.content_type;
                    const auto a = normalized_stream(single.body), b = normalized_stream(pd.body);
                    EXPECT_EQ(a, b);
                    ASSERT_GE(a.size(), 3u);
                    EXPECT_EQ(a.back(), json("[DONE]"));
                    const json & usage_chunk = a[a.size() - 2];
                    EXPECT_TRUE(usage_chunk.contains("usage")) << usage_chunk.dump();
                }
            }
}

// Direct transfer at the nodes: a held state is fetched with the node key, released once, refused after; a
// decode naming a state that is gone, or naming it badly, is an explicit error and touches no slot.
TEST(ServeHeldState, FetchReleaseAndRefusals) {
    const std::string key = "node-key-0123456789";
    auto pre = node_process::start(serve_args("llama", {"-np", "1", "--role", "prefill", "--api-key", key}));
    auto dec = node_process::start(serve_args("llama", {"-np", "1", "--role", "decode", "--api-key", key}));
    const json body = {{"prompt", "The held state of a long enough prompt"}, {"max_tokens", 8}, {"temperature", 0}};
    const http_reply held = prefill_held(*pre, "completions", body.dump(), key);
    ASSERT_EQ(held.status, 200) << held.body;
    const std::string id = held.j()["state"];
    const uint64_t bytes = held.j()["bytes"];
    EXPECT_EQ(get(*pre, "/v1/states/" + id).status, 401);  // the node key guards it
    const http_reply got = get(*pre, "/v1/states/" + id, key);
    ASSERT_EQ(got.status, 200);
    EXPECT_EQ(got.body.size(), bytes);
    const http_reply first = decode_held(*dec, pre->url(), id, key);
    ASSERT_EQ(first.status, 200) << first.body;
    const http_reply again = decode_held(*dec, pre->url(), id, key);  // fetching does not end the lease
    ASSERT_EQ(again.status, 200) << again.body;
    EXPECT_EQ(normalized(again.j()), normalized(first.j()));
    // Released once; then the state is gone: a decode naming it is a 424, never a guess.
    auto c = pre->client(10);
    auto del = c->Delete("/v1/states/" + id, auth_headers(key));
    ASSERT_TRUE(del);
    EXPECT_EQ(del->status, 200);
    EXPECT_EQ(c->Delete("/v1/states/" + id, auth_headers(key))->status, 404);
    const http_reply gone = decode_held(*dec, pre->url(), id, key);
    EXPECT_EQ(gone.status, 424) << gone.body;
    EXPECT_EQ(gone.j()["error"]["status"], "dependency_failed") << gone.body;
    // Malformed: a bad id, a bad source, a state both named and carried.
    EXPECT_EQ(decode_held(*dec, pre->url(), "../../metrics", key).status, 400);
    EXPECT_EQ(decode_held(*dec, "ftp://x", id, key).status, 400);
    EXPECT_EQ(decode_held(*dec, pre->url(), id, key, "blob bytes").status, 400);
    EXPECT_EQ(get(*pre, "/v1/states/XYZ", key).status, 404);
    const std::string dm = get(*dec, "/metrics", key).body;
    EXPECT_EQ(metric_value(dm, "baton_restores_total"), 2) << dm;  // the two good decodes only
    EXPECT_EQ(metric_value(dm, "baton_state_fetch_bytes_total"), double(2 * bytes)) << dm;
    const std::string pm = get(*pre, "/metrics", key).body;
    EXPECT_EQ(metric_value(pm, "baton_state_hold_released_total"), 1) << pm;
    EXPECT_EQ(metric_value(pm, "baton_state_hold_states"), 0) << pm;
}

// Regression (held states cut off on slow links): a held state was written in one write under --write-timeout,
// so a state that needed longer than that to cross its link was cut off however steadily the decode node read.
// --write-timeout bounds a stalled reader, not a transfer: a reader that keeps reading (here at most ~3 MB/s, a
// 12 MB state: ~4 s against a 1 s --write-timeout) gets the state whole; one that stops reading is cut off.
TEST(ServeHeldState, ASlowButSteadyReaderGetsALargeStateWhole) {
    auto pre = node_process::start({"serve", "-m", test_model_path("llama", 1, 512, 4), "-c", "2048", "-np", "1", "-t",
                                    "2", "--role", "prefill", "-ctk", "f32", "-ctv", "f32", "--write-timeout", "1"});
    std::vector<int> prompt = {1};
    for (int i = 1; i < 1500; ++i) prompt.push_back(5 + (i * 37) % 200);
    const json body = {{"prompt", prompt}, {"max_tokens", 1}, {"temperature", 0}};
    // (two held states: the steady reader's and the stalled one's)
    const http_reply a = prefill_held(*pre, "completions", body.dump());
    ASSERT_EQ(a.status, 200) << a.body;
    const http_reply b = prefill_held(*pre, "completions", body.dump());
    ASSERT_EQ(b.status, 200) << b.body;
    const uint64_t bytes = a.j()["bytes"];
    ASSERT_GT(bytes, uint64_t(8) << 20) << "a state well over the socket buffers on both sides (~4 MiB)";
    const auto fetch = [&](const std::string & id, raw_conn & c) {
        // (a receive buffer over loopback's MSS of 64 KiB: a smaller one stalls loopback TCP in window probes)
        ASSERT_TRUE(c.connect(pre->host(), pre->port(), 5, /*rcvbuf_bytes=*/128 << 10)) << c.error();
        ASSERT_TRUE(c.send_all(raw_request("GET", "/v1/states/" + id), 5)) << c.error();
        ASSERT_TRUE(c.read_until("\r\n\r\n", 30)) << c.error();
        ASSERT_EQ(c.buffer().rfind("HTTP/1.1 200", 0), 0u) << c.buffer().substr(0, 300);
    };
    {  // steady: 64 KiB every 20 ms at most
        raw_conn c;
        fetch(a.j()["state"], c);
        const size_t head = c.buffer().find("\r\n\r\n") + 4;
        const auto deadline = raw_deadline(120);
        while (c.buffer().size() - head < bytes && raw_clock::now() < deadline) {
            const raw_io io = c.read_some(5);
            if (io != raw_io::raw_io_data) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        EXPECT_EQ(c.buffer().size() - head, bytes) << "the state was cut off: " << c.error();
    }
    {  // stalled: the head, then nothing read; the node gives up on the write within --write-timeout and slack
        raw_conn c;
        fetch(b.j()["state"], c);
        std::this_thread::sleep_for(std::chrono::seconds(4));
        const auto deadline = raw_deadline(30);
        raw_io io = raw_io::raw_io_data;
        while (io == raw_io::raw_io_data && raw_clock::now() < deadline) io = c.read_some(5);
        EXPECT_TRUE(c.peer_closed()) << "a reader that stopped reading still had its connection";
        EXPECT_LT(c.buffer().size(), bytes);
    }
}

// A lease nobody releases ends at its TTL: the node holds nothing afterwards.
TEST(ServeHeldState, AnUnreleasedLeaseEndsAtItsTtl) {
    auto pre = node_process::start(serve_args("llama", {"-np", "1", "--role", "prefill", "--state-lease-ms", "300"}));
    const json body = {{"prompt", "A state nobody fetches"}, {"max_tokens", 4}};
    const http_reply held = prefill_held(*pre, "completions", body.dump());
    ASSERT_EQ(held.status, 200) << held.body;
    EXPECT_EQ(metric_value(get(*pre, "/metrics").body, "baton_state_hold_states"), 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the TTL and a sweep of the sweeper
    const std::string pm = get(*pre, "/metrics").body;
    EXPECT_EQ(metric_value(pm, "baton_state_hold_states"), 0) << pm;
    EXPECT_EQ(metric_value(pm, "baton_state_hold_bytes"), 0) << pm;
    EXPECT_EQ(metric_value(pm, "baton_state_hold_expired_total"), 1) << pm;
    EXPECT_EQ(get(*pre, "/v1/states/" + held.j()["state"].get<std::string>()).status, 404);
}

// The prefill node dies (kill -9) after it made the state and before the decode node fetched it: the decode
// is an explicit 424 (the router then falls back), and the decode node's slots are untouched.
TEST(ServeHeldState, ProducerKilledBeforeTheFetchIsA424) {
    auto pre = node_process::start(serve_args("llama", {"-np", "1", "--role", "prefill"}));
    auto dec = node_process::start(serve_args("llama", {"-np", "1", "--role", "decode"}));
    const json body = {{"prompt", "A state whose node dies"}, {"max_tokens", 4}};
    const http_reply held = prefill_held(*pre, "completions", body.dump());
    ASSERT_EQ(held.status, 200) << held.body;
    const std::string url = pre->url();
    ::kill(pre->pid(), SIGKILL);
    pre.reset();
    const http_reply r = decode_held(*dec, url, held.j()["state"].get<std::string>());
    EXPECT_EQ(r.status, 424) << r.body;
    EXPECT_EQ(metric_value(get(*dec, "/metrics").body, "baton_restores_total"), 0);
    // The node serves on.
    EXPECT_EQ(post(*dec, "/v1/completions", body.dump()).status, 200);
}

INSTANTIATE_TEST_SUITE_P(Archs, ServePdTest, ::testing::ValuesIn(mkmodel_archs()),
                         [](const auto & info) { return info.param; });

}  // namespace
}  // namespace baton::test
