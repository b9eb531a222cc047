// test_support.h — shared helpers for Baton's tests: cached test models and subprocesses with timeouts.
#pragma once

#include <string>
#include <vector>

namespace baton::test {

// test_model_path returns a test model of arch (made by mkmodel with the given seed and default size on
// first use, then cached in the build tree). Safe when test processes race: files appear by rename.
std::string test_model_path(const std::string & arch, unsigned seed = 1, int n_embd = 64, int n_layer = 4);

struct proc_result {
    int exit_code = -1;   // -1 when killed by a signal or the timeout
    bool timed_out = false;
    std::string out, err;
};

// run_process runs argv (argv[0] is a path) with stdin closed, capturing stdout/stderr; kills it after
// timeout_s seconds.
proc_result run_process(const std::vector<std::string> & argv, double timeout_s = 120);

// baton_bin is the path of the built `baton` executable.
std::string baton_bin();

// temp_dir returns a fresh directory under $TMPDIR (or /tmp) for this test process.
std::string temp_dir();

}  // namespace baton::test
