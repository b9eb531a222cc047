// llama_server_diff_test.cpp — the same requests to Debian's llama-server and to `baton serve` on the same
// GGUF with the same flags, the answers compared field by field where Baton promises llama-server's behaviour
// (docs/api.md, "llama-server compatibility"). Skipped where llama-server is not installed (it is in the build
// root). One pair of processes per test serves all of its cases.
#include <algorithm>
#include <cctype>
#include <map>
#include <tuple>

#include "serve_test_util.h"

namespace baton::test {
namespace {

struct server_pair {
    std::unique_ptr<node_process> llama, baton;
};

// start_pair: both servers on the test model with `-c ctx -np np` and extra flags for both.
server_pair start_pair(int ctx, int np, const std::vector<std::string> & both = {},
                       const std::vector<std::string> & baton_only = {}) {
    server_pair p;
    std::vector<std::string> common = {
        "-m", test_model_path("llama", 1), "-c", std::to_string(ctx), "-np", std::to_string(np), "-t", "2", "-fa",
        "off"};
    common.insert(common.end(), both.begin(), both.end());
    p.llama = node_process::start_llama_server(common);
    if (!p.llama) return p;
    std::vector<std::string> b = {"serve"};
    b.insert(b.end(), common.begin(), common.end());
    b.insert(b.end(), baton_only.begin(), baton_only.end());
    p.baton = node_process::start(b);
    return p;
}

#define SKIP_WITHOUT_LLAMA_SERVER(p)                                                                                   \
    if (!(p).llama) GTEST_SKIP() << "no /usr/bin/llama-server"

struct diff_case {
    std::string what, method, path, body;
};

http_reply send(const node_process & n, const diff_case & c, const std::string & key = "") {
    if (c.method == "GET") return get(n, c.path, key);
    return post(n, c.path, c.body, "application/json", key);
}

// expect_same_error: the same HTTP status, and an error object with the same code and type (and, for a
// context overflow, the same counts and message).
void expect_same_error(const diff_case & c, const http_reply & l, const http_reply & b) {
    SCOPED_TRACE(c.what + ": llama-server " + l.body + " | baton " + b.body);
    EXPECT_EQ(b.status, l.status);
    const json lj = l.j(), bj = b.j();
    ASSERT_TRUE(lj.contains("error") && bj.contains("error"));
    EXPECT_EQ(bj["error"]["code"], lj["error"]["code"]);
    EXPECT_EQ(bj["error"]["type"], lj["error"]["type"]);
    for (const char * f : {"n_prompt_tokens", "n_ctx"}) {
        EXPECT_EQ(bj["error"].value(f, json()), lj["error"].value(f, json())) << f;
    }
    if (lj["error"]["type"] == "exceed_context_size_error") {
        EXPECT_EQ(bj["error"]["message"], lj["error"]["message"]);
    }
}

TEST(LlamaServerDiff, ErrorsHaveLlamaServersStatusTypeAndFields) {
    server_pair p = start_pair(256, 1);
    SKIP_WITHOUT_LLAMA_SERVER(p);
    std::string long_text;
    for (int i = 0; i < 200; ++i) long_text += "hello world ";
    const std::vector<diff_case> cases = {
        {"context exceeded, /completion", "POST", "/completion", json{{"prompt", long_text}, {"n_predict", 2}}.dump()},
        {"context exceeded, /completions", "POST", "/completions",
         json{{"prompt", long_text}, {"n_predict", 2}}.dump()},
        {"context exceeded, /v1/completions", "POST", "/v1/completions",
         json{{"prompt", long_text}, {"max_tokens", 2}}.dump()},
        {"context exceeded, token array", "POST", "/v1/completions",
         json{{"prompt", std::vector<int>(300, 5)}, {"max_tokens", 2}}.dump()},
        {"context exceeded, chat", "POST", "/v1/chat/completions",
         json{{"messages", {{{"role", "user"}, {"content", long_text}}}}, {"max_tokens", 2}}.dump()},
        {"malformed JSON", "POST", "/v1/completions", "{not json"},
        {"a field of the wrong type", "POST", "/v1/completions", R"({"prompt":"x","temperature":"hot"})"},
        {"unknown route", "GET", "/v1/nothing", ""},
        {"two assistant messages at the end", "POST", "/v1/chat/completions",
         R"({"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},)"
         R"({"role":"assistant","content":"c"}],"max_tokens":2})"},
        {"slot action without --slot-save-path", "POST", "/slots/0?action=save", R"({"filename":"x.bin"})"},
    };
    for (const diff_case & c : cases) expect_same_error(c, send(*p.llama, c), send(*p.baton, c));
}

TEST(LlamaServerDiff, ApiKeyRefusalsAreAuthenticationErrors) {
    server_pair p = start_pair(256, 1, {"--api-key", "sekret"});
    SKIP_WITHOUT_LLAMA_SERVER(p);
    const diff_case c{"no key", "POST", "/v1/completions", R"({"prompt":"x","max_tokens":1})"};
    expect_same_error(c, send(*p.llama, c), send(*p.baton, c));
    const diff_case w{"wrong key", "POST", "/v1/completions", R"({"prompt":"x","max_tokens":1})"};
    expect_same_error(w, send(*p.llama, w, "nope"), send(*p.baton, w, "nope"));
    EXPECT_EQ(send(*p.baton, c, "sekret").status, 200);
    // Anthropic's header carries the key too, on both; a wrong one is refused alike.
    for (const std::string key : {"sekret", "nope"}) {
        const httplib::Headers h = {{"x-api-key", key}};
        const http_reply lr = to_reply(p.llama->client()->Post(c.path, h, c.body, "application/json"));
        const http_reply br = to_reply(p.baton->client()->Post(c.path, h, c.body, "application/json"));
        EXPECT_EQ(br.status, lr.status) << key << ": " << br.body;
        EXPECT_EQ(br.status, key == "sekret" ? 200 : 401) << br.body;
    }
}

// Each slot's context is n_ctx / n_slots on both (Baton's slots share one unified KV buffer but each owns an
// equal share of its cells), and /props and /slots report that share.
TEST(LlamaServerDiff, PerSlotContextIsReportedAndEnforcedAlike) {
    server_pair p = start_pair(1024, 4);
    SKIP_WITHOUT_LLAMA_SERVER(p);
    for (const auto * n : {p.llama.get(), p.baton.get()}) {
        const json props = get(*n, "/props").j();
        EXPECT_EQ(props["default_generation_settings"]["n_ctx"], 256) << props.dump().substr(0, 400);
        EXPECT_EQ(props["total_slots"], 4);
        for (const json & s : get(*n, "/slots").j()) EXPECT_EQ(s["n_ctx"], 256);
    }
    std::string text;
    for (int i = 0; i < 120; ++i) text += "hello world ";
    const diff_case c{"over one slot's context", "POST", "/completion",
                      json{{"prompt", text}, {"n_predict", 1}}.dump()};
    expect_same_error(c, send(*p.llama, c), send(*p.baton, c));
}

// Greedy text on the same GGUF and libllama is the same text, on llama-server's native route and OpenAI's.
TEST(LlamaServerDiff, GreedyCompletionsAreTheSameText) {
    server_pair p = start_pair(512, 1);
    SKIP_WITHOUT_LLAMA_SERVER(p);
    for (const std::string prompt : {"Hello there", "The quick brown fox", "1 2 3 4"}) {
        const json native = {{"prompt", prompt}, {"n_predict", 8}, {"temperature", 0}, {"cache_prompt", false}};
        const http_reply l = post(*p.llama, "/completions", native.dump()),
                         b = post(*p.baton, "/completions", native.dump());
        ASSERT_EQ(l.status, 200) << l.body;
        ASSERT_EQ(b.status, 200) << b.body;
        EXPECT_EQ(b.j()["content"], l.j()["content"]) << prompt;
        EXPECT_EQ(b.j()["tokens_predicted"], l.j()["tokens_predicted"]) << prompt;
        EXPECT_EQ(b.j()["tokens_evaluated"], l.j()["tokens_evaluated"]) << prompt;
        const json oai = {{"prompt", prompt}, {"max_tokens", 8}, {"temperature", 0}};
        const http_reply lo = post(*p.llama, "/v1/completions", oai.dump()),
                         bo = post(*p.baton, "/v1/completions", oai.dump());
        EXPECT_EQ(bo.j()["choices"][0]["text"], lo.j()["choices"][0]["text"]) << prompt;
        EXPECT_EQ(bo.j()["usage"], lo.j()["usage"]) << prompt;
    }
}

// ignore_eos bans the end-of-generation tokens (a -inf bias on each, listed in generation_settings.logit_bias
// as llama-server lists them), so even a bias that makes one the likeliest token cannot end or hold the text.
TEST(LlamaServerDiff, IgnoreEosBansEndTokensAsLlamaServerDoes) {
    server_pair p = start_pair(512, 1);
    SKIP_WITHOUT_LLAMA_SERVER(p);
    const json probe = {{"prompt", "Hello"}, {"n_predict", 1}, {"ignore_eos", true}};
    const json eog_bias = post(*p.llama, "/completion", probe.dump()).j()["generation_settings"]["logit_bias"];
    ASSERT_FALSE(eog_bias.empty()) << eog_bias;
    const int eos = eog_bias[0]["token"].get<int>();
    const json body = {{"prompt", "Hello there"},
                       {"n_predict", 8},
                       {"temperature", 0},
                       {"ignore_eos", true},
                       {"cache_prompt", false},
                       {"logit_bias", {{eos, 50}}},
                       {"n_probs", 0},
                       {"return_tokens", true}};
    const http_reply l = post(*p.llama, "/completion", body.dump()), b = post(*p.baton, "/completion", body.dump());
    ASSERT_EQ(l.status, 200) << l.body;
    ASSERT_EQ(b.status, 200) << b.body;
    EXPECT_EQ(b.j()["content"], l.j()["content"]);
    EXPECT_EQ(b.j()["tokens_predicted"], 8);
    EXPECT_EQ(b.j()["tokens"], l.j()["tokens"]);
    for (const json & t : b.j()["tokens"]) EXPECT_NE(t.get<int>(), eos);
    EXPECT_EQ(b.j()["generation_settings"]["logit_bias"], l.j()["generation_settings"]["logit_bias"]);
}

// --reasoning on|off sets the templates' enable_thinking (a request's chat_template_kwargs still win); the
// prompts /apply-template renders are the same on both servers.
TEST(LlamaServerDiff, ReasoningFlagSetsTheTemplatesEnableThinking) {
    const std::string tmpl =
        "{% if enable_thinking is defined %}[thinking={{ enable_thinking }}]{% endif %}"
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
    const json chat = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
    json kw = chat;
    kw["chat_template_kwargs"] = {{"enable_thinking", true}};
    std::map<std::string, std::string> prompts;
    for (const std::string mode : {"off", "on", "auto"}) {
        server_pair p = start_pair(512, 1, {"--jinja", "--chat-template", tmpl, "--reasoning", mode});
        SKIP_WITHOUT_LLAMA_SERVER(p);
        for (const json & body : {chat, kw}) {
            // auto without kwargs: Baton leaves enable_thinking to the template's default, llama-server passes
            // what its format detection decides (docs/api.md: compatibility); templates that think default to it.
            if (mode == "auto" && !body.contains("chat_template_kwargs")) continue;
            const http_reply l = post(*p.llama, "/apply-template", body.dump());
            const http_reply b = post(*p.baton, "/apply-template", body.dump());
            ASSERT_EQ(b.status, 200) << b.body;
            EXPECT_EQ(b.j()["prompt"], l.j()["prompt"]) << mode << ": " << body.dump();
        }
        prompts[mode] = post(*p.baton, "/apply-template", chat.dump()).j()["prompt"];
        EXPECT_NE(post(*p.baton, "/apply-template", kw.dump()).j()["prompt"].get<std::string>().find("[thinking=True]"),
                  std::string::npos);
    }
    EXPECT_NE(prompts["off"].find("[thinking=False]"), std::string::npos) << prompts["off"];
    EXPECT_NE(prompts["on"].find("[thinking=True]"), std::string::npos) << prompts["on"];
    EXPECT_EQ(prompts["auto"].find("[thinking="), std::string::npos) << prompts["auto"];
}

// A chat that ends with an assistant message is continued (llama-server's assistant prefill): the same prompt,
// so the same greedy text, whose content starts with the prefilled words (a stream sends only what follows); and through PD (the
// blob's embedded request carries the prefill) the same as on one node.
TEST(LlamaServerDiff, ATrailingAssistantMessageIsContinued) {
    server_pair p = start_pair(512, 1);
    SKIP_WITHOUT_LLAMA_SERVER(p);
    for (const bool stream : {false, true}) {
        const json body = {{"messages",
                            {{{"role", "system"}, {"content", "Be brief."}},
                             {{"role", "user"}, {"content", "What is the answer?"}},
                             {{"role", "assistant"}, {"content", "The answer is"}}}},
                           {"max_tokens", 6},
                           {"temperature", 0},
                           {"stream", stream}};
        const http_reply l = post(*p.llama, "/v1/chat/completions", body.dump());
        const http_reply b = post(*p.baton, "/v1/chat/completions", body.dump());
        ASSERT_EQ(l.status, 200) << l.body;
        ASSERT_EQ(b.status, 200) << b.body;
        auto content = [&](const http_reply & r) {
            return stream ? stream_text(normalized_stream(r.body))
                          : r.j()["choices"][0]["message"]["content"].get<std::string>();
        };
        EXPECT_EQ(content(b), content(l)) << stream;
        // A whole answer's content starts with the prefilled words; a stream sends only what follows them.
        EXPECT_EQ(content(b).rfind("The answer is", 0) == 0, !stream) << content(b);
        if (!stream) {
            EXPECT_EQ(b.j()["usage"], l.j()["usage"]);
            const http_reply pd = via_pd(*p.baton, *p.baton, "chat", body.dump());
            ASSERT_EQ(pd.status, 200) << pd.body;
            EXPECT_EQ(content(pd), content(b));
        }
    }
}

// A generation that runs until the context is full ends where llama-server's does: prompt + answer fill the
// slot's context exactly, finish_reason "length", the same text.
TEST(LlamaServerDiff, AGenerationThatFillsTheContextEndsWhereLlamaServersDoes) {
    server_pair p = start_pair(256, 1);
    SKIP_WITHOUT_LLAMA_SERVER(p);
    for (const bool stream : {false, true}) {
        const json body = {{"prompt", "hello world hello world"},
                           {"temperature", 0},
                           {"stream", stream},
                           {"logit_bias", {{2, false}, {4, false}}},
                           {"stream_options", {{"include_usage", true}}}};
        const http_reply l = post(*p.llama, "/v1/completions", body.dump()),
                         b = post(*p.baton, "/v1/completions", body.dump());
        ASSERT_EQ(l.status, 200) << l.body;
        ASSERT_EQ(b.status, 200) << b.body;
        auto usage = [&](const http_reply & r) {
            if (!stream) return r.j()["usage"];
            json u;
            for (const auto & c : sse_payloads(r.body))
                if (c != "[DONE]" && json::parse(c).contains("usage") && !json::parse(c)["usage"].is_null())
                    u = json::parse(c)["usage"];
            return u;
        };
        EXPECT_EQ(usage(b)["completion_tokens"], usage(l)["completion_tokens"]) << stream;
        EXPECT_EQ(usage(b)["total_tokens"], 256) << stream;
        if (!stream) {
            EXPECT_EQ(b.j()["choices"][0]["text"], l.j()["choices"][0]["text"]);
            EXPECT_EQ(b.j()["choices"][0]["finish_reason"], "length");
        }
    }
    // /completion says why it stopped as llama-server does: "truncated" when the context filled (stop_type
    // limit either way), not when n_predict ran out; through PD too (the decode node's slot filled).
    for (const int n_predict : {-1, 4}) {
        const json body = {{"prompt", "hello world hello world"},
                           {"temperature", 0},
                           {"n_predict", n_predict},
                           {"logit_bias", {{2, false}, {4, false}}}};
        const http_reply l = post(*p.llama, "/completion", body.dump()), b = post(*p.baton, "/completion", body.dump());
        ASSERT_EQ(l.status, 200) << l.body;
        ASSERT_EQ(b.status, 200) << b.body;
        EXPECT_EQ(l.j()["truncated"], n_predict < 0) << l.body;
        EXPECT_EQ(b.j()["truncated"], l.j()["truncated"]) << n_predict;
        EXPECT_EQ(b.j()["stop_type"], l.j()["stop_type"]) << n_predict;
        EXPECT_EQ(b.j()["content"], l.j()["content"]) << n_predict;
        const http_reply pd = via_pd(*p.baton, *p.baton, "completion", body.dump());
        ASSERT_EQ(pd.status, 200) << pd.body;
        EXPECT_EQ(pd.j()["truncated"], b.j()["truncated"]) << n_predict;
    }
}

// return_progress: a stream's prompt-progress chunks are llama-server's — one when the prompt starts and one
// after every batch (-b) of it, with the same total, cache and processed counts, in the endpoint's chunk shape,
// before the first token's — and the answer after them is the same. A whole answer carries none. Through PD the
// decode node reports the prompt once, whole, when its state has arrived, and the answer is the same.
TEST(LlamaServerDiff, PromptProgressChunksAreLlamaServers) {
    server_pair p = start_pair(1024, 1, {"-b", "64", "-ub", "16"});
    SKIP_WITHOUT_LLAMA_SERVER(p);
    std::string text;
    for (int i = 0; i < 30; ++i) text += "word" + std::to_string(i) + " ";
    // progress: the prompt_progress objects of a stream (time_ms dropped) and the text after them.
    struct seen {
        std::vector<std::tuple<int, int, int>> progress;
        std::string text;
        bool progress_after_text = false;
        std::string first_shape;  // the keys of the first progress chunk
    };
    auto read = [](const std::string & body) {
        seen s;
        for (const auto & c : sse_payloads(body)) {
            if (c == "[DONE]") continue;
            const json j = json::parse(c);
            if (j.contains("prompt_progress")) {
                const json & pp = j["prompt_progress"];
                s.progress.emplace_back(pp["total"].get<int>(), pp["cache"].get<int>(), pp["processed"].get<int>());
                s.progress_after_text = s.progress_after_text || !s.text.empty();
                EXPECT_TRUE(pp["time_ms"].is_number_integer()) << c;
                if (s.first_shape.empty())
                    for (const auto & [k, v] : j.items()) s.first_shape += k + (v.is_object() ? "{}" : "") + ",";
                continue;
            }
            if (j.contains("content")) s.text += j["content"].get<std::string>();
            if (j.contains("choices") && !j["choices"].empty()) {
                const json & ch = j["choices"][0];
                if (ch.contains("text")) s.text += ch["text"].get<std::string>();
                if (ch.contains("delta") && ch["delta"].contains("content") && ch["delta"]["content"].is_string())
                    s.text += ch["delta"]["content"].get<std::string>();
            }
        }
        return s;
    };
    const std::vector<std::pair<std::string, json>> cases = {
        {"/completion", {{"prompt", "a " + text}, {"n_predict", 4}}},
        {"/v1/completions", {{"prompt", "b " + text}, {"max_tokens", 4}}},
        {"/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "c " + text}}}}, {"max_tokens", 4}}},
    };
    for (const auto & [path, base] : cases) {
        SCOPED_TRACE(path);
        json body = base;
        body["temperature"] = 0;
        body["stream"] = true;
        body["return_progress"] = true;
        const http_reply l = post(*p.llama, path, body.dump()), b = post(*p.baton, path, body.dump());
        ASSERT_EQ(l.status, 200) << l.body;
        ASSERT_EQ(b.status, 200) << b.body;
        const seen ls = read(l.body), bs = read(b.body);
        ASSERT_GE(ls.progress.size(), 3u) << l.body.substr(0, 600);  // start, a batch of 64, the rest
        EXPECT_EQ(bs.progress, ls.progress) << b.body.substr(0, 600);
        EXPECT_FALSE(bs.progress_after_text);
        // The same keys, but llama-server's ids and fingerprint fields are its own: compare the shape's names.
        auto keys = [](std::string s) {
            std::vector<std::string> k;
            for (size_t a = 0, z; (z = s.find(',', a)) != std::string::npos; a = z + 1) k.push_back(s.substr(a, z - a));
            std::sort(k.begin(), k.end());
            return k;
        };
        EXPECT_EQ(keys(bs.first_shape), keys(ls.first_shape));
        EXPECT_EQ(bs.text, ls.text);
        // Not streamed: no progress on either.
        body["stream"] = false;
        body["prompt"] = path == "/v1/chat/completions" ? json() : json("d " + text);
        if (body["prompt"].is_null()) body.erase("prompt");
        const http_reply lw = post(*p.llama, path, body.dump()), bw = post(*p.baton, path, body.dump());
        EXPECT_EQ(lw.body.find("prompt_progress"), std::string::npos);
        EXPECT_EQ(bw.body.find("prompt_progress"), std::string::npos) << bw.body.substr(0, 300);
    }
    // Through PD: one progress chunk, the whole prompt, before the same answer.
    json body = {
        {"prompt", "e " + text}, {"n_predict", 4}, {"temperature", 0}, {"stream", true}, {"return_progress", true}};
    const http_reply one = post(*p.baton, "/completion", body.dump());
    const http_reply pd = via_pd(*p.baton, *p.baton, "completion", body.dump());
    ASSERT_EQ(pd.status, 200) << pd.body;
    const seen os = read(one.body), ps = read(pd.body);
    ASSERT_EQ(ps.progress.size(), 1u) << pd.body.substr(0, 600);
    const auto [total, cache, processed] = ps.progress[0];
    EXPECT_EQ(processed, total);
    EXPECT_EQ(total, std::get<0>(os.progress.back()));
    EXPECT_FALSE(ps.progress_after_text);
    EXPECT_EQ(ps.text, os.text);
}

// llama-server's direct token input: a prompt array mixing texts and token ids is the same tokens (BOS only
// before a leading text), so the same greedy text on both, and through PD as on one node.
TEST(LlamaServerDiff, APromptMixingTextsAndTokenIdsIsTheSamePrompt) {
    server_pair p = start_pair(512, 1);
    SKIP_WITHOUT_LLAMA_SERVER(p);
    for (const json & prompt : {json::array({"Hello", 5, 17, " world"}), json::array({1, 9, "the quick brown", 30})}) {
        const json body = {{"prompt", prompt}, {"n_predict", 6}, {"temperature", 0}, {"cache_prompt", false}};
        const http_reply l = post(*p.llama, "/completion", body.dump()), b = post(*p.baton, "/completion", body.dump());
        ASSERT_EQ(l.status, 200) << l.body;
        ASSERT_EQ(b.status, 200) << b.body;
        EXPECT_EQ(b.j()["content"], l.j()["content"]) << prompt;
        EXPECT_EQ(b.j()["tokens_evaluated"], l.j()["tokens_evaluated"]) << prompt;
        EXPECT_EQ(b.j()["prompt"], l.j()["prompt"]) << prompt;
        const http_reply pd = via_pd(*p.baton, *p.baton, "completion", body.dump());
        ASSERT_EQ(pd.status, 200) << pd.body;
        EXPECT_EQ(pd.j()["content"], b.j()["content"]);
    }
}

// Several prompts in one request: /v1/completions answers a choice per prompt (index = prompt x n + choice, as
// llama-server numbers them), /completion an array of its objects (each naming its prompt); streams interleave
// chunks that carry their index. The texts are llama-server's. Baton's usage counts every prompt and choice
// (OpenAI's sum; llama-server reports the first prompt's, docs/api.md); through a router (no PD: a prefill makes
// one state) the answer is the node's.
TEST(LlamaServerDiff, SeveralPromptsInOneRequestAnswerAsLlamaServer) {
    server_pair p = start_pair(1024, 4);
    SKIP_WITHOUT_LLAMA_SERVER(p);
    const json prompts = json::array({"Hello there", json::array({1, 9, 30, 41}), "The quick brown fox"});
    const json oai = {{"prompt", prompts}, {"max_tokens", 6}, {"temperature", 0}, {"n", 2}};
    const http_reply lo = post(*p.llama, "/v1/completions", oai.dump()),
                     bo = post(*p.baton, "/v1/completions", oai.dump());
    ASSERT_EQ(lo.status, 200) << lo.body;
    ASSERT_EQ(bo.status, 200) << bo.body;
    const json boj = bo.j(), loj = lo.j();
    ASSERT_EQ(boj["choices"].size(), 6u);
    ASSERT_EQ(loj["choices"].size(), 6u);
    int completion_tokens = 0;
    for (size_t i = 0; i < 6; ++i) {
        EXPECT_EQ(boj["choices"][i]["index"], i);
        EXPECT_EQ(boj["choices"][i]["text"], loj["choices"][i]["text"]) << i;
        EXPECT_EQ(boj["choices"][i]["finish_reason"], loj["choices"][i]["finish_reason"]) << i;
    }
    // Each prompt alone: its own prompt_tokens; the request's usage is their sum (n choices share a prompt).
    int prompt_tokens = 0;
    for (const json & one : prompts) {
        const http_reply r =
            post(*p.baton, "/v1/completions", json{{"prompt", one}, {"max_tokens", 6}, {"temperature", 0}}.dump());
        ASSERT_EQ(r.status, 200) << r.body;
        prompt_tokens += r.j()["usage"]["prompt_tokens"].get<int>();
        completion_tokens += 2 * r.j()["usage"]["completion_tokens"].get<int>();
    }
    EXPECT_EQ(bo.j()["usage"]["prompt_tokens"], prompt_tokens);
    EXPECT_EQ(bo.j()["usage"]["completion_tokens"], completion_tokens);

    const json native = {{"prompt", prompts}, {"n_predict", 6}, {"temperature", 0}, {"cache_prompt", false}};
    const http_reply ln = post(*p.llama, "/completion", native.dump()),
                     bn = post(*p.baton, "/completion", native.dump());
    ASSERT_EQ(ln.status, 200) << ln.body;
    ASSERT_EQ(bn.status, 200) << bn.body;
    const json bj = bn.j(), lj = ln.j();
    ASSERT_TRUE(bj.is_array()) << bn.body;
    ASSERT_EQ(bj.size(), 3u);
    ASSERT_TRUE(lj.is_array()) << ln.body;
    for (size_t i = 0; i < 3; ++i) {
        const json & b = bj[i];
        const json & l = lj[i];
        EXPECT_EQ(b["index"], l["index"]) << i;
        for (const char * f : {"content", "prompt", "tokens_evaluated", "tokens_predicted", "stop_type"})
            EXPECT_EQ(b[f], l[f]) << i << " " << f;
    }
    // Streamed: each index's text is llama-server's, on both endpoints.
    auto texts = [](const std::string & body, const char * field) {
        std::map<int, std::string> by_index;
        for (const auto & s : sse_payloads(body)) {
            const json c = json::parse(s, nullptr, false);
            if (!c.is_object()) continue;  // ([DONE], llama-server's "null")
            if (c.contains("choices") && !c["choices"].empty() && c["choices"][0].contains(field))
                by_index[c["choices"][0]["index"].get<int>()] += c["choices"][0][field].get<std::string>();
            else if (c.contains(field) && c.contains("index"))
                by_index[c["index"].get<int>()] += c[field].get<std::string>();
        }
        return by_index;
    };
    json so = oai, sn = native;
    so["stream"] = sn["stream"] = true;
    const http_reply lso = post(*p.llama, "/v1/completions", so.dump()),
                     bso = post(*p.baton, "/v1/completions", so.dump());
    const http_reply lsn = post(*p.llama, "/completion", sn.dump()), bsn = post(*p.baton, "/completion", sn.dump());
    ASSERT_EQ(bso.status, 200) << bso.body;
    ASSERT_EQ(bsn.status, 200) << bsn.body;
    EXPECT_EQ(texts(bso.body, "text"), texts(lso.body, "text"));
    EXPECT_EQ(texts(bso.body, "text").size(), 6u);
    EXPECT_EQ(texts(bsn.body, "content"), texts(lsn.body, "content"));
    EXPECT_EQ(texts(bsn.body, "content").size(), 3u);

    // A router over a prefill and a decode node: the request goes whole to a node (the same answer).
    auto router = node_process::start({"route", "--prefill", p.baton->url(), "--decode", p.baton->url(),
                                       "--pd-min-tokens", "0", "--health-interval", "0.2"});
    const http_reply ro = post(*router, "/v1/completions", oai.dump());
    ASSERT_EQ(ro.status, 200) << ro.body;
    EXPECT_NE(ro.route, "pd");
    EXPECT_EQ(normalized(ro.j())["choices"], normalized(bo.j())["choices"]);
    // Refusals name the prompt; a prefill takes one prompt.
    const http_reply bad = post(*p.baton, "/v1/completions", json{{"prompt", {"fine", json::array({1, -5})}}}.dump());
    EXPECT_EQ(bad.status, 400) << bad.body;
    EXPECT_NE(bad.body.find("prompt[1]: "), std::string::npos) << bad.body;
    const http_reply routed_bad =
        post(*router, "/v1/completions", json{{"prompt", {"fine", json::array({1.5})}}}.dump());
    EXPECT_EQ(routed_bad.status, 400) << routed_bad.body;
    EXPECT_NE(routed_bad.body.find("prompt[1]: prompt: must be"), std::string::npos) << routed_bad.body;
    json many = {{"prompt", json::array()}};
    for (int i = 0; i < 65; ++i) many["prompt"].push_back("p");
    EXPECT_EQ(post(*p.baton, "/v1/completions", many.dump()).status, 400);
}

// Anthropic's Messages API: the same greedy answer in the same shape — content blocks, stop_reason,
// usage (the prompt's length: input_tokens + cache_read_input_tokens; output_tokens), the stream's event
// types and text, and count_tokens. Where Baton differs on purpose (docs/api.md): a stop sequence is
// stop_reason "stop_sequence" (llama-server: "end_turn"), and a stream's blocks each stop before the next.
TEST(LlamaServerDiff, MessagesAreTheSameAnswerInTheSameShape) {
    server_pair p = start_pair(1024, 1);
    SKIP_WITHOUT_LLAMA_SERVER(p);
    auto prompt_of = [](const json & usage) {
        return usage.value("input_tokens", 0) + usage.value("cache_read_input_tokens", 0);
    };
    // The events of a raw SSE body: (event name, data).
    auto events = [](const std::string & body) {
        std::vector<std::pair<std::string, json>> out;
        size_t pos = 0;
        while ((pos = body.find("event: ", pos)) != std::string::npos) {
            const size_t nl = body.find('\n', pos);
            const std::string name = body.substr(pos + 7, nl - pos - 7);
            const size_t data = body.find("data: ", nl);
            const size_t end = body.find("\n\n", data);
            out.emplace_back(name, json::parse(body.substr(data + 6, end - data - 6), nullptr, false));
            pos = end;
        }
        return out;
    };
    for (const std::string text : {"Tell me about the state blob", "Hello there"}) {
        SCOPED_TRACE(text);
        json body = {{"model", "m"},
                     {"max_tokens", 10},
                     {"temperature", 0},
                     {"system", "Be brief."},
                     {"messages", {{{"role", "user"}, {"content", text}}}}};
        const http_reply l = post(*p.llama, "/v1/messages", body.dump()),
                         b = post(*p.baton, "/v1/messages", body.dump());
        ASSERT_EQ(l.status, 200) << l.body;
        ASSERT_EQ(b.status, 200) << b.body;
        const json lj = l.j(), bj = b.j();
        for (const char * k : {"type", "role", "stop_reason", "stop_sequence", "content"}) {
            EXPECT_EQ(bj[k], lj[k]) << k << ": llama-server " << l.body << " | baton " << b.body;
        }
        for (const auto & [k, v] : lj.items()) {
            EXPECT_TRUE(bj.contains(k)) << "baton lacks " << k << ": " << b.body;
        }
        for (const auto & [k, v] : lj["usage"].items()) {
            EXPECT_TRUE(bj["usage"].contains(k)) << "usage." << k;
        }
        EXPECT_EQ(bj["usage"]["output_tokens"], lj["usage"]["output_tokens"]);
        EXPECT_EQ(prompt_of(bj["usage"]), prompt_of(lj["usage"]));
        // (ids: Baton's are Anthropic's "msg_…"; llama-server's are its chat ids, "chatcmpl-…")
        EXPECT_TRUE(bj["id"].get<std::string>().starts_with("msg_")) << bj["id"];

        // count_tokens: the same prompt length.
        json count = body;
        count.erase("max_tokens");
        const json lc = post(*p.llama, "/v1/messages/count_tokens", count.dump()).j(),
                   bc = post(*p.baton, "/v1/messages/count_tokens", count.dump()).j();
        EXPECT_EQ(bc, lc);
        EXPECT_EQ(bc["input_tokens"], prompt_of(bj["usage"]));

        // Streamed: the same event types (each block's start, deltas and stop; message_delta; message_stop),
        // the same text, the same final usage.
        body["stream"] = true;
        const http_reply ls = post(*p.llama, "/v1/messages", body.dump()),
                         bs = post(*p.baton, "/v1/messages", body.dump());
        ASSERT_EQ(ls.status, 200) << ls.body;
        ASSERT_EQ(bs.status, 200) << bs.body;
        const auto le = events(ls.body), be = events(bs.body);
        auto summary = [](const std::vector<std::pair<std::string, json>> & ev) {
            std::map<std::string, int> names;
            std::string streamed;
            json last_usage;
            for (const auto & [name, data] : ev) {
                ++names[name];
                if (name == "content_block_delta" && data["delta"]["type"] == "text_delta")
                    streamed += data["delta"]["text"].get<std::string>();
                if (name == "message_delta") last_usage = data["usage"];
            }
            names.erase("content_block_delta");  // (how a text is cut into deltas is each server's)
            return std::tuple(names, streamed, last_usage["output_tokens"]);
        };
        EXPECT_EQ(summary(be), summary(le)) << "llama-server " << ls.body << "\n baton " << bs.body;
        ASSERT_FALSE(be.empty());
        EXPECT_EQ(be.front().first, le.front().first);
        EXPECT_EQ(be.back().first, le.back().first);
        EXPECT_EQ(bs.body.find("[DONE]"),
                  ls.body.find("[DONE]") == std::string::npos ? std::string::npos : bs.body.find("[DONE]"));
    }
    // A stop sequence: the same text and stop_sequence; stop_reason is Anthropic's "stop_sequence" at Baton.
    json body = {{"max_tokens", 16}, {"temperature", 0}, {"messages", {{{"role", "user"}, {"content", "Count"}}}}};
    const std::string whole = post(*p.baton, "/v1/messages", body.dump()).j()["content"][0]["text"];
    size_t at = 1;
    while (at < whole.size() && !std::isgraph(static_cast<unsigned char>(whole[at]))) ++at;
    ASSERT_LT(at, whole.size()) << whole;
    body["stop_sequences"] = {whole.substr(at, 1)};
    const json l = post(*p.llama, "/v1/messages", body.dump()).j(), b = post(*p.baton, "/v1/messages", body.dump()).j();
    EXPECT_EQ(b["content"], l["content"]);
    EXPECT_EQ(b["stop_sequence"], l["stop_sequence"]);
    EXPECT_EQ(b["stop_reason"], "stop_sequence");
    EXPECT_TRUE(l["stop_reason"] == "end_turn" || l["stop_reason"] == "stop_sequence") << l.dump();
}

}  // namespace
}  // namespace baton::test
