// serve_images_test.cpp — images in chats (`serve --mmproj`): the answer to a chat with an image is Debian's
// llama-server's on the same model and projector; Anthropic's image blocks answer as OpenAI's image_url parts;
// a PD pair whose decode node has no projector answers as the single node (Gemma 3's non-causal images too); and
// what cannot be taken is refused with the reason (400), by a node without a projector too. One process per role
// serves every case.
#include "baton/base/base64.h"
#include "baton/testmodel/mkmmproj.h"
#include "serve_test_util.h"
#include "support/test_audio.h"
#include "support/test_image.h"

namespace baton::test {
namespace {

// (Hermes' tool-calling template, so the image + tools case has tools to render.)
std::vector<std::string> image_flags(bool projector) {
    std::vector<std::string> f = {"-m",
                                  test_model_path("llama"),
                                  "-c",
                                  "1024",
                                  "-np",
                                  "1",
                                  "-t",
                                  "2",
                                  "-fa",
                                  "off",
                                  "--chat-template-file",
                                  BATON_TEST_E2E_DIR "/hermes_tools.jinja"};
    if (projector) f.insert(f.end(), {"--mmproj", test_mmproj_path(64), "--no-mmproj-offload"});
    return f;
}

std::string data_url(const std::string & file) { return "data:image/bmp;base64," + ::baton::base64_encode(file); }

json image_chat(const std::vector<std::string> & images, const std::string & text = "What is in it?") {
    json content = json::array({{{"type", "text"}, {"text", "Here is a picture: "}}});
    for (const auto & img : images) content.push_back({{"type", "image_url"}, {"image_url", {{"url", data_url(img)}}}});
    content.push_back({{"type", "text"}, {"text", text}});
    return {{"messages", {{{"role", "user"}, {"content", content}}}}, {"max_tokens", 12}, {"temperature", 0}};
}

// media_flags: serve's (and llama-server's) flags for model on the CPU, one slot of n_ctx, with projector (none:
// empty); serve_with: the same as `baton serve` arguments.
std::vector<std::string> media_flags(const std::string & model, int n_ctx, const std::string & projector) {
    std::vector<std::string> f = {"-m", model, "-c", std::to_string(n_ctx), "-np", "1", "-t", "2", "-fa", "off"};
    if (!projector.empty()) f.insert(f.end(), {"--mmproj", projector, "--no-mmproj-offload"});
    return f;
}
std::vector<std::string> serve_with(const std::vector<std::string> & flags) {
    std::vector<std::string> a = {"serve"};
    a.insert(a.end(), flags.begin(), flags.end());
    return a;
}

// expect_media_read: two chats that differ only in their medium answer with different first-token
// log-probabilities on n (the medium is read, not skipped).
void expect_media_read(const node_process & n, json a, json b) {
    a["logprobs"] = b["logprobs"] = true;
    const http_reply ra = post(n, "/v1/chat/completions", a.dump()), rb = post(n, "/v1/chat/completions", b.dump());
    ASSERT_EQ(ra.status, 200) << ra.body;
    ASSERT_EQ(rb.status, 200) << rb.body;
    EXPECT_NE(ra.j()["choices"][0]["logprobs"]["content"][0]["logprob"],
              rb.j()["choices"][0]["logprobs"]["content"][0]["logprob"]);
}

// expect_as_llama_server: each (greedy) chat answers on n as on Debian's llama-server started with flags: the same
// content and prompt tokens.
void expect_as_llama_server(const std::vector<std::string> & flags, const node_process & n,
                            const std::vector<json> & chats) {
    auto llama = node_process::start_llama_server(flags);
    if (!llama) {
        ADD_FAILURE() << "no /usr/bin/llama-server in the build root";
        return;
    }
    for (const json & body : chats) {
        const http_reply l = post(*llama, "/v1/chat/completions", body.dump());
        const http_reply r = post(n, "/v1/chat/completions", body.dump());
        ASSERT_EQ(l.status, 200) << l.body;
        ASSERT_EQ(r.status, 200) << r.body;
        EXPECT_EQ(r.j()["choices"][0]["message"]["content"], l.j()["choices"][0]["message"]["content"]);
        EXPECT_EQ(r.j()["usage"]["prompt_tokens"], l.j()["usage"]["prompt_tokens"]);
    }
}

// expect_pd_as_single: each body, sent whole and streamed, prefilled on pre and decoded on dec (a node without the
// projector) answers as single does.
void expect_pd_as_single(const node_process & single, const node_process & pre, const node_process & dec,
                         const std::vector<json> & cases) {
    for (json body : cases) {
        for (bool stream : {false, true}) {
            body["stream"] = stream;
            SCOPED_TRACE(body.dump().substr(0, 80) + (stream ? " (stream)" : ""));
            const http_reply want = post(single, "/v1/chat/completions", body.dump());
            const http_reply pd = via_pd(pre, dec, "chat", body.dump());
            ASSERT_EQ(want.status, 200) << want.body;
            ASSERT_EQ(pd.status, 200) << pd.body;
            if (stream) {
                EXPECT_EQ(normalized_stream(pd.body), normalized_stream(want.body));
            } else {
                EXPECT_EQ(normalized(pd.j()), normalized(want.j()));
            }
        }
    }
}

class ServeImages : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        std::vector<std::string> a = {"serve"};
        for (const auto & f : image_flags(true)) a.push_back(f);
        a.insert(a.end(), {"--mmproj-max-images", "2", "--mmproj-max-image-mb", "0.01"});
        with_ = node_process::start(a);
        std::vector<std::string> b = {"serve"};
        for (const auto & f : image_flags(false)) b.push_back(f);
        without_ = node_process::start(b);
    }
    static void TearDownTestSuite() {
        with_.reset();
        without_.reset();
    }
    static std::unique_ptr<node_process> with_, without_;
};
std::unique_ptr<node_process> ServeImages::with_, ServeImages::without_;

TEST_F(ServeImages, AChatWithAnImageAnswersAsLlamaServer) {
    auto llama = node_process::start_llama_server(image_flags(true));
    if (!llama) GTEST_SKIP() << "no /usr/bin/llama-server";
    for (uint32_t seed : {1u, 2u}) {
        const json body = image_chat({test_bmp(40, 24, seed)});
        const http_reply l = post(*llama, "/v1/chat/completions", body.dump());
        const http_reply r = post(*with_, "/v1/chat/completions", body.dump());
        ASSERT_EQ(l.status, 200) << l.body;
        ASSERT_EQ(r.status, 200) << r.body;
        EXPECT_EQ(r.j()["choices"][0]["message"]["content"], l.j()["choices"][0]["message"]["content"]) << seed;
        EXPECT_EQ(r.j()["usage"]["prompt_tokens"], l.j()["usage"]["prompt_tokens"]) << seed;
    }
    // The image is read: two images answer differently (their first tokens' log-probabilities differ).
    expect_media_read(*with_, image_chat({test_bmp(40, 24, 1)}), image_chat({test_bmp(40, 24, 2)}));
    // /completion's multimodal prompt ("<__media__>" and base64 multimodal_data): the image is read, and PD answers
    // as the single node. (Not compared with llama-server: Debian's 0.7 build finds no marker in prompt_string.)
    const json completion = {{"prompt",
                              {{"prompt_string", "Describe <__media__> in a word:"},
                               {"multimodal_data", {::baton::base64_encode(test_bmp(40, 24, 3))}}}},
                             {"n_predict", 10},
                             {"temperature", 0}};
    const http_reply rc = post(*with_, "/completion", completion.dump());
    ASSERT_EQ(rc.status, 200) << rc.body;
    json plain = completion;
    plain["prompt"] = "Describe  in a word:";
    const http_reply rp = post(*with_, "/completion", plain.dump());
    ASSERT_EQ(rp.status, 200) << rp.body;
    EXPECT_EQ(rc.j()["tokens_evaluated"].get<int>(),
              rp.j()["tokens_evaluated"].get<int>() + mkmmproj_image_tokens(mkmmproj_params{}));
    const http_reply pd = via_pd(*with_, *without_, "completion", completion.dump());
    ASSERT_EQ(pd.status, 200) << pd.body;
    EXPECT_EQ(pd.j()["content"], rc.j()["content"]);
    EXPECT_EQ(get(*with_, "/props").j()["modalities"]["vision"], true);
    EXPECT_EQ(get(*without_, "/props").j()["modalities"]["vision"], false);
}

TEST_F(ServeImages, AnthropicImageBlocksAnswerAsImageUrlParts) {
    const std::string img = test_bmp(40, 24, 3);
    const http_reply chat = post(*with_, "/v1/chat/completions", image_chat({img}).dump());
    const json msg = {
        {"max_tokens", 12},
        {"temperature", 0},
        {"messages",
         {{{"role", "user"},
           {"content",
            {{{"type", "text"}, {"text", "Here is a picture: "}},
             {{"type", "image"},
              {"source", {{"type", "base64"}, {"media_type", "image/bmp"}, {"data", ::baton::base64_encode(img)}}}},
             {{"type", "text"}, {"text", "What is in it?"}}}}}}}};
    const http_reply m = post(*with_, "/v1/messages", msg.dump());
    ASSERT_EQ(chat.status, 200) << chat.body;
    ASSERT_EQ(m.status, 200) << m.body;
    EXPECT_EQ(m.j()["content"][0]["text"], chat.j()["choices"][0]["message"]["content"]);
    // (Anthropic's input_tokens leave out the tokens read from the cache: the chat's prompt, just computed.)
    EXPECT_EQ(m.j()["usage"]["input_tokens"].get<int>() + m.j()["usage"]["cache_read_input_tokens"].get<int>(),
              chat.j()["usage"]["prompt_tokens"].get<int>());
}

// PD: the node with the projector prefills; the decode node, which has none, receives the images' cells and
// answers as the single node does: greedy and seeded, streamed and not, one image and two, with tools; and
// through a router whose decode node has no projector.
TEST_F(ServeImages, APrefillWithImagesDecodesOnANodeWithoutAProjector) {
    std::vector<json> cases;
    cases.push_back(image_chat({test_bmp(40, 24, 4)}));
    json seeded = image_chat({test_bmp(40, 24, 5)});
    seeded["temperature"] = 0.9;
    seeded["seed"] = 7;
    cases.push_back(seeded);
    cases.push_back(image_chat({test_bmp(40, 24, 6), test_bmp(24, 40, 7)}, "Which differs?"));
    json tools = image_chat({test_bmp(32, 32, 8)}, "Describe it with the tool.");
    tools["tools"] = json::parse(R"([{"type":"function","function":{"name":"describe","parameters":{"type":"object",
        "properties":{"colour":{"type":"string"}},"required":["colour"]}}}])");
    tools["tool_choice"] = "required";
    tools["max_tokens"] = 40;
    cases.push_back(tools);
    const json router_body = cases[0];
    expect_pd_as_single(*with_, *with_, *without_, cases);
    auto router = node_process::start({"route", "--prefill", with_->url(), "--decode", without_->url(),
                                       "--pd-min-tokens", "100000", "--timeout", "60", "--health-interval", "0.2"});
    const http_reply single = post(*with_, "/v1/chat/completions", router_body.dump());
    const http_reply routed = post(*router, "/v1/chat/completions", router_body.dump());
    ASSERT_EQ(routed.status, 200) << routed.body;
    EXPECT_EQ(routed.route, "pd") << "a chat with images takes PD whatever its length";
    EXPECT_EQ(normalized(routed.j()), normalized(single.j()));
}

// Streamed transfer with images (--state-stream-tokens): the prefill node encodes the image and sends the state in
// parts while the prompt computes, part stops falling inside the image's tokens too; the decode node, without a
// projector, joins them and answers as a single node with the same batch flags (-b 32 -ub 16 on both).
TEST_F(ServeImages, AStreamedStateWithImagesDecodesOnANodeWithoutAProjector) {
    const std::vector<std::string> batch = {"-b", "32", "-ub", "16"};
    std::vector<std::string> single_args = {"serve"}, prefill_args = {"serve"};
    for (const auto & f : image_flags(true)) {
        single_args.push_back(f);
        prefill_args.push_back(f);
    }
    single_args.insert(single_args.end(), batch.begin(), batch.end());
    prefill_args.insert(prefill_args.end(), batch.begin(), batch.end());
    prefill_args.insert(prefill_args.end(), {"--role", "prefill", "--state-stream-tokens", "16"});
    auto single = node_process::start(single_args);
    auto prefill = node_process::start(prefill_args);
    auto router = node_process::start({"route", "--prefill", prefill->url(), "--decode", without_->url(),
                                       "--pd-min-tokens", "100000", "--timeout", "60", "--health-interval", "0.2"});
    const double streams0 = metric_value(get(*without_, "/metrics").body, "baton_state_streams_fetched_total");
    json seeded = image_chat({test_bmp(40, 24, 9)});
    seeded["temperature"] = 0.9;
    seeded["seed"] = 11;
    int n = 0;
    for (json body : {image_chat({test_bmp(40, 24, 4)}), seeded,
                      image_chat({test_bmp(40, 24, 6), test_bmp(24, 40, 7)}, "Which differs?")}) {
        for (bool stream : {false, true}) {
            body["stream"] = stream;
            SCOPED_TRACE(body.dump().substr(0, 80) + (stream ? " (stream)" : ""));
            const http_reply want = post(*single, "/v1/chat/completions", body.dump());
            const http_reply got = post(*router, "/v1/chat/completions", body.dump());
            ASSERT_EQ(want.status, 200) << want.body;
            ASSERT_EQ(got.status, 200) << got.body;
            EXPECT_EQ(got.route, "pd");
            if (stream) EXPECT_EQ(normalized_stream(got.body), normalized_stream(want.body));
            else EXPECT_EQ(normalized(got.j()), normalized(want.j()));
            ++n;
        }
    }
    const std::string dm = get(*without_, "/metrics").body;
    EXPECT_EQ(metric_value(dm, "baton_state_streams_fetched_total") - streams0, n) << dm;
    const std::string pm = get(*prefill, "/metrics").body;
    EXPECT_GE(metric_value(pm, "baton_state_parts_out_total"), 2 * n) << "several parts per prompt: " << pm;
}

void expect_400(const node_process & n, const json & body, const std::string & needle) {
    const http_reply r = post(n, "/v1/chat/completions", body.dump());
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(r.j()["error"]["type"], "invalid_request_error") << r.body;
    EXPECT_NE(r.body.find(needle), std::string::npos) << needle << ": " << r.body;
}

TEST_F(ServeImages, WhatCannotBeTakenIsRefusedWithTheReason) {
    const std::string img = test_bmp(16, 16, 1);
    expect_400(*without_, image_chat({img}), "image input is not supported");
    const json mm = {
        {"prompt", {{"prompt_string", "<__media__>"}, {"multimodal_data", {::baton::base64_encode(img)}}}}};
    const http_reply r = post(*without_, "/completion", mm.dump());
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find("image input is not supported"), std::string::npos) << r.body;
    expect_400(*with_, image_chat({img, img, img}), "at most 2 (--mmproj-max-images)");
    expect_400(*with_, image_chat({test_bmp(80, 80, 1)}), "(--mmproj-max-image-mb)");
    expect_400(*with_, image_chat({std::string("BM but not a bitmap")}),
               "not an image or audio clip this server can decode");
    json remote = image_chat({img});
    remote["messages"][0]["content"][1]["image_url"]["url"] = "https://example.com/cat.png";
    expect_400(*with_, remote, "messages[0].content[1].image_url: http(s) image URLs are not fetched by this server");
    // The node goes on serving.
    EXPECT_EQ(post(*with_, "/v1/chat/completions", image_chat({img}).dump()).status, 200);
}

// --image-urls: a node fetches the http(s) images a chat names (an image server on loopback here) and answers as
// for the same image inline, on /v1/chat/completions and /v1/messages, through PD too (the prefill node fetches);
// every failed fetch is a 400 naming the field, the URL and why.
TEST_F(ServeImages, HttpImageUrlsAreFetchedOnlyWithTheFlagAndAnswerAsInlineImages) {
    const std::string img = test_bmp(40, 24, 9);
    httplib::Server host;
    host.Get("/cat.bmp", [&](const httplib::Request &, httplib::Response & res) { res.set_content(img, "image/bmp"); });
    host.Get("/moved", [](const httplib::Request &, httplib::Response & res) { res.set_redirect("/cat.bmp", 302); });
    host.Get("/page", [](const httplib::Request &, httplib::Response & res) {
        res.set_content("<html>gone</html>", "text/html");
    });
    host.Get("/big.bmp", [](const httplib::Request &, httplib::Response & res) {
        res.set_content(test_bmp(80, 80, 1), "image/bmp");
    });
    host.Get("/slow.bmp", [&](const httplib::Request &, httplib::Response & res) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        res.set_content(img, "image/bmp");
    });
    const int port = host.bind_to_any_port("127.0.0.1");
    std::thread t([&] { host.listen_after_bind(); });
    host.wait_until_ready();
    const std::string base = "http://127.0.0.1:" + std::to_string(port);
    std::vector<std::string> a = {"serve"};
    for (const auto & f : image_flags(true)) a.push_back(f);
    a.insert(a.end(), {"--mmproj-max-image-mb", "0.01", "--mmproj-max-images", "2", "--image-urls",
                       "--image-url-timeout", "0.5"});
    auto fetcher = node_process::start(a);

    auto with_url = [&](const std::string & url) {
        json b = image_chat({img});
        b["messages"][0]["content"][1]["image_url"]["url"] = url;
        return b;
    };
    const http_reply inline_ = post(*with_, "/v1/chat/completions", image_chat({img}).dump());
    ASSERT_EQ(inline_.status, 200) << inline_.body;
    for (const std::string path : {"/cat.bmp", "/moved"}) {
        const http_reply r = post(*fetcher, "/v1/chat/completions", with_url(base + path).dump());
        ASSERT_EQ(r.status, 200) << r.body;
        EXPECT_EQ(normalized(r.j()), normalized(inline_.j())) << path;
    }
    // PD: the prefill node fetches; the decode node (no projector) answers as the single node with the inline image.
    const http_reply pd = via_pd(*fetcher, *without_, "chat", with_url(base + "/cat.bmp").dump());
    ASSERT_EQ(pd.status, 200) << pd.body;
    EXPECT_EQ(normalized(pd.j()), normalized(inline_.j()));
    // Anthropic's url source.
    const json msg = {{"max_tokens", 12},
                      {"temperature", 0},
                      {"messages",
                       {{{"role", "user"},
                         {"content",
                          {{{"type", "text"}, {"text", "Here is a picture: "}},
                           {{"type", "image"}, {"source", {{"type", "url"}, {"url", base + "/cat.bmp"}}}},
                           {{"type", "text"}, {"text", "What is in it?"}}}}}}}};
    const http_reply m = post(*fetcher, "/v1/messages", msg.dump());
    ASSERT_EQ(m.status, 200) << m.body;
    EXPECT_EQ(m.j()["content"][0]["text"], inline_.j()["choices"][0]["message"]["content"]);
    // count_tokens fetches too: the same count as the image inline.
    json inline_msg = msg;
    inline_msg["messages"][0]["content"][1]["source"] = {
        {"type", "base64"}, {"media_type", "image/bmp"}, {"data", ::baton::base64_encode(img)}};
    const http_reply cu = post(*fetcher, "/v1/messages/count_tokens", msg.dump()),
                     ci = post(*fetcher, "/v1/messages/count_tokens", inline_msg.dump());
    ASSERT_EQ(cu.status, 200) << cu.body;
    ASSERT_EQ(ci.status, 200) << ci.body;
    EXPECT_EQ(cu.j()["input_tokens"], ci.j()["input_tokens"]);
    // One refusal per way a fetch fails, each naming the field.
    const std::string field = "messages[0].content[1].image_url: ";
    expect_400(*fetcher, with_url(base + "/missing.bmp"), field + "cannot fetch the image: ");
    expect_400(*fetcher, with_url(base + "/missing.bmp"), "answered 404");
    expect_400(*fetcher, with_url(base + "/page"), "answered Content-Type text/html");
    expect_400(*fetcher, with_url(base + "/big.bmp"), "over the limit of 10485");
    expect_400(*fetcher, with_url(base + "/slow.bmp"), "the --image-url-timeout of 500 ms passed");
    expect_400(*fetcher, with_url("http://127.0.0.1:1/x.bmp"), field + "cannot fetch the image: ");
    expect_400(*fetcher, with_url("http://user@127.0.0.1/x.bmp"), "credentials");
    // Over --mmproj-max-images: refused before anything is fetched (fetching these would time out first).
    json three = image_chat({img, img, img});
    for (int k = 1; k <= 3; ++k) three["messages"][0]["content"][k]["image_url"]["url"] = base + "/slow.bmp";
    expect_400(*fetcher, three, "images: 3 in one request, at most 2 (--mmproj-max-images)");
    EXPECT_EQ(post(*fetcher, "/v1/chat/completions", with_url(base + "/cat.bmp").dump()).status, 200);
    host.stop();
    t.join();
}

// On the Vulkan device (llvmpipe): the node with the projector runs the model (and the LLaVA-style projector) on the
// device, the decode node the model only (no projector); PD answers as that single node, greedy and seeded,
// streamed and not, one image and two — with the LLaVA-style projector on mkmodel's llama and Qwen2-VL's merger on
// its qwen2vl (M-RoPE grid positions). (Across devices the numerics differ, so the device is compared with itself: as PdGrid's cells.)
struct device_case {
    std::string name, arch, projector;
    uint32_t w = 0, h = 0;  // the images' size
    // The projector on the device too (the default); Qwen2-VL's stays on the CPU: its vision transformer's first
    // pipelines take llvmpipe ~16 s to compile, and the device's part of PD is the text model's.
    bool projector_on_device = true;
};
class ServeImagesVulkan : public ::testing::TestWithParam<device_case> {};

TEST_P(ServeImagesVulkan, APrefillWithImagesOnTheDeviceDecodesOnTheDeviceAsTheSingleNode) {
    // Under ASan/TSan llvmpipe's uninstrumented JIT threads report what is not Baton's: the release suite runs it.
    if (k_sanitized) GTEST_SKIP() << "sanitized build: the release suite runs the Vulkan cases";
    const device_case & d = GetParam();
    auto on_device = [&](bool projector) {
        std::vector<std::string> a = {"GGML_VK_VISIBLE_DEVICES=0", baton_bin(), "serve"};
        for (const auto & f : media_flags(test_model_path(d.arch), 1024, "")) a.push_back(f);
        a.insert(a.end(), {"-dev", "Vulkan0", "-ngl", "all"});
        if (projector) a.insert(a.end(), {"--mmproj", test_mmproj_path(64, 1, d.projector)});
        if (projector && !d.projector_on_device) a.push_back("--no-mmproj-offload");
        return node_process::start(a, 120, "/usr/bin/env");
    };
    auto pre = on_device(true), dec = on_device(false);
    const json props = get(*pre, "/props").j();
    ASSERT_EQ(props["modalities"]["vision"], true);
    json seeded = image_chat({test_bmp(d.w, d.h, 11)});
    seeded["temperature"] = 0.9;
    seeded["seed"] = 3;
    std::vector<json> cases = {image_chat({test_bmp(d.w, d.h, 10)}), seeded,
                               image_chat({test_bmp(d.w, d.h, 12), test_bmp(d.h, d.w, 13)}, "Which differs?")};
    expect_pd_as_single(*pre, *pre, *dec, cases);
    // The image is read on the device too: two images, two first-token distributions.
    expect_media_read(*pre, image_chat({test_bmp(d.w, d.h, 1)}), image_chat({test_bmp(d.w, d.h, 2)}));
}

INSTANTIATE_TEST_SUITE_P(Projectors, ServeImagesVulkan,
                         ::testing::Values(device_case{"llava", "llama", "mlp", 40, 24},
                                           device_case{"qwen2vl", "qwen2vl", "qwen2vl_merger", 64, 32, false}),
                         [](const auto & info) { return info.param.name; });

// Gemma 3's projector (non-causal attention among an image's embeddings) on mkmodel's gemma3: a chat with an image
// answers as Debian's llama-server on the same pair, and through PD (greedy and seeded, streamed and not; the state
// sent whole and in parts) on a decode node without the projector as the single node.
TEST(ServeImagesGemma3, NonCausalImagesAnswerAsLlamaServerAndThroughPd) {
    auto flags = [](bool projector) {
        return media_flags(test_model_path("gemma3"), 1024, projector ? test_mmproj_path(64, 1, "gemma3") : "");
    };
    auto args = [&](bool projector) { return serve_with(flags(projector)); };
    auto with = node_process::start(args(true));
    auto without = node_process::start(args(false));
    std::vector<json> cases = {image_chat({test_bmp(40, 24, 21)}), image_chat({test_bmp(40, 24, 22)})};
    cases[1]["temperature"] = 0.9;
    cases[1]["seed"] = 5;
    expect_as_llama_server(flags(true), *with, {cases[0]});
    expect_pd_as_single(*with, *with, *without, cases);
    // Streamed transfer (--state-stream-tokens 8, -b 32 -ub 16): part stops fall inside the image, which is still
    // decoded whole; the decode node joins the parts and answers as a single node with the same batch flags.
    auto batched = [&](std::vector<std::string> a) {
        a.insert(a.end(), {"-b", "32", "-ub", "16"});
        return a;
    };
    auto single = node_process::start(batched(args(true)));
    std::vector<std::string> pa = batched(args(true));
    pa.insert(pa.end(), {"--role", "prefill", "--state-stream-tokens", "8"});
    auto prefill = node_process::start(pa);
    auto router = node_process::start({"route", "--prefill", prefill->url(), "--decode", without->url(),
                                       "--pd-min-tokens", "100000", "--timeout", "60", "--health-interval", "0.2"});
    for (const json & body : cases) {
        const http_reply want = post(*single, "/v1/chat/completions", body.dump());
        const http_reply got = post(*router, "/v1/chat/completions", body.dump());
        ASSERT_EQ(want.status, 200) << want.body;
        ASSERT_EQ(got.status, 200) << got.body;
        EXPECT_EQ(got.route, "pd");
        EXPECT_EQ(normalized(got.j()), normalized(want.j()));
    }
    EXPECT_GE(metric_value(get(*prefill, "/metrics").body, "baton_state_parts_out_total"), 4.0);
}

// Qwen2-VL's merger on mkmodel's qwen2vl (M-RoPE: an image is a grid of embeddings at one position, the text after
// it max(w, h) positions on): a chat with an image answers as Debian's llama-server on the same pair, and through
// PD (greedy and seeded, streamed and not) on a decode node without the projector — which learns where the image's
// cells sit from the state alone — as the single node.
TEST(ServeImagesQwen2vl, MRopeImagesAnswerAsLlamaServerAndThroughPd) {
    auto flags = [](bool projector) {
        return media_flags(test_model_path("qwen2vl"), 1024,
                           projector ? test_mmproj_path(64, 1, "qwen2vl_merger") : "");
    };
    auto with = node_process::start(serve_with(flags(true)));
    auto without = node_process::start(serve_with(flags(false)));
    std::vector<json> cases = {image_chat({test_bmp(64, 32, 31)}),
                               image_chat({test_bmp(64, 32, 32), test_bmp(32, 64, 33)}, "Which differs?")};
    cases[1]["temperature"] = 0.9;
    cases[1]["seed"] = 7;
    expect_as_llama_server(flags(true), *with, {cases[0]});
    expect_pd_as_single(*with, *with, *without, cases);
    expect_media_read(*with, image_chat({test_bmp(64, 32, 1)}), image_chat({test_bmp(64, 32, 2)}));
}

// Audio (an input_audio part; Qwen2-Audio's projector on mkmodel's llama): a chat with a clip answers as Debian's
// llama-server on the same pair; through PD on a decode node without the projector, streamed and not, and through a
// router, as the single node; /props says what the projector reads; a clip sent to an image projector and an image
// sent to the audio one are 400s naming what the server does not read.
TEST(ServeAudio, AChatWithAClipAnswersAsLlamaServerAndThroughPd) {
    auto flags = [](bool projector) {
        return media_flags(test_model_path("llama"), 2048, projector ? test_mmproj_path(64, 1, "qwen2a") : "");
    };
    auto args = [&](bool projector) { return serve_with(flags(projector)); };
    auto clip_chat = [](const std::string & wav) {
        json content = json::array(
            {{{"type", "text"}, {"text", "Listen: "}},
             {{"type", "input_audio"}, {"input_audio", {{"data", ::baton::base64_encode(wav)}, {"format", "wav"}}}},
             {{"type", "text"}, {"text", "What is it?"}}});
        return json{{"messages", {{{"role", "user"}, {"content", content}}}}, {"max_tokens", 12}, {"temperature", 0}};
    };
    auto with = node_process::start(args(true));
    auto without = node_process::start(args(false));
    EXPECT_EQ(get(*with, "/props").j()["modalities"]["audio"], true);
    EXPECT_EQ(get(*with, "/props").j()["modalities"]["vision"], false);
    EXPECT_EQ(get(*without, "/props").j()["modalities"]["audio"], false);
    const json a = clip_chat(test_wav(1000, 1)), b = clip_chat(test_wav(1000, 2));
    expect_as_llama_server(flags(true), *with, {a, b});
    // The clip is heard: two clips answer differently.
    expect_media_read(*with, a, b);
    json seeded = b;
    seeded["temperature"] = 0.9;
    seeded["seed"] = 3;
    expect_pd_as_single(*with, *with, *without, {a, seeded});
    auto router = node_process::start({"route", "--prefill", with->url(), "--decode", without->url(), "--pd-min-tokens",
                                       "100000", "--timeout", "60", "--health-interval", "0.2"});
    const http_reply routed = post(*router, "/v1/chat/completions", a.dump());
    ASSERT_EQ(routed.status, 200) << routed.body;
    EXPECT_EQ(routed.route, "pd") << "a chat with audio takes PD whatever its length";
    EXPECT_EQ(normalized(routed.j()), normalized(post(*with, "/v1/chat/completions", a.dump()).j()));
    // What a server does not read: a clip on a node without a projector, an image on the audio projector.
    auto expect_refused = [](const node_process & n, const json & body, const std::string & needle) {
        const http_reply r = post(n, "/v1/chat/completions", body.dump());
        EXPECT_EQ(r.status, 400) << r.body;
        EXPECT_NE(r.body.find(needle), std::string::npos) << r.body;
    };
    expect_refused(*without, a, "audio input is not supported by this server");
    expect_refused(*with, image_chat({test_bmp(40, 24, 1)}), "image input is not supported by this server");
    json flac = a;
    flac["messages"][0]["content"][1]["input_audio"]["format"] = "flac";
    expect_refused(*with, flac, "is not wav or mp3");
}

// The fetch flags are checked by the command line (exit 2 naming the flag): each needs what it builds on.
TEST(ServeImageFlags, FetchFlagsNeedWhatTheyBuildOn) {
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"--image-urls"}, "--image-urls: needs --mmproj"},
        {{"--image-url-ca", "/etc/hostname"}, "--image-url-ca: needs --image-urls"},
        {{"--mmproj", test_mmproj_path(64), "--image-urls", "--image-url-timeout", "0"}, "--image-url-timeout"},
    };
    for (const auto & [flags, why] : cases) {
        std::vector<std::string> args = {baton_bin(), "serve", "-m", test_model_path("llama")};
        args.insert(args.end(), flags.begin(), flags.end());
        const proc_result r = run_process(args, 60);
        EXPECT_EQ(r.exit_code, 2) << why << ": " << r.err;
        EXPECT_NE(r.err.find(why), std::string::npos) << r.err;
    }
}

}  // namespace
}  // namespace baton::test
