// child_process.h — run a server process (`baton serve`, `baton route`, llama-server…) as a child and
// wait for the address it listens on.
//
// The one process helper of the project: `baton demo` runs its nodes with it, and so do the end-to-end
// tests (tests/support/node_process.h) and the benchmarks (bench/bench_net.h). A child is started with
// "--port 0"; its first stdout line "listening on http://HOST:PORT" gives the address. It dies with its
// parent (PR_SET_PDEATHSIG), and the destructor terminates (SIGTERM, then SIGKILL after a grace period)
// and reaps it, so nothing outlives the owner's scope. Thread-safety: one owner per child.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "baton/base/status.h"

namespace baton {

struct child_options {
    std::vector<std::string> argv;  // argv[0]: a path, or a program name looked up in PATH (e.g. taskset)
    std::string stderr_path;        // the child's stderr goes to this file (truncated)
    double timeout_s = 120;         // for the listening line
    bool port_zero = true;          // append "--port 0"
    // known_url: a child that does not print its address (llama-server) was told where to listen; no
    // listening line is awaited (readiness is the caller's to check, e.g. GET /health).
    std::string known_url;
};

class child_process {
  public:
    // spawn runs opts.argv and waits for the listening line.
    static Result<std::unique_ptr<child_process>> spawn(const child_options & opts);
    // start runs `self_exe args... --port 0` (a subcommand of this executable).
    static Result<std::unique_ptr<child_process>> start(const std::vector<std::string> & args,
                                                        const std::string & stderr_path, double timeout_s = 120);
    ~child_process();
    child_process(const child_process &) = delete;
    child_process & operator=(const child_process &) = delete;

    const std::string & url() const { return url_; }  // "http://HOST:PORT"
    const std::string & host() const { return host_; }
    int port() const { return port_; }
    pid_t pid() const { return pid_; }
    // stop sends SIGTERM, waits up to grace_s, then SIGKILLs; returns the exit code, or -1 when the child
    // died of a signal or had to be killed.
    int stop(double grace_s = 10);
    // wait_exit waits up to timeout_s for the child to exit on its own (then SIGKILLs it); as stop.
    int wait_exit(double timeout_s);
    // kill SIGKILLs and reaps the child at once.
    void kill();

  private:
    child_process() = default;
    Status set_url(const std::string & url, const std::string & what);
    pid_t pid_ = -1;
    int out_fd_ = -1;
    std::string url_, host_;
    int port_ = 0;
};

// self_exe returns the path of the running executable.
std::string self_exe();

}  // namespace baton
