// tool_calls_test.cpp — tool calls (tool_calls.h): format detection, each format's parse with hand-written
// expectations (calls, content around them, malformed and unterminated blocks falling back to content),
// the streaming invariant on every 2- and 3-piece split and on random outputs, tool definition / choice /
// history validation, and the grammars: libllama accepts each, a valid call is accepted byte by byte while
// an unknown function or arguments against the schema are not, and random walks of the required grammars
// always parse into calls of declared tools.
#include <gtest/gtest.h>

#include <llama.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "baton/model.h"
#include "baton/openai/tool_calls.h"
#include "support/test_support.h"

namespace baton::test {
namespace {

using json = nlohmann::json;
using F = tool_call_format;

tool_call call(std::string name, std::string args, std::string id = "") {
    return {std::move(id), std::move(name), std::move(args)};
}

json weather_tools() {
    return json::parse(R"([
      {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                          "unit": {"type": "string", "enum": ["c", "f"]}},
                       "required": ["city"]}}},
      {"type": "function", "function": {"name": "add", "strict": true,
        "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                       "required": ["a", "b"], "additionalProperties": false}}},
      {"type": "function", "function": {"name": "ping.v2"}}
    ])");
}

// A grammar sampler driven byte by byte over the test model's vocabulary (SentencePiece with byte fallback:
// one "<0xHH>" token per byte).
class grammar_driver {
  public:
    grammar_driver(const llama_vocab * vocab, const tool_grammar & g) : vocab_(vocab) {
        if (!vocab) return;
        std::vector<const char *> pats;
        for (const auto & p : g.trigger_patterns) pats.push_back(p.c_str());
        smpl_ = g.lazy ? llama_sampler_init_grammar_lazy_patterns(vocab, g.gbnf.c_str(), "root", pats.data(),
                                                                  pats.size(), nullptr, 0)
                       : llama_sampler_init_grammar(vocab, g.gbnf.c_str(), "root");
        const int n = llama_vocab_n_tokens(vocab);
        for (int t = 0; t < n; ++t) {
            unsigned b = 0;
            if (std::sscanf(llama_vocab_get_text(vocab, t), "<0x%02X>", &b) == 1) byte_token_[b] = t;
        }
        eos_ = llama_vocab_eos(vocab);
    }
    ~grammar_driver() {
        if (smpl_) llama_sampler_free(smpl_);
    }
    grammar_driver(const grammar_driver &) = delete;
    grammar_driver & operator=(const grammar_driver &) = delete;

    bool valid() const { return smpl_ != nullptr && byte_token_.size() == 256; }

    // allowed: the logits after the grammar, for every token.
    std::vector<float> allowed() {
        const int n = llama_vocab_n_tokens(vocab_);
        std::vector<llama_token_data> cand(static_cast<size_t>(n));
        for (int t = 0; t < n; ++t) cand[static_cast<size_t>(t)] = {t, 0.0f, 0.0f};
        llama_token_data_array arr{cand.data(), cand.size(), -1, false};
        llama_sampler_apply(smpl_, &arr);
        std::vector<float> logit(static_cast<size_t>(n));
        for (size_t i = 0; i < arr.size; ++i) logit[static_cast<size_t>(arr.data[i].id)] = arr.data[i].logit;
        return logit;
    }
    bool byte_allowed(const std::vector<float> & logit, unsigned char b) const {
        return logit[static_cast<size_t>(byte_token_.at(b))] != -INFINITY;
    }
    bool eos_allowed() { return allowed()[static_cast<size_t>(eos_)] != -INFINITY; }
    void accept(unsigned char b) { llama_sampler_accept(smpl_, byte_token_.at(b)); }

    // feed: every byte of s is allowed in turn (and accepted); false at the first that is not.
    bool feed(std::string_view s) {
        for (const char c : s) {
            const auto b = static_cast<unsigned char>(c);
            if (!byte_allowed(allowed(), b)) return false;
            accept(b);
        }
        return true;
    }

  private:
    const llama_vocab * vocab_;
    llama_sampler * smpl_ = nullptr;
    std::map<unsigned, llama_token> byte_token_;
    llama_token eos_ = -1;
};

// The suite's fixture: the grammar tests' vocabulary.
class ToolCalls : public ::testing::Test {
  protected:
    static void TearDownTestSuite() {
        delete model_;
        model_ = nullptr;
    }
    // vocab: the test model's vocabulary, loaded on first use (only the grammar tests need it).
    static const llama_vocab * vocab() {
        if (!model_) {
            llama_backend_once();
            llama_quiet_logs();
            model_load_params p;
            p.vocab_only = true;
            auto m = loaded_model::load(test_model_path("llama"), p);
            if (!m.ok()) {
                ADD_FAILURE() << m.status().to_string();
                return nullptr;
            }
            model_ = std::move(m.value()).release();
        }
        return model_->vocab();
    }
    static tool_grammar grammar(F f, const tool_choice & c, bool parallel, const json & tools = weather_tools()) {
        auto g = tool_calls_grammar(f, tools, c, parallel);
        EXPECT_TRUE(g.ok()) << g.status().to_string();
        return g.ok() ? g.value() : tool_grammar{};
    }
    // accepts: the grammar (fed prefix_free first, for lazy ones) accepts s and then allows end of generation.
    static bool accepts(const tool_grammar & g, std::string_view s) {
        grammar_driver d(vocab(), g);
        EXPECT_TRUE(d.valid());
        return d.valid() && d.feed(s) && d.eos_allowed();
    }

    static loaded_model * model_;
};
loaded_model * ToolCalls::model_ = nullptr;

// ---- detection ----

TEST_F(ToolCalls, FormatNames) {
    EXPECT_STREQ(tool_call_format_name(F::generic), "generic");
    EXPECT_STREQ(tool_call_format_name(F::hermes), "hermes");
    EXPECT_STREQ(tool_call_format_name(F::llama3), "llama3");
    EXPECT_STREQ(tool_call_format_name(F::mistral), "mistral");
}

TEST_F(ToolCalls, DetectFromTemplateSources) {
    // Qwen 2.5 / Hermes: the tools preamble shows the call syntax.
    EXPECT_EQ(tool_call_format_detect(
                  "{%- if tools %}{{- '<|im_start|>system\\n' }}...For each function call, return a json object "
                  "with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n"
                  "{\"name\": <function-name>, \"arguments\": <args-json-object>}\\n</tool_call><|im_end|>"),
              F::hermes);
    // Llama 3.1: the ipython role; Llama 3.2: the python tag.
    EXPECT_EQ(tool_call_format_detect("{{- '<|start_header_id|>ipython<|end_header_id|>\\n\\n' }}"), F::llama3);
    EXPECT_EQ(tool_call_format_detect("{{- '<|python_tag|>' + tool_call.name + '.call(' }}"), F::llama3);
    // ipython alone (no Llama 3 headers) is not enough.
    EXPECT_EQ(tool_call_format_detect("ipython"), F::generic);
    // Mistral Nemo.
    EXPECT_EQ(tool_call_format_detect("{%- if message.tool_calls %}{{- '[TOOL_CALLS][' }}"), F::mistral);
    // Plain ChatML, Gemma: generic.
    EXPECT_EQ(tool_call_format_detect("{% for m in messages %}<|im_start|>{{ m.role }}{% endfor %}"), F::generic);
    EXPECT_EQ(tool_call_format_detect(""), F::generic);
}

// ---- hermes ----

TEST_F(ToolCalls, HermesOneCall) {
    const auto r = tool_calls_parse(
        F::hermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>");
    EXPECT_EQ(r.content, "");
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0], call("get_weather", "{\"city\":\"Paris\"}"));
}

TEST_F(ToolCalls, HermesContentAroundCallsKeptVerbatim) {
    const auto r =
        tool_calls_parse(F::hermes, "Let me check.\n<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call>\nDone.  ");
    EXPECT_EQ(r.content, "Let me check.\n\nDone.  ");
    EXPECT_EQ(r.calls, std::vector<tool_call>{call("a", "{}")});
}

TEST_F(ToolCalls, HermesWhitespaceBetweenCallsDropped) {
    const auto r =
        tool_calls_parse(F::hermes, "\n <tool_call>\n{\"name\":\"a\",\"arguments\":{\"x\":1}}\n</tool_call>\n\n"
                                    "<tool_call> {\"name\":\"b\",\"arguments\":{\"y\":[1, 2]}} </tool_call>\n");
    EXPECT_EQ(r.content, "");
    EXPECT_EQ(r.calls, (std::vector<tool_call>{call("a", "{\"x\":1}"), call("b", "{\"y\":[1,2]}")}));
}

TEST_F(ToolCalls, HermesArgumentsCompactInModelOrder) {
    const auto r = tool_calls_parse(
        F::hermes, "<tool_call>{\"name\":\"f\",\"arguments\":{ \"z\" : 1 ,\n \"a\" : { \"k\" : null } }}</tool_call>");
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].arguments, "{\"z\":1,\"a\":{\"k\":null}}");
}

TEST_F(ToolCalls, HermesUnicodeInArguments) {
    const std::string out =
        "<tool_call>{\"name\":\"say\",\"arguments\":{\"text\":\"h\xc3\xa9llo \xe2\x9c\x93 \\u00e9\"}}</tool_call>";
    const auto r = tool_calls_parse(F::hermes, out);
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].arguments, "{\"text\":\"h\xc3\xa9llo \xe2\x9c\x93 \xc3\xa9\"}");
}

TEST_F(ToolCalls, HermesCloseTagInsideArgumentStringDoesNotEndBlock) {
    const auto r = tool_calls_parse(
        F::hermes, "<tool_call>{\"name\":\"echo\",\"arguments\":{\"s\":\"</tool_call>\"}}</tool_call>");
    EXPECT_EQ(r.content, "");
    EXPECT_EQ(r.calls, std::vector<tool_call>{call("echo", "{\"s\":\"</tool_call>\"}")});
}

TEST_F(ToolCalls, HermesMalformedBlocksStayContent) {
    const std::vector<std::string> bad = {
        "<tool_call>{\"name\":\"a\",\"arguments\":{}</tool_call>",       // JSON not closed before the tag
        "<tool_call>{\"name\":\"a\" \"arguments\":{}}</tool_call>",      // malformed JSON
        "<tool_call>{\"arguments\":{}}</tool_call>",                     // no name
        "<tool_call>{\"name\":\"\",\"arguments\":{}}</tool_call>",       // empty name
        "<tool_call>{\"name\":3,\"arguments\":{}}</tool_call>",          // name not a string
        "<tool_call>{\"name\":\"a\",\"arguments\":\"{}\"}</tool_call>",  // arguments a string
        "<tool_call>{\"name\":\"a\"}</tool_call>",                       // no arguments
        "<tool_call>[{\"name\":\"a\",\"arguments\":{}}]</tool_call>",    // not an object
        "<tool_call>{\"name\":\"a\",\"arguments\":{}} trailing</tool_call>",
        "<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_cal>",
        "<tool_call>plain words</tool_call>",
        "text <tool_call> more text",
    };
    for (const auto & s : bad) {
        const auto r = tool_calls_parse(F::hermes, s);
        EXPECT_EQ(r.content, s) << s;
        EXPECT_TRUE(r.calls.empty()) << s;
    }
}

TEST_F(ToolCalls, HermesMalformedBlockThenValidBlock) {
    const std::string bad = "<tool_call>{\"name\":\"a\"}</tool_call>";
    const auto r = tool_calls_parse(F::hermes, bad + "\n<tool_call>{\"name\":\"b\",\"arguments\":{}}</tool_call>");
    EXPECT_EQ(r.content, bad + "\n");  // the stretch before the call is not only whitespace: verbatim
    EXPECT_EQ(r.calls, std::vector<tool_call>{call("b", "{}")});
    // A marker that breaks off and starts again.
    const auto r2 = tool_calls_parse(F::hermes, "<tool_call><tool_call>{\"name\":\"b\",\"arguments\":{}}</tool_call>");
    EXPECT_EQ(r2.content, "<tool_call>");
    EXPECT_EQ(r2.calls.size(), 1u);
}

TEST_F(ToolCalls, HermesUnterminatedBlockStaysContent) {
    const std::string s = "Sure. <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par";
    const auto r = tool_calls_parse(F::hermes, s);
    EXPECT_EQ(r.content, s);
    EXPECT_TRUE(r.calls.empty());
    // Complete JSON but no closing tag (length limit right after it).
    const std::string s2 = "<tool_call>{\"name\":\"a\",\"arguments\":{}}\n</tool_";
    EXPECT_EQ(tool_calls_parse(F::hermes, s2).content, s2);
    // After a valid call, the unterminated block is still content.
    const auto r3 =
        tool_calls_parse(F::hermes, "<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call>\n<tool_call>{\"na");
    EXPECT_EQ(r3.content, "\n<tool_call>{\"na");
    EXPECT_EQ(r3.calls.size(), 1u);
}

TEST_F(ToolCalls, HermesTooDeepIsNotACall) {
    std::string deep = "<tool_call>{\"name\":\"a\",\"arguments\":{\"x\":";
    for (size_t i = 0; i < tool_call_depth_max; ++i) deep += "[";
    for (size_t i = 0; i < tool_call_depth_max; ++i) deep += "]";
    deep += "}}</tool_call>";
    const auto r = tool_calls_parse(F::hermes, deep);
    EXPECT_TRUE(r.calls.empty());
    EXPECT_EQ(r.content, deep);
}

TEST_F(ToolCalls, NoCallMeansContentVerbatim) {
    for (const F f : {F::generic, F::hermes, F::llama3, F::mistral}) {
        for (const std::string s : {"", "  ", "Hello!\n", "  {not json", "<tool", "[TOOL", "{\"a\":1} x"}) {
            const auto r = tool_calls_parse(f, s);
            EXPECT_EQ(r.content, s) << tool_call_format_name(f) << ": " << s;
            EXPECT_TRUE(r.calls.empty());
        }
    }
}

// ---- llama3 ----

TEST_F(ToolCalls, Llama3Calls) {
    auto r = tool_calls_parse(F::llama3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}");
    EXPECT_EQ(r.content, "");
    EXPECT_EQ(r.calls, std::vector<tool_call>{call("get_weather", "{\"city\":\"Paris\"}")});
    r = tool_calls_parse(F::llama3, "\n<|python_tag|>{\"name\":\"a\",\"arguments\":{\"k\":true}}\n");
    EXPECT_EQ(r.calls, std::vector<tool_call>{call("a", "{\"k\":true}")});
    r = tool_calls_parse(F::llama3, "{\"name\":\"a\",\"parameters\":{}}; {\"name\":\"b\",\"parameters\":{\"n\":1}}");
    EXPECT_EQ(r.calls, (std::vector<tool_call>{call("a", "{}"), call("b", "{\"n\":1}")}));
    EXPECT_EQ(r.content, "");
}

TEST_F(ToolCalls, Llama3AnythingElseIsContent) {
    for (const std::string s : {
             "The weather is nice.",
             "{\"name\":\"a\",\"parameters\":{}} and then some text",
             "{\"name\":\"a\",\"parameters\":{}};",                   // dangling separator
             "{\"name\":\"a\",\"parameters\":{}}; {\"name\":\"b\"}",  // second not a call
             "<|python_tag|>brave_search.call(query=\"x\")",          // built-in tool syntax
             "<|python_tag|><|python_tag|>{\"name\":\"a\",\"parameters\":{}}",
             "{\"name\":\"a\",\"parameters\":[]}",
             "<|python_ta",
         }) {
        const auto r = tool_calls_parse(F::llama3, s);
        EXPECT_EQ(r.content, s) << s;
        EXPECT_TRUE(r.calls.empty()) << s;
    }
}

// ---- mistral ----

TEST_F(ToolCalls, MistralCalls) {
    const auto r = tool_calls_parse(F::mistral, "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {\"x\": 1}, \"id\": "
                                                "\"abc123DEF\"}, {\"name\": \"b\", \"arguments\": {}}]");
    EXPECT_EQ(r.content, "");
    EXPECT_EQ(r.calls, (std::vector<tool_call>{call("a", "{\"x\":1}", "abc123DEF"), call("b", "{}")}));
    const auto r2 = tool_calls_parse(F::mistral, "I'll look.[TOOL_CALLS] [{\"name\":\"a\",\"arguments\":{}}]");
    EXPECT_EQ(r2.content, "I'll look.");
    EXPECT_EQ(r2.calls.size(), 1u);
}

TEST_F(ToolCalls, MistralMalformedIsContent) {
    for (const std::string s :
         {"[TOOL_CALLS][]", "[TOOL_CALLS]{\"name\":\"a\",\"arguments\":{}}",
          "[TOOL_CALLS][{\"name\":\"a\",\"arguments\":{},\"id\":7}]",
          "[TOOL_CALLS][{\"name\":\"a\",\"arguments\":{}}, 3]", "[TOOL_CALLS][{\"name\":\"a\","}) {
        const auto r = tool_calls_parse(F::mistral, s);
        EXPECT_EQ(r.content, s) << s;
        EXPECT_TRUE(r.calls.empty()) << s;
    }
}

// ---- generic ----

TEST_F(ToolCalls, GenericForms) {
    auto r = tool_calls_parse(F::generic, " {\"tool_calls\": [{\"name\": \"a\", \"arguments\": {\"q\": \"x\"}}, "
                                          "{\"name\": \"b\", \"arguments\": {}}]}\n");
    EXPECT_EQ(r.content, "");
    EXPECT_EQ(r.calls, (std::vector<tool_call>{call("a", "{\"q\":\"x\"}"), call("b", "{}")}));
    r = tool_calls_parse(F::generic, "{\"tool_call\": {\"name\": \"a\", \"arguments\": {}}}");
    EXPECT_EQ(r.calls, std::vector<tool_call>{call("a", "{}")});
    r = tool_calls_parse(F::generic, "{\"response\": \"It is sunny \\u2600.\"}");
    EXPECT_EQ(r.content, "It is sunny \xe2\x98\x80.");
    EXPECT_TRUE(r.calls.empty());
    for (const std::string s : {"{\"tool_calls\": []}", "{\"tool_call\": {\"name\": \"a\"}}", "{\"response\": 3}",
                                "{\"answer\": \"x\"}", "{\"response\": \"x\"} extra", "Just text."}) {
        r = tool_calls_parse(F::generic, s);
        EXPECT_EQ(r.content, s) << s;
        EXPECT_TRUE(r.calls.empty()) << s;
    }
}

// ---- streaming ----

struct streamed {
    std::string content;
    std::vector<tool_call> calls;
    std::string error;  // a malformed delta sequence
};

streamed run_stream(F f, const std::vector<std::string_view> & pieces) {
    tool_call_stream st(f);
    streamed s;
    const auto take = [&](tool_stream_piece p) {
        s.content += p.content;
        for (auto & d : p.calls) {
            if (d.index == s.calls.size()) {
                if (d.name.empty()) s.error = "first delta without a name";
                s.calls.push_back({d.id, d.name, d.arguments});
            } else if (d.index + 1 == s.calls.size()) {
                if (!d.name.empty() || !d.id.empty()) s.error = "later delta with a name or id";
                s.calls.back().arguments += d.arguments;
            } else {
                s.error = "delta index out of order";
            }
        }
    };
    for (const auto p : pieces) take(st.push(p));
    take(st.finish());
    return s;
}

void expect_stream_matches(F f, const std::string & s, const std::vector<std::string_view> & pieces,
                           const tool_output & whole) {
    const streamed got = run_stream(f, pieces);
    std::string cuts;
    for (const auto p : pieces) cuts += std::to_string(p.size()) + " ";
    ASSERT_EQ(got.error, "") << tool_call_format_name(f) << " cuts " << cuts << ": " << s;
    ASSERT_EQ(got.content, whole.content) << tool_call_format_name(f) << " cuts " << cuts << ": " << s;
    ASSERT_EQ(got.calls, whole.calls) << tool_call_format_name(f) << " cuts " << cuts << ": " << s;
}

const std::vector<std::pair<F, std::string>> & stream_corpus() {
    static const std::vector<std::pair<F, std::string>> k = {
        {F::hermes,
         "Let me check.\n<tool_call>\n{\"name\": \"w\", \"arguments\": {\"c\": \"P\\\"}\"}}\n</tool_call>\n"},
        {F::hermes, "  <tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call> "
                    "\n<tool_call>{\"name\":\"b\",\"arguments\":{\"x\":[1]}}</tool_call> tail"},
        {F::hermes, "<tool_call>{\"name\":\"a\"}</tool_call><tool_call>{\"name\":\"b\",\"arguments\":{}}</tool_call>"},
        {F::hermes, "<tool<tool_call><tool_call>{\"name\":\"b\",\"arguments\":{}}</tool_c</tool_call>"},
        {F::hermes, "x <tool_call>{\"name\":\"a\",\"arguments\":{\"s\":\"\xc3\xa9</tool_call>\"}}</tool_call>\n\n"},
        {F::hermes, "\n\n<tool_call>{\"name\":\"a\",\"arguments\":{}}\n</tool_"},
        {F::hermes, "   "},
        {F::llama3, " <|python_tag|>{\"name\":\"a\",\"parameters\":{\"q\":\"}\"}}; {\"name\":\"b\",\"arguments\":{}} "},
        {F::llama3, "{\"name\":\"a\",\"parameters\":{}} nope"},
        {F::llama3, "<|python_tag|>code()"},
        {F::llama3, "Hi there"},
        {F::mistral, "Hm.[TOOL_CALLS][{\"name\":\"a\",\"arguments\":{},\"id\":\"A1b2C3d4E\"}] \n"},
        {F::mistral, "[TOOL_CALLS][{\"name\":\"a\"}] [TOOL_CALLS] [{\"name\":\"b\",\"arguments\":{\"z\":\"]\"}}]"},
        {F::mistral, "[TOOL_CALL[TOOL_CALLS]"},
        {F::generic, "{\"tool_calls\":[{\"name\":\"a\",\"arguments\":{\"k\":\"{\"}}]} "},
        {F::generic, "  {\"response\":\"hello \\\"there\\\"\"}"},
        {F::generic, "{\"response\":\"x\"}!"},
        {F::generic, "plain"},
    };
    return k;
}

TEST_F(ToolCalls, StreamEveryTwoPieceSplit) {
    for (const auto & [f, s] : stream_corpus()) {
        const tool_output whole = tool_calls_parse(f, s);
        const std::string_view v(s);
        for (size_t i = 0; i <= s.size(); ++i) expect_stream_matches(f, s, {v.substr(0, i), v.substr(i)}, whole);
    }
}

TEST_F(ToolCalls, StreamEveryThreePieceSplit) {
    for (const auto & [f, s] : stream_corpus()) {
        const tool_output whole = tool_calls_parse(f, s);
        const std::string_view v(s);
        for (size_t i = 0; i <= s.size(); ++i)
            for (size_t j = i; j <= s.size(); ++j)
                expect_stream_matches(f, s, {v.substr(0, i), v.substr(i, j - i), v.substr(j)}, whole);
    }
}

TEST_F(ToolCalls, StreamByteByByte) {
    for (const auto & [f, s] : stream_corpus()) {
        std::vector<std::string_view> bytes;
        for (size_t i = 0; i < s.size(); ++i) bytes.push_back(std::string_view(s).substr(i, 1));
        expect_stream_matches(f, s, bytes, tool_calls_parse(f, s));
    }
}

TEST_F(ToolCalls, StreamRandomOutputsAndSplits) {
    static const char * const k_frags[] = {
        "<tool_call>",
        "</tool_call>",
        "<tool_",
        "</tool",
        "[TOOL_CALLS]",
        "[TOOL",
        "<|python_tag|>",
        "<|py",
        "{\"name\":\"a\",\"arguments\":{}}",
        "{\"name\":\"b\",\"parameters\":{\"x\":1}}",
        "{\"name\":\"c\"",
        "[{\"name\":\"m\",\"arguments\":{\"k\":\"v\"},\"id\":\"i\"}]",
        "{\"tool_calls\":[",
        "{\"response\":\"r\"}",
        "{",
        "}",
        "[",
        "]",
        "\"",
        "\\",
        ":",
        ",",
        ";",
        " ",
        "\n",
        "\t",
        "text",
        "\xc3\xa9",
        "\"arguments\":",
        "{\"tool_call\":",
        "}]",
        "}}",
    };
    std::mt19937 rng(20250601);
    for (int iter = 0; iter < 4000; ++iter) {
        const F f = static_cast<F>(iter % 4);
        std::string s;
        const int n = std::uniform_int_distribution<int>(0, 24)(rng);
        for (int k = 0; k < n; ++k) s += k_frags[std::uniform_int_distribution<size_t>(0, std::size(k_frags) - 1)(rng)];
        const tool_output whole = tool_calls_parse(f, s);
        for (int t = 0; t < 4; ++t) {
            std::vector<std::string_view> pieces;
            size_t at = 0;
            while (at < s.size()) {
                const size_t len = std::min(s.size() - at, std::uniform_int_distribution<size_t>(0, 6)(rng));
                pieces.push_back(std::string_view(s).substr(at, len));
                at += len;
            }
            expect_stream_matches(f, s, pieces, whole);
            if (HasFatalFailure()) return;
        }
    }
}

TEST_F(ToolCalls, StreamHoldsBackOnlyWhatMayBeAMarker) {
    tool_call_stream st(F::hermes);
    EXPECT_EQ(st.push("Hello <tool").content, "Hello ");
    EXPECT_EQ(st.push("box> ok").content, "<toolbox> ok");
    const auto p = st.push("\n<tool_call>{\"name\":\"a\",\"arguments\":{\"x\":");
    EXPECT_EQ(p.content, "\n");
    EXPECT_TRUE(p.calls.empty());
    const auto q = st.push("2}}</tool_call>");
    ASSERT_EQ(q.calls.size(), 1u);
    EXPECT_EQ(q.calls[0], (tool_call_delta{0, "", "a", "{\"x\":2}"}));
    EXPECT_EQ(st.push("\n").content, "");  // may only separate blocks
    EXPECT_EQ(st.push("Bye").content, "\nBye");
    EXPECT_EQ(st.finish(), tool_stream_piece{});

    // llama3 and generic: plain text passes at once, JSON is held to the end.
    tool_call_stream l(F::llama3);
    EXPECT_EQ(l.push(" Sure").content, " Sure");
    tool_call_stream g(F::generic);
    EXPECT_EQ(g.push("{\"response\": \"hi\"").content, "");
    EXPECT_EQ(g.push("} and more").content, "{\"response\": \"hi\"} and more");
}

// ---- definitions, choice, history ----

void expect_invalid(const Status & st, const std::string & prefix) {
    EXPECT_EQ(st.code(), status_code::invalid_argument) << st.to_string();
    EXPECT_EQ(st.message().substr(0, prefix.size()), prefix) << st.to_string();
}

TEST_F(ToolCalls, ToolsCheckAcceptsValidTools) {
    EXPECT_TRUE(tools_check(weather_tools()).ok());
    EXPECT_TRUE(tools_check(json::array()).ok());
}

TEST_F(ToolCalls, ToolsCheckNamesThePath) {
    const auto with = [](const char * fn) {
        json t = weather_tools();
        t[1]["function"] = json::parse(fn);
        return t;
    };
    expect_invalid(tools_check(json::object()), "tools: must be an array");
    expect_invalid(tools_check(json::parse(R"([3])")), "tools[0]: must be an object");
    expect_invalid(tools_check(json::parse(R"([{"type": "code", "function": {"name": "a"}}])")), "tools[0].type: ");
    expect_invalid(tools_check(json::parse(R"([{"type": "function"}])")), "tools[0].function: ");
    expect_invalid(tools_check(with(R"({"name": "bad name"})")), "tools[1].function.name: \"bad name\"");
    expect_invalid(tools_check(with(R"({"name": ""})")), "tools[1].function.name: ");
    expect_invalid(tools_check(with(R"({"name": 5})")), "tools[1].function.name: must be a string");
    expect_invalid(tools_check(with(("{\"name\": \"" + std::string(65, 'a') + "\"}").c_str())),
                   "tools[1].function.name: ");
    expect_invalid(tools_check(with(R"({"name": "get_weather"})")),
                   "tools[1].function.name: \"get_weather\" is declared twice");
    expect_invalid(tools_check(with(R"({"name": "a", "description": 1})")), "tools[1].function.description: ");
    expect_invalid(tools_check(with(R"({"name": "a", "parameters": "x"})")), "tools[1].function.parameters: ");
    expect_invalid(tools_check(with(R"({"name": "a", "strict": "yes"})")), "tools[1].function.strict: ");
}

TEST_F(ToolCalls, ToolChoiceParse) {
    const json tools = weather_tools();
    EXPECT_EQ(tool_choice_parse("auto", tools).value(), tool_choice{tool_choice_auto{}});
    EXPECT_EQ(tool_choice_parse("none", tools).value(), tool_choice{tool_choice_none{}});
    EXPECT_EQ(tool_choice_parse("required", tools).value(), tool_choice{tool_choice_required{}});
    EXPECT_EQ(tool_choice_parse(json::parse(R"({"type": "function", "function": {"name": "add"}})"), tools).value(),
              tool_choice{tool_choice_named{"add"}});
    expect_invalid(tool_choice_parse("always", tools).status(), "tool_choice: \"always\"");
    expect_invalid(tool_choice_parse(3, tools).status(), "tool_choice: ");
    expect_invalid(tool_choice_parse("required", json::array()).status(), "tool_choice: ");
    expect_invalid(
        tool_choice_parse(json::parse(R"({"type": "function", "function": {"name": "nope"}})"), tools).status(),
        "tool_choice.function.name: \"nope\" is not a declared tool");
    expect_invalid(tool_choice_parse(json::parse(R"({"type": "x", "function": {"name": "add"}})"), tools).status(),
                   "tool_choice.type: ");
    expect_invalid(tool_choice_parse(json::parse(R"({"type": "function"})"), tools).status(), "tool_choice.function: ");
}

TEST_F(ToolCalls, HistoryCheck) {
    const json ok = json::parse(R"([{"id": "call_1", "type": "function",
                                     "function": {"name": "add", "arguments": "{\"a\": 1, \"b\": 2}"}}])");
    EXPECT_TRUE(tool_calls_history_check(ok, "messages[3].tool_calls").ok());
    const auto with_fn = [](const char * fn) {
        return json::array({{{"id", "c"}, {"type", "function"}, {"function", json::parse(fn)}}});
    };
    expect_invalid(
        tool_calls_history_check(with_fn(R"({"name": "add", "arguments": "[1]"})"), "messages[3].tool_calls"),
        "messages[3].tool_calls[0].function.arguments: not a JSON object");
    expect_invalid(tool_calls_history_check(with_fn(R"({"name": "add", "arguments": "{"})"), "messages[3].tool_calls"),
                   "messages[3].tool_calls[0].function.arguments: not a JSON object");
    expect_invalid(tool_calls_history_check(with_fn(R"({"name": "add", "arguments": {}})"), "m.tool_calls"),
                   "m.tool_calls[0].function.arguments: must be a string");
    expect_invalid(tool_calls_history_check(with_fn(R"({"arguments": "{}"})"), "m.tool_calls"),
                   "m.tool_calls[0].function.name: ");
    expect_invalid(tool_calls_history_check(json::parse(R"([{"type": "function", "function": {}}])"), "m.tool_calls"),
                   "m.tool_calls[0].id: ");
    expect_invalid(
        tool_calls_history_check(json::parse(R"([{"id": "x", "type": "web", "function": {}}])"), "m.tool_calls"),
        "m.tool_calls[0].type: ");
    expect_invalid(tool_calls_history_check(json::object(), "m.tool_calls"), "m.tool_calls: must be an array");
}

// ---- grammars ----

const F k_all_formats[] = {F::generic, F::hermes, F::llama3, F::mistral};

TEST_F(ToolCalls, NoneAndAmbiguousAutoGiveNoGrammar) {
    for (const F f : k_all_formats) EXPECT_EQ(grammar(f, tool_choice_none{}, true), tool_grammar{});
    EXPECT_EQ(grammar(F::generic, tool_choice_auto{}, true), tool_grammar{});
    EXPECT_EQ(grammar(F::llama3, tool_choice_auto{}, false), tool_grammar{});
}

TEST_F(ToolCalls, LibllamaAcceptsEveryGrammar) {
    const tool_choice choices[] = {tool_choice_auto{}, tool_choice_required{}, tool_choice_named{"add"},
                                   tool_choice_named{"ping.v2"}};
    for (const F f : k_all_formats)
        for (const auto & c : choices)
            for (const bool parallel : {false, true}) {
                const tool_grammar g = grammar(f, c, parallel);
                if (g.gbnf.empty()) continue;
                EXPECT_EQ(g.lazy, std::holds_alternative<tool_choice_auto>(c));
                grammar_driver d(vocab(), g);
                EXPECT_TRUE(d.valid()) << tool_call_format_name(f) << " parallel " << parallel << "\n" << g.gbnf;
            }
}

TEST_F(ToolCalls, RequiredAcceptsValidCallsInEachFormat) {
    const std::string w = "{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\"}}";
    const std::string a = "{\"name\": \"add\", \"arguments\": {\"a\":1,\"b\":-2}}";
    const std::string p = "{\"name\": \"ping.v2\", \"arguments\": {}}";
    const std::string hermes_w = "<tool_call>\n" + w + "\n</tool_call>";
    const std::string hermes_a = "<tool_call>\n" + a + "\n</tool_call>";
    const std::string hermes_p = "<tool_call>\n" + p + "\n</tool_call>";
    EXPECT_TRUE(accepts(grammar(F::hermes, tool_choice_required{}, false), hermes_w));
    EXPECT_TRUE(accepts(grammar(F::hermes, tool_choice_required{}, false), hermes_p));
    EXPECT_TRUE(accepts(grammar(F::hermes, tool_choice_required{}, true), hermes_w + "\n" + hermes_a));
    EXPECT_FALSE(accepts(grammar(F::hermes, tool_choice_required{}, false), hermes_w + "\n" + hermes_a));
    EXPECT_TRUE(accepts(grammar(F::mistral, tool_choice_required{}, false), "[TOOL_CALLS][" + a + "]"));
    EXPECT_TRUE(accepts(grammar(F::mistral, tool_choice_required{}, true),
                        "[TOOL_CALLS][" + a.substr(0, a.size() - 1) + ", \"id\": \"abc123XYZ\"}, " + w + "]"));
    EXPECT_TRUE(
        accepts(grammar(F::llama3, tool_choice_required{}, true),
                "{\"name\": \"add\", \"parameters\": {\"a\":1,\"b\":2}}; {\"name\": \"ping.v2\", \"parameters\": {}}"));
    EXPECT_TRUE(accepts(grammar(F::generic, tool_choice_required{}, false), "{\"tool_call\": " + a + "}"));
    EXPECT_TRUE(accepts(grammar(F::generic, tool_choice_required{}, true), "{\"tool_calls\": [" + a + ", " + p + "]}"));
    // And each of those parses back into the calls.
    EXPECT_EQ(tool_calls_parse(F::hermes, hermes_w + "\n" + hermes_a).calls.size(), 2u);
}

TEST_F(ToolCalls, RejectsUnknownFunctionsAndArgumentsAgainstTheSchema) {
    const tool_grammar g = grammar(F::hermes, tool_choice_required{}, true);
    const std::string open = "<tool_call>\n";
    EXPECT_FALSE(accepts(g, open + "{\"name\": \"nope\""));
    EXPECT_FALSE(accepts(g, open + "{\"name\": \"add\", \"arguments\": {\"a\":\"x\""));        // a is an integer
    EXPECT_FALSE(accepts(g, open + "{\"name\": \"add\", \"arguments\": {\"a\":1}"));           // b is required
    EXPECT_FALSE(accepts(g, open + "{\"name\": \"get_weather\", \"arguments\": {\"unit\":"));  // city first
    EXPECT_FALSE(accepts(g, open + "{\"name\": \"get_weather\", \"arguments\": {\"city\":\"P\",\"unit\":\"k\""));
    EXPECT_FALSE(accepts(g, open + "{\"arguments\""));  // name comes first
    EXPECT_FALSE(accepts(g, "Sure! " + open));          // required: no text before the call
    // Named: only that function.
    const tool_grammar n = grammar(F::hermes, tool_choice_named{"add"}, false);
    EXPECT_FALSE(accepts(n, open + "{\"name\": \"get_weather\""));
    EXPECT_TRUE(accepts(n, open + "{\"name\": \"add\", \"arguments\": {\"a\":1,\"b\":2}}\n</tool_call>"));
}

TEST_F(ToolCalls, AutoIsLazyUntilTheMarker) {
    for (const F f : {F::hermes, F::mistral}) {
        const tool_grammar g = grammar(f, tool_choice_auto{}, true);
        ASSERT_TRUE(g.lazy);
        ASSERT_EQ(g.trigger_patterns.size(), 1u);
        const std::string text =
            f == F::hermes ? "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\":1,\"b\":2}}\n</tool_call>"
                           : "[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\":1,\"b\":2}}]";
        const std::string marker = f == F::hermes ? "<tool_call>" : "[TOOL_CALLS]";
        EXPECT_TRUE(accepts(g, "Free text { with [anything]. "));  // not triggered: unconstrained
        EXPECT_TRUE(accepts(g, "Let me add these.\n" + text));
        EXPECT_FALSE(accepts(g, "Let me add these.\n" + marker +
                                    (f == F::hermes ? "\n{\"name\": \"sub\"" : "[{\"name\": \"sub\"")));
        const auto r = tool_calls_parse(f, "Let me add these.\n" + text);
        EXPECT_EQ(r.calls, std::vector<tool_call>{call("add", "{\"a\":1,\"b\":2}")});
    }
}

// A schema the converter refuses: an error naming the tool for required, no grammar for auto.
TEST_F(ToolCalls, RefusedSchema) {
    const json tools = json::parse(R"([{"type": "function", "function": {"name": "f",
        "parameters": {"type": "object", "properties": {"s": {"type": "string", "pattern": "^a+$"}}}}}])");
    const auto g = tool_calls_grammar(F::hermes, tools, tool_choice_required{}, false);
    ASSERT_FALSE(g.ok());
    expect_invalid(g.status(), "tools[0].function.parameters: ");
    const auto a = tool_calls_grammar(F::hermes, tools, tool_choice_auto{}, false);
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a.value(), tool_grammar{});
}

// The property behind tool_choice "required": whatever the model picks among what the grammar allows, once
// generation may end, the output is well-formed tool calls of declared functions.
TEST_F(ToolCalls, RandomWalksOfRequiredGrammarsParseIntoDeclaredCalls) {
    const json tools = weather_tools();
    const std::vector<std::string> declared = {"get_weather", "add", "ping.v2"};
    std::mt19937 rng(7);
    const tool_choice choices[] = {tool_choice_required{}, tool_choice_named{"get_weather"}};
    for (const F f : k_all_formats)
        for (const auto & choice : choices)
            for (const bool parallel : {false, true}) {
                const tool_grammar g = grammar(f, choice, parallel, tools);
                int finished = 0;
                for (int walk = 0; walk < 12; ++walk) {
                    grammar_driver d(vocab(), g);
                    ASSERT_TRUE(d.valid());
                    std::string out;
                    bool ended = false;
                    for (int step = 0; step < 3000 && !ended; ++step) {
                        const std::vector<float> logit = d.allowed();
                        // ASCII choices (random bytes could form code points the grammar's string rule allows
                        // but JSON does not, such as surrogates); closers are favored so values stay small.
                        std::vector<unsigned char> opts, closers;
                        for (unsigned b = 0x20; b < 0x7f; ++b)
                            if (d.byte_allowed(logit, static_cast<unsigned char>(b))) {
                                opts.push_back(static_cast<unsigned char>(b));
                                if (b == '}' || b == ']' || b == '"') closers.push_back(static_cast<unsigned char>(b));
                            }
                        if (d.byte_allowed(logit, '\n')) opts.push_back('\n');
                        const bool eos = logit[static_cast<size_t>(llama_vocab_eos(vocab()))] != -INFINITY;
                        if (eos && (opts.empty() || rng() % 2 == 0)) {
                            ended = true;
                            break;
                        }
                        ASSERT_FALSE(opts.empty()) << "stuck after: " << out;
                        const auto & from = !closers.empty() && rng() % 3 == 0 ? closers : opts;
                        const unsigned char b = from[rng() % from.size()];
                        d.accept(b);
                        out += static_cast<char>(b);
                    }
                    if (!ended) continue;  // a long walk: bounded, not judged
                    ++finished;
                    const tool_output r = tool_calls_parse(f, out);
                    ASSERT_FALSE(r.calls.empty()) << tool_call_format_name(f) << ": " << out;
                    EXPECT_EQ(r.content, "") << out;
                    if (!parallel) {
                        EXPECT_EQ(r.calls.size(), 1u) << out;
                    }
                    for (const auto & c : r.calls) {
                        if (std::holds_alternative<tool_choice_named>(choice)) {
                            EXPECT_EQ(c.name, "get_weather") << out;
                        }
                        EXPECT_NE(std::find(declared.begin(), declared.end(), c.name), declared.end()) << out;
                        EXPECT_TRUE(json::parse(c.arguments, nullptr, false).is_object()) << out;
                    }
                }
                EXPECT_GE(finished, 6) << tool_call_format_name(f) << " parallel " << parallel;
            }
}

}  // namespace
}  // namespace baton::test
