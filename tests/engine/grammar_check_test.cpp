// grammar_check_test.cpp — Baton's GBNF structure check (src/engine/grammar_check.cpp): one case per limit
// and per refusal, common grammars accepted, grammars at the limits (and at the caps, on a 1 MiB thread
// stack) loaded by libllama through sampling_check_grammar, and the engine refusing a deep grammar from
// any task before libllama sees it. Regressions are named after issue 22's finding.
#include <chrono>
#include <gtest/gtest.h>
#include <llama.h>
#include <pthread.h>

#include <string>

#include "baton/grammar_check.h"
#include "baton/sampling.h"
#include "engine_fixture.h"

namespace baton {
namespace {

using namespace baton::test;

std::string nested_groups(size_t n) { return "root ::= " + std::string(n, '(') + "\"a\"" + std::string(n, ')') + "\n"; }

// chain(k): k rules (root included), each starting with the next.
std::string chain(size_t k) {
    std::string g = "root ::= r1 \"x\"\n";
    for (size_t i = 1; i + 1 < k; ++i) g += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + " \"x\"\n";
    return g + "r" + std::to_string(k - 1) + " ::= \"a\"\n";
}

// alternatives(n): root with n literal alternatives.
std::string alternatives(size_t n) {
    std::string g = "root ::= ";
    for (size_t i = 0; i < n; ++i) g += (i ? " | \"" : "\"") + std::to_string(i) + "\"";
    return g + "\n";
}

std::string refusal(const std::string & gbnf, const grammar_limits & l = {}) {
    Status st = grammar_check(gbnf, l);
    EXPECT_FALSE(st.ok()) << "accepted: " << gbnf.substr(0, 200);
    if (st.ok()) return {};
    EXPECT_EQ(st.code(), status_code::invalid_argument);
    EXPECT_EQ(st.message().rfind("grammar: ", 0), 0u) << st.message();
    return st.message();
}

#define EXPECT_OK(gbnf) EXPECT_TRUE(grammar_check(gbnf).ok()) << grammar_check(gbnf).to_string()
#define EXPECT_REFUSED_WITH(gbnf, text) EXPECT_NE(refusal(gbnf).find(text), std::string::npos) << refusal(gbnf)

TEST(GrammarCheck, AcceptsCommonGrammars) {
    EXPECT_OK("root ::= \"yes\" | \"no\"");
    EXPECT_OK(R"G(root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
ws ::= | " " | "\n" [ \t]{0,20}
)G");
    EXPECT_OK("root ::= (expr \"=\" ws term \"\\n\")+\r\nexpr ::= term ([-+*/] term)*\r\n"
              "term ::= ident | num | \"(\" ws expr \")\" ws\r\nident ::= [a-z] [a-z0-9_]* ws\r\n"
              "num ::= [0-9]+ ws\r\nws ::= [ \\t\\n]*\r\n");
    EXPECT_OK(
        "root ::= item{2,5} \"\\u00e9\\U0001F600\" [^\\]\\-] . <[12]> !<[13]> <tok>\nitem ::= \"-\" [a-z]+ \"\\n\"\n");
    EXPECT_OK("# a comment\nroot ::= x? x* x+ x{3} x{1,} x{0,4} # trailing\nx ::= \"x\"\n");
    EXPECT_OK("root ::= \"\\xff\" \"caf\xc3\xa9\" [\xe2\x82\xac-\xe2\x82\xaf]");
}

TEST(GrammarCheck, GroupDepthLimit) {
    EXPECT_OK(nested_groups(64));
    const std::string m = refusal(nested_groups(65));
    EXPECT_NE(m.find("groups nested deeper than 64 (--grammar-max-depth) at byte 73"), std::string::npos) << m;
    grammar_limits l;
    l.depth_max = 100;
    EXPECT_TRUE(grammar_check(nested_groups(100), l).ok());
    EXPECT_FALSE(grammar_check(nested_groups(101), l).ok());
    // Parentheses inside strings, classes, token texts and comments are not groups.
    EXPECT_OK("root ::= \"" + std::string(100, '(') + "\" [(] <(((> # (((((\n");
}

TEST(GrammarCheck, ChainLimit) {
    EXPECT_OK(chain(1024));
    EXPECT_NE(
        refusal(chain(1025)).find("starts a chain of more than 1024 rules before any character (--grammar-max-chain)"),
        std::string::npos);
    // The chain goes on through a prefix that can match nothing, and through groups.
    grammar_limits l;
    l.chain_max = 3;
    EXPECT_TRUE(grammar_check("root ::= a \"x\"\na ::= \"a\"", l).ok());
    EXPECT_TRUE(grammar_check("root ::= e a\ne ::= | \"e\"\na ::= \"b\"", l).ok());
    EXPECT_FALSE(grammar_check("root ::= e a\ne ::= | \"e\"\na ::= b\nb ::= c\nc ::= \"c\"", l).ok());
    EXPECT_TRUE(grammar_check("root ::= ((\"a\"))", l).ok());
    EXPECT_FALSE(grammar_check("root ::= (((\"a\")))", l).ok());
    // A chain that starts after a character is no chain.
    EXPECT_TRUE(grammar_check("root ::= \"x\" a\na ::= \"y\" b\nb ::= \"y\" c\nc ::= \"z\"", l).ok());
}

TEST(GrammarCheck, RulesLimitCountsGroupsAndRepetitions) {
    grammar_limits l;
    l.rules_max = 10;
    EXPECT_TRUE(grammar_check("root ::= (\"a\") (\"b\") x{0,3}\nx ::= \"x\"", l).ok());  // 1 + 2 + 1 + 3
    EXPECT_NE(refusal("root ::= \"a\"{0,10}", l).find("more than 10 rules, counting groups and repetitions"),
              std::string::npos);
    std::string many = "root ::= r0\n";
    for (int i = 0; i < 12; ++i) many += "r" + std::to_string(i) + " ::= \"a\" r" + std::to_string(i + 1) + "\n";
    EXPECT_NE(refusal(many, l).find("(--grammar-max-rules)"), std::string::npos);
}

TEST(GrammarCheck, ElementsLimitCountsExpandedRepetitions) {
    grammar_limits l;
    l.elements_max = 1000;
    EXPECT_TRUE(grammar_check("root ::= \"ab\"{400}", l).ok());
    EXPECT_NE(refusal("root ::= \"ab\"{600}", l).find("more than 1000 elements after expanding repetitions"),
              std::string::npos);
    // The default: a long string repeated 1999 times would be 200 million elements.
    EXPECT_REFUSED_WITH("root ::= \"" + std::string(100000, 'a') + "\"{1999}", "(--grammar-max-elements)");
}

TEST(GrammarCheck, FanoutLimit) {
    EXPECT_OK(alternatives(4096));
    EXPECT_REFUSED_WITH(alternatives(4097), "more than 4096 alternatives");
    // Through references: 2^13 ways to start.
    std::string g = "root ::= r0\n";
    for (int i = 0; i < 13; ++i)
        g += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + " \"x\" | r" + std::to_string(i + 1) +
             " \"y\"\n";
    EXPECT_REFUSED_WITH(g + "r13 ::= \"a\"\n", "(--grammar-max-fanout)");
    // A run of rules that can match nothing: every one of them can start the sequence.
    std::string seq = "root ::= ";
    for (int i = 0; i < 5000; ++i) seq += "e ";
    EXPECT_REFUSED_WITH(seq + "\"a\"\ne ::= \"z\" |\n", "(--grammar-max-fanout)");
}

TEST(GrammarCheck, RepetitionCounts) {
    EXPECT_OK("root ::= \"a\"{1999}");
    EXPECT_REFUSED_WITH("root ::= \"a\"{2001}", "a repetition count above 2000 at byte 12");
    EXPECT_REFUSED_WITH("root ::= \"a\"{0,5000}", "a repetition count above 2000");  // libllama: silently unbounded
    EXPECT_REFUSED_WITH("root ::= \"a\"{99999999999999999999999}", "above 2000");
    EXPECT_REFUSED_WITH("root ::= \"a\"{2000}", "libllama refuses 2000 or more");
    EXPECT_OK("root ::= (\"a\"{50}){50}");                                  // the group is 1 rule: 1 x 50
    EXPECT_REFUSED_WITH("root ::= (\"a\"{0,50}){50}", "libllama refuses");  // the group is 51 rules: 51 x 50
    EXPECT_REFUSED_WITH("root ::= * \"a\"", "a repetition without an item before it at byte 9");
    EXPECT_REFUSED_WITH("root ::= \"\"+", "a repetition without an item before it");
    EXPECT_REFUSED_WITH("root ::= \"a\"{", "expecting an integer at byte 13");
    EXPECT_REFUSED_WITH("root ::= \"a\"{1 2}", "expecting ','");
    EXPECT_REFUSED_WITH("root ::= \"a\"{1,2", "expecting '}'");
}

TEST(GrammarCheck, LeftRecursionIsRefused) {
    EXPECT_REFUSED_WITH("root ::= root \"x\" | \"y\"",
                        "rule 'root' (byte 0) can reach itself before matching a character");
    EXPECT_REFUSED_WITH("root ::= a\na ::= b \"x\"\nb ::= a | \"y\"", "(left recursion");
    EXPECT_REFUSED_WITH("root ::= (\"a\"?)*", "a repetition at byte 15 in rule 'root'");  // stricter than libllama
    EXPECT_OK("root ::= \"(\" root? \")\"");  // recursion after a character is fine
}

TEST(GrammarCheck, SyntaxErrorsNameTheByte) {
    EXPECT_REFUSED_WITH("root ::= \"\\q\"", "unknown escape at byte 10");
    EXPECT_REFUSED_WITH("root ::= \"\\x4\"", "expecting 2 hex digits at byte 10");
    EXPECT_REFUSED_WITH("root ::= \"abc", "unexpected end of input in the string at byte 9");
    EXPECT_REFUSED_WITH("root ::= [abc", "in the character class at byte 9");
    EXPECT_REFUSED_WITH("root ::= (\"a\"", "expecting ')' at byte 13");
    EXPECT_REFUSED_WITH("root := \"a\"", "expecting ::= at byte 5");
    EXPECT_REFUSED_WITH("::= \"a\"", "expecting a rule name at byte 0");
    EXPECT_REFUSED_WITH("root ::= \"a\" )", "expecting a newline or the end at byte 13");
    EXPECT_REFUSED_WITH("root ::= \"a\"\n  | \"b\"", "expecting a rule name at byte 15");  // libllama's rule too
    EXPECT_REFUSED_WITH("root ::= foo", "rule 'foo' is used at byte 9 but never defined");
    EXPECT_REFUSED_WITH("a ::= \"x\"", "no rule named 'root'");
    EXPECT_REFUSED_WITH(std::string("root ::= \"a\0\"", 13), "a NUL byte at byte 11");
    EXPECT_REFUSED_WITH("root ::= <[99999999999]>", "a token id above 4294967295 at byte 11");
    EXPECT_REFUSED_WITH("root ::= <" + std::string(300, 'a') + ">",
                        "a token reference longer than 256 bytes at byte 9");
    EXPECT_REFUSED_WITH("root ::= <[12]", "expecting '>'");
    EXPECT_REFUSED_WITH("root ::= !\"a\"", "expecting '<' at byte 10");
}

TEST(GrammarCheck, LimitsOutsideTheirCapsAreRefusedNamingTheFlag) {
    grammar_limits l;
    EXPECT_TRUE(grammar_limits_check(l).ok());
    EXPECT_TRUE(grammar_limits_check(grammar_limits_cap).ok());
    l.depth_max = 0;
    EXPECT_EQ(grammar_limits_check(l).message(), "--grammar-max-depth: 0 is not in 1..1024");
    l = grammar_limits_cap;
    l.chain_max += 1;
    EXPECT_EQ(grammar_limits_check(l).message(), "--grammar-max-chain: 4097 is not in 1..4096");
    l = grammar_limits_cap;
    l.fanout_max += 1;
    EXPECT_FALSE(grammar_check("root ::= \"a\"", l).ok());  // grammar_check itself holds them to the caps
    sampling_params p;
    p.grammar_bounds.elements_max = 0;
    EXPECT_NE(sampling_check(p).message().find("--grammar-max-elements"), std::string::npos);
}

// Issue 22, finding 1: "(" x 100,000 ... ")" x 100,000 (~200 KB, under the 1 MiB cap) overflowed the stack
// inside libllama's grammar parser and killed the node.
TEST(GrammarCheckRegression, NestedHundredThousandDeepIsRefusedBeforeLibllama) {
    const std::string deep = "root ::= " + std::string(100000, '(') + "\"a\"" + std::string(100000, ')');
    ASSERT_LT(deep.size(), grammar_bytes_max);
    const std::string m = refusal(deep);
    EXPECT_EQ(m, "grammar: groups nested deeper than 64 (--grammar-max-depth) at byte 73");
    sampling_params p;
    p.grammar.gbnf = deep;
    EXPECT_EQ(sampling_check(p).message(), m);
    // The libllama path: sampling_check_grammar and the chain refuse it without calling libllama's parser
    // (which would crash this test binary).
    auto model = model_for("llama");
    EXPECT_EQ(sampling_check_grammar(p, model->vocab()).message(), m);
    auto chain = sampling_make_chain(p, model->vocab());
    ASSERT_FALSE(chain.ok());
    EXPECT_EQ(chain.status().message(), m);
    // Raised to the cap, it is still refused.
    p.grammar_bounds = grammar_limits_cap;
    EXPECT_NE(sampling_check_grammar(p, model->vocab()).message().find("deeper than 1024"), std::string::npos);
}

// A 52-byte grammar libllama accepts and then expands forever (its parse stacks grow until memory runs out):
// "a" reaches itself through "b", which can match nothing, with something left to match after it.
TEST(GrammarCheckRegression, LeftRecursionThroughAnEmptyRuleIsRefused) {
    EXPECT_REFUSED_WITH("root ::= a\na ::= b a \"x\" | \"z\"\nb ::= c\nc ::= \"y\" | \n", "rule 'a' (byte 11)");
}

// Found by grammar_check_fuzz (a libFuzzer timeout, 2026-12-03): every item can match nothing and accepts the
// same characters, so libllama's sampler follows C(215 + L, L) ways to read a token of L such characters
// before it rejects it (7.6 s for one sampling step in the ASan build). About 216 stacks at each position:
// inside the fan-out limit, so it took the run check to refuse it.
TEST(GrammarCheckRegression, AmbiguousNullableRepetitionIsRefused) {
    EXPECT_REFUSED_WITH("root ::= item{215} \",\"\nitem ::= [a,-z]{0,8}\n",
                        "rule 'root' (byte 0) has more than 4 elements in a row that can each match nothing");
    // The fuzzer's second find (CI, 2026-12-04): the same shape with another class.
    EXPECT_REFUSED_WITH("root ::= item{410}\nitem ::= [a=z]{0,8}\n", "elements in a row that can each match nothing");
    // Nested optional copies ({0,n} builds a chain of rules) count the same as inline ones.
    EXPECT_REFUSED_WITH("root ::= item{0,215} \",\"\nitem ::= [a-z]*\n",
                        "elements in a row that can each match nothing");
}

TEST(GrammarCheck, NullableRunsUpToTheLimitAreAccepted) {
    const std::string four = "root ::= x x x x \".\"\nx ::= [a-z]*\n";
    EXPECT_TRUE(grammar_check(four, {}).ok()) << grammar_check(four, {}).to_string();
    EXPECT_REFUSED_WITH("root ::= x x x x x \".\"\nx ::= [a-z]*\n", "more than 4 elements in a row");
    // The element that ends the row counts when it starts with the same character.
    EXPECT_REFUSED_WITH("root ::= x x x x \"a\"\nx ::= [a-z]*\n", "more than 4 elements in a row");
    // A JSON object's optional properties: ("," kv)? each, where kv cannot be a run of commas.
    std::string props = "root ::= \"{\" kv";
    for (int i = 0; i < 30; ++i) props += " (\",\" ws kv)?";
    props += " \"}\"\nkv ::= \"\\\"k\\\":\" ws [0-9]+\nws ::= [ \\t\\n]{0,20}\n";
    EXPECT_TRUE(grammar_check(props, {}).ok()) << grammar_check(props, {}).to_string();
    // Elements that start with different characters are not ambiguous however many follow one another.
    std::string distinct = "root ::= ";
    for (char c = 'a'; c <= 'z'; ++c) distinct += std::string("\"") + c + "\"? ";
    EXPECT_TRUE(grammar_check(distinct + "\n", {}).ok()) << grammar_check(distinct + "\n", {}).to_string();
    // A code point above 255 shares a bucket with its low 7 bits over 128 (a superset is safe): é (U+00E9)
    // and U+0169 both fold to bucket 233, so five of them in a row are refused.
    EXPECT_REFUSED_WITH("root ::= [\\u00e9]? [\\u0169]? [\\u00e9]? [\\u0169]? [\\u00e9]?\n",
                        "more than 4 elements in a row");
    // A non-nullable element ends a run: "a" x "a" x ... is accepted.
    std::string split = "root ::= ";
    for (int i = 0; i < 20; ++i) split += "[a-z]* \",\" ";
    EXPECT_TRUE(grammar_check(split + "\n", {}).ok()) << grammar_check(split + "\n", {}).to_string();
}

// {5,3}: libllama builds max - min (unsigned: 2^64 - 2) rules.
TEST(GrammarCheckRegression, RepetitionWithMaximumBelowMinimumIsRefused) {
    EXPECT_REFUSED_WITH("root ::= \"a\"{5,3}", "a repetition whose maximum is below its minimum at byte 12");
}

// libllama's left-recursion check walks every path without a memo: rules that each start with the next one
// twice (and can match nothing) make 2^n paths.
TEST(GrammarCheckRegression, ExponentialLeftRecursionCheckIsRefused) {
    std::string g = "root ::= r0 \"b\"\n";
    for (int i = 0; i < 40; ++i)
        g += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + " r" + std::to_string(i + 1) + " | \"\"\n";
    EXPECT_REFUSED_WITH(g + "r40 ::= \"\"\n", "(--grammar-max-fanout)");
}

// The fuzzer's timeout (grammar_check_fuzz, 2026-12-05): a character class naming U+FFFFFFFF (a \U escape
// takes any 8 hex digits) made the class scan's 32-bit counter wrap and never end. Each returns now.
TEST(GrammarCheckRegression, ClassEndingAtTheLargestCodePointEnds) {
    for (const char * g : {"root ::= [\\Uffffffff]", "root ::= [^\\Ufffffff0-\\Uffffffff]",
                           "root ::= [\\Uffffff00-\\Uffffffff] \"a\""}) {
        const Status st = grammar_check(g);  // (before the fix: no return)
        EXPECT_TRUE(st.ok()) << g << ": " << st.to_string();
    }
}

// ---- through libllama ----

class GrammarCheckLibllama : public ::testing::Test {
  protected:
    static const llama_vocab * vocab() { return model_for("llama")->vocab(); }
    static Status loads(const std::string & gbnf, const grammar_limits & l = {}) {
        sampling_params p;
        p.grammar.gbnf = gbnf;
        p.grammar_bounds = l;
        return sampling_check_grammar(p, vocab());
    }
};

TEST_F(GrammarCheckLibllama, GrammarsAtTheDefaultLimitsLoad) {
    EXPECT_TRUE(loads(nested_groups(64)).ok());
    EXPECT_TRUE(loads(chain(1024)).ok());
    EXPECT_TRUE(loads(alternatives(4096)).ok());
    EXPECT_TRUE(loads("root ::= \"a\"{1999}").ok());
}

// The caps' margin: grammars at the caps load on a thread with a 1 MiB stack (an eighth of the usual).
TEST_F(GrammarCheckLibllama, GrammarsAtTheCapsLoadOnAOneMebibyteStack) {
    const grammar_limits cap = grammar_limits_cap;
    struct job {
        std::string gbnf;
        grammar_limits limits;
        Status result;
    };
    job jobs[] = {{nested_groups(cap.depth_max), cap, {}}, {chain(cap.chain_max), cap, {}}};
    const llama_vocab * v = vocab();
    (void)v;  // loaded here, on the main thread
    for (job & j : jobs) {
        pthread_attr_t attr;
        ASSERT_EQ(pthread_attr_init(&attr), 0);
        ASSERT_EQ(pthread_attr_setstacksize(&attr, size_t(1) << 20), 0);
        pthread_t t;
        auto run = [](void * arg) -> void * {
            auto * jj = static_cast<job *>(arg);
            jj->result = loads(jj->gbnf, jj->limits);
            return nullptr;
        };
        ASSERT_EQ(pthread_create(&t, &attr, run, &j), 0);
        pthread_join(t, nullptr);
        pthread_attr_destroy(&attr);
        EXPECT_TRUE(j.result.ok()) << j.result.to_string();
    }
}

TEST_F(GrammarCheckLibllama, RefusedGrammarsNeverReachLibllama) {
    // libllama would accept it and loop; sampling_check_grammar refuses it first.
    Status st = loads("root ::= a\na ::= b a \"x\" | \"z\"\nb ::= c\nc ::= \"y\" | \n");
    EXPECT_NE(st.message().find("left recursion"), std::string::npos) << st.to_string();
    // What libllama itself rejects is still reported as its rejection.
    EXPECT_EQ(loads("root ::= <notatoken>").message(),
              "grammar: libllama's GBNF parser rejected it (or a trigger pattern)");
}

// The engine checks every task's grammar at submit: a decode task (a blob's embedded request) or a
// generation with the 100,000-deep grammar is refused there, and the engine goes on serving.
TEST(GrammarCheckRegression, DeepGrammarInADecodeTaskIsRefusedAtSubmit) {
    auto m = model_for("llama");
    auto e = make_engine(m, engine_cfg(1, 1024));
    gen_request req = greedy(make_prompt(12, 7, int32_t(m->identity().n_vocab)), 4);
    engine_result pre = run_task(*e, task_prefill{req});
    ASSERT_TRUE(pre.done.ok()) << pre.done.status().to_string();
    gen_request deep = req;
    deep.sampling.grammar.gbnf = "root ::= " + std::string(100000, '(') + "\"a\"" + std::string(100000, ')');
    auto d = e->submit(task_decode{validated(pre.done->blob), deep});
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.status().code(), status_code::invalid_argument);
    EXPECT_NE(d.status().message().find("groups nested deeper than 64"), std::string::npos) << d.status().to_string();
    auto g = e->submit(task_generate{deep});
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().code(), status_code::invalid_argument);
    // A node's raised bounds travel with the request, but never past the caps.
    deep.sampling.grammar_bounds.depth_max = grammar_limits_cap.depth_max + 1;
    EXPECT_NE(e->submit(task_generate{deep}).status().message().find("--grammar-max-depth"), std::string::npos);
    // Still serving: the same blob decodes.
    run_result ok = run_task(*e, task_decode{validated(pre.done->blob), req});
    EXPECT_TRUE(ok.done.ok()) << ok.done.status().to_string();
}

}  // namespace
}  // namespace baton
