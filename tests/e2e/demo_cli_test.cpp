// demo_cli_test.cpp — `baton demo` (the README's main job) runs prefill -> blob -> decode through the
// router, prints its figures, and leaves no process behind.
#include <gtest/gtest.h>

#include "support/test_support.h"

namespace baton {
namespace {

TEST(CliDemo, StreamsThroughRouterAndPrintsFigures) {
    auto r = test::run_process(
        {test::baton_bin(), "demo", "-m", test::test_model_path("llama"), "-n", "8", "-p", "Hello world"}, 120);
    ASSERT_EQ(r.exit_code, 0) << r.out << "\n" << r.err;
    EXPECT_NE(r.out.find("route pd"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("time to first token"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("state "), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("state 0.00 MiB"), std::string::npos) << "a PD request must move a state: " << r.out;
    // Every child was reaped: no `baton serve` / `baton route` left over from this demo.
    auto ps = test::run_process(
        {"/bin/sh", "-c",
         "ps -eo args | grep -c '[b]aton serve -m " + test::test_model_path("llama") + " --role prefill -np 1'"});
    EXPECT_EQ(ps.out, "0\n") << "demo left processes behind";
}

}  // namespace
}  // namespace baton
