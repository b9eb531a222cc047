// router_reliability_test.cpp — issue 22's findings through a whole cluster: inputs that once took down a
// node now end in a clear error while the router, the prefill node and the decode node all keep serving.
#include <gtest/gtest.h>

#include <csignal>
#include <sys/wait.h>

#include "baton/blob.h"
#include "e2e/serve_test_util.h"
#include "support/node_process.h"

namespace baton {
namespace {

using namespace baton::test;

struct trio {
    std::unique_ptr<node_process> prefill, decode, router;
    static trio make() {
        trio t;
        t.prefill = node_process::start(serve_args("llama", {"--role", "prefill", "-np", "1"}));
        t.decode = node_process::start(serve_args("llama", {"--role", "decode", "-np", "2"}));
        t.router =
            node_process::start({"route", "--prefill", t.prefill->url(), "--decode", t.decode->url(), "--pd-min-tokens",
                                 "1", "-m", test_model_path("llama"), "--timeout", "60", "--health-interval", "0.2"});
        return t;
    }
    void expect_all_alive(const std::string & why) const {
        for (const node_process * n : {prefill.get(), decode.get(), router.get()}) {
            const http_reply h = get(*n, "/health", "", 10);
            EXPECT_EQ(h.status, 200) << why << ": " << n->url() << " " << h.body << "\n" << n->stderr_text();
        }
    }
};

// The finding: `root ::= ((((...("a")...))))` nested 100,000 deep (~200 KB, under the 1 MiB grammar cap)
// overflowed libllama's recursive grammar parser: the prefill node died, the router fell back to the decode
// node, which died too. The same grammar inside a blob killed a decode node from /v1/decode.
TEST(RouterReliabilityRegression, HundredThousandDeepGrammarKillsNoProcess) {
    const trio t = trio::make();
    const std::string deep = "root ::= " + std::string(100000, '(') + "\"a\"" + std::string(100000, ')');
    const json body = {{"prompt", "Answer with one letter:"}, {"max_tokens", 4}, {"grammar", deep}};
    const http_reply r = post(*t.router, "/v1/completions", body.dump(), "application/json", "", 60);
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find("grammar"), std::string::npos) << r.body;
    t.expect_all_alive("after the deep grammar through the router");

    // Straight to each node, streamed too: still a 400, still alive.
    json streamed = body;
    streamed["stream"] = true;
    EXPECT_EQ(post(*t.decode, "/v1/completions", streamed.dump()).status, 400);
    json pbody = body;
    EXPECT_EQ(post(*t.prefill, "/v1/prefill", pbody.dump()).status, 400);
    t.expect_all_alive("after the deep grammar to the nodes");

    // The same grammar inside a blob's embedded request, straight to the decode node.
    json small = pbody;
    small["grammar"] = "root ::= \"a\"";
    const http_reply blob = post(*t.prefill, "/v1/prefill", small.dump());
    ASSERT_EQ(blob.status, 200) << blob.body;
    const std::vector<uint8_t> bytes(blob.body.begin(), blob.body.end());
    auto v = blob_parse(bytes);
    ASSERT_TRUE(v.ok() && v->request) << v.status().to_string();
    json req = json::parse(*v->request);
    ASSERT_TRUE(req["sampling"]["grammar"].contains("gbnf")) << req.dump();
    req["sampling"]["grammar"]["gbnf"] = deep;
    const std::string req_text = req.dump();
    blob_parts parts = blob_view_parts(v.value());
    parts.request = req_text;
    blob_buffer_sink sink;
    ASSERT_TRUE(blob_write(parts, sink).ok());
    const std::string crafted(sink.bytes().begin(), sink.bytes().end());
    const http_reply dec = post(*t.decode, "/v1/decode", crafted, "application/octet-stream");
    EXPECT_TRUE(dec.status == 400 || dec.status == 422) << dec.status << " " << dec.body;
    EXPECT_NE(dec.body.find("grammar"), std::string::npos) << dec.body;
    t.expect_all_alive("after a blob with the deep grammar");

    // A grammar within the limits still works through PD: the cluster is serving, not just alive.
    const json ok = {{"prompt", "Answer with one letter:"},
                     {"max_tokens", 1},
                     {"temperature", 0},
                     {"grammar", "root ::= ((\"a\" | \"b\"))"}};
    const http_reply fine = post(*t.router, "/v1/completions", ok.dump(), "application/json", "", 60);
    ASSERT_EQ(fine.status, 200) << fine.body;
    const std::string text = fine.j()["choices"][0]["text"].get<std::string>();
    EXPECT_TRUE(text == "a" || text == "b") << text;
}

}  // namespace
}  // namespace baton
