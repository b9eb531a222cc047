// grammar_request_test.cpp — grammars and logit_bias keys at the edge (issue 22 findings 1 and 5): the
// request parser holds a grammar to the node's --grammar-max-* before anything is queued, /v1/completions
// and /v1/decode (a blob's embedded request) answer a deep grammar with an error and the node lives on, the
// flags raise the limits only up to their caps, and a numeric logit_bias key that is no token id is a 400.
#include <gtest/gtest.h>

#include <algorithm>

#include "baton/blob.h"
#include "baton/grammar_check.h"
#include "baton/openai/openai.h"
#include "serve_test_util.h"

namespace baton {
namespace {

using namespace baton::test;

std::string nested_groups(size_t n) { return "root ::= " + std::string(n, '(') + "\"a\"" + std::string(n, ')'); }

std::string completion_with_grammar(const std::string & gbnf) {
    return json{{"prompt", "Hi"}, {"max_tokens", 2}, {"temperature", 0}, {"grammar", gbnf}}.dump();
}

TEST(GrammarRequest, TheParserHoldsGrammarsToTheNodesBounds) {
    auto deep = openai_parse(completion_with_grammar(nested_groups(100000)), openai_endpoint::completions);
    ASSERT_FALSE(deep.ok());
    EXPECT_EQ(deep.status().code(), status_code::invalid_argument);
    EXPECT_EQ(deep.status().message(), "grammar: groups nested deeper than 64 (--grammar-max-depth) at byte 73");
    EXPECT_TRUE(openai_parse(completion_with_grammar(nested_groups(64)), openai_endpoint::completions).ok());

    openai_defaults d;
    d.sampling.grammar_bounds.depth_max = 200;
    auto raised = openai_parse(completion_with_grammar(nested_groups(150)), openai_endpoint::completions, d);
    ASSERT_TRUE(raised.ok()) << raised.status().to_string();
    EXPECT_EQ(raised->sampling.grammar_bounds, d.sampling.grammar_bounds);  // carried to the engine's check
    auto over = openai_parse(completion_with_grammar(nested_groups(201)), openai_endpoint::completions, d);
    ASSERT_FALSE(over.ok());
    EXPECT_NE(over.status().message().find("deeper than 200"), std::string::npos) << over.status().to_string();
}

// Issue 22, finding 5: "99999999999999999999" did not parse as a token id and was tokenized as text.
TEST(GrammarRequestRegression, NumericLogitBiasKeyThatIsNoTokenIdIsRefused) {
    for (const char * key :
         {"99999999999999999999", "2147483648", "-5", "+99999999999", "000000000000000000009999999999"}) {
        const std::string body = json{{"prompt", "Hi"}, {"logit_bias", {{key, 1}}}}.dump();
        auto r = openai_parse(body, openai_endpoint::completions);
        ASSERT_FALSE(r.ok()) << key;
        EXPECT_EQ(r.status().code(), status_code::invalid_argument) << key;
        EXPECT_NE(r.status().message().find("is not a token id of this model"), std::string::npos)
            << r.status().to_string();
    }
    // Numbers that are ids stay ids (leading zeros and "+" as llama-server's stoi reads them); text stays text.
    auto ok =
        openai_parse(json{{"prompt", "Hi"}, {"logit_bias", {{"+7", 1}, {"0012", 2}, {"-0", 3}, {"12a", 4}}}}.dump(),
                     openai_endpoint::completions);
    ASSERT_TRUE(ok.ok()) << ok.status().to_string();
    std::vector<int32_t> ids;
    for (const auto & [t, b] : ok->sampling.logit_bias) ids.push_back(t);
    std::sort(ids.begin(), ids.end());
    EXPECT_EQ(ids, (std::vector<int32_t>{0, 7, 12}));
    ASSERT_EQ(ok->logit_bias_text.size(), 1u);
    EXPECT_EQ(ok->logit_bias_text[0].first, "12a");
}

// blob_with_request: bytes rewritten so the embedded request's "grammar" is gbnf (checksums recomputed).
std::string blob_with_grammar(const std::string & bytes, const std::string & gbnf) {
    const auto * data = reinterpret_cast<const uint8_t *>(bytes.data());
    auto v = blob_parse(std::span<const uint8_t>(data, bytes.size()));
    if (!v.ok()) throw std::runtime_error(v.status().to_string());
    const blob_view & b = v.value();
    if (!b.request) throw std::runtime_error("the blob embeds no request");
    json req = json::parse(*b.request);
    req["sampling"]["grammar"]["gbnf"] = gbnf;  // docs/state-blob.md, section 7
    const std::string req_text = req.dump();
    blob_parts parts;
    parts.identity = b.identity;
    parts.context = b.context;
    parts.tokens = b.tokens;
    parts.state = b.state;
    parts.checkpoints = b.checkpoints;
    if (b.logits) parts.logits = *b.logits;
    parts.request = req_text;
    blob_buffer_sink sink;
    if (Status st = blob_write(parts, sink); !st.ok()) throw std::runtime_error(st.to_string());
    return std::string(sink.bytes().begin(), sink.bytes().end());
}

// Issue 22, finding 1: the 100,000-deep grammar killed the node that parsed it, on /v1/completions and from a
// blob on /v1/decode. Now both answer with an error naming the limit, and the node keeps serving.
TEST(GrammarRequestRegression, NestedHundredThousandDeepGrammarIsRefusedAndTheNodeLives) {
    auto n = node_process::start(serve_args("llama", {"-np", "1"}));
    const std::string deep = nested_groups(100000);
    const http_reply r = post(*n, "/v1/completions", completion_with_grammar(deep));
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find("groups nested deeper than 64 (--grammar-max-depth) at byte 73"), std::string::npos)
        << r.body;
    const http_reply chat =
        post(*n, "/v1/chat/completions",
             json{{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 2}, {"grammar", deep}}.dump());
    EXPECT_EQ(chat.status, 400) << chat.body;

    // From a blob: prefill an ordinary request, then give its embedded request the deep grammar.
    const http_reply blob =
        post(*n, "/v1/prefill", json{{"prompt", "Hi"}, {"max_tokens", 2}, {"temperature", 0}}.dump());
    ASSERT_EQ(blob.status, 200) << blob.body;
    const http_reply dec = post(*n, "/v1/decode", blob_with_grammar(blob.body, deep), "application/octet-stream");
    EXPECT_EQ(dec.status, 422) << dec.body;  // incompatible: over this node's --grammar-max-depth
    EXPECT_NE(dec.body.find("embedded request: sampling.grammar: groups nested deeper than 64"), std::string::npos)
        << dec.body;

    EXPECT_EQ(get(*n, "/health").status, 200);
    const http_reply fine = post(*n, "/v1/decode", blob.body, "application/octet-stream");
    EXPECT_EQ(fine.status, 200) << fine.body;
    const http_reply shallow = post(*n, "/v1/completions", completion_with_grammar(nested_groups(3)));
    EXPECT_EQ(shallow.status, 200) << shallow.body;
}

TEST(GrammarRequest, FlagsRaiseTheLimitsUpToTheirCaps) {
    auto n = node_process::start(
        serve_args("llama", {"-np", "1", "--grammar-max-depth", "200", "--grammar-max-fanout", "8192"}));
    EXPECT_EQ(post(*n, "/v1/completions", completion_with_grammar(nested_groups(150))).status, 200);
    const http_reply over = post(*n, "/v1/completions", completion_with_grammar(nested_groups(201)));
    EXPECT_EQ(over.status, 400) << over.body;
    EXPECT_NE(over.body.find("deeper than 200"), std::string::npos) << over.body;

    auto exit_of = [](std::vector<std::string> extra) {
        auto args = serve_args("llama", std::move(extra));
        args.insert(args.begin(), baton_bin());
        args.insert(args.end(), {"--port", "0"});
        return run_process(args, 60);
    };
    for (const auto & [flag, value] : std::vector<std::pair<std::string, std::string>>{
             {"--grammar-max-depth", std::to_string(grammar_limits_cap.depth_max + 1)},
             {"--grammar-max-chain", "0"},
             {"--grammar-max-rules", std::to_string(grammar_limits_cap.rules_max + 1)},
             {"--grammar-max-elements", std::to_string(grammar_limits_cap.elements_max + 1)},
             {"--grammar-max-fanout", std::to_string(grammar_limits_cap.fanout_max + 1)}}) {
        const proc_result r = exit_of({flag, value});
        EXPECT_EQ(r.exit_code, 2) << flag << ": " << r.err;
        EXPECT_NE(r.err.find(flag), std::string::npos) << "the message names the flag: " << r.err;
    }
    const proc_result help = run_process({baton_bin(), "serve", "--help"}, 60);
    for (const char * flag : {"--grammar-max-depth", "--grammar-max-chain", "--grammar-max-rules",
                              "--grammar-max-elements", "--grammar-max-fanout"})
        EXPECT_NE(help.out.find(flag), std::string::npos) << flag;
}

}  // namespace
}  // namespace baton
