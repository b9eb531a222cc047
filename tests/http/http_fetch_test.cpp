// http_fetch_test.cpp — fetching a URL a client named (http_fetch.h): the URL rules, one case per way a fetch
// ends (a body, a redirect followed, a loop of redirects, a status other than 200, a body over the cap by its
// Content-Length, a deadline, no TLS for https), against an edge server on loopback this test starts.
#include <gtest/gtest.h>

#include <chrono>
#include <future>

#include "baton/http/http_fetch.h"
#include "baton/http/http_server.h"

namespace baton {
namespace {

using namespace std::chrono_literals;

TEST(FetchUrl, SchemesHostsPortsAndTargets) {
    auto u = fetch_url_parse("HTTP://Example.com/a/b.png?x=1#frag");
    ASSERT_TRUE(u.ok()) << u.status().message();
    EXPECT_FALSE(u->origin.tls);
    EXPECT_EQ(u->origin.host, "Example.com");
    EXPECT_EQ(u->origin.port, 80);
    EXPECT_EQ(u->target, "/a/b.png?x=1");
    EXPECT_EQ(fetch_url_text(*u), "http://Example.com:80/a/b.png?x=1");
    auto s = fetch_url_parse("https://127.0.0.1:8443?q");
    ASSERT_TRUE(s.ok());
    EXPECT_TRUE(s->origin.tls);
    EXPECT_EQ(s->origin.port, 8443);
    EXPECT_EQ(s->target, "/?q");
    auto v6 = fetch_url_parse("https://[::1]/img");
    ASSERT_TRUE(v6.ok());
    EXPECT_EQ(v6->origin.host, "::1");
    EXPECT_EQ(v6->origin.port, 443);
    EXPECT_EQ(fetch_url_text(*v6), "https://[::1]:443/img");
    EXPECT_EQ(fetch_url_parse("http://h").value().target, "/");
    // Read back: the text of a parsed URL parses to the same URL.
    for (const auto * ok : {"http://a.b:1/x?y", "https://[fe80::1]:9/", "http://h_1-2.example"}) {
        auto a = fetch_url_parse(ok);
        ASSERT_TRUE(a.ok()) << ok;
        auto b = fetch_url_parse(fetch_url_text(*a));
        ASSERT_TRUE(b.ok()) << ok;
        EXPECT_EQ(fetch_url_text(*b), fetch_url_text(*a));
    }
}

TEST(FetchUrl, EachRuleRefusesByName) {
    const std::pair<std::string, const char *> cases[] = {
        {"ftp://h/a", "only http:// and https://"},
        {"file:///etc/passwd", "only http:// and https://"},
        {"http://user:pw@h/a", "credentials"},
        {"http:///a", "no host"},
        {"http://h:/a", "an empty port"},
        {"http://h:0/", "1..65535"},
        {"http://h:65536/", "1..65535"},
        {"http://h:8x/", "1..65535"},
        {"http://h%41/", "a host holds only"},
        {"http://[::1/", "unterminated"},
        {"http://[]/", "unterminated or empty"},
        {"http://[::1]x/", "text after the ]"},
        {"http://[g::1]/", "[IPv6] host holds only"},
        {"http://h/a b", "a space or a control character"},
        {"http://h/a\r\nX: y", "a space or a control character"},
        {"http://h/" + std::string(9000, 'a'), "longer than 8 KiB"},
    };
    for (const auto & [url, why] : cases) {
        auto r = fetch_url_parse(url);
        ASSERT_FALSE(r.ok()) << url;
        EXPECT_EQ(r.status().code(), status_code::invalid_argument) << url;
        EXPECT_NE(r.status().message().find(why), std::string::npos) << url << ": " << r.status().message();
    }
}

// An edge server with one route per way a fetch can end.
class FetchServer : public ::testing::Test {
  protected:
    void SetUp() override {
        server_ = std::make_unique<http_server>(http_server_config{});
        auto get = [this](std::string path, http_handler h) {
            server_->route("GET", std::move(path), {}, std::move(h));
        };
        get("/img", [](http_exchange & ex) -> net::awaitable<void> {
            http_response r;
            r.content_type = "image/bmp";
            r.body = std::string(1000, 'i');
            co_await ex.respond(std::move(r));
        });
        auto redirect = [](std::string to, int status) {
            return [to, status](http_exchange & ex) -> net::awaitable<void> {
                http_response r;
                r.status = status;
                r.headers.emplace_back("Location", to);
                co_await ex.respond(std::move(r));
            };
        };
        get("/r1", redirect("/r2", 302));
        get("/r2", redirect("img", 307));  // relative to /: /img
        get("/loop", redirect("/loop", 301));
        get("/nowhere", redirect("ftp://h/x", 302));
        get("/page", [](http_exchange & ex) -> net::awaitable<void> {
            co_await ex.respond(http_response{200, "text/html", {}, "<html>not found</html>"});
        });
        get("/slow", [](http_exchange & ex) -> net::awaitable<void> {
            net::steady_timer t(co_await net::this_coro::executor);
            t.expires_after(1s);
            error_code ec;
            co_await t.async_wait(net::redirect_error(net::use_awaitable, ec));
            co_await ex.respond(http_response{200, "image/png", {}, "late"});
        });
        auto port = server_->bind();
        ASSERT_TRUE(port.ok());
        base_ = "http://127.0.0.1:" + std::to_string(port.value());
        server_->start();
    }
    void TearDown() override { server_->stop(); }

    Result<fetched> fetch(const std::string & url, uint64_t max_bytes = 1 << 20,
                          std::chrono::milliseconds timeout = 2000ms, tls_context_ptr tls = nullptr) {
        net::io_context ioc;
        const fetch_limits lim{std::chrono::steady_clock::now() + timeout, max_bytes, 3};
        std::optional<Result<fetched>> out;
        net::co_spawn(
            ioc, [&]() -> net::awaitable<void> { out.emplace(co_await http_fetch(url, lim, tls)); }, net::detached);
        ioc.run();
        return std::move(*out);
    }

    // expect_fails: fetching path fails with code and a message holding why.
    void expect_fails(const std::string & path, status_code code, const std::string & why,
                      uint64_t max_bytes = 1 << 20) {
        auto r = fetch(base_ + path, max_bytes);
        ASSERT_FALSE(r.ok()) << path;
        EXPECT_EQ(r.status().code(), code) << path << ": " << r.status().message();
        EXPECT_NE(r.status().message().find(why), std::string::npos) << path << ": " << r.status().message();
    }

    std::unique_ptr<http_server> server_;
    std::string base_;
};

TEST_F(FetchServer, BodyAndTypeOfA200) {
    auto r = fetch(base_ + "/img");
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->body, std::string(1000, 'i'));
    EXPECT_EQ(r->content_type, "image/bmp");
    EXPECT_EQ(r->url, base_ + "/img");
    auto page = fetch(base_ + "/page");
    ASSERT_TRUE(page.ok());
    EXPECT_EQ(page->content_type, "text/html");  // (the caller decides what a type means)
}

TEST_F(FetchServer, RedirectsAreFollowedAbsoluteAndRelative) {
    auto r = fetch(base_ + "/r1");
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->body.size(), 1000u);
    EXPECT_EQ(r->url, base_ + "/img");
}

TEST_F(FetchServer, ARedirectLoopEndsAfterMaxRedirects) {
    expect_fails("/loop", status_code::upstream_error, "more than 3 redirects");
}

TEST_F(FetchServer, ARedirectToAnotherSchemeIsRefused) {
    expect_fails("/nowhere", status_code::invalid_argument, "redirected to URL 'ftp://h/x'");
}

TEST_F(FetchServer, AStatusOtherThan200IsAnUpstreamError) {
    expect_fails("/no-such-path", status_code::upstream_error, "answered 404");
}

TEST_F(FetchServer, ABodyOverTheCapIsTooLarge) {
    expect_fails("/img", status_code::too_large, "1000 bytes, over the limit of 999", 999);
    EXPECT_TRUE(fetch(base_ + "/img", 1000).ok());  // (the cap itself is allowed)
}

TEST_F(FetchServer, TheDeadlineCoversTheWholeFetch) {
    // (The server answers 200 after a second: only the deadline makes this fail.)
    auto r = fetch(base_ + "/slow", 1 << 20, 300ms);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), status_code::deadline_exceeded) << r.status().message();
}

TEST_F(FetchServer, HttpsNeedsATlsContextAndAnHttpsServer) {
    const std::string https = "https" + base_.substr(4) + "/img";
    auto no_tls = fetch(https);
    ASSERT_FALSE(no_tls.ok());
    EXPECT_EQ(no_tls.status().code(), status_code::invalid_argument);
    auto tls = tls_client_context({});
    ASSERT_TRUE(tls.ok());
    auto plain = fetch(https, 1 << 20, 2000ms, tls.value());  // the server speaks plain HTTP: no handshake
    ASSERT_FALSE(plain.ok());
    EXPECT_EQ(plain.status().code(), status_code::upstream_error);
    EXPECT_NE(plain.status().message().find("TLS handshake"), std::string::npos) << plain.status().message();
}

}  // namespace
}  // namespace baton
