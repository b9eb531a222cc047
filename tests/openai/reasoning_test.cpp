// reasoning_test.cpp — the thought/answer split (reasoning.h): format names, tag detection, each rule of the
// split with hand-written expectations, what streaming holds back, and the key property: any split of an
// output into pieces gives the same reasoning and content as the whole output, which is the specified split
// (an independent, non-streaming oracle below).
#include <gtest/gtest.h>

#include <iterator>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "baton/openai/reasoning.h"

namespace baton::test {
namespace {

const reasoning_tags k_think{"<think>", "</think>"};
const reasoning_format k_formats[] = {reasoning_format::none, reasoning_format::deepseek,
                                      reasoning_format::deepseek_legacy};

// run feeds pieces in order, then finishes, and returns the concatenated deltas.
reasoning_delta run(reasoning_format f, const reasoning_tags & tags, bool starts_in_reasoning,
                    const std::vector<std::string_view> & pieces) {
    reasoning_splitter sp(f, tags, starts_in_reasoning);
    reasoning_delta all;
    for (const auto piece : pieces) {
        const reasoning_delta d = sp.feed(piece);
        all.reasoning += d.reasoning;
        all.content += d.content;
    }
    const reasoning_delta d = sp.finish();
    all.reasoning += d.reasoning;
    all.content += d.content;
    return all;
}

reasoning_delta run_whole(reasoning_format f, std::string_view s, bool starts_in_reasoning = false,
                          const reasoning_tags & tags = k_think) {
    return run(f, tags, starts_in_reasoning, {s});
}

bool ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string trimmed(std::string_view s, bool left, bool right) {
    while (left && !s.empty() && ws(s.front())) s.remove_prefix(1);
    while (right && !s.empty() && ws(s.back())) s.remove_suffix(1);
    return std::string(s);
}

// oracle: the split of reasoning.h's header comment, computed on the whole string with plain string search.
reasoning_delta oracle(reasoning_format f, const reasoning_tags & tags, bool starts_in_reasoning, std::string_view s) {
    if (f == reasoning_format::none) return {"", std::string(s)};
    size_t first = 0;
    while (first < s.size() && ws(s[first])) ++first;
    reasoning_delta ds{"", std::string(s)};
    size_t body = std::string_view::npos;
    if (s.substr(first).starts_with(tags.open)) body = first + tags.open.size();
    else if (starts_in_reasoning) body = first;
    if (body != std::string_view::npos) {
        const size_t close = s.find(tags.close, body);
        if (close == std::string_view::npos) {
            ds = {trimmed(s.substr(body), true, true), ""};
        } else {
            ds = {trimmed(s.substr(body, close - body), true, true),
                  trimmed(s.substr(close + tags.close.size()), true, false)};
        }
    }
    if (f == reasoning_format::deepseek_legacy) ds.content = std::string(s);
    return ds;
}

std::string show(std::string_view s) {
    std::string out;
    for (const char c : s) out += c == '\n' ? std::string("\\n") : std::string(1, c);
    return out;
}

// check_all_splits: oracle == whole == byte by byte == every 2- and 3-piece split, for every format and
// both starts_in_reasoning values.
void check_all_splits(std::string_view s, const reasoning_tags & tags = k_think) {
    for (const auto f : k_formats) {
        for (const bool sir : {false, true}) {
            SCOPED_TRACE(std::string(reasoning_format_name(f)) + (sir ? " in-reasoning" : "") + " \"" + show(s) + "\"");
            const reasoning_delta want = oracle(f, tags, sir, s);
            ASSERT_EQ(run(f, tags, sir, {s}), want);
            std::vector<std::string_view> bytes;
            for (size_t i = 0; i < s.size(); ++i) bytes.push_back(s.substr(i, 1));
            ASSERT_EQ(run(f, tags, sir, bytes), want) << "byte by byte";
            for (size_t i = 0; i <= s.size(); ++i) {
                for (size_t j = i; j <= s.size(); ++j) {
                    const std::vector<std::string_view> pieces{s.substr(0, i), s.substr(i, j - i), s.substr(j)};
                    ASSERT_EQ(run(f, tags, sir, pieces), want) << "split at " << i << ", " << j;
                }
            }
        }
    }
}

TEST(Reasoning, FormatParsesNamesAndAuto) {
    EXPECT_EQ(reasoning_format_parse("none").value(), reasoning_format::none);
    EXPECT_EQ(reasoning_format_parse("deepseek").value(), reasoning_format::deepseek);
    EXPECT_EQ(reasoning_format_parse("deepseek-legacy").value(), reasoning_format::deepseek_legacy);
    EXPECT_EQ(reasoning_format_parse("auto").value(), reasoning_format::deepseek);
    for (const auto f : k_formats) EXPECT_EQ(reasoning_format_parse(reasoning_format_name(f)).value(), f);
    EXPECT_STREQ(reasoning_format_name(reasoning_format::deepseek_legacy), "deepseek-legacy");
}

TEST(Reasoning, FormatRejectsUnknownNamingTheEscapedValue) {
    for (const char * bad : {"", "DeepSeek", "deepseek_legacy", "auto "}) {
        const auto r = reasoning_format_parse(bad);
        ASSERT_FALSE(r.ok()) << bad;
        EXPECT_EQ(r.status().code(), status_code::invalid_argument);
        EXPECT_NE(r.status().message().find("\"" + std::string(bad) + "\""), std::string::npos) << r.status().message();
    }
    const auto r = reasoning_format_parse("a\n\"b");
    EXPECT_EQ(r.status().message(),
              "reasoning format \"a\\x0a\\\"b\": must be none, deepseek, deepseek-legacy or auto");
}

TEST(Reasoning, TagsForThinkFamiliesAndDefault) {
    // Qwen3 and DeepSeek-R1 template excerpts; a template with no marker gets the default too.
    EXPECT_EQ(reasoning_tags_for_template("{%- if enable_thinking is defined and enable_thinking is false %}"
                                          "{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}"),
              k_think);
    EXPECT_EQ(reasoning_tags_for_template("{% set content = content.split('</think>')[-1] %}"
                                          "{{'<｜Assistant｜><think>\\n'}}"),
              k_think);
    EXPECT_EQ(reasoning_tags_for_template("{{ '<|im_start|>assistant\\n' }}"), k_think);
    EXPECT_EQ(reasoning_tags_for_template(""), k_think);
}

TEST(Reasoning, TagsForMagistral) {
    const reasoning_tags want{"[THINK]", "[/THINK]"};
    EXPECT_EQ(reasoning_tags_for_template("{%- if block['type'] == 'thinking' %}{{- '[THINK]' + block['thinking'] + "
                                          "'[/THINK]' }}"),
              want);
}

TEST(Reasoning, TagsForCommandR7B) {
    const reasoning_tags want{"<|START_THINKING|>", "<|END_THINKING|>"};
    EXPECT_EQ(reasoning_tags_for_template("{{ '<|START_THINKING|>' + message.tool_plan + '<|END_THINKING|>' }}"), want);
}

TEST(Reasoning, TagsForSeedOss) {
    const reasoning_tags want{"<seed:think>", "</seed:think>"};
    EXPECT_EQ(reasoning_tags_for_template("{{ '<seed:think>' + reasoning_content + '</seed:think>' }}"), want);
}

TEST(Reasoning, PromptOpensWhenItEndsWithTheOpenTag) {
    EXPECT_TRUE(reasoning_prompt_opens("<|im_start|>assistant\n<think>\n", k_think));                 // Qwen3
    EXPECT_TRUE(reasoning_prompt_opens("<｜Assistant｜><think>", k_think));                           // DeepSeek-R1
    EXPECT_FALSE(reasoning_prompt_opens("<|im_start|>assistant\n<think>\n\n</think>\n\n", k_think));  // thinking off
    EXPECT_FALSE(reasoning_prompt_opens("<|im_start|>assistant\n", k_think));
    EXPECT_FALSE(reasoning_prompt_opens("", k_think));
    EXPECT_TRUE(reasoning_prompt_opens("[INST]hi[/INST][THINK] \t", {"[THINK]", "[/THINK]"}));
    EXPECT_FALSE(reasoning_prompt_opens("[INST]hi[/INST]<think>", {"[THINK]", "[/THINK]"}));
}

TEST(Reasoning, NoneIsVerbatimAndHoldsNothing) {
    reasoning_splitter sp(reasoning_format::none, k_think, true);
    EXPECT_EQ(sp.feed(" <think>a</thi"), (reasoning_delta{"", " <think>a</thi"}));
    EXPECT_EQ(sp.feed("nk>b \n"), (reasoning_delta{"", "nk>b \n"}));
    EXPECT_EQ(sp.finish(), (reasoning_delta{}));
}

TEST(Reasoning, DeepseekSplitsALeadingThoughtAndTrimsAroundIt) {
    EXPECT_EQ(run_whole(reasoning_format::deepseek, "<think>\n  I think.\n  Twice. \n</think>\n\n Answer.\n"),
              (reasoning_delta{"I think.\n  Twice.", "Answer.\n"}));
}

TEST(Reasoning, DeepseekAllowsWhitespaceBeforeTheOpenTag) {
    EXPECT_EQ(run_whole(reasoning_format::deepseek, "\n \t<think>a</think>b"), (reasoning_delta{"a", "b"}));
}

TEST(Reasoning, DeepseekEmptyThought) {
    EXPECT_EQ(run_whole(reasoning_format::deepseek, "<think>\n\n</think>\n\nok"), (reasoning_delta{"", "ok"}));
    EXPECT_EQ(run_whole(reasoning_format::deepseek, "<think></think>"), (reasoning_delta{"", ""}));
}

TEST(Reasoning, DeepseekWithoutALeadingOpenTagIsAllContent) {
    EXPECT_EQ(run_whole(reasoning_format::deepseek, "\n\nHi <think>x</think> y"),
              (reasoning_delta{"", "\n\nHi <think>x</think> y"}));
    EXPECT_EQ(run_whole(reasoning_format::deepseek, "a</think>b"), (reasoning_delta{"", "a</think>b"}));
    EXPECT_EQ(run_whole(reasoning_format::deepseek, "  \n"), (reasoning_delta{"", "  \n"}));
}

TEST(Reasoning, DeepseekExtractsOnlyTheFirstBlock) {
    EXPECT_EQ(run_whole(reasoning_format::deepseek, "<think>a</think> b <think>c</think>"),
              (reasoning_delta{"a", "b <think>c</think>"}));
}

TEST(Reasoning, DeepseekKeepsContentTrailingWhitespace) {
    EXPECT_EQ(run_whole(reasoning_format::deepseek, "<think>a</think>b \n\n"), (reasoning_delta{"a", "b \n\n"}));
    EXPECT_EQ(run_whole(reasoning_format::deepseek, "plain \n"), (reasoning_delta{"", "plain \n"}));
}

TEST(Reasoning, DeepseekUnclosedThoughtIsReasoning) {
    EXPECT_EQ(run_whole(reasoning_format::deepseek, "<think> still thinking \n"),
              (reasoning_delta{"still thinking", ""}));
    EXPECT_EQ(run_whole(reasoning_format::deepseek, "<think>"), (reasoning_delta{"", ""}));
}

TEST(Reasoning, StartsInReasoningNeedsNoOpenTag) {
    EXPECT_EQ(run_whole(reasoning_format::deepseek, "\nthought \n</think>\n\nanswer", true),
              (reasoning_delta{"thought", "answer"}));
    EXPECT_EQ(run_whole(reasoning_format::deepseek, "</think>answer", true), (reasoning_delta{"", "answer"}));
    EXPECT_EQ(run_whole(reasoning_format::deepseek, "\n\nno close ", true), (reasoning_delta{"no close", ""}));
}

TEST(Reasoning, StartsInReasoningConsumesARepeatedOpenTag) {
    EXPECT_EQ(run_whole(reasoning_format::deepseek, " <think> t </think> a", true), (reasoning_delta{"t", "a"}));
    // Not at the start: plain reasoning text.
    EXPECT_EQ(run_whole(reasoning_format::deepseek, "x <think> t </think> a", true),
              (reasoning_delta{"x <think> t", "a"}));
}

TEST(Reasoning, LegacyKeepsTheWholeOutputInContent) {
    EXPECT_EQ(run_whole(reasoning_format::deepseek_legacy, "<think> a </think> b "),
              (reasoning_delta{"a", "<think> a </think> b "}));
    EXPECT_EQ(run_whole(reasoning_format::deepseek_legacy, " a </think> b", true),
              (reasoning_delta{"a", " a </think> b"}));
    EXPECT_EQ(run_whole(reasoning_format::deepseek_legacy, "x<think>a</think>"),
              (reasoning_delta{"", "x<think>a</think>"}));
}

TEST(Reasoning, LegacyNeverHoldsContentBack) {
    reasoning_splitter sp(reasoning_format::deepseek_legacy, k_think, false);
    EXPECT_EQ(sp.feed(" <thi"), (reasoning_delta{"", " <thi"}));
    EXPECT_EQ(sp.feed("nk>a </th"), (reasoning_delta{"a", "nk>a </th"}));
    EXPECT_EQ(sp.feed("ink> b"), (reasoning_delta{"", "ink> b"}));
    EXPECT_EQ(sp.finish(), (reasoning_delta{}));
}

TEST(Reasoning, OtherFamiliesTags) {
    const reasoning_tags magistral{"[THINK]", "[/THINK]"};
    EXPECT_EQ(run_whole(reasoning_format::deepseek, "[THINK]hm[/THINK]ok", false, magistral),
              (reasoning_delta{"hm", "ok"}));
    EXPECT_EQ(run_whole(reasoning_format::deepseek, "<think>hm</think>ok", false, magistral),
              (reasoning_delta{"", "<think>hm</think>ok"}));
    const reasoning_tags command_r{"<|START_THINKING|>", "<|END_THINKING|>"};
    EXPECT_EQ(run_whole(reasoning_format::deepseek, "<|START_THINKING|>plan<|END_THINKING|>do", false, command_r),
              (reasoning_delta{"plan", "do"}));
}

TEST(Reasoning, PartialTagAtTheEndIsKeptVerbatim) {
    EXPECT_EQ(run_whole(reasoning_format::deepseek, "<thi"), (reasoning_delta{"", "<thi"}));
    EXPECT_EQ(run_whole(reasoning_format::deepseek, " <thi"), (reasoning_delta{"", " <thi"}));
    EXPECT_EQ(run_whole(reasoning_format::deepseek, " <thi", true), (reasoning_delta{"<thi", ""}));
    EXPECT_EQ(run_whole(reasoning_format::deepseek, "<think>abc </thi"), (reasoning_delta{"abc </thi", ""}));
    EXPECT_EQ(run_whole(reasoning_format::deepseek_legacy, "<thi"), (reasoning_delta{"", "<thi"}));
    EXPECT_EQ(run_whole(reasoning_format::deepseek_legacy, "<thi", true), (reasoning_delta{"<thi", "<thi"}));
    // Streamed: held back by feed, flushed by finish.
    reasoning_splitter sp(reasoning_format::deepseek, k_think, false);
    EXPECT_EQ(sp.feed("<thi"), (reasoning_delta{}));
    EXPECT_EQ(sp.finish(), (reasoning_delta{"", "<thi"}));
}

TEST(Reasoning, StreamingHoldsBackOnlyPossibleTagStartsAndUndecidedWhitespace) {
    reasoning_splitter sp(reasoning_format::deepseek, k_think, false);
    EXPECT_EQ(sp.feed("\n"), (reasoning_delta{}));         // leading whitespace: before a tag or content?
    EXPECT_EQ(sp.feed("<think>\n"), (reasoning_delta{}));  // the reasoning's leading whitespace: dropped
    EXPECT_EQ(sp.feed("Hello"), (reasoning_delta{"Hello", ""}));
    EXPECT_EQ(sp.feed(" wor"), (reasoning_delta{" wor", ""}));
    EXPECT_EQ(sp.feed("ld \n"), (reasoning_delta{"ld", ""}));  // trailing whitespace: before the close tag?
    EXPECT_EQ(sp.feed("<"), (reasoning_delta{}));
    EXPECT_EQ(sp.feed("x"), (reasoning_delta{" \n<x", ""}));  // not a tag: the whitespace was interior
    EXPECT_EQ(sp.feed(" </th"), (reasoning_delta{}));
    EXPECT_EQ(sp.feed("ink>\n\n"), (reasoning_delta{}));
    EXPECT_EQ(sp.feed("Answer"), (reasoning_delta{"", "Answer"}));
    EXPECT_EQ(sp.feed(" <think> \n"), (reasoning_delta{"", " <think> \n"}));  // content: never held
    EXPECT_EQ(sp.finish(), (reasoning_delta{}));
}

TEST(Reasoning, StreamingContentWithoutThoughtIsEmittedAtOnce) {
    reasoning_splitter sp(reasoning_format::deepseek, k_think, false);
    EXPECT_EQ(sp.feed(" <"), (reasoning_delta{}));
    EXPECT_EQ(sp.feed("b>bold"), (reasoning_delta{"", " <b>bold"}));
    EXPECT_EQ(sp.feed(" \n"), (reasoning_delta{"", " \n"}));
    EXPECT_EQ(sp.finish(), (reasoning_delta{}));
}

TEST(Reasoning, TagsSplitAcrossPieces) {
    reasoning_splitter sp(reasoning_format::deepseek, k_think, false);
    EXPECT_EQ(sp.feed("<th"), (reasoning_delta{}));
    EXPECT_EQ(sp.feed("ink>ab"), (reasoning_delta{"ab", ""}));
    EXPECT_EQ(sp.feed("c</"), (reasoning_delta{"c", ""}));
    EXPECT_EQ(sp.feed("think"), (reasoning_delta{}));
    EXPECT_EQ(sp.feed(">x"), (reasoning_delta{"", "x"}));
    EXPECT_EQ(sp.finish(), (reasoning_delta{}));
    // "<</think>": the first '<' fails the tag, the second begins it.
    EXPECT_EQ(run(reasoning_format::deepseek, k_think, true, {"a<", "</", "think>b"}), (reasoning_delta{"a<", "b"}));
}

TEST(Reasoning, SplitsAgreeWithTheWholeOutputExhaustively) {
    const char * cases[] = {
        "<think>a b</think>c",
        "  <think>\n x \n</think>\n y \n",
        "<think></think>",
        "</think>after",
        " pre <think>x</think>",
        "<thi",
        " \n",
        "<think>é  </th",
        "<<think>>a<</think>>b",
        "<think><think>a</thinkk></think></think>",
        "x</think> \n<think>y</think>",
        "\n<think> é </think>\t",
    };
    for (const char * s : cases) check_all_splits(s);
    check_all_splits("[THINK] a [/THINK] b [THINK]", {"[THINK]", "[/THINK]"});
    check_all_splits("<seed:think>a</seed:think> b", {"<seed:think>", "</seed:think>"});
}

TEST(Reasoning, RandomSplitsAgreeWithTheWholeOutput) {
    const char * fragments[] = {"<think>", "</think>", "<th", "</th", "ink>", "<", ">",
                                "/",       " ",        "\n",  "\t",   "abc",  "é", "x"};
    std::mt19937 rng(20240611);
    std::uniform_int_distribution<size_t> n_fragments(0, 12);
    std::uniform_int_distribution<size_t> pick(0, std::size(fragments) - 1);
    std::uniform_int_distribution<int> coin(0, 3);
    for (int iter = 0; iter < 4000; ++iter) {
        std::string s;
        for (size_t n = n_fragments(rng); n > 0; --n) s += fragments[pick(rng)];
        std::vector<std::string_view> pieces;
        size_t from = 0;
        for (size_t i = 1; i <= s.size(); ++i) {
            if (i == s.size() || coin(rng) == 0) {
                pieces.push_back(std::string_view(s).substr(from, i - from));
                from = i;
            }
        }
        for (const auto f : k_formats) {
            for (const bool sir : {false, true}) {
                const reasoning_delta want = oracle(f, k_think, sir, s);
                ASSERT_EQ(run(f, k_think, sir, {s}), want)
                    << reasoning_format_name(f) << " " << sir << " \"" << show(s) << "\"";
                ASSERT_EQ(run(f, k_think, sir, pieces), want) << reasoning_format_name(f) << " " << sir << " \""
                                                              << show(s) << "\" in " << pieces.size() << " pieces";
            }
        }
    }
}

}  // namespace
}  // namespace baton::test
