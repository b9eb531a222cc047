// serve_static_test.cpp — the pages: a node and a router serve static files (--path, or by default the web UI
// Debian installs with llama.cpp-tools) without the API key, as llama-server does, while every endpoint
// still asks for it; --no-webui turns the default pages off.
#include <fstream>
#include <sstream>

#include "serve_test_util.h"

namespace baton::test {
namespace {

std::string read_file(const std::string & path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

TEST(ServeStatic, PathFilesAreOpenAndTheApiStillNeedsTheKey) {
    const std::string dir = temp_dir();
    std::ofstream(dir + "/index.html") << "<html><body>baton</body></html>";
    std::ofstream(dir + "/app.js") << "console.log(1)";
    auto n = node_process::start(serve_args("llama", {"--path", dir, "--api-key", "k"}));
    const http_reply index = get(*n, "/");
    EXPECT_EQ(index.status, 200) << index.body;
    EXPECT_EQ(index.body, "<html><body>baton</body></html>");
    EXPECT_EQ(index.content_type, "text/html; charset=utf-8");
    EXPECT_EQ(get(*n, "/app.js").content_type, "text/javascript; charset=utf-8");
    EXPECT_EQ(get(*n, "/missing.js").status, 401);     // not a file: the API's rules
    EXPECT_EQ(get(*n, "/../etc/passwd").status, 401);  // never outside the directory
    EXPECT_EQ(get(*n, "/v1/models").status, 401);      // endpoints keep the key
    EXPECT_EQ(get(*n, "/v1/models", "k").status, 200);
    EXPECT_EQ(post(*n, "/", "{}").status, 401);  // only GET/HEAD reach the files
    auto router = node_process::start({"route", "--decode", n->url(), "--path", dir, "--api-key", "k"});
    EXPECT_EQ(get(*router, "/").body, "<html><body>baton</body></html>");
    EXPECT_EQ(get(*router, "/v1/models").status, 401);
}

TEST(ServeStatic, TheDebianWebUiIsTheDefaultAndNoWebuiTurnsItOff) {
    const std::string ui = "/usr/share/llama.cpp/llama-server/default-ui";
    const std::string want = read_file(ui + "/index.html");
    if (want.empty()) GTEST_SKIP() << "llama.cpp-tools' web UI is not installed";
    auto n = node_process::start(serve_args("llama"));
    const http_reply index = get(*n, "/");
    EXPECT_EQ(index.status, 200);
    EXPECT_EQ(index.body, want);
    auto off = node_process::start(serve_args("llama", {"--no-webui"}));
    EXPECT_EQ(get(*off, "/").status, 404);
}

}  // namespace
}  // namespace baton::test
