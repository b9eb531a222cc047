// http_errors_test.cpp — the one Status -> HTTP map: each code's HTTP status and llama-server's error type,
// the body's fields, and the body read back into the Status it came from (the router passes a node's on).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "baton/http/http_errors.h"
#include "baton/http/sse.h"

namespace baton {
namespace {

struct error_row {
    status_code code;
    int http;
    const char * type;  // llama-server's name for the kind (its server's error_type)
};

const error_row k_rows[] = {
    {status_code::invalid_argument, 400, "invalid_request_error"},
    {status_code::context_exceeded, 400, "exceed_context_size_error"},
    {status_code::unauthenticated, 401, "authentication_error"},
    {status_code::permission_denied, 403, "permission_error"},
    {status_code::not_found, 404, "not_found_error"},
    {status_code::busy, 409, "unavailable_error"},
    {status_code::too_large, 413, "invalid_request_error"},
    {status_code::corrupt, 422, "invalid_request_error"},
    {status_code::incompatible, 422, "invalid_request_error"},
    {status_code::unsupported, 422, "invalid_request_error"},
    {status_code::dependency_failed, 424, "server_error"},
    {status_code::io_error, 500, "server_error"},
    {status_code::engine_error, 500, "server_error"},
    {status_code::internal, 500, "server_error"},
    {status_code::not_implemented, 501, "not_supported_error"},
    {status_code::upstream_error, 502, "server_error"},
    {status_code::unavailable, 503, "unavailable_error"},
    {status_code::cancelled, 503, "unavailable_error"},
    {status_code::deadline_exceeded, 504, "server_error"},
    {status_code::resource_exhausted, 507, "server_error"},
};

TEST(HttpErrors, EveryCodeHasItsStatusAndLlamaServersTypeAndReadsBack) {
    ASSERT_EQ(std::size(k_rows), size_t(status_code::internal));  // every code but ok, once
    for (const error_row & r : k_rows) {
        const Status st(r.code, std::string("what went wrong with ") + status_code_name(r.code));
        EXPECT_EQ(http_status_for(r.code), r.http) << status_code_name(r.code);
        const auto j = nlohmann::json::parse(http_error_json(st));
        EXPECT_EQ(j["error"]["code"], r.http) << j;
        EXPECT_EQ(j["error"]["type"], r.type) << j;
        EXPECT_EQ(j["error"]["status"], status_code_name(r.code)) << j;
        EXPECT_EQ(j["error"]["message"], st.message()) << j;
        EXPECT_EQ(status_code_from_name(status_code_name(r.code)), r.code);
        const Status back = http_error_status(http_error_json(st));
        EXPECT_EQ(back.code(), r.code);
        EXPECT_EQ(back.message(), st.message());
    }
    EXPECT_EQ(status_code_from_name("no_such_code"), std::nullopt);
}

TEST(HttpErrors, ContextExceededCarriesLlamaServersFieldsAndMessage) {
    const Status st = context_exceeded_status(1801, 256);
    const auto j = nlohmann::json::parse(http_error_json(st));
    EXPECT_EQ(j["error"]["code"], 400);
    EXPECT_EQ(j["error"]["type"], "exceed_context_size_error");
    EXPECT_EQ(j["error"]["message"],
              "request (1801 tokens) exceeds the available context size (256 tokens), try increasing it");
    EXPECT_EQ(j["error"]["n_prompt_tokens"], 1801);
    EXPECT_EQ(j["error"]["n_ctx"], 256);
    const Status back = http_error_status(http_error_json(st));
    ASSERT_TRUE(std::holds_alternative<context_overflow>(back.detail()));
    EXPECT_EQ(std::get<context_overflow>(back.detail()), (context_overflow{1801, 256}));
    // Other codes carry no such fields.
    const auto plain = nlohmann::json::parse(http_error_json(Status(status_code::invalid_argument, "x")));
    EXPECT_FALSE(plain["error"].contains("n_ctx"));
}

TEST(HttpErrors, BodiesThatAreNotBatonsReadAsNoStatus) {
    for (const char * body :
         {"", "bad field", "{}", R"({"error":"x"})", R"({"error":{"message":"m"}})",
          R"({"error":{"status":"nope","message":"m"}})", R"({"error":{"status":"ok","message":"m"}})",
          R"({"error":{"status":3,"message":"m"}})", R"({"error":{"status":"not_found"}})"})
        EXPECT_TRUE(http_error_status(body).ok()) << body;
    // A context_exceeded without usable numbers keeps its code and message, without a detail.
    const Status st = http_error_status(R"({"error":{"status":"context_exceeded","message":"m","n_ctx":-1}})");
    EXPECT_EQ(st.code(), status_code::context_exceeded);
    EXPECT_TRUE(std::holds_alternative<std::monostate>(st.detail()));
}

// An Anthropic (Messages) stream that fails after its first event ends with a named error event whose data is
// Anthropic's shape around the server's error object; OpenAI streams keep their data-only error and [DONE].
TEST(HttpErrors, AMessagesStreamEndsWithANamedErrorEvent) {
    const Status st(status_code::deadline_exceeded, "deadline");
    const std::string e = sse_named_error(st);
    ASSERT_TRUE(e.starts_with("event: error\ndata: ")) << e;
    ASSERT_TRUE(e.ends_with("\n\n")) << e;
    const nlohmann::json j = nlohmann::json::parse(e.substr(std::string("event: error\ndata: ").size()));
    EXPECT_EQ(j["type"], "error");
    EXPECT_EQ(j["error"], nlohmann::json::parse(http_error_json(st))["error"]);
    EXPECT_EQ(sse_named_event("ping", "{}"), "event: ping\ndata: {}\n\n");
}

}  // namespace
}  // namespace baton
