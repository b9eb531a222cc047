// cli_main.h — the `baton` command line: what apps/baton.cpp (and the test node) call.
// Thread-safety: call once, from main.
#pragma once

namespace baton {

constexpr int k_exit_ok = 0;
constexpr int k_exit_failure = 1;
constexpr int k_exit_usage = 2;  // bad flags or arguments

// cli_main runs one subcommand (see `baton --help`) and returns the process exit status.
int cli_main(int argc, char ** argv);

}  // namespace baton
