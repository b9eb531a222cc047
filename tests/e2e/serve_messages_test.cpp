// serve_messages_test.cpp — Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens) on real
// processes: the message's shape, the stream's events read raw (names, order, indices), tools, the token
// count, refusals; and PD (prefill node → blob → decode node) and a router, streamed and not, equal to a
// single node. One set of processes serves every case of a test.
#include <cctype>

#include "serve_test_util.h"

namespace baton::test {
namespace {

std::string hermes_template_file() { return BATON_TEST_E2E_DIR "/hermes_tools.jinja"; }

json messages_body(const std::string & text, int max_tokens = 12) {
    return {{"model", "test"},
            {"max_tokens", max_tokens},
            {"temperature", 0},
            {"messages", {{{"role", "user"}, {"content", text}}}}};
}

json anthropic_tools() {
    return json::parse(R"([
      {"name": "get_weather", "description": "Weather in a city",
       "input_schema": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                                          "unit": {"enum": ["c", "f"]}},
                        "required": ["city", "unit"], "additionalProperties": false}},
      {"name": "get_time", "description": "Time in a zone",
       "input_schema": {"type": "object", "properties": {"zone": {"type": "integer", "minimum": -12, "maximum": 14}},
                        "required": ["zone"], "additionalProperties": false}}
    ])");
}

// One event of an Anthropic stream, read raw: its "event:" name and its "data:" JSON.
struct sse_named {
    std::string name;
    json data;
};

// named_events splits an SSE body into its events; an event without a name or with data that is not JSON
// fails the test.
std::vector<sse_named> named_events(const std::string & body) {
    std::vector<sse_named> out;
    size_t pos = 0;
    while (pos < body.size()) {
        size_t end = body.find("\n\n", pos);
        if (end == std::string::npos) end = body.size();
        const std::string block = body.substr(pos, end - pos);
        pos = end + 2;
        if (block.empty()) continue;
        sse_named e;
        size_t line = 0;
        while (line < block.size()) {
            size_t nl = block.find('\n', line);
            if (nl == std::string::npos) nl = block.size();
            const std::string l = block.substr(line, nl - line);
            if (l.starts_with("event: ")) e.name = l.substr(7);
            if (l.starts_with("data: ")) e.data = json::parse(l.substr(6), nullptr, false);
            line = nl + 1;
        }
        EXPECT_FALSE(e.name.empty()) << "an event without a name: " << block;
        EXPECT_FALSE(e.data.is_discarded()) << "data that is not JSON: " << block;
        if (e.data.is_object()) {
            EXPECT_EQ(e.data["type"], e.name) << block;
        }
        out.push_back(std::move(e));
    }
    return out;
}

// The message a stream adds up to (blocks by index, text and thinking deltas appended, input_json_delta
// parsed at the block's end), checking the grammar of the stream on the way: message_start first, each
// block started, fed and stopped before the next starts, indices from 0 in order, message_delta then
// message_stop last, no [DONE].
json message_of_stream(const std::vector<sse_named> & events) {
    json msg;
    std::string partial;
    int64_t open = -1, next = 0;
    bool delta_seen = false;
    for (size_t i = 0; i < events.size(); ++i) {
        const sse_named & e = events[i];
        const json & d = e.data;
        if (i == 0) {
            EXPECT_EQ(e.name, "message_start");
            msg = d["message"];
            continue;
        }
        EXPECT_NE(e.name, "message_start");
        if (e.name == "content_block_start") {
            EXPECT_EQ(open, -1) << "a block started before the last one stopped";
            EXPECT_EQ(d["index"], next);
            open = next++;
            msg["content"].push_back(d["content_block"]);
            partial.clear();
        } else if (e.name == "content_block_delta") {
            EXPECT_EQ(d["index"], open);
            json & block = msg["content"][size_t(open)];
            const json & delta = d["delta"];
            if (delta["type"] == "text_delta")
                block["text"] = block["text"].get<std::string>() + delta["text"].get<std::string>();
            else if (delta["type"] == "thinking_delta")
                block["thinking"] = block["thinking"].get<std::string>() + delta["thinking"].get<std::string>();
            else if (delta["type"] == "input_json_delta") partial += delta["partial_json"].get<std::string>();
            else if (delta["type"] == "signature_delta") block["signature"] = delta["signature"];
            else ADD_FAILURE() << "unknown delta " << delta.dump();
        } else if (e.name == "content_block_stop") {
            EXPECT_EQ(d["index"], open);
            json & block = msg["content"][size_t(open)];
            if (block["type"] == "tool_use" && !partial.empty()) block["input"] = json::parse(partial);
            open = -1;
        } else if (e.name == "message_delta") {
            EXPECT_EQ(open, -1);
            msg["stop_reason"] = d["delta"]["stop_reason"];
            msg["stop_sequence"] = d["delta"]["stop_sequence"];
            msg["usage"] = d["usage"];
            delta_seen = true;
        } else if (e.name == "message_stop") {
            EXPECT_TRUE(delta_seen);
            EXPECT_EQ(i + 1, events.size()) << "message_stop is the last event";
        } else {
            ADD_FAILURE() << "unexpected event " << e.name;
        }
    }
    return msg;
}

// comparable: a message without what differs per response or per node (ids, the cache split of usage:
// input_tokens + cache_read_input_tokens is kept as the prompt's length).
json comparable(json m) {
    m.erase("id");
    if (m.contains("usage") && m["usage"].is_object()) {
        json & u = m["usage"];
        u["prompt"] = u.value("input_tokens", 0) + u.value("cache_read_input_tokens", 0);
        u.erase("input_tokens");
        u.erase("cache_read_input_tokens");
    }
    if (m.contains("content") && m["content"].is_array())
        for (auto & b : m["content"])
            if (b.is_object() && b["type"] == "tool_use") b.erase("id");
    return m;
}

TEST(ServeMessages, NodeAnswersInAnthropicsShapesStreamedAndNot) {
    auto n = node_process::start(serve_args("llama", {"--chat-template-file", hermes_template_file(), "-np", "2"}));
    // The whole message.
    const json body = messages_body("Tell me about the state blob", 10);
    const http_reply whole = post(*n, "/v1/messages", body.dump());
    ASSERT_EQ(whole.status, 200) << whole.body;
    const json m = whole.j();
    EXPECT_TRUE(m["id"].get<std::string>().starts_with("msg_")) << m.dump();
    EXPECT_EQ(m["type"], "message");
    EXPECT_EQ(m["role"], "assistant");
    EXPECT_EQ(m["model"], get(*n, "/v1/models").j()["data"][0]["id"]);
    EXPECT_EQ(m["stop_reason"], "max_tokens") << m.dump();
    EXPECT_TRUE(m["stop_sequence"].is_null());
    ASSERT_EQ(m["content"].size(), 1u) << m.dump();
    EXPECT_EQ(m["content"][0]["type"], "text");
    EXPECT_EQ(m["usage"]["output_tokens"], 10);
    for (const char * k : {"input_tokens", "cache_read_input_tokens", "output_tokens"})
        EXPECT_TRUE(m["usage"][k].is_number_integer()) << k;
    EXPECT_FALSE(m.contains("timings"));
    EXPECT_FALSE(m.contains("choices"));
    const int64_t prompt =
        m["usage"]["input_tokens"].get<int64_t>() + m["usage"]["cache_read_input_tokens"].get<int64_t>();

    // The same request streamed: the same message, event by event.
    json sbody = body;
    sbody["stream"] = true;
    const http_reply s = post(*n, "/v1/messages", sbody.dump());
    ASSERT_EQ(s.status, 200) << s.body;
    EXPECT_NE(s.content_type.find("text/event-stream"), std::string::npos);
    EXPECT_EQ(s.body.find("[DONE]"), std::string::npos);
    const auto events = named_events(s.body);
    const json streamed = message_of_stream(events);
    EXPECT_EQ(events.front().data["message"]["usage"]["input_tokens"], prompt);
    EXPECT_EQ(events.front().data["message"]["usage"]["output_tokens"], 0);
    EXPECT_EQ(comparable(streamed), comparable(m)) << s.body;

    // count_tokens: the rendered prompt's tokens, the same a generation counts.
    json count = body;
    count.erase("max_tokens");
    const http_reply c = post(*n, "/v1/messages/count_tokens", count.dump());
    ASSERT_EQ(c.status, 200) << c.body;
    EXPECT_EQ(c.j(), json({{"input_tokens", prompt}}));

    // A stop sequence (a printable ASCII character of the greedy answer): stop_reason stop_sequence, naming it;
    // the answer ends before it.
    const std::string text = m["content"][0]["text"];
    size_t at = 1;
    while (at < text.size() && !std::isgraph(static_cast<unsigned char>(text[at]))) ++at;
    ASSERT_LT(at, text.size()) << "no printable ASCII in the answer: " << text;
    const std::string seq = text.substr(at, 1);
    json stop = body;
    stop["stop_sequences"] = {seq};
    for (bool stream : {false, true}) {
        stop["stream"] = stream;
        const http_reply r = post(*n, "/v1/messages", stop.dump());
        ASSERT_EQ(r.status, 200) << r.body;
        const json sm = stream ? message_of_stream(named_events(r.body)) : r.j();
        EXPECT_EQ(sm["stop_reason"], "stop_sequence") << r.body;
        EXPECT_EQ(sm["stop_sequence"], seq) << r.body;
        const std::string got = sm["content"].empty() ? "" : sm["content"][0]["text"].get<std::string>();
        EXPECT_EQ(got, text.substr(0, text.find(seq))) << r.body;
    }

    // A system prompt, block content and Anthropic's headers: accepted.
    json rich = body;
    rich["system"] = json::array({{{"type", "text"}, {"text", "Be brief."}}});
    rich["messages"] =
        json::parse(R"([{"role":"user","content":[{"type":"text","text":"Hi"},{"type":"text","text":"!"}]},
                                       {"role":"assistant","content":"Hello."},{"role":"user","content":"More"}])");
    rich["metadata"] = {{"user_id", "u1"}};
    auto client = n->client(60);
    const auto hr =
        client->Post("/v1/messages", {{"anthropic-version", "2023-06-01"}}, rich.dump(), "application/json");
    ASSERT_TRUE(hr);
    EXPECT_EQ(hr->status, 200) << hr->body;

    // Refusals: 400 in the server's error shape, naming the field.
    const std::pair<json, std::string> refused[] = {
        {json::parse(R"({"max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":
            {"type":"base64","media_type":"image/png","data":"AA=="}}]}]})"),
         "image"},
        {json::parse(R"({"max_tokens":5,"messages":[]})"), "messages"},
        {json::parse(
             R"({"max_tokens":5,"messages":[{"role":"user","content":"x"}],"tools":[{"type":"bash_20250124","name":"bash"}]})"),
         "tools[0].type"},
        {json::parse(R"({"max_tokens":5,"messages":[{"role":"user","content":"x"}],"stop_sequences":"\n"})"), ""},
    };
    for (const auto & [b, field] : refused) {
        const http_reply r = post(*n, "/v1/messages", b.dump());
        if (field.empty()) {  // (a string is a stop sequence, as llama-server takes "stop")
            EXPECT_EQ(r.status, 200) << r.body;
            continue;
        }
        EXPECT_EQ(r.status, 400) << b.dump() << " -> " << r.body;
        EXPECT_NE(r.j()["error"]["message"].get<std::string>().find(field), std::string::npos) << r.body;
        EXPECT_EQ(r.j()["error"]["type"], "invalid_request_error") << r.body;
        EXPECT_EQ(post(*n, "/v1/messages/count_tokens", b.dump()).status, 400);
    }
}

// Tools: tool_choice any and a named tool yield tool_use blocks whose input obeys the schema, streamed as
// input_json_delta; a tool result and thinking in the history render; tool_choice none calls nothing.
TEST(ServeMessages, ToolsYieldToolUseBlocksAndHistoryRenders) {
    auto n = node_process::start(serve_args("llama", {"--chat-template-file", hermes_template_file(), "-np", "2"}));
    for (int seed = 1; seed <= 4; ++seed) {
        SCOPED_TRACE("seed " + std::to_string(seed));
        json body = messages_body("What is the weather in Paris?", 200);
        body["temperature"] = 1.0;
        body["tools"] = anthropic_tools();
        body["tool_choice"] = seed % 2
                                  ? json{{"type", "any"}, {"disable_parallel_tool_use", true}}
                                  : json{{"type", "tool"}, {"name", "get_time"}, {"disable_parallel_tool_use", true}};
        for (bool stream : {false, true}) {
            body["stream"] = stream;
            // (no seed in the Messages API: the node's random seed; the checks hold for any output)
            const http_reply r = post(*n, "/v1/messages", body.dump());
            ASSERT_EQ(r.status, 200) << r.body;
            const json m = stream ? message_of_stream(named_events(r.body)) : r.j();
            ASSERT_EQ(m["stop_reason"], "tool_use") << r.body;
            json call;
            for (const auto & b : m["content"])
                if (b["type"] == "tool_use") call = b;
            ASSERT_TRUE(call.is_object()) << r.body;
            EXPECT_TRUE(call["id"].get<std::string>().starts_with("toolu_")) << call.dump();
            ASSERT_TRUE(call["input"].is_object()) << call.dump();
            if (seed % 2 == 0) {
                EXPECT_EQ(call["name"], "get_time");
            }
            if (call["name"] == "get_time") {
                EXPECT_TRUE(call["input"]["zone"].is_number_integer()) << call.dump();
            } else {
                EXPECT_EQ(call["name"], "get_weather");
                EXPECT_TRUE(call["input"]["unit"] == "c" || call["input"]["unit"] == "f") << call.dump();
            }
        }
    }
    // The conversation goes on: the call and its result (and a thought) in the history.
    json next = messages_body("x", 8);
    next["tools"] = anthropic_tools();
    next["tool_choice"] = {{"type", "none"}};
    next["messages"] = json::parse(R"([
        {"role":"user","content":"Weather in Oslo?"},
        {"role":"assistant","content":[{"type":"thinking","thinking":"Ask the tool.","signature":""},
                                       {"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Oslo","unit":"c"}}]},
        {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"12 C"}]}])");
    const http_reply r = post(*n, "/v1/messages", next.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_NE(r.j()["stop_reason"], "tool_use") << r.body;
    // The history reaches the template: the tool result is in the prompt the node counts.
    json shorter = next;
    shorter["messages"][2]["content"][0]["content"] = "";
    EXPECT_GT(post(*n, "/v1/messages/count_tokens", next.dump()).j()["input_tokens"].get<int>(),
              post(*n, "/v1/messages/count_tokens", shorter.dump()).j()["input_tokens"].get<int>());
}

// PD (the prefill node renders and prefills, the decode node generates from the blob) and a router in front
// of a prefill and a decode node answer as one node does: greedy, streamed and not, with tools.
TEST(ServeMessages, PdAndRouterEqualSingleNode) {
    const std::vector<std::string> extra = {"--chat-template-file", hermes_template_file()};
    auto with = [&](std::vector<std::string> a) {
        a.insert(a.end(), extra.begin(), extra.end());
        return node_process::start(serve_args("llama", a));
    };
    auto single = with({});
    auto pre = with({"--role", "prefill"});
    auto dec = with({"--role", "decode"});
    auto router = node_process::start({"route", "--prefill", pre->url(), "--decode", dec->url(), "--pd-min-tokens", "0",
                                       "-m", test_model_path("llama"), "--timeout", "60", "--health-interval", "0.2"});
    std::vector<json> cases;
    cases.push_back(messages_body("Tell me about the state blob and the router", 16));
    json sys = messages_body("And the decode node?", 12);
    sys["system"] = "You are terse.";
    sys["stop_sequences"] = {"zzz"};
    cases.push_back(sys);
    json tools = messages_body("Weather in Oslo?", 80);
    tools["tools"] = anthropic_tools();
    tools["tool_choice"] = {{"type", "any"}};
    cases.push_back(tools);
    for (json body : cases) {
        for (bool stream : {false, true}) {
            body["stream"] = stream;
            SCOPED_TRACE(body.dump());
            auto message = [&](const http_reply & r) {
                EXPECT_EQ(r.status, 200) << r.body;
                return comparable(stream ? message_of_stream(named_events(r.body)) : r.j());
            };
            const json want = message(post(*single, "/v1/messages", body.dump()));
            EXPECT_EQ(message(via_pd(*pre, *dec, "messages", body.dump())), want);
            const http_reply routed = post(*router, "/v1/messages", body.dump());
            EXPECT_EQ(routed.route, "pd") << routed.body;
            EXPECT_EQ(message(routed), want);
        }
    }
    // count_tokens through the router: a node's count.
    json count = cases[1];
    count.erase("stream");
    EXPECT_EQ(post(*router, "/v1/messages/count_tokens", count.dump()).j(),
              post(*single, "/v1/messages/count_tokens", count.dump()).j());
    // A refusal at the router's edge is the node's 400.
    EXPECT_EQ(post(*router, "/v1/messages", R"({"messages":[{"role":"user","content":[{"type":"image"}]}]})").status,
              400);
}

}  // namespace
}  // namespace baton::test
