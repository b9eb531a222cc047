// child_process.cpp — see child_process.h.
#include "child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <thread>

namespace baton {

std::string self_exe() {
    char buf[PATH_MAX];
    const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    return n > 0 ? std::string(buf, size_t(n)) : "baton";
}

Result<std::unique_ptr<child_process>> child_process::start(const std::vector<std::string> & args, const std::string & stderr_path,
                                                            double timeout_s) {
    int out_pipe[2];
    if (::pipe2(out_pipe, O_CLOEXEC) != 0) return Status(status_code::io_error, "pipe failed");
    std::vector<std::string> argv = {self_exe()};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--port", "0"});
    const pid_t pid = ::fork();
    if (pid < 0) return Status(status_code::io_error, "fork failed");
    if (pid == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // never outlive the parent, however it ends
        ::dup2(out_pipe[1], 1);
        const int err = ::open(stderr_path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
        if (err >= 0) ::dup2(err, 2);
        const int in = ::open("/dev/null", O_RDONLY);
        if (in >= 0) ::dup2(in, 0);
        sigset_t none;
        sigemptyset(&none);
        ::sigprocmask(SIG_SETMASK, &none, nullptr);  // the parent may block SIGINT/SIGTERM for sigwait
        std::vector<char *> c;
        for (auto & a : argv) c.push_back(a.data());
        c.push_back(nullptr);
        ::execv(c[0], c.data());
        ::_exit(127);
    }
    ::close(out_pipe[1]);
    std::unique_ptr<child_process> cp(new child_process());
    cp->pid_ = pid;
    cp->out_fd_ = out_pipe[0];
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    std::string line;
    while (line.find('\n') == std::string::npos) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
        if (left <= 0) return Status(status_code::deadline_exceeded, argv[1] + " did not start in time (see " + stderr_path + ")");
        pollfd p = {cp->out_fd_, POLLIN, 0};
        if (::poll(&p, 1, int(left)) <= 0) continue;
        char buf[256];
        const ssize_t r = ::read(cp->out_fd_, buf, sizeof buf);
        if (r <= 0) return Status(status_code::unavailable, argv[1] + " exited before listening (see " + stderr_path + ")");
        line.append(buf, size_t(r));
    }
    const std::string prefix = "listening on ";
    const size_t at = line.find(prefix);
    if (at == std::string::npos) return Status(status_code::internal, "unexpected first line from " + argv[1] + ": " + line);
    cp->url_ = line.substr(at + prefix.size(), line.find('\n', at) - at - prefix.size());
    return cp;
}

int child_process::stop(double grace_s) {
    if (pid_ <= 0) return -1;
    ::kill(pid_, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s);
    int st = 0;
    while (::waitpid(pid_, &st, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, &st, 0);
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    pid_ = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

child_process::~child_process() {
    stop(5);
    if (out_fd_ >= 0) ::close(out_fd_);
}

}  // namespace baton
