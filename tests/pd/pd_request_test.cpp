// pd_request_test.cpp — the embedded request (blob section 7) without a model or a process: every shape a
// prefill node embeds round-trips exactly, and the decoder refuses what docs/state-blob.md's field table
// does not allow, one case per rule.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "baton/pd/pd_request.h"

namespace baton {
namespace {

using json = nlohmann::json;

// A client's request as a prefill node resolves it: parsed with the node's defaults, a chat rendered.
openai_request resolved(const std::string & body, openai_endpoint e) {
    auto r = openai_parse(body, e);
    EXPECT_TRUE(r.ok()) << body << ": " << r.status().message();
    if (!r.ok()) return {};
    if (std::holds_alternative<openai_chat>(r->input)) {
        openai_chat_rendered c;
        c.tokens = {1, 17, 42};
        c.reasoning.format = reasoning_format::deepseek;
        c.reasoning.starts_open = true;
        c.tools = tool_call_format::hermes;
        r->input = c;
    }
    return r.value();
}

std::string encode(const openai_request & r) {
    auto j = pd_request_encode(r);
    EXPECT_TRUE(j.ok()) << j.status().message();
    return j.ok() ? j.value() : "";
}

json valid_json() {
    return json::parse(
        encode(resolved(R"({"prompt":"Hello","max_tokens":3,"seed":7,"stop":["\n"]})", openai_endpoint::completions)));
}

Status decode(const json & j, const pd_request_limits & lim = {}) { return pd_request_decode(j.dump(), lim).status(); }

TEST(PdRequest, EveryShapeAPrefillNodeEmbedsRoundTripsExactly) {
    const std::pair<const char *, openai_endpoint> bodies[] = {
        {R"({"prompt":"Hello","max_tokens":3,"temperature":0,"seed":7,"stop":["\n"]})", openai_endpoint::completions},
        {R"({"prompt":[1,2,3],"n":2,"logprobs":2,"top_k":3,"logit_bias":{"5":-100,"6":false},"top_p":0.3})",
         openai_endpoint::completions},
        {R"({"prompt":"a","logit_bias":[["hi",1.5],["yo",false]],"presence_penalty":-0.0,"min_p":0.125})",
         openai_endpoint::completions},
        {R"({"messages":[{"role":"user","content":"Hi"}],"stream":true,"stream_options":{"include_usage":true},
             "grammar":"root ::= \"a\"","model":"x"})",
         openai_endpoint::chat},
        {R"({"prompt":"x","n_predict":2,"return_tokens":true,"ignore_eos":true,"n_probs":3})",
         openai_endpoint::completion},
    };
    for (const auto & [body, endpoint] : bodies) {
        const openai_request r = resolved(body, endpoint);
        const std::string text = encode(r);
        auto back = pd_request_decode(text, pd_request_limits{});
        ASSERT_TRUE(back.ok()) << text << ": " << back.status().message();
        EXPECT_TRUE(back.value() == r) << body << "\n -> " << text;
        EXPECT_EQ(encode(back.value()), text) << "not a fixed point: " << body;
        EXPECT_EQ(json::parse(text).at("version"), 1);  // nothing of version 2's: what older nodes read
    }
}

// Version 2 carries a rendered chat's prefill (a trailing assistant message the answer continues); it is
// written only for such a request, and each version holds exactly its own fields.
TEST(PdRequest, APrefillIsVersionTwoAndOnlyThere) {
    openai_request r =
        resolved(R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":3})", openai_endpoint::chat);
    std::get<openai_chat_rendered>(r.input).prefill = "Sure, ";
    const std::string text = encode(r);
    const json j = json::parse(text);
    EXPECT_EQ(j.at("version"), 2);
    EXPECT_EQ(j.at("input").at("prefill"), "Sure, ");
    auto back = pd_request_decode(text, pd_request_limits{});
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_TRUE(back.value() == r);
    EXPECT_EQ(encode(back.value()), text);
    json v1 = j;  // version 1 has no prefill field
    v1["version"] = 1;
    auto refused = pd_request_decode(v1.dump(), pd_request_limits{});
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.status().message().find("input.prefill"), std::string::npos) << refused.status().message();
    json empty = j;  // a version 2 prefill is never empty (that request is written as version 1)
    empty["input"]["prefill"] = "";
    EXPECT_EQ(pd_request_decode(empty.dump(), pd_request_limits{}).status().code(), status_code::corrupt);
    json missing = j;
    missing["input"].erase("prefill");
    EXPECT_EQ(pd_request_decode(missing.dump(), pd_request_limits{}).status().code(), status_code::corrupt);
}

// Version 3 carries the messages endpoint (Anthropic's Messages API), always with a prefill field ("" when
// none); only that endpoint is written as version 3, and an older version naming it is corrupt.
TEST(PdRequest, TheMessagesEndpointIsVersionThreeAndOnlyThere) {
    for (const char * prefill : {"", "Sure, "}) {
        openai_request r = resolved(R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":3,
                                        "stop_sequences":["x"],"stream":true})",
                                    openai_endpoint::messages);
        std::get<openai_chat_rendered>(r.input).prefill = prefill;
        const std::string text = encode(r);
        const json j = json::parse(text);
        EXPECT_EQ(j.at("version"), 3);
        EXPECT_EQ(j.at("endpoint"), "messages");
        EXPECT_EQ(j.at("input").at("prefill"), prefill);
        auto back = pd_request_decode(text, pd_request_limits{});
        ASSERT_TRUE(back.ok()) << back.status().message();
        EXPECT_TRUE(back.value() == r);
        EXPECT_EQ(encode(back.value()), text);
        json v2 = j;
        v2["version"] = 2;
        auto refused = pd_request_decode(v2.dump(), pd_request_limits{});
        ASSERT_FALSE(refused.ok());
        EXPECT_EQ(refused.status().code(), status_code::corrupt);
    }
    json text = valid_json();  // a messages request's input is a rendered chat, never a text
    text["version"] = 3;
    text["endpoint"] = "messages";
    EXPECT_EQ(decode(text).code(), status_code::corrupt);
}

// Version 4 carries return_progress (a stream's prompt-progress chunks, reported by the decode node): written
// only for a request that asks for them, always true there; older versions carry no such field.
TEST(PdRequest, ReturnProgressIsVersionFourAndOnlyThere) {
    for (const auto & [body, endpoint] : std::vector<std::pair<const char *, openai_endpoint>>{
             {R"({"prompt":"x","n_predict":2,"stream":true,"return_progress":true})", openai_endpoint::completion},
             {R"({"messages":[{"role":"user","content":"hi"}],"stream":true,"return_progress":true})",
              openai_endpoint::chat}}) {
        const openai_request r = resolved(body, endpoint);
        ASSERT_TRUE(r.return_progress);
        const std::string text = encode(r);
        const json j = json::parse(text);
        EXPECT_EQ(j.at("version"), 4);
        EXPECT_EQ(j.at("return_progress"), true);
        auto back = pd_request_decode(text, pd_request_limits{});
        ASSERT_TRUE(back.ok()) << back.status().message();
        EXPECT_TRUE(back.value() == r);
        EXPECT_EQ(encode(back.value()), text);
        json v3 = j;  // version 3 has no such field
        v3["version"] = 3;
        EXPECT_EQ(decode(v3).code(), status_code::corrupt);
        json off = j;  // a version 4 request always asks for progress (one that does not is written as older)
        off["return_progress"] = false;
        EXPECT_EQ(decode(off).code(), status_code::corrupt);
        json missing = j;
        missing.erase("return_progress");
        EXPECT_EQ(decode(missing).code(), status_code::corrupt);
        json typed = j;
        typed["return_progress"] = 1;
        EXPECT_EQ(decode(typed).code(), status_code::corrupt);
    }
    EXPECT_EQ(json::parse(encode(resolved(R"({"prompt":"x","return_progress":false})", openai_endpoint::completion)))
                  .at("version"),
              1);
}

TEST(PdRequest, FloatsAndNeverSampledBiasesSurviveBitForBit) {
    openai_request r = resolved(R"({"prompt":"a"})", openai_endpoint::completions);
    r.sampling.temperature = 0.1f;  // not a double exactly
    r.sampling.frequency_penalty = -0.0f;
    r.sampling.logit_bias = {{3, -INFINITY}, {4, 0.3f}};
    r.logit_bias_text = {{"x", -INFINITY}};
    auto back = pd_request_decode(encode(r), pd_request_limits{});
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(back->sampling.temperature, 0.1f);
    EXPECT_TRUE(std::signbit(back->sampling.frequency_penalty));
    EXPECT_EQ(back->sampling.logit_bias, r.sampling.logit_bias);
    EXPECT_EQ(back->logit_bias_text, r.logit_bias_text);
}

TEST(PdRequest, AnUnrenderedChatIsNotEmbedded) {
    auto r = openai_parse(R"({"messages":[{"role":"user","content":"Hi"}]})", openai_endpoint::chat);
    ASSERT_TRUE(r.ok());
    auto j = pd_request_encode(r.value());
    ASSERT_FALSE(j.ok());
    EXPECT_EQ(j.status().code(), status_code::invalid_argument);
}

TEST(PdRequest, EveryFieldOfTheTableIsRequired) {
    const json good = valid_json();
    ASSERT_TRUE(decode(good).ok()) << decode(good).message();
    for (const auto & [key, value] : good.items()) {
        if (key == "version") continue;  // its own rule below
        json j = good;
        j.erase(key);
        Status st = decode(j);
        EXPECT_EQ(st.code(), status_code::corrupt) << key;
        EXPECT_NE(st.message().find(key), std::string::npos) << st.message();
    }
    for (const auto & [key, value] : good.at("sampling").items()) {
        json j = good;
        j["sampling"].erase(key);
        Status st = decode(j);
        EXPECT_EQ(st.code(), status_code::corrupt) << key;
        EXPECT_NE(st.message().find("sampling." + key), std::string::npos) << st.message();
    }
}

TEST(PdRequest, AFieldOutsideTheTableIsRefusedByName) {
    json j = valid_json();
    j["temperature"] = 0.5;  // the public dialect's spelling is not this format's
    Status st = decode(j);
    EXPECT_EQ(st.code(), status_code::corrupt);
    EXPECT_NE(st.message().find("temperature"), std::string::npos) << st.message();
    j = valid_json();
    j["sampling"]["mirostat"] = 2;
    EXPECT_NE(decode(j).message().find("sampling.mirostat"), std::string::npos);
}

// Shapes a node turns into tokens before a blob embeds them (a mixed prompt, /infill) are refused here.
TEST(PdRequest, UnbuiltPromptsAreNeverEmbedded) {
    for (const auto & [body, ep] : std::vector<std::pair<std::string, openai_endpoint>>{
             {R"({"prompt":["Hi", 5]})", openai_endpoint::completion},
             {R"({"input_prefix":"a","input_suffix":"b"})", openai_endpoint::infill}}) {
        auto r = openai_parse(body, ep);
        ASSERT_TRUE(r.ok()) << r.status().message();
        EXPECT_EQ(pd_request_encode(r.value()).status().code(), status_code::invalid_argument) << body;
    }
}

TEST(PdRequest, AnotherOrNoVersionIsIncompatible) {
    json j = valid_json();
    j["version"] = pd_request_version + 1;
    EXPECT_EQ(decode(j).code(), status_code::incompatible);
    j["version"] = pd_request_version_min - 1;
    EXPECT_EQ(decode(j).code(), status_code::incompatible);
    j.erase("version");
    EXPECT_EQ(decode(j).code(), status_code::incompatible);
    // The format before versioning: the public dialect's canonical JSON with "endpoint".
    EXPECT_EQ(pd_request_decode(R"({"endpoint":"completions","prompt":"a"})", {}).status().code(),
              status_code::incompatible);
}

TEST(PdRequest, WrongTypesAndShapesAreCorrupt) {
    const auto expect = [](json j, const std::string & field) {
        Status st = decode(j);
        EXPECT_EQ(st.code(), status_code::corrupt) << j.dump();
        EXPECT_NE(st.message().find(field), std::string::npos) << st.message();
    };
    json j = valid_json();
    j["n"] = "1";
    expect(j, "n");
    j = valid_json();
    j["endpoint"] = "embeddings";
    expect(j, "endpoint");
    j = valid_json();
    j["input"] = {{"kind", "chat_rendered"}, {"tokens", {1}}};  // not an input of completions
    expect(j, "input.kind");
    j = valid_json();
    j["input"] = {{"kind", "tokens"}, {"tokens", json::array()}};
    expect(j, "input.tokens");
    j = valid_json();
    j["input"] = {{"kind", "tokens"}, {"tokens", {1, -2}}};
    expect(j, "input.tokens");
    j = valid_json();
    j["stop"] = {""};
    expect(j, "stop");
    j = valid_json();
    j["sampling"]["logit_bias"] = {{1, true}};
    expect(j, "sampling.logit_bias");
    j = valid_json();
    j["max_tokens"] = -2;
    expect(j, "max_tokens");
    j = valid_json();
    j["sampling"]["temperature"] = "hot";
    expect(j, "sampling.temperature");
    EXPECT_EQ(pd_request_decode("{", {}).status().code(), status_code::corrupt);
    EXPECT_EQ(pd_request_decode("[1]", {}).status().code(), status_code::corrupt);
}

TEST(PdRequest, ARenderedChatCarriesItsReasoningSplitAndToolFormat) {
    const openai_request r = resolved(R"({"messages":[{"role":"user","content":"Hi"}]})", openai_endpoint::chat);
    json j = json::parse(encode(r));
    EXPECT_EQ(j["input"]["kind"], "chat_rendered");
    EXPECT_EQ(j["input"]["reasoning"]["format"], "deepseek");
    EXPECT_EQ(j["input"]["tool_format"], "hermes");
    json bad = j;
    bad["input"]["reasoning"]["format"] = "auto";  // a request's word; an embedded request names the result
    EXPECT_EQ(decode(bad).code(), status_code::corrupt);
    bad = j;
    bad["input"]["reasoning"]["open"] = "<th ink>";
    EXPECT_EQ(decode(bad).code(), status_code::corrupt);
    bad = j;
    bad["input"]["tool_format"] = "xml";
    EXPECT_EQ(decode(bad).code(), status_code::corrupt);
    bad = j;
    bad["input"] = {{"kind", "text"}, {"text", "Hi"}};  // a chat is embedded rendered, never as text
    EXPECT_EQ(decode(bad).code(), status_code::corrupt);
}

TEST(PdRequest, ThisNodesLimitsMakeABlobIncompatibleNotCorrupt) {
    pd_request_limits small;
    small.prompt.max_prompt_bytes = 3;
    EXPECT_EQ(decode(valid_json(), small).code(), status_code::incompatible);  // "Hello": 5 bytes
    json j = valid_json();
    j["n"] = 3;
    pd_request_limits two;
    two.n_max = 2;
    EXPECT_EQ(decode(j, two).code(), status_code::incompatible);  // --n-max
    j = valid_json();
    j["sampling"]["grammar"] = {
        {"gbnf", "root ::= ((((\"a\"))))"}, {"lazy", false}, {"trigger_patterns", json::array()}};
    pd_request_limits shallow;
    shallow.grammar.depth_max = 2;
    EXPECT_EQ(decode(j, shallow).code(), status_code::incompatible);
    EXPECT_TRUE(decode(j).ok()) << decode(j).message();
    j["sampling"]["temperature"] = 1000;  // outside the engine's range (sampling_check)
    EXPECT_EQ(decode(j).code(), status_code::incompatible);
}

TEST(PdRequest, TheDecodedGrammarIsHeldToThisNodesBounds) {
    pd_request_limits lim;
    lim.grammar.depth_max = 7;
    auto r = pd_request_decode(valid_json().dump(), lim);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->sampling.grammar_bounds, lim.grammar);
}

}  // namespace
}  // namespace baton
