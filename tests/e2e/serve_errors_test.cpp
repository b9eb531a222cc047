// serve_errors_test.cpp — every error status of the API provoked by a real request, with the JSON error
// shape {"error":{"code","message","type","status"}} (llama-server's, plus Baton's own name).
#include <map>
#include <sstream>

#include "serve_test_util.h"

namespace baton::test {
namespace {

// llama_type: llama-server's error type for the kind of failure Baton names (its own name, error.status).
std::string llama_type(const std::string & baton_status) {
    static const std::map<std::string, std::string> types = {
        {"invalid_argument", "invalid_request_error"},
        {"too_large", "invalid_request_error"},
        {"corrupt", "invalid_request_error"},
        {"incompatible", "invalid_request_error"},
        {"unsupported", "invalid_request_error"},
        {"context_exceeded", "exceed_context_size_error"},
        {"unauthenticated", "authentication_error"},
        {"permission_denied", "permission_error"},
        {"not_found", "not_found_error"},
        {"not_implemented", "not_supported_error"},
        {"busy", "unavailable_error"},
        {"unavailable", "unavailable_error"},
    };
    const auto it = types.find(baton_status);
    return it == types.end() ? "server_error" : it->second;
}

// expect_error checks the status, Baton's name for the error (error.status), llama-server's type for it and
// (optionally) a word of the message.
void expect_error(const http_reply & r, int status, const std::string & baton_status, const std::string & word = "") {
    EXPECT_EQ(r.status, status) << r.body;
    const json j = r.j();
    ASSERT_TRUE(j.is_object() && j.contains("error")) << r.body;
    EXPECT_EQ(j["error"]["code"].get<int>(), status) << r.body;
    EXPECT_EQ(j["error"]["status"].get<std::string>(), baton_status) << r.body;
    EXPECT_EQ(j["error"]["type"].get<std::string>(), llama_type(baton_status)) << r.body;
    if (!word.empty()) {
        EXPECT_NE(j["error"]["message"].get<std::string>().find(word), std::string::npos) << r.body;
    }
}

const std::string k_prompt = R"({"prompt":"Hello there","max_tokens":4,"temperature":0})";

std::string prefill_body() { return R"({"prompt":"Hello there","max_tokens":4,"temperature":0})"; }

TEST(ServeErrors, MalformedRequestsAre400) {
    auto n = node_process::start(serve_args("llama"));
    expect_error(post(*n, "/v1/completions", "{not json"), 400, "invalid_argument", "JSON");
    expect_error(post(*n, "/v1/completions", R"({"prompt":"x","temperature":"hot"})"), 400, "invalid_argument",
                 "temperature");
    expect_error(post(*n, "/v1/chat/completions", R"({"messages":[]})"), 400, "invalid_argument", "messages");
    expect_error(post_prefill(*n, "nope", R"({"prompt":"x"})"), 400, "invalid_argument", "X-Baton-Endpoint");
    expect_error(post(*n, "/v1/completions", R"({"prompt":[1, 999999]})"), 400, "invalid_argument", "prompt");
    // The node still works afterwards.
    EXPECT_EQ(post(*n, "/v1/completions", k_prompt).status, 200);
}

TEST(ServeErrors, UnknownRouteOrSlotIs404) {
    auto n = node_process::start(serve_args("llama", {"-np", "2"}));
    expect_error(get(*n, "/v1/nothing"), 404, "not_found");
    expect_error(post(*n, "/v2/completions", k_prompt), 404, "not_found");
    expect_error(get(*n, "/v1/slots/9/state"), 404, "not_found", "slot 9");
    expect_error(get(*n, "/v1/slots/abc/state"), 404, "not_found");
    expect_error(get(*n, "/v1/slots/1/state"), 404, "not_found", "no state");  // empty slot
}

TEST(ServeErrors, BadBlobsAre422) {
    auto pre = node_process::start(serve_args("llama", {"--role", "prefill"}));
    auto bad_pre = node_process::start(serve_args("llama", {"--role", "prefill", "--test-corrupt-state"}));
    auto other = node_process::start(serve_args("llama", {"--role", "decode"}, 2));  // another model (seed 2)
    auto dec = node_process::start(serve_args("llama", {"--role", "decode"}));

    expect_error(post(*dec, "/v1/decode", "definitely not a blob", "application/octet-stream"), 422, "corrupt",
                 "magic");
    const http_reply blob = post(*pre, "/v1/prefill", prefill_body());
    ASSERT_EQ(blob.status, 200);
    std::string truncated = blob.body.substr(0, blob.body.size() / 2);
    expect_error(post(*dec, "/v1/decode", truncated, "application/octet-stream"), 422, "corrupt");

    const http_reply flipped = post(*bad_pre, "/v1/prefill", prefill_body());
    ASSERT_EQ(flipped.status, 200);
    EXPECT_EQ(flipped.body.size(), blob.body.size());
    expect_error(post(*dec, "/v1/decode", flipped.body, "application/octet-stream"), 422, "corrupt", "state");

    expect_error(post(*other, "/v1/decode", blob.body, "application/octet-stream"), 422, "incompatible", "fingerprint");
    auto c = other->client();
    expect_error(to_reply(c->Put("/v1/slots/0/state", blob.body, "application/octet-stream")), 422, "incompatible",
                 "fingerprint");

    // Rejections are counted by reason, and the decode node still serves a good blob.
    const std::string m = get(*dec, "/metrics").body;
    EXPECT_GE(metric_value(m, "baton_restore_failures_total{reason=\"corrupt\"}"), 3) << m;
    EXPECT_GE(metric_value(get(*other, "/metrics").body, "baton_restore_failures_total{reason=\"incompatible\"}"), 2);
    EXPECT_EQ(post(*dec, "/v1/decode", blob.body, "application/octet-stream").status, 200);
}

TEST(ServeErrors, OversizedBodiesAre413) {
    auto n = node_process::start(serve_args("llama", {"--max-json-mb", "0.01", "--max-blob-mb", "0.002"}));
    const std::string big_prompt(20000, 'a');
    expect_error(post(*n, "/v1/completions", json({{"prompt", big_prompt}}).dump()), 413, "too_large");
    const http_reply blob = post(*n, "/v1/prefill", prefill_body());
    ASSERT_EQ(blob.status, 200);
    ASSERT_GT(blob.body.size(), 2100u);
    expect_error(post(*n, "/v1/decode", blob.body, "application/octet-stream"), 413, "too_large");
    // The connection-level cap (over both limits) gives the same JSON error.
    expect_error(post(*n, "/v1/decode", std::string(64 * 1024, 'x'), "application/octet-stream"), 413, "too_large");
    EXPECT_EQ(post(*n, "/v1/completions", k_prompt).status, 200);
}

TEST(ServeErrors, MissingOrWrongKeyIs401) {
    auto n = node_process::start(serve_args("llama", {"--api-key", "s3cret"}));
    EXPECT_EQ(get(*n, "/health").status, 200);  // health is open
    expect_error(post(*n, "/v1/completions", k_prompt), 401, "unauthenticated", "missing");
    expect_error(post(*n, "/v1/completions", k_prompt, "application/json", "wrong"), 401, "unauthenticated", "wrong");
    expect_error(get(*n, "/v1/slots/0/state"), 401, "unauthenticated");
    expect_error(get(*n, "/metrics"), 401, "unauthenticated");
    expect_error(post(*n, "/v1/decode", "x", "application/octet-stream"), 401, "unauthenticated");
    EXPECT_EQ(post(*n, "/v1/completions", k_prompt, "application/json", "s3cret").status, 200);
    EXPECT_EQ(get(*n, "/v1/models", "s3cret").status, 200);
}

TEST(ServeErrors, WrongRoleIs409) {
    auto pre = node_process::start(serve_args("llama", {"--role", "prefill"}));
    auto dec = node_process::start(serve_args("llama", {"--role", "decode"}));
    expect_error(post(*dec, "/v1/prefill", prefill_body()), 409, "busy", "role decode");
    const http_reply blob = post(*pre, "/v1/prefill", prefill_body());
    ASSERT_EQ(blob.status, 200);
    expect_error(post(*pre, "/v1/decode", blob.body, "application/octet-stream"), 409, "busy", "role prefill");
    auto c = pre->client();
    expect_error(to_reply(c->Put("/v1/slots/0/state", blob.body, "application/octet-stream")), 409, "busy",
                 "role prefill");
    expect_error(get(*dec, "/v1/slots/0/state"), 409, "busy", "role decode");
}

// With one slot and no queue, a long stream holds the slot: its state is busy (409), another request gets
// 503 with Retry-After; hanging up frees the slot quickly (the work is cancelled).
TEST(ServeErrors, BusySlotIs409NoFreeSlotIs503AndHangingUpCancels) {
    auto n = node_process::start(serve_args("llama", {"-np", "1", "--queue-max", "0"}));
    held_stream s(*n, long_stream_body());
    ASSERT_TRUE(s.wait_for("data: ")) << s.received();
    expect_error(get(*n, "/v1/slots/0/state"), 409, "busy", "busy");
    auto c = n->client();
    expect_error(to_reply(c->Delete("/v1/slots/0/state")), 409, "busy");
    const http_reply full = post(*n, "/v1/completions", k_prompt);
    expect_error(full, 503, "unavailable", "no free slot");
    EXPECT_EQ(full.retry_after, "1");

    s.release();
    ASSERT_TRUE(wait_slot_idle(*n, 0, 10));
    EXPECT_EQ(s.received().find("[DONE]"), std::string::npos) << "the stream ran to its end instead of being cancelled";
    const std::string m = get(*n, "/metrics").body;
    EXPECT_LT(metric_value(m, "baton_generated_tokens_total"), 1800) << m;
    EXPECT_EQ(post(*n, "/v1/completions", k_prompt).status, 200);
}

TEST(ServeErrors, RequestOverTimeoutIs504) {
    // One slot of 8192 tokens (each slot holds n_ctx / slots) on a 512-wide model: 8000 tokens take far
    // longer than 3 s on any CPU this runs on (the 64-wide test model can be that fast), while the first
    // token comes long before the timeout.
    auto n = node_process::start(
        {"serve", "-m", test_model_path("llama", 1, 512, 4), "-c", "8192", "-np", "1", "-t", "2", "--timeout", "3"});
    json body = long_stream_body();
    body["stream"] = false;
    body["max_tokens"] = 8000;
    expect_error(post(*n, "/v1/completions", body.dump()), 504, "deadline_exceeded", "timeout");
    // A stream that times out ends with an explicit error: an error event and [DONE] once tokens flowed,
    // or a plain 504 if the deadline passed before the first token.
    body["stream"] = true;
    const http_reply s = post(*n, "/v1/completions", body.dump());
    if (s.status == 200) {
        EXPECT_NE(s.body.find("deadline_exceeded"), std::string::npos)
            << s.body.substr(s.body.size() > 400 ? s.body.size() - 400 : 0);
        EXPECT_NE(s.body.find("data: [DONE]"), std::string::npos);
    } else {
        expect_error(s, 504, "deadline_exceeded", "timeout");
    }
}

// Issue 23: --log-level and --log-format are checked by the command line (exit 2 naming the flag), on every
// subcommand.
TEST(ServeLogging, BadLogFlagsExit2) {
    const std::vector<std::vector<std::string>> cases = {
        serve_args("llama", {"--log-level", "verbose"}),
        serve_args("llama", {"--log-format", "xml"}),
        {"route", "--decode", "http://127.0.0.1:1", "--log-level", "INFO"},
        {"mkmodel", "--arch", "llama", "-o", "/nonexistent/x.gguf", "--log-format", ""},
    };
    for (auto args : cases) {
        const std::string flag = args[args.size() - 2];
        args.insert(args.begin(), baton_bin());
        const proc_result r = run_process(args, 60);
        EXPECT_EQ(r.exit_code, 2) << args[1] << " " << flag << ": " << r.err;
        EXPECT_NE(r.err.find(flag), std::string::npos) << r.err;
    }
}

// Issue 23: with --log-format json a node's log lines are JSON objects (time, level, msg), and --log-level
// drops the lines below it.
TEST(ServeLogging, JsonLinesAndLevels) {
    auto n = node_process::start(serve_args("llama", {"--log-format", "json"}));
    ASSERT_EQ(n->terminate(), 0) << n->stderr_text();
    std::istringstream lines(n->stderr_text());
    std::vector<json> logged;
    for (std::string line; std::getline(lines, line);)
        if (line.rfind("{", 0) == 0) logged.push_back(json::parse(line));  // throws on a broken line
    auto find = [&](const std::string & prefix) -> const json * {
        for (const json & j : logged)
            if (j.value("msg", "").rfind(prefix, 0) == 0) return &j;
        return nullptr;
    };
    const json * keyless = find("serve: no --api-key: every route is open");
    ASSERT_TRUE(keyless) << n->stderr_text();
    EXPECT_EQ((*keyless)["level"], "warn");
    EXPECT_TRUE((*keyless)["time"].is_string());
    EXPECT_FALSE(keyless->contains("request_id"));
    const json * bye = find("serve: shutting down");
    ASSERT_TRUE(bye) << n->stderr_text();
    EXPECT_EQ((*bye)["level"], "info");

    auto quiet = node_process::start(serve_args("llama", {"--log-level", "error"}));
    ASSERT_EQ(quiet->terminate(), 0) << quiet->stderr_text();
    EXPECT_EQ(quiet->stderr_text().find("no --api-key"), std::string::npos) << quiet->stderr_text();
    EXPECT_EQ(quiet->stderr_text().find("shutting down"), std::string::npos) << quiet->stderr_text();
}

}  // namespace
}  // namespace baton::test
