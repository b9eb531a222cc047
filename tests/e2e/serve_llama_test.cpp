// serve_llama_test.cpp — llama-server's endpoints and flags on a node: /completion, /props, /slots and the
// slot-file actions, /apply-template, CORS, the server-wide sampling defaults, -c 0, --alias, and the
// fields Baton refuses instead of dropping.
#include <fstream>

#include <set>

#include "serve_test_util.h"

namespace baton::test {
namespace {

// ---- /completion ----

TEST(ServeLlama, CompletionHasLlamaServersShapeAndTheSameTextAsV1Completions) {
    auto n = node_process::start(serve_args("llama"));
    const http_reply v1 = post(*n, "/v1/completions", R"({"prompt":"Hello there","max_tokens":6,"temperature":0})");
    const http_reply r = post(*n, "/completion", R"({"prompt":"Hello there","n_predict":6,"temperature":0})");
    ASSERT_EQ(r.status, 200) << r.body;
    const json j = r.j();
    EXPECT_EQ(j["content"], v1.j()["choices"][0]["text"]) << r.body;
    EXPECT_EQ(j["stop"], true);
    EXPECT_EQ(j["stop_type"], "limit");
    EXPECT_EQ(j["stopping_word"], "");
    EXPECT_EQ(j["tokens_predicted"], 6);
    EXPECT_EQ(j["tokens_evaluated"], v1.j()["usage"]["prompt_tokens"]);
    EXPECT_EQ(j["tokens"], json::array()) << "tokens only with return_tokens";
    EXPECT_EQ(j["generation_settings"]["n_predict"], 6);
    EXPECT_EQ(j["generation_settings"]["temperature"], 0.0);
    EXPECT_EQ(j["prompt"].get<std::string>().rfind("<s>", 0), 0u) << "the prompt as the model saw it: " << r.body;
    EXPECT_EQ(j["timings"]["predicted_n"], 6);
    EXPECT_TRUE(j["timings"].contains("prompt_per_second"));
    EXPECT_EQ(j["model"], v1.j()["model"]);

    // return_tokens gives the ids; they detokenize to the content.
    const http_reply t =
        post(*n, "/completion", R"({"prompt":"Hello there","n_predict":6,"temperature":0,"return_tokens":true})");
    const json ids = t.j()["tokens"];
    ASSERT_EQ(ids.size(), 6u) << t.body;
    EXPECT_EQ(post(*n, "/detokenize", json{{"tokens", ids}}.dump()).j()["content"], j["content"]);

    // A stop word: stop_type word, the word named, the text up to it.
    const std::string text = j["content"].get<std::string>();
    const size_t at = text.find_first_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", 1);
    ASSERT_NE(at, std::string::npos) << "the greedy text has a letter after its first byte: " << r.body;
    const std::string word = text.substr(at, 1);
    const json w = post(*n, "/completion",
                        json{{"prompt", "Hello there"}, {"n_predict", 6}, {"temperature", 0}, {"stop", {word}}}.dump())
                       .j();
    EXPECT_EQ(w["stop_type"], "word") << w.dump();
    EXPECT_EQ(w["stopping_word"], word);
    EXPECT_EQ(w["content"], text.substr(0, text.find(word)));
}

TEST(ServeLlama, StreamedCompletionEndsWithTheFinalObjectAndNoDoneMarker) {
    auto n = node_process::start(serve_args("llama"));
    const json whole = post(*n, "/completion", R"({"prompt":"Hello there","n_predict":5,"temperature":0})").j();
    const http_reply r =
        post(*n, "/completion", R"({"prompt":"Hello there","n_predict":5,"temperature":0,"stream":true})");
    ASSERT_EQ(r.status, 200) << r.body;
    const auto chunks = sse_payloads(r.body);
    ASSERT_GE(chunks.size(), 2u) << r.body;
    std::string text;
    size_t n_tokens = 0;
    for (size_t i = 0; i + 1 < chunks.size(); ++i) {
        const json c = json::parse(chunks[i]);
        EXPECT_EQ(c["stop"], false) << chunks[i];
        text += c["content"].get<std::string>();
        n_tokens += c["tokens"].size();
        EXPECT_EQ(c["tokens_predicted"], n_tokens) << chunks[i];
    }
    EXPECT_EQ(n_tokens, 5u) << "every token is reported, also those whose text is held back";
    const json last = json::parse(chunks.back());
    EXPECT_EQ(last["stop"], true) << chunks.back();
    EXPECT_EQ(last["stop_type"], "limit");
    EXPECT_EQ(json(text), whole["content"]);
    EXPECT_EQ(r.body.find("[DONE]"), std::string::npos) << "llama-server's /completion stream has no [DONE]";
}

// ---- /props, /slots ----

TEST(ServeLlama, PropsReportTheDefaultsTemplateAndSlots) {
    auto n = node_process::start(
        serve_args("llama", {"-np", "3", "--temp", "0.5", "--top-k", "7", "-n", "9", "--seed", "77"}));
    const http_reply r = get(*n, "/props");
    ASSERT_EQ(r.status, 200) << r.body;
    const json j = r.j();
    EXPECT_EQ(j["total_slots"], 3);
    const json p = j["default_generation_settings"]["params"];
    EXPECT_FLOAT_EQ(p["temperature"].get<float>(), 0.5f);
    EXPECT_EQ(p["top_k"], 7);
    EXPECT_EQ(p["n_predict"], 9);
    EXPECT_EQ(p["seed"], 77);
    EXPECT_NE(j["chat_template"].get<std::string>().find("<|im_start|>"), std::string::npos) << "the model's template";
    EXPECT_EQ(j["bos_token"], "<s>");
    EXPECT_EQ(j["eos_token"], "</s>");
    EXPECT_EQ(j["baton"]["chat_template_origin"], "model");
    EXPECT_EQ(j["baton"]["jinja"], true);
    EXPECT_EQ(j["endpoint_slots"], true);
    const http_reply post_props = post(*n, "/props", "{}");
    EXPECT_EQ(post_props.status, 501) << post_props.body;
    EXPECT_EQ(post_props.j()["error"]["type"], "not_supported_error");
}

TEST(ServeLlama, SlotsListAndNoSlots) {
    auto n = node_process::start(serve_args("llama", {"-np", "2"}));
    const json s = get(*n, "/slots").j();
    ASSERT_TRUE(s.is_array() && s.size() == 2) << s.dump();
    EXPECT_EQ(s[1]["id"], 1);
    EXPECT_EQ(s[0]["is_processing"], false);
    EXPECT_TRUE(s[0].contains("n_ctx"));
    auto off = node_process::start(serve_args("llama", {"--no-slots"}));
    const http_reply r = get(*off, "/slots");
    EXPECT_EQ(r.status, 501) << r.body;
    EXPECT_NE(r.body.find("--slots"), std::string::npos) << r.body;
    EXPECT_EQ(get(*off, "/v1/slots").status, 200) << "Baton's own slot view stays";
}

TEST(ServeLlama, SlotSaveRestoreEraseThroughFilesVerifiesTheFile) {
    const std::string dir = temp_dir();
    auto n = node_process::start(serve_args("llama", {"-np", "1", "--slot-save-path", dir}));
    const json first =
        post(*n, "/v1/completions", R"({"prompt":"Hello there, slot","max_tokens":4,"temperature":0})").j();
    const http_reply saved = post(*n, "/slots/0?action=save", R"({"filename":"a.bin"})");
    ASSERT_EQ(saved.status, 200) << saved.body;
    const int n_saved = saved.j()["n_saved"];
    EXPECT_GT(n_saved, 0);
    EXPECT_GT(saved.j()["n_written"].get<int>(), 0);
    const http_reply erased = post(*n, "/slots/0?action=erase", "");
    ASSERT_EQ(erased.status, 200) << erased.body;
    EXPECT_EQ(erased.j()["n_erased"], n_saved);
    EXPECT_EQ(get(*n, "/v1/slots").j()[0]["n_tokens"], 0);
    const http_reply restored = post(*n, "/slots/0?action=restore", R"({"filename":"a.bin"})");
    ASSERT_EQ(restored.status, 200) << restored.body;
    EXPECT_EQ(restored.j()["n_restored"], n_saved);
    EXPECT_EQ(get(*n, "/v1/slots").j()[0]["n_tokens"], n_saved);
    // The restored prefix is reused: the same request answers the same, with its prompt cached.
    const json again =
        post(*n, "/v1/completions", R"({"prompt":"Hello there, slot","max_tokens":4,"temperature":0})").j();
    EXPECT_EQ(again["choices"], first["choices"]);
    EXPECT_GT(again["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);

    // A file that is not a valid blob is refused by the full verification and leaves the slot as it was.
    {
        std::ifstream in(dir + "/a.bin", std::ios::binary);
        std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        bytes[bytes.size() / 2] ^= 0x40;
        std::ofstream(dir + "/bad.bin", std::ios::binary) << bytes;
    }
    const int before = get(*n, "/v1/slots").j()[0]["n_tokens"];
    const http_reply bad = post(*n, "/slots/0?action=restore", R"({"filename":"bad.bin"})");
    EXPECT_EQ(bad.status, 422) << bad.body;
    EXPECT_EQ(get(*n, "/v1/slots").j()[0]["n_tokens"], before);
    EXPECT_EQ(post(*n, "/slots/0?action=restore", R"({"filename":"missing.bin"})").status, 404);
    // Names that could leave the directory, unknown actions, unknown slots.
    for (const char * name : {"../a.bin", ".hidden", "a/b", ""})
        EXPECT_EQ(post(*n, "/slots/0?action=save", json{{"filename", name}}.dump()).status, 400) << name;
    EXPECT_EQ(post(*n, "/slots/0?action=shred", "").status, 400);
    EXPECT_EQ(post(*n, "/slots/9?action=erase", "").status, 404);
    // Without --slot-save-path the file actions are not offered (as llama-server), erase still is.
    auto plain = node_process::start(serve_args("llama"));
    EXPECT_EQ(post(*plain, "/slots/0?action=save", R"({"filename":"a.bin"})").status, 501);
    EXPECT_EQ(post(*plain, "/slots/0?action=erase", "").status, 200);
}

// ---- /apply-template ----

TEST(ServeLlama, ApplyTemplateIsThePromptTheChatIsTokenizedFrom) {
    auto n = node_process::start(serve_args("llama"));
    const json msgs = {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hello"}}};
    const http_reply a = post(*n, "/apply-template", json{{"messages", msgs}}.dump());
    ASSERT_EQ(a.status, 200) << a.body;
    const std::string prompt = a.j()["prompt"];
    EXPECT_EQ(prompt,
              "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n");
    const json no_gen =
        post(*n, "/apply-template", json{{"messages", msgs}, {"add_generation_prompt", false}}.dump()).j();
    EXPECT_EQ(no_gen["prompt"], "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n");
    // The chat and the prompt as a completion are the same tokens, so the same greedy answer.
    const json chat =
        post(*n, "/v1/chat/completions", json{{"messages", msgs}, {"max_tokens", 5}, {"temperature", 0}}.dump()).j();
    const json comp =
        post(*n, "/v1/completions", json{{"prompt", prompt}, {"max_tokens", 5}, {"temperature", 0}}.dump()).j();
    EXPECT_EQ(chat["usage"]["prompt_tokens"], comp["usage"]["prompt_tokens"]);
    EXPECT_EQ(chat["choices"][0]["message"]["content"], comp["choices"][0]["text"]);
    EXPECT_EQ(post(*n, "/apply-template", R"({"messages":[]})").status, 400);
}

// ---- CORS ----

TEST(ServeLlama, CorsPreflightAndAllowedOrigins) {
    auto n = node_process::start(serve_args("llama", {"--api-key", "k"}));
    auto c = n->client(30);
    // A preflight needs no key and names what is allowed; the default (*) answers a literal * and never
    // allows credentials with it (issue 22: a reflected origin with credentials let any page act as the user).
    auto pre = c->Options("/v1/chat/completions",
                          {{"Origin", "http://ui.example"}, {"Access-Control-Request-Method", "POST"}});
    ASSERT_TRUE(pre);
    EXPECT_EQ(pre->status, 200);
    EXPECT_EQ(pre->get_header_value("Access-Control-Allow-Origin"), "*");
    EXPECT_FALSE(pre->has_header("Access-Control-Allow-Credentials"));
    EXPECT_NE(pre->get_header_value("Access-Control-Allow-Methods").find("POST"), std::string::npos);
    // Real responses carry it too, errors included.
    auto models = c->Get("/v1/models", {{"Origin", "http://ui.example"}, {"Authorization", "Bearer k"}});
    ASSERT_TRUE(models);
    EXPECT_EQ(models->status, 200);
    EXPECT_EQ(models->get_header_value("Access-Control-Allow-Origin"), "*");
    auto denied = c->Get("/v1/models", {{"Origin", "http://ui.example"}});
    ASSERT_TRUE(denied);
    EXPECT_EQ(denied->status, 401);
    EXPECT_EQ(denied->get_header_value("Access-Control-Allow-Origin"), "*");
    // No Origin, no CORS headers.
    auto plain = c->Get("/health");
    ASSERT_TRUE(plain);
    EXPECT_FALSE(plain->has_header("Access-Control-Allow-Origin"));

    auto listed = node_process::start(serve_args("llama", {"--cors-origins", "http://a.example, http://b.example"}));
    auto lc = listed->client(30);
    auto ok = lc->Get("/health", {{"Origin", "http://b.example"}});
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->get_header_value("Access-Control-Allow-Origin"), "http://b.example");
    auto other = lc->Get("/health", {{"Origin", "http://evil.example"}});
    ASSERT_TRUE(other);
    EXPECT_FALSE(other->has_header("Access-Control-Allow-Origin")) << "an origin not listed gets no CORS header";
}

// ---- flags ----

TEST(ServeLlama, ServerWideSamplingDefaultsApplyToRequestsThatLeaveThemOut) {
    // --temp 0: greedy unless a request asks otherwise; -n 3: three tokens unless it says.
    auto n = node_process::start(serve_args("llama", {"--temp", "0", "-n", "3"}));
    const json implicit = post(*n, "/v1/completions", R"({"prompt":"Hello there"})").j();
    const json explicit_ =
        post(*n, "/v1/completions", R"({"prompt":"Hello there","temperature":0,"max_tokens":3})").j();
    EXPECT_EQ(implicit["usage"]["completion_tokens"], 3) << implicit.dump();
    EXPECT_EQ(implicit["choices"], explicit_["choices"]);
    // --seed: sampled requests without a seed repeat.
    auto s = node_process::start(serve_args("llama", {"--seed", "1234", "--temp", "1.0"}));
    const std::string body = R"({"prompt":"Hello there","max_tokens":12})";
    const json a = post(*s, "/v1/completions", body).j(), b = post(*s, "/v1/completions", body).j();
    EXPECT_EQ(a["choices"], b["choices"]);
    const json seeded = post(*s, "/v1/completions", R"({"prompt":"Hello there","max_tokens":12,"seed":1234})").j();
    EXPECT_EQ(seeded["choices"], a["choices"]) << "the default seed is the same as asking for it";
}

TEST(ServeLlama, FlagsMistakesExitWithUsage) {
    auto exit_of = [](std::vector<std::string> extra) {
        auto args = serve_args("llama", std::move(extra));
        args.insert(args.begin(), baton_bin());
        args.insert(args.end(), {"--port", "0"});
        return run_process(args, 60);
    };
    for (const auto & extra :
         std::vector<std::vector<std::string>>{{"--temp", "-1"},
                                               {"--seed", "-5"},
                                               {"--reasoning-format", "loud"},
                                               {"--chat-template-kwargs", "[1]"},
                                               {"--chat-template", "x", "--chat-template-file", "/nonexistent"},
                                               {"--chat-template-file", "/nonexistent"},
                                               {"--slot-save-path", "/nonexistent/dir"},
                                               {"--cors-origins", " , "},
                                               {"--alias", "a,b"}}) {
        const proc_result r = exit_of(extra);
        EXPECT_EQ(r.exit_code, 2) << extra[0] << ": " << r.err;
        EXPECT_NE(r.err.find(extra[0].substr(0, 6)), std::string::npos) << "the message names the flag: " << r.err;
    }
    // A --chat-template that does not parse stops the node at start, naming the error.
    const proc_result t = exit_of({"--chat-template", "{% for m in messages %}{{ m.content }"});
    EXPECT_NE(t.exit_code, 0);
    EXPECT_NE(t.err.find("--chat-template"), std::string::npos) << t.err;
}

TEST(ServeLlama, ContextZeroIsTheModelsTrainingContextAndAliasNamesTheModelWithItsTags) {
    auto n = node_process::start({"serve", "-m", test_model_path("llama"), "-c", "0", "-t", "2", "--alias", "my-model",
                                  "--tags", "chat,,small"});
    const json props = get(*n, "/props").j();
    EXPECT_GT(props["default_generation_settings"]["n_ctx"].get<int>(), 2048) << props.dump();
    EXPECT_EQ(get(*n, "/v1/models").j()["data"][0]["id"], "my-model");
    EXPECT_EQ(get(*n, "/v1/models").j()["data"][0]["meta"]["tags"], json({"chat", "small"}));
    const json r = post(*n, "/v1/completions", R"({"prompt":"Hi","max_tokens":2,"model":"some-other-name"})").j();
    EXPECT_EQ(r["model"], "my-model")
        << "as llama-server: a node answers with its own model whatever the request names";
}

// --metrics and --offline are accepted (no-ops); --verbose logs one line per finished generation.
TEST(ServeLlama, VerboseLogsEachGenerationAndCompatibilityNoOpsAreAccepted) {
    auto n = node_process::start(serve_args("llama", {"--metrics", "--offline", "-v"}));
    ASSERT_EQ(post(*n, "/v1/completions", R"({"prompt":"Hello","max_tokens":3,"temperature":0})").status, 200);
    EXPECT_EQ(get(*n, "/metrics").status, 200);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    std::string err;
    while ((err = n->stderr_text()).find("3 generated") == std::string::npos &&
           std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_NE(err.find("completions: slot 0:"), std::string::npos) << err;
    EXPECT_NE(err.find("3 generated"), std::string::npos) << err;
}

// logit_bias (OpenAI's object form and llama-server's array form, false = never): it steers greedy decoding,
// bans tokens, and a decode node applies it to the first token it samples from the shipped logits too.
TEST(ServeLlama, LogitBiasSteersAndBansTokensAlsoThroughPd) {
    auto n = node_process::start(serve_args("llama", {"-np", "1"}));
    auto tokens_of = [&](const json & extra) {
        json b = {{"prompt", "Hello there"}, {"n_predict", 6}, {"temperature", 0}, {"return_tokens", true}};
        b.update(extra);
        const http_reply r = post(*n, "/completion", b.dump());
        EXPECT_EQ(r.status, 200) << r.body;
        return r.j()["tokens"];
    };
    const json plain = tokens_of(json::object());
    ASSERT_EQ(plain.size(), 6u);
    const int first = plain[0];
    const json banned = tokens_of({{"logit_bias", json::array({json::array({first, false})})}});
    ASSERT_EQ(banned.size(), 6u);
    for (const auto & t : banned) EXPECT_NE(t.get<int>(), first) << "a banned token was sampled: " << banned.dump();
    const int pushed = post(*n, "/tokenize", R"({"content":"a"})").j()["tokens"][0];
    const json forced = tokens_of({{"logit_bias", {{std::to_string(pushed), 100}}}});
    for (const auto & t : forced) EXPECT_EQ(t.get<int>(), pushed) << forced.dump();

    // PD: the bias is in the embedded request; the decode node's first token is sampled with it.
    auto pre = node_process::start(serve_args("llama", {"-np", "1", "--role", "prefill"}));
    auto dec = node_process::start(serve_args("llama", {"-np", "1", "--role", "decode"}));
    for (bool sampled : {false, true}) {
        json body = {{"prompt", "Hello there"},
                     {"max_tokens", 6},
                     {"temperature", sampled ? 0.9 : 0.0},
                     {"seed", 7},
                     {"logit_bias", json::array({json::array({first, false}), json::array({pushed, 3.5})})}};
        const json single = post(*n, "/v1/completions", body.dump()).j();
        const http_reply blob = post(*pre, "/v1/prefill", body.dump());
        ASSERT_EQ(blob.status, 200) << blob.body;
        const http_reply pd = post(*dec, "/v1/decode", blob.body, "application/octet-stream");
        ASSERT_EQ(pd.status, 200) << pd.body;
        EXPECT_EQ(normalized(single), normalized(pd.j())) << (sampled ? "sampled" : "greedy");
    }
    // Typed errors naming the field.
    for (const char * bad :
         {R"({"999999":1})", R"({"":1})", R"({"5":1000})", R"([[5]])", R"("x")", R"([[5,"y"]])", R"([["",1]])"}) {
        const http_reply r =
            post(*n, "/v1/completions", std::string(R"({"prompt":"Hi","max_tokens":1,"logit_bias":)") + bad + "}");
        EXPECT_EQ(r.status, 400) << bad << ": " << r.body;
        EXPECT_NE(r.body.find("logit_bias"), std::string::npos) << r.body;
    }
    // Texts (llama-server's [["text", bias]], and a non-numeric key of the object form): every token of the
    // text's tokenization gets the bias. A digit string in the array form is a text too (as llama-server).
    const json text_tokens = post(*n, "/tokenize", R"({"content":" the state"})").j()["tokens"];
    ASSERT_GE(text_tokens.size(), 1u);
    std::set<int> in_text;
    for (const auto & t : text_tokens) in_text.insert(t.get<int>());
    for (const json & lb : {json::array({json::array({" the state", 100})}), json{{" the state", 100}}}) {
        const json pushed_text = tokens_of({{"logit_bias", lb}});
        ASSERT_EQ(pushed_text.size(), 6u);
        for (const auto & t : pushed_text)
            EXPECT_TRUE(in_text.count(t.get<int>())) << lb.dump() << ": " << pushed_text.dump();
    }
    const json banned_text = tokens_of({{"logit_bias", json::array({json::array({" the state", false})})}});
    for (const auto & t : banned_text) EXPECT_FALSE(in_text.count(t.get<int>())) << banned_text.dump();
}

TEST(ServeLlama, FieldsBatonDoesNotImplementAreRefusedByName) {
    auto n = node_process::start(serve_args("llama"));
    const std::string msgs = R"("messages":[{"role":"user","content":"hi"}])";
    for (const auto & [field, value] :
         std::vector<std::pair<std::string, std::string>>{{"functions", R"([{"name":"f"}])"},
                                                          {"function_call", R"("auto")"},
                                                          {"grammar_triggers", R"([{"type":"word","value":"x"}])"},
                                                          {"post_sampling_probs", "true"},
                                                          {"mirostat", "2"},
                                                          {"typical_p", "0.5"},
                                                          {"samplers", R"(["top_k"])"},
                                                          {"n_cmpl", "2"}}) {
        const http_reply r = post(*n, "/v1/chat/completions", "{" + msgs + ",\"" + field + "\":" + value + "}");
        EXPECT_EQ(r.status, 400) << field << ": " << r.body;
        EXPECT_NE(r.body.find(field), std::string::npos) << r.body;
    }
    // Their "off" values are accepted.
    for (const char * off : {R"("tools":[])", R"("tool_choice":"auto")", R"("response_format":{"type":"text"})",
                             R"("logprobs":false)", R"("mirostat":0)", R"("typical_p":1.0)", R"("logit_bias":{})"}) {
        const http_reply r = post(*n, "/v1/chat/completions", "{" + msgs + ",\"max_tokens\":1," + off + "}");
        EXPECT_EQ(r.status, 200) << off << ": " << r.body;
    }
    // (Several prompts in one request are served since issue 27: LlamaServerDiff.SeveralPrompts*.)
    const http_reply several = post(*n, "/completion", R"({"prompt":["a","b"],"n_predict":1})");
    EXPECT_EQ(several.status, 200) << several.body;
    EXPECT_EQ(several.j().size(), 2u) << several.body;
}

}  // namespace
}  // namespace baton::test
