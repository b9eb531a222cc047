// log_test.cpp — the logger: level and format names, the text and JSON lines (one line per call, whatever
// the message holds), level filtering, concurrent writers, X-Request-Id generation and validation.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "baton/base/log.h"
#include "log_test_seam.h"

namespace baton {
namespace {

// Captures every line the logger writes while it lives; restores stderr and the defaults after.
class Log : public ::testing::Test {
  protected:
    void SetUp() override {
        log_set_sink_for_test([this](std::string_view line) {
            std::lock_guard<std::mutex> lock(mu_);
            lines_.emplace_back(line);
        });
    }
    void TearDown() override {
        log_set_sink_for_test({});
        log_configure(log_level::info, log_format::text);
    }
    std::vector<std::string> lines() {
        std::lock_guard<std::mutex> lock(mu_);
        return lines_;
    }

  private:
    std::mutex mu_;
    std::vector<std::string> lines_;
};

const std::string k_time = R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)";

TEST(LogNames, LevelsParseTheirNamesOnly) {
    for (log_level l : {log_level::debug, log_level::info, log_level::warn, log_level::error, log_level::off}) {
        auto p = log_level_parse(log_level_name(l));
        ASSERT_TRUE(p.ok()) << log_level_name(l);
        EXPECT_EQ(p.value(), l);
    }
    for (std::string_view bad : {"", "INFO", "warning", "verbose", "trace", "info "}) {
        auto p = log_level_parse(bad);
        ASSERT_FALSE(p.ok()) << bad;
        EXPECT_EQ(p.status().code(), status_code::invalid_argument);
        EXPECT_NE(p.status().message().find("debug, info, warn, error or off"), std::string::npos);
    }
}

TEST(LogNames, FormatsParseTheirNamesOnly) {
    EXPECT_EQ(log_format_parse("text").value(), log_format::text);
    EXPECT_EQ(log_format_parse("json").value(), log_format::json);
    for (std::string_view bad : {"", "JSON", "logfmt", "txt"}) {
        auto p = log_format_parse(bad);
        ASSERT_FALSE(p.ok()) << bad;
        EXPECT_EQ(p.status().code(), status_code::invalid_argument);
    }
}

TEST_F(Log, TextLineHasUtcTimeLevelAndTheRequestOnlyWhenGiven) {
    log_info("hello {} {}", 42, std::string("world"));
    log_warn(log_request{"abc123"}, "slot {} busy", 3);
    log_error(log_request{""}, "no id");
    const auto l = lines();
    ASSERT_EQ(l.size(), 3u);
    EXPECT_TRUE(std::regex_match(l[0], std::regex("^" + k_time + " info hello 42 world$"))) << l[0];
    EXPECT_TRUE(std::regex_match(l[1], std::regex("^" + k_time + R"( warn \[req=abc123\] slot 3 busy$)"))) << l[1];
    EXPECT_TRUE(std::regex_match(l[2], std::regex("^" + k_time + " error no id$"))) << l[2];
}

TEST_F(Log, LevelBelowTheConfiguredOneIsDropped) {
    log_configure(log_level::warn, log_format::text);
    EXPECT_FALSE(log_enabled(log_level::debug));
    EXPECT_FALSE(log_enabled(log_level::info));
    EXPECT_TRUE(log_enabled(log_level::warn));
    EXPECT_TRUE(log_enabled(log_level::error));
    EXPECT_FALSE(log_enabled(log_level::off));
    log_debug("d");
    log_info("i");
    log_warn("w");
    log_error("e");
    ASSERT_EQ(lines().size(), 2u);
    EXPECT_NE(lines()[0].find(" warn w"), std::string::npos);
    log_configure(log_level::off, log_format::text);
    log_error("dropped");
    EXPECT_EQ(lines().size(), 2u) << "off writes nothing";
    log_configure(log_level::debug, log_format::text);
    log_debug(log_request{"r"}, "now {}", "seen");
    ASSERT_EQ(lines().size(), 3u);
    EXPECT_NE(lines()[2].find(" debug [req=r] now seen"), std::string::npos) << lines()[2];
}

TEST_F(Log, DefaultIsInfoAndText) {
    // TearDown of every test restores the documented default; a fresh process starts there too.
    EXPECT_FALSE(log_enabled(log_level::debug));
    EXPECT_TRUE(log_enabled(log_level::info));
    log_info("x");
    EXPECT_EQ(lines().at(0).front(), '2') << "a text line starts with its time";
}

// A message built from client input: quotes, backslashes, a newline, control characters, DEL, invalid UTF-8
// (a stray continuation byte, an overlong '/', a cut-short sequence, a surrogate, 0xFF) and valid UTF-8.
const std::string k_nasty = std::string("a \"quoted\" \\path\\ line1\nline2\r\t bell\x07 nul") + std::string(1, '\0') +
                            " del\x7f cont\x80 overlong\xC0\xAF cut\xE2\x82 surrogate\xED\xA0\x80 ff\xFF ok \xC3\xA9 "
                            "\xF0\x9F\x98\x80 end";
const std::string k_nasty_clean =
    std::string("a \"quoted\" \\path\\ line1\nline2\r\t bell\x07 nul") + std::string(1, '\0') +
    " del\x7f cont\xEF\xBF\xBD overlong\xEF\xBF\xBD\xEF\xBF\xBD cut\xEF\xBF\xBD\xEF\xBF\xBD "
    "surrogate\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD ff\xEF\xBF\xBD ok \xC3\xA9 "
    "\xF0\x9F\x98\x80 end";

TEST_F(Log, JsonLineEscapesANastyMessageIntoOneParseableObject) {
    log_configure(log_level::info, log_format::json);
    log_warn(log_request{"id-\"q\"\\"}, "{}", k_nasty);
    const auto l = lines();
    ASSERT_EQ(l.size(), 1u);
    EXPECT_EQ(l[0].find('\n'), std::string::npos) << "one call, one line";
    for (unsigned char c : l[0]) EXPECT_GE(c, 0x20) << "no raw control character in a JSON line";
    // nlohmann refuses invalid UTF-8 and unescaped control characters: parsing at all is the check.
    nlohmann::json j;
    ASSERT_NO_THROW(j = nlohmann::json::parse(l[0])) << l[0];
    ASSERT_TRUE(j.is_object());
    EXPECT_EQ(j.size(), 4u) << l[0];
    EXPECT_EQ(j["level"], "warn");
    EXPECT_EQ(j["request_id"], "id-\"q\"\\");
    EXPECT_EQ(j["msg"].get<std::string>(), k_nasty_clean);
    EXPECT_TRUE(std::regex_match(j["time"].get<std::string>(), std::regex("^" + k_time + "$"))) << j["time"];
    EXPECT_NE(l[0].find("\\u0007"), std::string::npos) << l[0];
}

TEST_F(Log, JsonLineWithoutRequestHasNoRequestId) {
    log_configure(log_level::info, log_format::json);
    log_info("plain {}", 1);
    const auto j = nlohmann::json::parse(lines().at(0));
    EXPECT_FALSE(j.contains("request_id")) << j;
    EXPECT_EQ(j["msg"], "plain 1");
    EXPECT_EQ(j["level"], "info");
}

TEST_F(Log, TextLineCannotBeSplitByTheMessage) {
    log_info(log_request{"r1"}, "{}", k_nasty);
    const auto l = lines();
    ASSERT_EQ(l.size(), 1u);
    EXPECT_EQ(l[0].find('\n'), std::string::npos);
    for (unsigned char c : l[0]) EXPECT_TRUE(c >= 0x20 && c != 0x7f) << "raw control character in " << l[0];
    EXPECT_NE(l[0].find("line1\\nline2\\r\\t bell\\x07 nul\\x00 del\\x7f cont\xEF\xBF\xBD"), std::string::npos) << l[0];
    EXPECT_NE(l[0].find("\\\\path\\\\"), std::string::npos) << "backslashes doubled: " << l[0];
}

TEST_F(Log, ConcurrentWritersEachGetWholeLines) {
    log_configure(log_level::info, log_format::json);
    constexpr int k_threads = 4, k_lines = 200;
    std::vector<std::thread> threads;
    for (int t = 0; t < k_threads; ++t)
        threads.emplace_back([t] {
            const std::string id = request_id_new();
            for (int i = 0; i < k_lines; ++i)
                log_info(log_request{id}, "thread {} line {} {}", t, i, std::string(100, 'x'));
        });
    for (auto & t : threads) t.join();
    const auto l = lines();
    ASSERT_EQ(l.size(), size_t(k_threads * k_lines));
    for (const auto & line : l) {
        const auto j = nlohmann::json::parse(line, nullptr, false);
        ASSERT_FALSE(j.is_discarded()) << line;
        EXPECT_EQ(j["request_id"].get<std::string>().size(), 16u);
    }
}

TEST(RequestId, NewIsSixteenLowercaseHexAndFresh) {
    const std::string a = request_id_new(), b = request_id_new();
    for (const std::string & id : {a, b}) {
        EXPECT_TRUE(std::regex_match(id, std::regex("^[0-9a-f]{16}$"))) << id;
        EXPECT_TRUE(request_id_valid(id)) << id;
    }
    EXPECT_NE(a, b);
    std::string other;
    std::thread([&] { other = request_id_new(); }).join();
    EXPECT_NE(other, a) << "each thread's generator has its own seed";
    EXPECT_NE(other, b);
}

TEST(RequestId, ValidIsOneTo128PrintableAsciiWithoutSpace) {
    EXPECT_TRUE(request_id_valid("a"));
    EXPECT_TRUE(request_id_valid("3f2a-9b_c.d:e/f~!"));
    EXPECT_TRUE(request_id_valid(std::string(128, 'z')));
    EXPECT_FALSE(request_id_valid(""));
    EXPECT_FALSE(request_id_valid(std::string(129, 'z')));
    EXPECT_FALSE(request_id_valid("has space"));
    EXPECT_FALSE(request_id_valid("tab\t"));
    EXPECT_FALSE(request_id_valid("line\nbreak"));
    EXPECT_FALSE(request_id_valid("del\x7f"));
    EXPECT_FALSE(request_id_valid("caf\xC3\xA9"));
    EXPECT_FALSE(request_id_valid(std::string_view("nul\0x", 5)));
}

}  // namespace
}  // namespace baton
