// anthropic_test.cpp — Anthropic's Messages API without a model or a process: the request read into a chat
// (openai_parse with openai_endpoint::messages, llama-server's mapping), one case per rule and per refusal;
// the message object and the stream's events (anthropic_response.h).
#include <gtest/gtest.h>

#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "baton/openai/anthropic_response.h"
#include "baton/openai/openai.h"

namespace baton {
namespace {

using json = nlohmann::json;

Result<openai_request> parse_messages_body(const std::string & body, const openai_defaults & d = {}) {
    return openai_parse(body, openai_endpoint::messages, d);
}

const openai_chat & messages_chat_of(const Result<openai_request> & r) { return std::get<openai_chat>(r->input); }

// A refusal is invalid_argument (or too_large) and names the field.
void expect_messages_refused(const std::string & body, const std::string & field,
                             status_code code = status_code::invalid_argument) {
    auto r = parse_messages_body(body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.status().code(), code) << body << " -> " << r.status().message();
    EXPECT_NE(r.status().message().find(field), std::string::npos) << body << " -> " << r.status().message();
}

TEST(AnthropicParse, AStringConversationIsAChatWithLlamaServersDefaults) {
    auto r = parse_messages_body(
        R"({"model":"m","messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Yo"},
                       {"role":"user","content":"Go"}]})");
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->endpoint, openai_endpoint::messages);
    EXPECT_EQ(r->model, "m");
    EXPECT_EQ(r->max_tokens, 4096);  // llama-server's default when max_tokens is absent
    EXPECT_FALSE(r->stream);
    const auto & m = messages_chat_of(r).messages;
    ASSERT_EQ(m.size(), 3u);
    EXPECT_EQ(m[0].role, "user");
    EXPECT_EQ(m[0].content, "Hi");
    EXPECT_EQ(m[1].role, "assistant");
    EXPECT_EQ(m[2].content, "Go");
}

TEST(AnthropicParse, TheSamplingFieldsStopSequencesAndStreamAreRead) {
    auto r =
        parse_messages_body(R"({"messages":[{"role":"user","content":"Hi"}],"max_tokens":7,"temperature":0,"top_p":0.5,
                       "top_k":3,"stop_sequences":["\n","END"],"stream":true,"metadata":{"user_id":"u"}})");
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->max_tokens, 7);
    EXPECT_EQ(r->sampling.temperature, 0.0f);
    EXPECT_EQ(r->sampling.top_p, 0.5f);
    EXPECT_EQ(r->sampling.top_k, 3);
    EXPECT_EQ(r->stop, (std::vector<std::string>{"\n", "END"}));
    EXPECT_TRUE(r->stream);
    expect_messages_refused(R"({"messages":[{"role":"user","content":"Hi"}],"stop_sequences":[""]})", "stop_sequences");
    expect_messages_refused(R"({"messages":[{"role":"user","content":"Hi"}],"stop_sequences":[1]})", "stop_sequences");
    expect_messages_refused(R"({"messages":[{"role":"user","content":"Hi"}],"temperature":"hot"})", "temperature");
    expect_messages_refused(R"({"messages":[{"role":"user","content":"Hi"}],"max_tokens":1.5})", "max_tokens");
}

TEST(AnthropicParse, TheSystemPromptLeadsAsOneSystemMessage) {
    auto r = parse_messages_body(
        R"({"system":[{"type":"text","text":"Be "},{"type":"text","text":"brief.","cache_control":{}}],
                       "messages":[{"role":"user","content":"Hi"}]})");
    ASSERT_TRUE(r.ok()) << r.status().message();
    const auto & m = messages_chat_of(r).messages;
    ASSERT_EQ(m.size(), 2u);
    EXPECT_EQ(m[0].role, "system");
    EXPECT_EQ(m[0].content, "Be brief.");
    auto s = parse_messages_body(R"({"system":"Plain.","messages":[{"role":"user","content":"Hi"}]})");
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(messages_chat_of(s).messages[0].content, "Plain.");
    expect_messages_refused(R"({"system":[{"type":"image"}],"messages":[{"role":"user","content":"Hi"}]})",
                            "system[0].type");
    expect_messages_refused(R"({"system":5,"messages":[{"role":"user","content":"Hi"}]})", "system");
}

// Claude Code's billing header changes its cch stamp on every request; llama-server writes it as fffff so
// the prompt's prefix stays cacheable.
TEST(AnthropicParse, TheBillingHeadersStampIsNormalized) {
    auto r = parse_messages_body(R"({"system":"x-anthropic-billing-header: cc_version=2.1; cch=a5145; You are Claude.",
                       "messages":[{"role":"user","content":"Hi"}]})");
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(messages_chat_of(r).messages[0].content,
              "x-anthropic-billing-header: cc_version=2.1; cch=fffff; You are Claude.");
    auto other = parse_messages_body(R"({"system":"cch=a5145; kept","messages":[{"role":"user","content":"Hi"}]})");
    ASSERT_TRUE(other.ok());
    EXPECT_EQ(messages_chat_of(other).messages[0].content, "cch=a5145; kept");
}

TEST(AnthropicParse, TextBlocksAreConcatenated) {
    auto r = parse_messages_body(R"({"messages":[{"role":"user","content":[{"type":"text","text":"What is"},
                                                            {"type":"text","text":" the answer?"}]}]})");
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(messages_chat_of(r).messages.at(0).content, "What is the answer?");
}

// tool_use blocks are the assistant turn's calls; tool_result blocks become tool messages after the turn
// they are in (llama-server's order: the user's text first).
TEST(AnthropicParse, ToolUseAndToolResultBlocksBecomeCallsAndToolMessages) {
    auto r = parse_messages_body(R"({"messages":[
        {"role":"user","content":"Weather?"},
        {"role":"assistant","content":[{"type":"thinking","thinking":"Use the tool.","signature":"s"},
                                       {"type":"text","text":"Checking."},
                                       {"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},
        {"role":"user","content":[{"type":"text","text":"Results:"},
                                  {"type":"tool_result","tool_use_id":"toolu_1","content":"Sunny","is_error":false},
                                  {"type":"tool_result","tool_use_id":"toolu_2",
                                   "content":[{"type":"text","text":"A"},{"type":"text","text":"B"}]}]}]})");
    ASSERT_TRUE(r.ok()) << r.status().message();
    const auto & m = messages_chat_of(r).messages;
    ASSERT_EQ(m.size(), 5u);
    EXPECT_EQ(m[1].role, "assistant");
    EXPECT_EQ(m[1].content, "Checking.");
    EXPECT_EQ(m[1].reasoning_content, "Use the tool.");
    ASSERT_EQ(m[1].tool_calls.size(), 1u);
    EXPECT_EQ(m[1].tool_calls[0], (chat_tool_call{"toolu_1", "get_weather", R"({"city":"Paris"})"}));
    EXPECT_EQ(m[2].role, "user");
    EXPECT_EQ(m[2].content, "Results:");
    EXPECT_EQ(m[3].role, "tool");
    EXPECT_EQ(m[3].tool_call_id, "toolu_1");
    EXPECT_EQ(m[3].content, "Sunny");
    EXPECT_EQ(m[4].tool_call_id, "toolu_2");
    EXPECT_EQ(m[4].content, "AB");
}

TEST(AnthropicParse, MessagesWithNothingToSayAreLeftOutAsLlamaServerDoes) {
    auto r = parse_messages_body(R"({"messages":[{"role":"user","content":"Hi"},{"role":"assistant"},
                                   {"role":"assistant","content":[{"type":"redacted_thinking","data":"x"}]},
                                   {"role":"user","content":[{"type":"tool_result","tool_use_id":"t"}]}]})");
    ASSERT_TRUE(r.ok()) << r.status().message();
    const auto & m = messages_chat_of(r).messages;
    ASSERT_EQ(m.size(), 2u);
    EXPECT_EQ(m[1].role, "tool");
    EXPECT_EQ(m[1].content, "");
}

TEST(AnthropicParse, ImageBlocksBecomeMarkersAndBytes) {
    auto r = parse_messages_body(R"({"messages":[{"role":"user","content":[{"type":"text","text":"look: "},
                       {"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw=="}},
                       {"type":"text","text":" and "},
                       {"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"/9j/"}}]}]})");
    ASSERT_TRUE(r.ok()) << r.status().message();
    const auto & c = messages_chat_of(r);
    ASSERT_EQ(c.images.size(), 2u);
    EXPECT_EQ(c.images[0], std::string("\x89PNG", 4));
    EXPECT_EQ(c.images[1], std::string("\xff\xd8\xff", 3));
    EXPECT_EQ(c.messages[0].content, "look: " + openai_media_marker() + " and " + openai_media_marker());
}

// A url source is recorded for the node that prefills to fetch (only with --image-urls).
TEST(AnthropicParse, UrlImageSourcesAreRecordedInPlaceForTheNodeToFetch) {
    auto r = parse_messages_body(R"({"messages":[{"role":"user","content":[{"type":"text","text":"look: "},
                       {"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw=="}},
                       {"type":"image","source":{"type":"url","url":"https://example.com/a.png"}}]}]})");
    ASSERT_TRUE(r.ok()) << r.status().message();
    const auto & c = messages_chat_of(r);
    ASSERT_EQ(c.images.size(), 2u);
    EXPECT_EQ(c.images[1], "");
    ASSERT_EQ(c.image_urls.size(), 1u);
    EXPECT_EQ(c.image_urls[0],
              (openai_chat::image_url{1, "https://example.com/a.png", "messages[0].content[2].source.url"}));
}

TEST(AnthropicParse, ImageBlocksThatCannotBeTakenAreRefusedByName) {
    expect_messages_refused(R"({"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url",
                       "url":"file:///etc/passwd"}}]}]})",
                            "messages[0].content[0].source.url: must be an http(s) URL");
    expect_messages_refused(R"({"messages":[{"role":"user","content":[{"type":"image","source":{"type":"file",
                       "file_id":"x"}}]}]})",
                            "messages[0].content[0].source.type: must be \"base64\" or \"url\"");
    expect_messages_refused(R"({"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64",
                       "media_type":"text/plain","data":"AA=="}}]}]})",
                            "messages[0].content[0].source.media_type");
    expect_messages_refused(R"({"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64",
                       "media_type":"image/png","data":"not base64!"}}]}]})",
                            "messages[0].content[0].source.data: the image is not valid base64");
    expect_messages_refused(R"({"messages":[{"role":"assistant","content":[{"type":"image","source":{"type":"base64",
                       "media_type":"image/png","data":"AA=="}}]}]})",
                            "messages[0].content[0]: image blocks belong to user messages");
}

TEST(AnthropicParse, UnknownBlocksAreRefusedByName) {
    expect_messages_refused(R"({"messages":[{"role":"user","content":[{"type":"document"}]}]})",
                            "messages[0].content[0].type");
    expect_messages_refused(R"({"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t",
                       "content":[{"type":"image"}]}]}]})",
                            "messages[0].content[0].content[0]");
    expect_messages_refused(R"({"messages":[{"role":"user","content":[{"text":"no type"}]}]})",
                            "messages[0].content[0].type");
    expect_messages_refused(R"({"messages":[{"role":"user","content":[{"type":"text","text":5}]}]})",
                            "messages[0].content[0].text");
}

TEST(AnthropicParse, BlocksInTheWrongTurnAreRefused) {
    expect_messages_refused(
        R"({"messages":[{"role":"user","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]}]})",
        "tool_use blocks belong to assistant messages");
    expect_messages_refused(R"({"messages":[{"role":"user","content":"x"},{"role":"assistant","content":[
                       {"type":"tool_result","tool_use_id":"a"}]}]})",
                            "tool_result blocks belong to user messages");
    expect_messages_refused(R"({"messages":[{"role":"user","content":[{"type":"thinking","thinking":"t"}]}]})",
                            "thinking blocks belong to assistant messages");
    expect_messages_refused(R"({"messages":[{"role":"user","content":"x"},{"role":"assistant","content":[
                       {"type":"tool_use","id":"a","name":"f","input":[1]}]}]})",
                            "messages[1].content[0].input");
    expect_messages_refused(R"({"messages":[{"role":"user","content":"x"},{"role":"assistant","content":[
                       {"type":"tool_use","id":"a","input":{}}]}]})",
                            "messages[1].content[0].name");
}

TEST(AnthropicParse, MessagesAndRolesAreChecked) {
    expect_messages_refused(R"({"max_tokens":5})", "messages");
    expect_messages_refused(R"({"messages":[]})", "messages");
    expect_messages_refused(R"({"messages":[{"role":"system","content":"x"}]})", "messages[0].role");
    expect_messages_refused(R"({"messages":[{"role":"user"}]})", "messages[0].content");
    expect_messages_refused(R"({"messages":[{"role":"user","content":5}]})", "messages[0].content");
    expect_messages_refused(R"({"messages":[{"role":"assistant"}]})", "no message has content");
    expect_messages_refused(R"({"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},
                                   {"role":"assistant","content":"c"}]})",
                            "2 or more assistant messages");
}

TEST(AnthropicParse, ThePromptLimitsHoldAsOnChat) {
    openai_defaults d;
    d.prompt.max_messages = 1;
    auto many = parse_messages_body(R"({"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]})", d);
    ASSERT_FALSE(many.ok());
    EXPECT_EQ(many.status().code(), status_code::too_large);
    d = {};
    d.prompt.max_prompt_bytes = 8;
    auto big = parse_messages_body(R"({"system":"12345","messages":[{"role":"user","content":"6789"}]})", d);
    ASSERT_FALSE(big.ok());
    EXPECT_EQ(big.status().code(), status_code::too_large);
    EXPECT_NE(big.status().message().find("messages[0]"), std::string::npos) << big.status().message();
}

// Tools keep the client's key order in their schema (the template shows it, the grammar follows it).
TEST(AnthropicParse, ToolsBecomeFunctionsInTheClientsKeyOrder) {
    auto r = parse_messages_body(R"({"messages":[{"role":"user","content":"Hi"}],
                       "tools":[{"name":"get_weather","description":"Weather","cache_control":{"type":"ephemeral"},
                                 "input_schema":{"type":"object","properties":{"z":{"type":"string"},"a":{"type":"number"}}}},
                                {"name":"noop"}]})");
    ASSERT_TRUE(r.ok()) << r.status().message();
    const auto & tools = messages_chat_of(r).tools;
    ASSERT_TRUE(tools.is_array());
    ASSERT_EQ(tools.size(), 2u);
    EXPECT_EQ(tools[0].dump(),
              R"({"type":"function","function":{"name":"get_weather","description":"Weather",)"
              R"("parameters":{"type":"object","properties":{"z":{"type":"string"},"a":{"type":"number"}}}}})");
    EXPECT_EQ(tools[1].dump(), R"({"type":"function","function":{"name":"noop","description":"","parameters":{}}})");
    EXPECT_TRUE(std::holds_alternative<tool_choice_auto>(messages_chat_of(r).choice));
    expect_messages_refused(R"({"messages":[{"role":"user","content":"Hi"}],"tools":[{"type":"web_search_20250305",
                       "name":"web_search"}]})",
                            "tools[0].type");
    expect_messages_refused(R"({"messages":[{"role":"user","content":"Hi"}],"tools":[{"description":"x"}]})",
                            "tools[0].name");
    expect_messages_refused(R"({"messages":[{"role":"user","content":"Hi"}],"tools":[{"name":"f","input_schema":[]}]})",
                            "tools[0].input_schema");
    expect_messages_refused(R"({"messages":[{"role":"user","content":"Hi"}],"tools":{"name":"f"}})", "tools");
}

TEST(AnthropicParse, ToolChoiceMapsToTheChatsChoice) {
    const std::string head = R"({"messages":[{"role":"user","content":"Hi"}],"tools":[{"name":"f"},{"name":"g"}],)";
    auto any = parse_messages_body(head + R"("tool_choice":{"type":"any"}})");
    ASSERT_TRUE(any.ok()) << any.status().message();
    EXPECT_TRUE(std::holds_alternative<tool_choice_required>(messages_chat_of(any).choice));
    EXPECT_TRUE(messages_chat_of(any).parallel_tool_calls);
    auto named =
        parse_messages_body(head + R"("tool_choice":{"type":"tool","name":"g","disable_parallel_tool_use":true}})");
    ASSERT_TRUE(named.ok()) << named.status().message();
    EXPECT_EQ(std::get<tool_choice_named>(messages_chat_of(named).choice).name, "g");
    EXPECT_FALSE(messages_chat_of(named).parallel_tool_calls);
    auto none = parse_messages_body(head + R"("tool_choice":{"type":"none"}})");
    ASSERT_TRUE(none.ok());
    EXPECT_TRUE(std::holds_alternative<tool_choice_none>(messages_chat_of(none).choice));
    auto autos = parse_messages_body(head + R"("tool_choice":{"type":"auto"}})");
    ASSERT_TRUE(autos.ok());
    EXPECT_TRUE(std::holds_alternative<tool_choice_auto>(messages_chat_of(autos).choice));
    expect_messages_refused(head + R"("tool_choice":{"type":"tool","name":"h"}})", "tool_choice");
    expect_messages_refused(head + R"("tool_choice":{"type":"tool"}})", "tool_choice.name");
    expect_messages_refused(head + R"("tool_choice":{"type":"sometimes"}})", "tool_choice.type");
    expect_messages_refused(head + R"("tool_choice":"auto"})", "tool_choice");
    expect_messages_refused(R"({"messages":[{"role":"user","content":"Hi"}],"tool_choice":{"type":"any"}})",
                            "tool_choice");
}

TEST(AnthropicParse, ThinkingIsCheckedAndTemplateKwargsPassThrough) {
    auto r = parse_messages_body(
        R"({"messages":[{"role":"user","content":"Hi"}],"thinking":{"type":"enabled","budget_tokens":1024},
                       "chat_template_kwargs":{"enable_thinking":false}})");
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(messages_chat_of(r).template_kwargs, json({{"enable_thinking", false}}));
    EXPECT_TRUE(
        parse_messages_body(R"({"messages":[{"role":"user","content":"Hi"}],"thinking":{"type":"disabled"}})").ok());
    expect_messages_refused(R"({"messages":[{"role":"user","content":"Hi"}],"thinking":{"type":"maybe"}})",
                            "thinking.type");
    expect_messages_refused(
        R"({"messages":[{"role":"user","content":"Hi"}],"thinking":{"type":"enabled","budget_tokens":"x"}})",
        "budget_tokens");
    expect_messages_refused(R"({"messages":[{"role":"user","content":"Hi"}],"thinking":true})", "thinking");
}

TEST(AnthropicParse, FieldsThatWouldChangeTheAnswerAreRefused) {
    expect_messages_refused(R"({"messages":[{"role":"user","content":"Hi"}],"mcp_servers":[{"url":"x"}]})",
                            "mcp_servers");
    expect_messages_refused(R"({"messages":[{"role":"user","content":"Hi"}],"container":"c"})", "container");
    expect_messages_refused(R"({"messages":[{"role":"user","content":"Hi"}],"output_format":{"type":"json_schema"}})",
                            "output_format");
    expect_messages_refused(R"({"messages":[{"role":"user","content":"Hi"}],"metadata":"u"})", "metadata");
    // Empty or null: the default behaviour, accepted.
    EXPECT_TRUE(
        parse_messages_body(R"({"messages":[{"role":"user","content":"Hi"}],"mcp_servers":[],"container":null})").ok());
}

TEST(AnthropicParse, MalformedBodiesAreRefused) {
    expect_messages_refused("{", "malformed JSON");
    expect_messages_refused("[]", "JSON object");
    expect_messages_refused(R"({"messages":[{"role":"user","content":"\ud800"}]})", "body");
}

// ---- responses ----

openai_response_meta messages_meta() {
    openai_response_meta m = openai_response_meta_make(openai_endpoint::messages, "model.gguf", "fp_0");
    m.id = "msg_test";
    return m;
}

openai_result messages_result(finish_reason finish, std::string stop_word = {}) {
    openai_result r;
    r.done.finish = finish;
    r.done.stop_word = std::move(stop_word);
    r.done.usage = {10, 4, 3};
    return r;
}

TEST(AnthropicResponse, MessageIdsAreAnthropics) {
    const openai_response_meta a = openai_response_meta_make(openai_endpoint::messages, "m", "fp");
    const openai_response_meta b = openai_response_meta_make(openai_endpoint::messages, "m", "fp");
    EXPECT_EQ(a.id.rfind("msg_", 0), 0u) << a.id;
    EXPECT_EQ(a.id.size(), 28u);
    EXPECT_NE(a.id, b.id);
}

TEST(AnthropicResponse, TheMessageHasItsBlocksInOrderAndLlamaServersUsage) {
    openai_result r = messages_result(finish_reason::stop);
    r.reasoning = "Hmm.";
    r.content = "Calling.";
    r.tool_calls = {{"toolu_a", "f", R"({"x":1})"}};
    const json j = json::parse(anthropic_message_json(messages_meta(), r));
    EXPECT_EQ(j, json::parse(R"({"id":"msg_test","type":"message","role":"assistant","model":"model.gguf",
        "content":[{"type":"thinking","thinking":"Hmm.","signature":""},{"type":"text","text":"Calling."},
                   {"type":"tool_use","id":"toolu_a","name":"f","input":{"x":1}}],
        "stop_reason":"tool_use","stop_sequence":null,
        "usage":{"cache_read_input_tokens":4,"input_tokens":6,"output_tokens":3}})"));
    EXPECT_FALSE(j.contains("timings"));
}

TEST(AnthropicResponse, StopReasonsAreAnthropics) {
    EXPECT_STREQ(anthropic_stop_reason(messages_result(finish_reason::stop)), "end_turn");
    EXPECT_STREQ(anthropic_stop_reason(messages_result(finish_reason::length)), "max_tokens");
    openai_result calls = messages_result(finish_reason::stop);
    calls.tool_calls = {{"t", "f", "{}"}};
    EXPECT_STREQ(anthropic_stop_reason(calls), "tool_use");
    const openai_result word = messages_result(finish_reason::stop, "END");
    EXPECT_STREQ(anthropic_stop_reason(word), "stop_sequence");
    const json j = json::parse(anthropic_message_json(messages_meta(), word));
    EXPECT_EQ(j["stop_sequence"], "END");
    EXPECT_EQ(j["content"], json::array());  // no text: no block
}

TEST(AnthropicResponse, CountTokensIsInputTokensAlone) {
    EXPECT_EQ(anthropic_count_tokens_json(12), R"({"input_tokens":12})");
}

std::vector<std::string> event_names(const std::vector<anthropic_event> & events) {
    std::vector<std::string> out;
    for (const auto & e : events) out.push_back(e.name);
    return out;
}

// The stream: each block opened, fed and closed before the next; indices from 0 in order; a thinking block
// ends with an empty signature; message_delta has the stop and the usage split.
TEST(AnthropicStream, BlocksOpenInOrderAndCloseBeforeTheNext) {
    anthropic_stream s(messages_meta());
    std::vector<anthropic_event> all = s.start(10);
    const json start = json::parse(all[0].data);
    EXPECT_EQ(start["message"]["usage"],
              json::parse(R"({"cache_read_input_tokens":0,"input_tokens":10,"output_tokens":0})"));
    EXPECT_EQ(start["message"]["content"], json::array());
    EXPECT_EQ(start["message"]["id"], "msg_test");
    auto feed = [&](openai_delta d) {
        for (auto & e : s.push(d)) all.push_back(std::move(e));
    };
    openai_delta think;
    think.text.reasoning = "Hm";
    feed(think);
    feed(think);
    openai_delta text;
    text.text.content = "Hi";
    feed(text);
    openai_delta call;
    call.tool_calls = {{0, "toolu_x", "f", R"({"a":1})"}};
    feed(call);
    openai_result r = messages_result(finish_reason::stop);
    r.tool_calls = {{"toolu_x", "f", R"({"a":1})"}};
    for (auto & e : s.finish(r)) all.push_back(std::move(e));
    EXPECT_EQ(
        event_names(all),
        (std::vector<std::string>{"message_start", "content_block_start", "content_block_delta", "content_block_delta",
                                  "content_block_delta", "content_block_stop", "content_block_start",
                                  "content_block_delta", "content_block_stop", "content_block_start",
                                  "content_block_delta", "content_block_stop", "message_delta", "message_stop"}));
    for (const auto & e : all) EXPECT_EQ(json::parse(e.data)["type"], e.name);
    EXPECT_EQ(json::parse(all[1].data), json::parse(R"({"type":"content_block_start","index":0,
                                                        "content_block":{"type":"thinking","thinking":""}})"));
    EXPECT_EQ(json::parse(all[3].data)["delta"], json::parse(R"({"type":"thinking_delta","thinking":"Hm"})"));
    EXPECT_EQ(json::parse(all[4].data)["delta"], json::parse(R"({"type":"signature_delta","signature":""})"));
    EXPECT_EQ(json::parse(all[5].data)["index"], 0);
    EXPECT_EQ(json::parse(all[6].data)["index"], 1);
    EXPECT_EQ(json::parse(all[7].data)["delta"], json::parse(R"({"type":"text_delta","text":"Hi"})"));
    EXPECT_EQ(json::parse(all[9].data), json::parse(R"({"type":"content_block_start","index":2,
        "content_block":{"type":"tool_use","id":"toolu_x","name":"f","input":{}}})"));
    EXPECT_EQ(json::parse(all[10].data)["delta"],
              json::parse(R"({"type":"input_json_delta","partial_json":"{\"a\":1}"})"));
    EXPECT_EQ(json::parse(all[11].data)["index"], 2);
    EXPECT_EQ(json::parse(all[12].data), json::parse(R"({"type":"message_delta",
        "delta":{"stop_reason":"tool_use","stop_sequence":null},
        "usage":{"cache_read_input_tokens":4,"input_tokens":6,"output_tokens":3}})"));
    EXPECT_EQ(json::parse(all[13].data), json::parse(R"({"type":"message_stop"})"));
}

TEST(AnthropicStream, AnAnswerWithoutTextHasNoBlocks) {
    anthropic_stream s(messages_meta());
    EXPECT_TRUE(s.push(openai_delta{}).empty());
    EXPECT_EQ(event_names(s.finish(messages_result(finish_reason::length))),
              (std::vector<std::string>{"message_delta", "message_stop"}));
}

// Text after a call opens a block of its own (the next index).
TEST(AnthropicStream, TextAfterACallIsANewBlock) {
    anthropic_stream s(messages_meta());
    openai_delta call;
    call.tool_calls = {{0, "toolu_1", "f", "{}"}, {1, "toolu_2", "g", "{}"}};
    openai_delta text;
    text.text.content = "and";
    std::vector<anthropic_event> all = s.push(call);
    for (auto & e : s.push(text)) all.push_back(std::move(e));
    std::vector<int> starts;
    for (const auto & e : all)
        if (e.name == "content_block_start") starts.push_back(json::parse(e.data)["index"].get<int>());
    EXPECT_EQ(starts, (std::vector<int>{0, 1, 2}));
}

}  // namespace
}  // namespace baton
