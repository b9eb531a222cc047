// child_process.h — start `baton` subcommands as child processes and wait for their address.
//
// Used by `baton demo` to run a prefill node, a decode node and a router. A child is started with
// "--port 0"; its first stdout line "listening on http://HOST:PORT" gives the address. The destructor
// terminates (SIGTERM, then SIGKILL after a grace period) and reaps the child, so nothing outlives the
// parent's scope. Thread-safety: one owner per child.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "baton/status.h"

namespace baton {

class child_process {
  public:
    // start runs `self_exe args... --port 0` with stderr to stderr_path and waits up to timeout_s for the
    // listening line.
    static Result<std::unique_ptr<child_process>> start(const std::vector<std::string> & args, const std::string & stderr_path,
                                                        double timeout_s = 120);
    ~child_process();
    child_process(const child_process &) = delete;
    child_process & operator=(const child_process &) = delete;

    const std::string & url() const { return url_; }
    pid_t pid() const { return pid_; }
    // stop sends SIGTERM, waits up to grace_s, then SIGKILLs; returns the exit code or -1.
    int stop(double grace_s = 10);

  private:
    child_process() = default;
    pid_t pid_ = -1;
    int out_fd_ = -1;
    std::string url_;
};

// self_exe returns the path of the running executable.
std::string self_exe();

}  // namespace baton
