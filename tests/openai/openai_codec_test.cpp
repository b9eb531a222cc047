// openai_codec_test.cpp — the OpenAI request codec without a model or a process: openai_parse's shapes,
// defaults and refusals (one case per rule). What a prefill node embeds in a blob is pd/pd_request.h's
// (tests/pd/pd_request_test.cpp).
#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "baton/openai/openai.h"

namespace baton {
namespace {

Result<openai_request> parse(const std::string & body, openai_endpoint e = openai_endpoint::completions) {
    return openai_parse(body, e);
}

// A refusal is invalid_argument (or too_large) and names the field.
void expect_refused(const std::string & body, const std::string & field,
                    openai_endpoint e = openai_endpoint::completions) {
    auto r = parse(body, e);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_NE(r.status().message().find(field), std::string::npos) << body << " -> " << r.status().message();
}

// llama-server's direct token input: texts and ids in one prompt array (its parts kept in order); an array of
// texts alone is several prompts, which openai_parse refuses (a prefill makes one state; a node splits them first
// with openai_prompts_split).
TEST(OpenaiParse, APromptMixingTextsAndIdsKeepsItsParts) {
    auto r = parse(R"({"prompt":["Hi", 5, " there", 7]})", openai_endpoint::completion);
    ASSERT_TRUE(r.ok()) << r.status().message();
    const auto & m = std::get<openai_prompt_mixed>(r->input);
    ASSERT_EQ(m.parts.size(), 4u);
    EXPECT_EQ(std::get<std::string>(m.parts[0]), "Hi");
    EXPECT_EQ(std::get<token_id>(m.parts[1]), 5);
    EXPECT_EQ(std::get<std::string>(m.parts[2]), " there");
    expect_refused(R"({"prompt":["a", -1]})", "prompt");
    expect_refused(R"({"prompt":["a", 1.5]})", "prompt");
    expect_refused(R"({"prompt":["a", "b"]})", "several prompts in one request make no one state");
}

// Several prompts: one body per prompt, in order, every other field and its place kept (a json_schema's property
// order decides its grammar); one prompt, another endpoint or no JSON object: nothing to split.
TEST(OpenaiPromptsSplit, OneBodyPerPromptWithTheOtherFieldsInOrder) {
    auto s = openai_prompts_split(R"({"z":1,"prompt":["a",[1,2],{"prompt_string":"b"}],"a":{"y":1,"b":2}})",
                                  openai_endpoint::completions);
    ASSERT_TRUE(s.ok()) << s.status().message();
    ASSERT_EQ(s->size(), 3u);
    EXPECT_EQ((*s)[0], R"({"z":1,"prompt":"a","a":{"y":1,"b":2}})");
    EXPECT_EQ((*s)[1], R"({"z":1,"prompt":[1,2],"a":{"y":1,"b":2}})");
    EXPECT_EQ((*s)[2], R"({"z":1,"prompt":{"prompt_string":"b"},"a":{"y":1,"b":2}})");
    auto split_of = [](const char * body, openai_endpoint e = openai_endpoint::completion) {
        auto r = openai_prompts_split(body, e);
        EXPECT_TRUE(r.ok()) << body;
        return r.ok() ? r->size() : size_t(99);
    };
    EXPECT_EQ(split_of(R"({"prompt":["a","b"]})"), 2u);
    EXPECT_EQ(split_of(R"({"prompt":[[1],[2],[3]]})"), 3u);
    EXPECT_EQ(split_of(R"({"prompt":"a"})"), 0u);
    // The cheap scan that spares one-prompt bodies a second parse lets every spelling of the member through:
    // JSON whitespace around the colon, a key written with an escape.
    EXPECT_EQ(split_of("{\"prompt\" \t:\r\n [\"a\",\"b\"]}"), 2u);
    EXPECT_EQ(split_of(R"({"pro\u006dpt":["a","b"]})"), 2u);
    EXPECT_EQ(split_of(R"({"prompt":"say \"prompt\":[1] and \"prompt\": [\"x\",\"y\"]"})"), 0u);
    EXPECT_EQ(split_of(R"({"n":2,"prompt":"a","x":{"prompt":["a","b"]}})"), 0u);
    EXPECT_EQ(split_of(R"({"prompt":["a"]})"), 0u);
    EXPECT_EQ(split_of(R"({"prompt":[1,2,3]})"), 0u);      // token ids: one prompt
    EXPECT_EQ(split_of(R"({"prompt":["a",5,"b"]})"), 0u);  // texts and ids: one prompt
    EXPECT_EQ(split_of(R"({"prompt":["a","b"]})", openai_endpoint::chat), 0u);
    EXPECT_EQ(split_of(R"(not json)"), 0u);
    EXPECT_EQ(split_of(R"(["a","b"])"), 0u);
    auto bad = openai_prompts_split(R"({"prompt":[[1],2]})", openai_endpoint::completions);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.status().message().find("prompt[1]: each of several prompts"), std::string::npos);
    std::string many = R"({"prompt":[)";
    for (size_t i = 0; i <= openai_prompts_max; ++i) many += std::string(i ? "," : "") + "\"p\"";
    auto over = openai_prompts_split(many + "]}", openai_endpoint::completions);
    ASSERT_FALSE(over.ok());
    EXPECT_NE(over.status().message().find("more than 64"), std::string::npos) << over.status().message();
}

TEST(OpenaiParse, CompletionTextPromptTakesTheDefaultsItLeavesOut) {
    openai_defaults d;
    d.sampling.temperature = 0.3f;
    d.max_tokens = 7;
    auto r = openai_parse(R"({"prompt":"Hello","top_k":5})", openai_endpoint::completions, d);
    ASSERT_TRUE(r.ok()) << r.status().message();
    ASSERT_TRUE(std::holds_alternative<openai_prompt_text>(r->input));
    EXPECT_EQ(std::get<openai_prompt_text>(r->input).text, "Hello");
    EXPECT_FLOAT_EQ(r->sampling.temperature, 0.3f);  // the node's default
    EXPECT_EQ(r->sampling.top_k, 5);                 // the request's own
    EXPECT_EQ(r->max_tokens, 7);
    EXPECT_EQ(r->n, 1);
    EXPECT_FALSE(r->stream);
}

TEST(OpenaiParse, CompletionTokenPromptAndAOneStringArray) {
    auto t = parse(R"({"prompt":[1,2,3]})");
    ASSERT_TRUE(t.ok()) << t.status().message();
    ASSERT_TRUE(std::holds_alternative<openai_prompt_tokens>(t->input));
    EXPECT_EQ(std::get<openai_prompt_tokens>(t->input).tokens, (std::vector<token_id>{1, 2, 3}));
    auto s = parse(R"({"prompt":["only one"]})");
    ASSERT_TRUE(s.ok()) << s.status().message();
    EXPECT_EQ(std::get<openai_prompt_text>(s->input).text, "only one");
}

TEST(OpenaiParse, ChatMessagesKeepRolesContentAndOrder) {
    auto r = parse(R"({"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"Hi"}],
                       "max_tokens":4,"stream":true,"stream_options":{"include_usage":true}})",
                   openai_endpoint::chat);
    ASSERT_TRUE(r.ok()) << r.status().message();
    ASSERT_TRUE(std::holds_alternative<openai_chat>(r->input));
    const auto & m = std::get<openai_chat>(r->input).messages;
    ASSERT_EQ(m.size(), 2u);
    EXPECT_EQ(m[0].role, "system");
    EXPECT_EQ(m[1].content, "Hi");
    EXPECT_EQ(r->max_tokens, 4);
    EXPECT_TRUE(r->stream);
    EXPECT_TRUE(r->include_usage);
}

// Images: an image_url part becomes the process's media marker in the text and the file's bytes in images, in
// order; the url may be the object's or (as some clients send it) the part's string; detail is ignored.
TEST(OpenaiParse, ImageUrlPartsBecomeMarkersAndFileBytes) {
    auto r = parse(R"({"messages":[{"role":"user","content":[{"type":"text","text":"a"},
                       {"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw==","detail":"high"}},
                       {"type":"text","text":"b"},{"type":"image_url","image_url":"data:image/jpeg;base64,/9j/"}]}]})",
                   openai_endpoint::chat);
    ASSERT_TRUE(r.ok()) << r.status().message();
    const auto & c = std::get<openai_chat>(r->input);
    ASSERT_EQ(c.images.size(), 2u);
    EXPECT_EQ(c.images[0], std::string("\x89PNG", 4));
    EXPECT_EQ(c.images[1], std::string("\xff\xd8\xff", 3));
    EXPECT_EQ(c.messages[0].content, "a" + openai_media_marker() + "b" + openai_media_marker());
    EXPECT_EQ(openai_media_marker().size(), 28u);  // "<__image_" + 16 hex digits + "__>"
}

// An http(s) image URL is recorded, not fetched: its image's bytes stay empty, its place among the images and its
// field are kept for the node that prefills (which fetches it only with --image-urls).
TEST(OpenaiParse, HttpImageUrlsAreRecordedInPlaceForTheNodeToFetch) {
    auto r = parse(R"({"messages":[{"role":"user","content":[
                       {"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw=="}},
                       {"type":"image_url","image_url":{"url":"HTTPS://example.com/cat.png?x=1"}},
                       {"type":"image_url","image_url":"http://127.0.0.1:9/a.bmp"}]}]})",
                   openai_endpoint::chat);
    ASSERT_TRUE(r.ok()) << r.status().message();
    const auto & c = std::get<openai_chat>(r->input);
    ASSERT_EQ(c.images.size(), 3u);
    EXPECT_EQ(c.images[0], std::string("\x89PNG", 4));
    EXPECT_EQ(c.images[1], "");
    EXPECT_EQ(c.images[2], "");
    ASSERT_EQ(c.image_urls.size(), 2u);
    EXPECT_EQ(c.image_urls[0],
              (openai_chat::image_url{1, "HTTPS://example.com/cat.png?x=1", "messages[0].content[1].image_url"}));
    EXPECT_EQ(c.image_urls[1].index, 2u);
    EXPECT_EQ(c.image_urls[1].url, "http://127.0.0.1:9/a.bmp");
    EXPECT_EQ(c.messages[0].content, openai_media_marker() + openai_media_marker() + openai_media_marker());
}

// One refusal per rule of an image part: a data: or http(s) URL, an image's media type, base64, a url string.
TEST(OpenaiParse, ImageUrlPartsThatCannotBeTakenAreRefusedByName) {
    auto chat_with = [](const std::string & part) {
        return R"({"messages":[{"role":"user","content":[)" + part + "]}]}";
    };
    expect_refused(chat_with(R"({"type":"image_url","image_url":{"url":"file:///etc/passwd"}})"),
                   "content[0].image_url.url: must be a data: URL", openai_endpoint::chat);
    expect_refused(chat_with(R"({"type":"image_url","image_url":{"url":"ftp://example.com/a.png"}})"),
                   "or an http(s) URL", openai_endpoint::chat);
    expect_refused(chat_with(R"({"type":"image_url","image_url":{"url":"data:text/plain;base64,AA=="}})"),
                   "is not an image", openai_endpoint::chat);
    expect_refused(chat_with(R"({"type":"image_url","image_url":{"url":"data:image/png,rawbytes"}})"), "must be base64",
                   openai_endpoint::chat);
    expect_refused(chat_with(R"({"type":"image_url","image_url":{"url":"data:image/png;base64,@@@="}})"),
                   "not valid base64", openai_endpoint::chat);
    expect_refused(chat_with(R"({"type":"image_url","image_url":{"url":"data:image/png;base64,"}})"),
                   "the image is empty", openai_endpoint::chat);
    expect_refused(chat_with(R"({"type":"image_url","image_url":{"url":5}})"), "image_url.url: must be a string",
                   openai_endpoint::chat);
    expect_refused(chat_with(R"({"type":"image_url"})"), "image_url: is missing", openai_endpoint::chat);
    expect_refused(chat_with(R"({"type":"file","file":{}})"), "only text, image_url and input_audio parts",
                   openai_endpoint::chat);
}

// OpenAI's input_audio part: {"data": base64, "format": "wav" | "mp3"} becomes the clip's bytes where the marker
// stands, beside images in order; one refusal per rule.
TEST(OpenaiParse, InputAudioPartsBecomeMediaFilesInOrder) {
    auto r = parse(R"({"messages":[{"role":"user","content":[{"type":"text","text":"a "},
        {"type":"input_audio","input_audio":{"data":"UklGRg==","format":"wav"}},{"type":"text","text":" b "},
        {"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw=="}}]}]})",
                   openai_endpoint::chat);
    ASSERT_TRUE(r.ok()) << r.status().message();
    const auto & chat = std::get<openai_chat>(r->input);
    ASSERT_EQ(chat.images.size(), 2u);
    EXPECT_EQ(chat.images[0], "RIFF");
    EXPECT_EQ(chat.images[1], std::string("\x89PNG", 4));
    EXPECT_EQ(chat.messages[0].content, "a " + openai_media_marker() + " b " + openai_media_marker());
    auto chat_with = [](const std::string & part) {
        return R"({"messages":[{"role":"user","content":[)" + part + "]}]}";
    };
    expect_refused(chat_with(R"({"type":"input_audio"})"), "content[0].input_audio: must be an object",
                   openai_endpoint::chat);
    expect_refused(chat_with(R"({"type":"input_audio","input_audio":{"format":"wav"}})"),
                   "input_audio.data: must be a string", openai_endpoint::chat);
    expect_refused(chat_with(R"({"type":"input_audio","input_audio":{"data":"AA=="}})"),
                   "input_audio.format: must be a string", openai_endpoint::chat);
    expect_refused(chat_with(R"({"type":"input_audio","input_audio":{"data":"AA==","format":"flac"}})"),
                   "input_audio.format: \"flac\" is not wav or mp3", openai_endpoint::chat);
    expect_refused(chat_with(R"({"type":"input_audio","input_audio":{"data":"@@","format":"mp3"}})"),
                   "input_audio.data: the audio is not valid base64", openai_endpoint::chat);
    expect_refused(chat_with(R"({"type":"input_audio","input_audio":{"data":"","format":"mp3"}})"),
                   "the audio is empty", openai_endpoint::chat);
}

// llama-server's multimodal prompt: "<__media__>" in prompt_string stands for the next multimodal_data image
// (base64); it becomes this process's marker. Without images it is a text prompt, as written.
TEST(OpenaiParse, MultimodalPromptObjectsOfCompletion) {
    auto r =
        parse(R"({"prompt":{"prompt_string":"a <__media__> b <__media__>","multimodal_data":["iVBORw==","/9j/"]}})",
              openai_endpoint::completion);
    ASSERT_TRUE(r.ok()) << r.status().message();
    const auto & m = std::get<openai_prompt_media>(r->input);
    EXPECT_EQ(m.text, "a " + openai_media_marker() + " b " + openai_media_marker());
    ASSERT_EQ(m.images.size(), 2u);
    EXPECT_EQ(m.images[1], std::string("\xff\xd8\xff", 3));
    auto plain = parse(R"({"prompt":{"prompt_string":"a <__media__>"}})", openai_endpoint::completion);
    ASSERT_TRUE(plain.ok());
    EXPECT_EQ(std::get<openai_prompt_text>(plain->input).text, "a <__media__>");
    expect_refused(R"({"prompt":{"multimodal_data":[]}})", "prompt.prompt_string", openai_endpoint::completion);
    expect_refused(R"({"prompt":{"prompt_string":"a","multimodal_data":"AA=="}})", "prompt.multimodal_data",
                   openai_endpoint::completion);
    expect_refused(R"({"prompt":{"prompt_string":"a","multimodal_data":["%%"]}})", "multimodal_data[0]",
                   openai_endpoint::completion);
    expect_refused(R"({"prompt":{"prompt_string":"a","audio":[]}})", "prompt.audio", openai_endpoint::completion);
}

TEST(OpenaiParse, MaxTokensSpellingsAndSeedMinusOne) {
    EXPECT_EQ(parse(R"({"prompt":"a","max_completion_tokens":9})")->max_tokens, 9);
    EXPECT_EQ(parse(R"({"prompt":"a","n_predict":11})")->max_tokens, 11);
    EXPECT_EQ(parse(R"({"prompt":"a","seed":-1})")->sampling.seed, 0xFFFFFFFFu);
    EXPECT_EQ(parse(R"({"prompt":"a","seed":42})")->sampling.seed, 42u);
}

TEST(OpenaiParse, MalformedBodiesAndShapesAreRefused) {
    EXPECT_FALSE(parse("{").ok());
    EXPECT_FALSE(parse("[]").ok());
    expect_refused(R"({"messages":[]})", "messages", openai_endpoint::chat);
    expect_refused(R"({"prompt":"a","temperature":"hot"})", "temperature");
    expect_refused(R"({"prompt":"a","top_p":1.5})", "top_p");
    expect_refused(R"({"prompt":"a","max_tokens":-2})", "max_tokens");
    expect_refused(R"({"prompt":"a","stream_options":3})", "stream_options");
    expect_refused(R"({"prompt":"a","n":2})", "n", openai_endpoint::completion);
}

TEST(OpenaiParse, FieldsThatWouldChangeTheAnswerAreRefusedByName) {
    expect_refused(R"({"prompt":"a","mirostat":2})", "mirostat");
    expect_refused(R"({"prompt":"a","echo":true})", "echo");
    expect_refused(R"({"prompt":"a","suffix":"x"})", "suffix");
    expect_refused(R"({"prompt":"a","tools":[{"type":"function","function":{"name":"f"}}]})", "tools");
    // Their "off" values are accepted: a client library sending defaults is not refused.
    EXPECT_TRUE(parse(R"({"prompt":"a","mirostat":0,"typical_p":1,"echo":false})").ok());
}

TEST(OpenaiParse, AnEndpointOrRenderedPromptInTheBodyIsNotThePublicDialect) {
    // The PD internals travel in their own format (pd/pd_request.h): a client cannot switch its endpoint,
    // nor hand a chat endpoint a "rendered" prompt of token ids.
    auto pub = openai_parse(R"({"endpoint":"completion","prompt":"a"})", openai_endpoint::completions);
    ASSERT_TRUE(pub.ok()) << pub.status().message();
    EXPECT_EQ(pub->endpoint, openai_endpoint::completions);
    auto rendered = openai_parse(R"({"prompt":[1,2],"reasoning":{"format":"none","open":"<a>","close":"</a>",
                                     "starts_open":false}})",
                                 openai_endpoint::chat);
    ASSERT_FALSE(rendered.ok());
    EXPECT_NE(rendered.status().message().find("messages"), std::string::npos) << rendered.status().message();
}

TEST(OpenaiEndpoint, NamesParseBackAndOthersAreRefused) {
    for (openai_endpoint e : {openai_endpoint::completions, openai_endpoint::chat, openai_endpoint::completion}) {
        auto back = openai_endpoint_parse(openai_endpoint_name(e));
        ASSERT_TRUE(back.ok());
        EXPECT_EQ(back.value(), e);
    }
    EXPECT_FALSE(openai_endpoint_parse("embeddings").ok());
    EXPECT_FALSE(openai_endpoint_parse("").ok());
}

}  // namespace
}  // namespace baton
