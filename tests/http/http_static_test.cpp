// http_static_test.cpp — static files: what is served from the root, and every way out of it refused.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "baton/http/http_static.h"
#include "support/test_support.h"

namespace baton {
namespace {

void write(const std::string & path, const std::string & text) { std::ofstream(path) << text; }

TEST(HttpStatic, FilesUnderTheRootAreServedWithTheirTypes) {
    const std::string dir = test::temp_dir();
    ::mkdir((dir + "/www").c_str(), 0755);
    ::mkdir((dir + "/www/js").c_str(), 0755);
    write(dir + "/www/index.html", "<html>hi</html>");
    write(dir + "/www/js/app.mjs", "export {}");
    write(dir + "/www/style.css", "p{}");
    write(dir + "/secret.txt", "no");
    const std::string root = http_static_root(dir + "/www");
    ASSERT_FALSE(root.empty());
    auto index = http_static_file(root, "/");
    ASSERT_TRUE(index);
    EXPECT_EQ(index->body, "<html>hi</html>");
    EXPECT_EQ(index->content_type, "text/html; charset=utf-8");
    EXPECT_EQ(http_static_file(root, "/index.html")->body, "<html>hi</html>");
    EXPECT_EQ(http_static_file(root, "/js/app.mjs")->content_type, "text/javascript; charset=utf-8");
    EXPECT_EQ(http_static_file(root, "/style.css")->content_type, "text/css; charset=utf-8");
    // Nothing outside the root, however it is asked for.
    ASSERT_EQ(::symlink((dir + "/secret.txt").c_str(), (dir + "/www/link.txt").c_str()), 0);
    ASSERT_EQ(::symlink(dir.c_str(), (dir + "/www/up").c_str()), 0);
    for (const char * bad :
         {"/../secret.txt", "/js/../../secret.txt", "/./index.html", "//index.html", "/link.txt", "/up/secret.txt",
          "/%2e%2e/secret.txt", "/js", "/js/", "/missing.html", "", "index.html", "/a\\b"})
        EXPECT_FALSE(http_static_file(root, bad)) << bad;
    EXPECT_EQ(http_static_root(dir + "/nope"), "");
    EXPECT_EQ(http_static_root(dir + "/secret.txt"), "");
    EXPECT_FALSE(http_static_file("", "/index.html"));
}

}  // namespace
}  // namespace baton
