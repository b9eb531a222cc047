// serve_structured_test.cpp — structured output, tool calls, logprobs, logit_bias and n > 1 on real nodes:
// what the output obeys (schema, grammar, tool calls), the shapes (llama-server's logprobs, OpenAI's
// tool_calls and choices), streamed == whole, and PD == single node for each of them.
#include <cmath>
#include <map>
#include <set>

#include "serve_test_util.h"

namespace baton::test {
namespace {

// A Hermes/Qwen-style template (tests/e2e/hermes_tools.jinja, shared with the Python end-to-end test):
// tools in a system turn, assistant tool calls as <tool_call> blocks, tool results as <tool_response> in a
// user turn.
std::string hermes_template_file() { return BATON_TEST_E2E_DIR "/hermes_tools.jinja"; }

const json k_person_schema = json::parse(R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 8},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "role": {"enum": ["prefill", "decode", "router"]},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 4}, "maxItems": 3},
    "home": {"type": "object", "properties": {"x": {"type": "integer", "minimum": -5, "maximum": 5}},
             "required": ["x"], "additionalProperties": false}
  },
  "required": ["name", "age", "role", "tags", "home"],
  "additionalProperties": false
})");

// person_ok checks an instance against k_person_schema by hand (the end-to-end test validates with
// python3-jsonschema too).
std::string person_problem(const json & v) {
    if (!v.is_object()) return "not an object";
    for (const char * k : {"name", "age", "role", "tags", "home"})
        if (!v.contains(k)) return std::string("missing ") + k;
    if (v.size() != 5) return "extra properties";
    if (!v["name"].is_string() || v["name"].get<std::string>().empty()) return "name";
    if (!v["age"].is_number_integer() || v["age"].get<int64_t>() < 0 || v["age"].get<int64_t>() > 120) return "age";
    const std::set<std::string> roles = {"prefill", "decode", "router"};
    if (!v["role"].is_string() || !roles.count(v["role"].get<std::string>())) return "role";
    if (!v["tags"].is_array() || v["tags"].size() > 3) return "tags";
    for (const auto & t : v["tags"])
        if (!t.is_string()) return "tag";
    const json & h = v["home"];
    if (!h.is_object() || h.size() != 1 || !h.contains("x") || !h["x"].is_number_integer() ||
        std::abs(h["x"].get<int64_t>()) > 5)
        return "home";
    return "";
}

json weather_tools() {
    return json::parse(R"([
      {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "maxLength": 12},
            "unit": {"enum": ["c", "f"]}},
          "required": ["city", "unit"], "additionalProperties": false}}},
      {"type": "function", "function": {"name": "get_time", "description": "Time in a zone",
        "parameters": {"type": "object", "properties": {"zone": {"type": "integer", "minimum": -12, "maximum": 14}},
          "required": ["zone"], "additionalProperties": false}}}
    ])");
}

json chat(const std::string & text, int max_tokens = 48) {
    return {{"messages", {{{"role", "user"}, {"content", text}}}}, {"max_tokens", max_tokens}};
}

// A prefill node and a decode node beside a single node, all with the same model and template, started
// fresh: the last digits of a logprob depend on where a sequence's cells sit in the KV cache (a matrix
// product sums over the cells in SIMD lanes), so the nodes compared must hold the same history.
struct pd_trio {
    std::unique_ptr<node_process> single, pre, dec;
    pd_trio(int slots, std::vector<std::string> extra) {
        auto with = [&](std::vector<std::string> a) {
            std::vector<std::string> args = {
                "serve", "-m", test_model_path("llama"), "-c", std::to_string(1024 * slots), "-t", "2"};
            args.insert(args.end(), a.begin(), a.end());
            args.insert(args.end(), extra.begin(), extra.end());
            return args;
        };
        const std::string np = std::to_string(slots);
        single = node_process::start(with({"-np", np}));
        pre = node_process::start(with({"-np", "1", "--role", "prefill"}));
        dec = node_process::start(with({"-np", np, "--role", "decode"}));
    }
    // pd runs body through /v1/prefill and /v1/decode.
    http_reply pd(const std::string & endpoint, json body) const {
        const http_reply blob = post_prefill(*pre, endpoint, body.dump());
        if (blob.status != 200) return blob;
        return post(*dec, "/v1/decode", blob.body, "application/octet-stream");
    }
};

// by_choice groups a stream's chunks by choice index (choices interleave in any order across nodes).
std::map<int, std::vector<json>> by_choice(const std::vector<json> & chunks) {
    std::map<int, std::vector<json>> out;
    for (const auto & c : chunks) {
        if (!c.is_object() || !c.contains("choices") || c["choices"].empty()) {
            out[-1].push_back(c);
            continue;
        }
        out[c["choices"][0]["index"].get<int>()].push_back(c);
    }
    return out;
}

// Folding a chat stream into the whole answer's choices: content, tool_calls (without ids), logprobs.
struct folded {
    std::string content;
    json tool_calls = json::array();
    json logprobs = json::array();
    std::string finish;
};
std::map<int, folded> fold_chat_stream(const std::string & body) {
    std::map<int, folded> out;
    for (const auto & p : sse_payloads(body)) {
        if (p == "[DONE]") continue;
        const json c = json::parse(p);
        if (c["choices"].empty()) continue;
        const json & ch = c["choices"][0];
        folded & f = out[ch["index"].get<int>()];
        const json & d = ch["delta"];
        if (d.contains("content") && d["content"].is_string()) f.content += d["content"].get<std::string>();
        if (d.contains("tool_calls"))
            for (const auto & tc : d["tool_calls"]) {
                const size_t i = tc["index"].get<size_t>();
                if (i >= f.tool_calls.size())
                    f.tool_calls.push_back({{"type", "function"}, {"function", {{"name", ""}, {"arguments", ""}}}});
                json & into = f.tool_calls[i]["function"];
                if (tc["function"].contains("name")) into["name"] = tc["function"]["name"];
                into["arguments"] =
                    into["arguments"].get<std::string>() + tc["function"]["arguments"].get<std::string>();
            }
        if (ch.contains("logprobs") && ch["logprobs"].is_object())
            for (const auto & lp : ch["logprobs"]["content"]) f.logprobs.push_back(lp);
        if (ch["finish_reason"].is_string()) f.finish = ch["finish_reason"].get<std::string>();
    }
    return out;
}

folded fold_whole_choice(const json & choice) {
    folded f;
    const json & m = choice["message"];
    if (m["content"].is_string()) f.content = m["content"].get<std::string>();
    if (m.contains("tool_calls"))
        for (auto tc : m["tool_calls"]) {
            tc.erase("id");
            f.tool_calls.push_back(tc);
        }
    if (choice["logprobs"].is_object()) f.logprobs = choice["logprobs"]["content"];
    f.finish = choice["finish_reason"].get<std::string>();
    return f;
}

// near: a == b, except that "logprob" numbers may differ by tol. Choices of an n > 1 request decode as one
// batch, and where each sits (its slot, KV cells, batch row) changes the last bits of a logit on ggml's CPU
// kernels; their tokens and text must still be equal (measured differences are ~1e-6).
bool near(const json & a, const json & b, double tol, const std::string & key = "") {
    if (key == "logprob" && a.is_number() && b.is_number()) return std::fabs(a.get<double>() - b.get<double>()) <= tol;
    if (a.type() != b.type() || a.size() != b.size()) return false;
    if (a.is_object()) {
        for (auto it = a.begin(); it != a.end(); ++it)
            if (!b.contains(it.key()) || !near(it.value(), b[it.key()], tol, it.key())) return false;
        return true;
    }
    if (a.is_array()) {
        for (size_t i = 0; i < a.size(); ++i)
            if (!near(a[i], b[i], tol)) return false;
        return true;
    }
    return a == b;
}

void expect_same(const folded & a, const folded & b, double tol) {
    EXPECT_EQ(a.content, b.content);
    EXPECT_EQ(a.tool_calls, b.tool_calls);
    if (tol == 0) {
        EXPECT_EQ(a.logprobs, b.logprobs);
    } else {
        EXPECT_TRUE(near(a.logprobs, b.logprobs, tol)) << a.logprobs.dump() << "\n" << b.logprobs.dump();
    }
    EXPECT_EQ(a.finish, b.finish);
}

TEST(ServeStructured, JsonSchemaOutputsAlwaysParseAndValidateOver20Seeds) {
    auto n = node_process::start(serve_args("llama", {"-np", "2"}));
    for (int seed = 1; seed <= 20; ++seed) {
        SCOPED_TRACE("seed " + std::to_string(seed));
        json body = chat("Describe a node as JSON", 160);
        body["temperature"] = 1.0;
        body["seed"] = seed;
        body["response_format"] = {
            {"type", "json_schema"},
            {"json_schema", {{"name", "person"}, {"schema", k_person_schema}, {"strict", true}}}};
        const http_reply r = post(*n, "/v1/chat/completions", body.dump());
        ASSERT_EQ(r.status, 200) << r.body;
        const json choice = r.j()["choices"][0];
        ASSERT_EQ(choice["finish_reason"], "stop") << r.body;
        const json v = json::parse(choice["message"]["content"].get<std::string>(), nullptr, false);
        ASSERT_FALSE(v.is_discarded()) << choice["message"]["content"];
        EXPECT_EQ(person_problem(v), "") << v.dump();
    }
    // json_object: any object; llama-server's json_schema field: the same grammar as response_format's.
    json obj = chat("JSON please", 120);
    obj["temperature"] = 1.0;
    obj["seed"] = 7;
    obj["response_format"] = {{"type", "json_object"}};
    const http_reply r = post(*n, "/v1/chat/completions", obj.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    if (r.j()["choices"][0]["finish_reason"] == "stop") {
        EXPECT_TRUE(json::parse(r.j()["choices"][0]["message"]["content"].get<std::string>()).is_object());
    }
    json a = chat("x", 100), b = chat("x", 100);
    a["seed"] = b["seed"] = 3;
    a["temperature"] = b["temperature"] = 1.0;
    a["json_schema"] = k_person_schema;
    b["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"schema", k_person_schema}}}};
    EXPECT_EQ(normalized(post(*n, "/v1/chat/completions", a.dump()).j()),
              normalized(post(*n, "/v1/chat/completions", b.dump()).j()));
}

// Properties come in the order the client wrote them (a model's answer can depend on it: "reasoning"
// before "answer"), although Baton parses bodies with key-sorted objects; the template shows tools in the
// client's key order too.
TEST(ServeStructured, SchemaPropertiesAndToolsKeepTheClientsKeyOrder) {
    auto n = node_process::start(serve_args("llama", {"-np", "1", "--chat-template-file", hermes_template_file()}));
    const std::string body = R"({"messages":[{"role":"user","content":"x"}],"max_tokens":60,"temperature":0,
        "response_format":{"type":"json_schema","json_schema":{"schema":{"type":"object",
          "properties":{"zeta":{"enum":[1]},"mid":{"enum":[2]},"alpha":{"enum":[3]}},
          "required":["zeta","mid","alpha"],"additionalProperties":false}}}})";
    const http_reply r = post(*n, "/v1/chat/completions", body);
    ASSERT_EQ(r.status, 200) << r.body;
    std::string text = r.j()["choices"][0]["message"]["content"];
    std::erase_if(text, [](char c) { return c == ' ' || c == '\n'; });
    EXPECT_EQ(text, R"({"zeta":1,"mid":2,"alpha":3})");
    const std::string tools = R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function",
        "function":{"name":"f","parameters":{"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"integer"}}}}}]})";
    const http_reply t = post(*n, "/apply-template", tools);
    ASSERT_EQ(t.status, 200) << t.body;
    EXPECT_NE(
        t.j()["prompt"].get<std::string>().find(
            R"({"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "integer"}}}}})"),
        std::string::npos)
        << t.body;
}

TEST(ServeStructured, GrammarFieldConstrainsCompletionsAndBadGrammarIs400) {
    auto n = node_process::start(serve_args("llama", {"-np", "1"}));
    json body = {{"prompt", "Answer:"},
                 {"max_tokens", 40},
                 {"temperature", 1.0},
                 {"seed", 5},
                 {"grammar", "root ::= (\"yes\" | \"no\") \" \" [0-9]{1,3}"}};
    for (int seed = 1; seed <= 10; ++seed) {
        body["seed"] = seed;
        const http_reply r = post(*n, "/v1/completions", body.dump());
        ASSERT_EQ(r.status, 200) << r.body;
        const std::string text = r.j()["choices"][0]["text"].get<std::string>();
        EXPECT_TRUE(text.starts_with("yes ") || text.starts_with("no ")) << text;
        EXPECT_EQ(r.j()["choices"][0]["finish_reason"], "stop") << text;
        const std::string digits = text.substr(text.find(' ') + 1);
        EXPECT_TRUE(!digits.empty() && digits.size() <= 3 &&
                    digits.find_first_not_of("0123456789") == std::string::npos)
            << text;
    }
    body["grammar"] = "root ::= undefined-rule";
    http_reply bad = post(*n, "/v1/completions", body.dump());
    EXPECT_EQ(bad.status, 400) << bad.body;
    EXPECT_NE(bad.body.find("grammar"), std::string::npos) << bad.body;
    body["grammar"] = "root ::= \"a\"";
    body["json_schema"] = {{"type", "string"}};
    bad = post(*n, "/v1/completions", body.dump());
    EXPECT_EQ(bad.status, 400) << bad.body;
    json schema = chat("x");
    schema["response_format"] = {{"type", "json_schema"},
                                 {"json_schema", {{"schema", {{"type", "string"}, {"pattern", "^a+$"}}}}}};
    bad = post(*n, "/v1/chat/completions", schema.dump());
    EXPECT_EQ(bad.status, 400) << bad.body;
    EXPECT_NE(bad.body.find("pattern"), std::string::npos) << bad.body;
    schema["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "x"}}}};
    EXPECT_EQ(post(*n, "/v1/chat/completions", schema.dump()).status, 400);
    schema["response_format"] = {{"type", "yaml"}};
    EXPECT_EQ(post(*n, "/v1/chat/completions", schema.dump()).status, 400);
}

// Regression: a grammar that is complete while logit_bias forbids every end-of-generation token leaves no
// candidate; accepting one anyway made libllama throw (or abort) on the scheduler thread. It ends the
// generation instead. ignore_eos forbids them the same way (as llama-server, which answers this case with a 500
// "Unexpected empty grammar stack"), so it ends there too.
TEST(ServeStructured, CompleteGrammarWithEndOfGenerationForbiddenEndsTheGeneration) {
    auto n = node_process::start(serve_args("llama", {"-np", "1"}));
    json body = {{"prompt", "x"},
                 {"max_tokens", 12},
                 {"temperature", 0},
                 {"grammar", "root ::= \"ab\""},
                 {"logit_bias", {{2, false}, {4, false}}}};
    for (double temp : {0.0, 1.0}) {
        body["temperature"] = temp;
        const http_reply r = post(*n, "/v1/completions", body.dump());
        ASSERT_EQ(r.status, 200) << r.body;
        EXPECT_EQ(r.j()["choices"][0]["text"], "ab");
        EXPECT_EQ(r.j()["choices"][0]["finish_reason"], "stop");
    }
    json eos = {
        {"prompt", "x"}, {"max_tokens", 6}, {"temperature", 0}, {"grammar", "root ::= \"ab\""}, {"ignore_eos", true}};
    const http_reply r = post(*n, "/v1/completions", eos.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.j()["choices"][0]["text"], "ab");
    EXPECT_EQ(r.j()["choices"][0]["finish_reason"], "stop");
    EXPECT_EQ(get(*n, "/health").status, 200);
}

TEST(ServeStructured, ToolChoiceRequiredAndNamedAlwaysYieldWellFormedCalls) {
    auto n = node_process::start(serve_args("llama", {"-np", "2", "--chat-template-file", hermes_template_file()}));
    for (int seed = 1; seed <= 12; ++seed) {
        SCOPED_TRACE("seed " + std::to_string(seed));
        json body = chat("What is the weather in Paris?", 200);
        body["temperature"] = 1.0;
        body["seed"] = seed;
        body["tools"] = weather_tools();
        body["tool_choice"] =
            seed % 3 == 0 ? json{{"type", "function"}, {"function", {{"name", "get_time"}}}} : json("required");
        body["parallel_tool_calls"] = seed % 2 == 0;
        const http_reply r = post(*n, "/v1/chat/completions", body.dump());
        ASSERT_EQ(r.status, 200) << r.body;
        const json choice = r.j()["choices"][0];
        // One call: the grammar ends the output after it. Parallel calls: the random model may start
        // another until max_tokens (that unfinished block stays content); the finished ones must be whole.
        if (seed % 2 != 0) {
            ASSERT_EQ(choice["finish_reason"], "tool_calls") << r.body;
        } else {
            ASSERT_TRUE(choice["finish_reason"] == "tool_calls" || choice["finish_reason"] == "length") << r.body;
        }
        const json & calls = choice["message"]["tool_calls"];
        ASSERT_TRUE(calls.is_array() && !calls.empty()) << r.body;
        if (seed % 2 != 0) {
            EXPECT_EQ(calls.size(), 1u) << r.body;
        }
        for (const auto & c : calls) {
            EXPECT_TRUE(c["id"].get<std::string>().starts_with("call_"));
            EXPECT_EQ(c["type"], "function");
            const std::string name = c["function"]["name"];
            const json args = json::parse(c["function"]["arguments"].get<std::string>(), nullptr, false);
            ASSERT_TRUE(args.is_object()) << c.dump();
            if (seed % 3 == 0) {
                EXPECT_EQ(name, "get_time");
            }
            if (name == "get_weather") {
                EXPECT_EQ(args.size(), 2u) << args.dump();
                EXPECT_TRUE(args["city"].is_string() && args["city"].get<std::string>().size() <= 12 * 6);
                EXPECT_TRUE(args["unit"] == "c" || args["unit"] == "f") << args.dump();
            } else {
                ASSERT_EQ(name, "get_time");
                EXPECT_EQ(args.size(), 1u);
                EXPECT_TRUE(args["zone"].is_number_integer() && args["zone"] >= -12 && args["zone"] <= 14);
            }
        }
    }
}

TEST(ServeStructured, ToolHistoryRendersAndMalformedHistoryOrToolsAre400) {
    auto n = node_process::start(serve_args("llama", {"-np", "1", "--chat-template-file", hermes_template_file()}));
    json body = chat("Weather?", 4);
    body["tools"] = weather_tools();
    body["messages"] = json::parse(R"([
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"unit\": \"c\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "21 C"}
    ])");
    const http_reply tmpl = post(*n, "/apply-template", body.dump());
    ASSERT_EQ(tmpl.status, 200) << tmpl.body;
    const std::string prompt = tmpl.j()["prompt"];
    EXPECT_NE(
        prompt.find("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}"),
        std::string::npos)
        << prompt;
    EXPECT_NE(prompt.find("<tool_response>\n21 C\n</tool_response>"), std::string::npos) << prompt;
    EXPECT_NE(prompt.find("\"get_time\""), std::string::npos) << prompt;
    EXPECT_EQ(post(*n, "/v1/chat/completions", body.dump()).status, 200);

    auto expect_400 = [&](json b, const std::string & needle) {
        const http_reply r = post(*n, "/v1/chat/completions", b.dump());
        EXPECT_EQ(r.status, 400) << r.body;
        EXPECT_NE(r.body.find(needle), std::string::npos) << r.body;
    };
    json broken = body;
    broken["messages"][1]["tool_calls"][0]["function"]["arguments"] = "{not json";
    expect_400(broken, "messages[1].tool_calls[0]");
    broken = body;
    broken["messages"][1]["tool_calls"][0]["function"].erase("name");
    expect_400(broken, "messages[1].tool_calls[0]");
    broken = body;
    broken["tools"][0]["function"]["name"] = "bad name!";
    expect_400(broken, "tools[0]");
    broken = body;
    broken["tool_choice"] = {{"type", "function"}, {"function", {{"name", "nope"}}}};
    expect_400(broken, "tool_choice");
    json completion = {{"prompt", "x"}, {"tools", weather_tools()}};
    const http_reply r = post(*n, "/v1/completions", completion.dump());
    EXPECT_EQ(r.status, 400) << r.body;
    // A node whose template does not show tools refuses them rather than dropping them.
    auto plain = node_process::start(serve_args("llama", {"-np", "1"}));
    json tools_body = chat("x");
    tools_body["tools"] = weather_tools();
    const http_reply refused = post(*plain, "/v1/chat/completions", tools_body.dump());
    EXPECT_EQ(refused.status, 400) << refused.body;
    EXPECT_NE(refused.body.find("tools"), std::string::npos) << refused.body;
}

TEST(ServeStructured, LogprobsAreTheModelsDistributionInLlamaServersShapes) {
    auto n = node_process::start(serve_args("llama", {"-np", "1"}));
    json body = chat("Tell me about the state blob", 12);
    body["temperature"] = 0;
    body["logprobs"] = true;
    body["top_logprobs"] = 5;
    const http_reply r = post(*n, "/v1/chat/completions", body.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    const json content = r.j()["choices"][0]["logprobs"]["content"];
    ASSERT_EQ(content.size(), r.j()["usage"]["completion_tokens"].get<size_t>()) << r.body;
    for (const auto & t : content) {
        const json & top = t["top_logprobs"];
        ASSERT_EQ(top.size(), 5u);
        // greedy: the chosen token is the most likely one
        EXPECT_EQ(top[0]["id"], t["id"]) << t.dump();
        EXPECT_EQ(top[0]["logprob"], t["logprob"]);
        std::set<int> ids;
        double mass = 0;
        for (size_t i = 0; i < top.size(); ++i) {
            ids.insert(top[i]["id"].get<int>());
            mass += std::exp(top[i]["logprob"].get<double>());
            if (i) {
                EXPECT_LE(top[i]["logprob"].get<double>(), top[i - 1]["logprob"].get<double>());
            }
            EXPECT_LE(top[i]["logprob"].get<double>(), 0.0);
        }
        EXPECT_EQ(ids.size(), 5u);
        EXPECT_LE(mass, 1.0 + 1e-6);
        std::string bytes;
        for (const auto & b : t["bytes"]) bytes += char(b.get<int>());
        EXPECT_EQ(bytes, t["token"].get<std::string>());
    }
    // Without logprobs: null. Completions: the integer form; /completion: n_probs.
    json off = chat("x", 2);
    EXPECT_TRUE(post(*n, "/v1/chat/completions", off.dump()).j()["choices"][0]["logprobs"].is_null());
    json comp = {{"prompt", "Hello"}, {"max_tokens", 3}, {"temperature", 0}, {"logprobs", 2}};
    const http_reply c = post(*n, "/v1/completions", comp.dump());
    ASSERT_EQ(c.status, 200) << c.body;
    EXPECT_EQ(c.j()["choices"][0]["logprobs"]["content"].size(), 3u) << c.body;
    EXPECT_EQ(c.j()["choices"][0]["logprobs"]["content"][0]["top_logprobs"].size(), 2u);
    json llama = {{"prompt", "Hello"}, {"n_predict", 3}, {"temperature", 0}, {"n_probs", 2}};
    const http_reply l = post(*n, "/completion", llama.dump());
    ASSERT_EQ(l.status, 200) << l.body;
    EXPECT_EQ(l.j()["completion_probabilities"], c.j()["choices"][0]["logprobs"]["content"]) << l.body;
    json bad = chat("x");
    bad["top_logprobs"] = 3;  // without logprobs: true
    EXPECT_EQ(post(*n, "/v1/chat/completions", bad.dump()).status, 400);
    bad["logprobs"] = true;
    bad["top_logprobs"] = 21;
    EXPECT_EQ(post(*n, "/v1/chat/completions", bad.dump()).status, 400);
}

TEST(ServeStructured, StreamedEqualsWholeForSchemaToolsAndLogprobs) {
    auto n = node_process::start(serve_args("llama", {"-np", "2", "--chat-template-file", hermes_template_file()}));
    std::vector<json> bodies;
    json schema = chat("JSON", 120);
    schema["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"schema", k_person_schema}}}};
    bodies.push_back(schema);
    json tools = chat("Weather?", 120);
    tools["tools"] = weather_tools();
    tools["tool_choice"] = "required";
    bodies.push_back(tools);
    json n3 = chat("Three ways", 16);
    n3["n"] = 3;
    bodies.push_back(n3);
    for (json body : bodies) {
        body["temperature"] = 0.9;
        body["seed"] = 11;
        body["logprobs"] = true;
        body["top_logprobs"] = 2;
        SCOPED_TRACE(body.dump());
        const http_reply whole = post(*n, "/v1/chat/completions", body.dump());
        ASSERT_EQ(whole.status, 200) << whole.body;
        body["stream"] = true;
        const http_reply streamed = post(*n, "/v1/chat/completions", body.dump());
        ASSERT_EQ(streamed.status, 200) << streamed.body;
        const auto folded_stream = fold_chat_stream(streamed.body);
        const json choices = whole.j()["choices"];
        ASSERT_EQ(folded_stream.size(), choices.size());
        // One choice: bit-equal. Several: tokens equal, logprobs to 1e-4 (see near).
        const double tol = choices.size() > 1 ? 1e-4 : 0.0;
        for (const auto & c : choices) {
            SCOPED_TRACE("choice " + c["index"].dump());
            expect_same(fold_whole_choice(c), folded_stream.at(c["index"].get<int>()), tol);
        }
    }
}

TEST(ServeStructured, NChoicesAreSeedOffsetsOfOneRequest) {
    auto n = node_process::start(serve_args("llama", {"-np", "4", "--n-max", "4"}));
    json body = {{"prompt", "Once upon a time"}, {"max_tokens", 10}, {"temperature", 1.0}, {"seed", 40}, {"n", 4}};
    const http_reply r = post(*n, "/v1/completions", body.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    const json choices = r.j()["choices"];
    ASSERT_EQ(choices.size(), 4u);
    std::set<std::string> texts;
    uint32_t generated = 0;
    for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(choices[i]["index"], i);
        json one = body;
        one["n"] = 1;
        one["seed"] = 40 + i;
        const http_reply single = post(*n, "/v1/completions", one.dump());
        EXPECT_EQ(single.j()["choices"][0]["text"], choices[i]["text"]) << "choice " << i;
        texts.insert(choices[i]["text"].get<std::string>());
        generated += single.j()["usage"]["completion_tokens"].get<uint32_t>();
    }
    EXPECT_GT(texts.size(), 1u);
    EXPECT_EQ(r.j()["usage"]["completion_tokens"].get<uint32_t>(), generated);
    body["n"] = 5;  // above --n-max
    EXPECT_EQ(post(*n, "/v1/completions", body.dump()).status, 400);
    json llama = {{"prompt", "x"}, {"n", 2}};
    EXPECT_EQ(post(*n, "/completion", llama.dump()).status, 400);
}

// The PD promise for each capability: grammar, tool calls, logit_bias, n = 4 (one blob, restored four
// times), with logprobs — equal to the single node, token for token and logprob for logprob (n = 4: token
// for token, logprobs to 1e-4; a single node also restores one in-process blob n times, see near()).
TEST(ServeStructured, PdEqualsSingleNodeForGrammarToolsBiasAndN4) {
    const std::vector<std::string> extra = {"--chat-template-file", hermes_template_file()};
    std::vector<std::pair<std::string, json>> cases;
    json schema = chat("JSON", 100);
    schema["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"schema", k_person_schema}}}};
    cases.emplace_back("chat", schema);
    json tools = chat("Weather in Oslo?", 100);
    tools["tools"] = weather_tools();
    tools["tool_choice"] = "required";
    cases.emplace_back("chat", tools);
    json auto_tools = chat("Weather in Oslo?", 24);
    auto_tools["tools"] = weather_tools();
    cases.emplace_back("chat", auto_tools);
    json bias = {{"prompt", "The node"}, {"max_tokens", 16}};
    bias["logit_bias"] = json::array();
    for (int id = 100; id < 140; ++id) bias["logit_bias"].push_back({id, id % 2 ? 5.0 : -100.0});
    bias["logit_bias"].push_back({" the node", 3.0});  // a text: every token of its tokenization
    cases.emplace_back("completions", bias);
    json n4 = chat("Four answers", 12);
    n4["n"] = 4;
    cases.emplace_back("chat", n4);
    json grammar = {{"prompt", "Count:"}, {"max_tokens", 30}, {"grammar", "root ::= [0-9]+ (\",\" [0-9]+)*"}};
    cases.emplace_back("completions", grammar);
    for (auto [endpoint, body] : cases) {
        for (bool stream : {false, true}) {
            body["temperature"] = 0.8;
            body["seed"] = 21;
            body["logprobs"] = endpoint == "chat" ? json(true) : json(3);
            if (endpoint == "chat") body["top_logprobs"] = 3;
            body["stream"] = stream;
            SCOPED_TRACE(endpoint + " " + body.dump());
            const int n = body.value("n", 1);
            const pd_trio t(n, extra);
            const std::string path = endpoint == "chat" ? "/v1/chat/completions" : "/v1/completions";
            const http_reply single = post(*t.single, path, body.dump());
            ASSERT_EQ(single.status, 200) << single.body;
            const http_reply pd = t.pd(endpoint, body);
            ASSERT_EQ(pd.status, 200) << pd.body;
            if (n == 1) {  // bit-equal, logprob for logprob
                if (!stream) {
                    EXPECT_EQ(normalized(single.j()), normalized(pd.j()));
                } else {
                    EXPECT_EQ(by_choice(normalized_stream(single.body)), by_choice(normalized_stream(pd.body)));
                }
            } else if (!stream) {  // several choices: the same tokens, logprobs to 1e-4 (see near)
                EXPECT_TRUE(near(normalized(single.j()), normalized(pd.j()), 1e-4)) << single.body << "\n" << pd.body;
            } else {
                const auto a = by_choice(normalized_stream(single.body)), b = by_choice(normalized_stream(pd.body));
                ASSERT_EQ(a.size(), b.size());
                for (const auto & [i, chunks] : a)
                    EXPECT_TRUE(near(json(chunks), json(b.at(i)), 1e-4)) << "choice " << i;
            }
            // n choices through PD: one blob from the prefill node, restored once per choice.
            EXPECT_EQ(metric_value(get(*t.dec, "/metrics").body, "baton_restores_total"), double(n));
        }
    }
}

}  // namespace
}  // namespace baton::test
