// child_process.cpp — see child_process.h.
#include "baton/cli/child_process.h"

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

namespace {

// exec_child runs in the forked child: stdout to the pipe, stderr to the file, stdin from /dev/null.
[[noreturn]] void exec_child(std::vector<std::string> argv, int out_fd, const std::string & stderr_path) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // never outlive the parent, however it ends
    ::dup2(out_fd, 1);
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
    ::execvp(c[0], c.data());
    ::_exit(127);
}

// read_first_line reads fd until a newline, up to the deadline.
Result<std::string> read_first_line(int fd, std::chrono::steady_clock::time_point deadline, const std::string & what) {
    std::string line;
    while (line.find('\n') == std::string::npos) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
        if (left <= 0) return Status(status_code::deadline_exceeded, what + " did not print its address in time");
        pollfd p = {fd, POLLIN, 0};
        if (::poll(&p, 1, int(left)) <= 0) continue;
        char buf[256];
        const ssize_t r = ::read(fd, buf, sizeof buf);
        if (r <= 0) return Status(status_code::unavailable, what + " exited before listening");
        line.append(buf, size_t(r));
    }
    return line;
}

int exit_code(int st) { return WIFEXITED(st) ? WEXITSTATUS(st) : -1; }

}  // namespace

std::string self_exe() {
    char buf[PATH_MAX];
    const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    return n > 0 ? std::string(buf, size_t(n)) : "baton";
}

Result<std::unique_ptr<child_process>> child_process::spawn(const child_options & opts) {
    if (opts.argv.empty()) return Status(status_code::invalid_argument, "child_process: empty argv");
    std::vector<std::string> argv = opts.argv;
    if (opts.port_zero && opts.known_url.empty()) argv.insert(argv.end(), {"--port", "0"});
    const std::string what = argv.size() > 1 && argv[0] == self_exe() ? "baton " + argv[1] : argv[0];
    int out_pipe[2];
    if (::pipe2(out_pipe, O_CLOEXEC) != 0) return Status(status_code::io_error, "pipe failed");
    const pid_t pid = ::fork();
    if (pid < 0) {
        ::close(out_pipe[0]);
        ::close(out_pipe[1]);
        return Status(status_code::io_error, "fork failed");
    }
    if (pid == 0) exec_child(std::move(argv), out_pipe[1], opts.stderr_path);
    ::close(out_pipe[1]);
    std::unique_ptr<child_process> cp(new child_process());
    cp->pid_ = pid;
    cp->out_fd_ = out_pipe[0];
    if (!opts.known_url.empty()) {
        BATON_RETURN_IF_ERROR(cp->set_url(opts.known_url, what));
        return cp;
    }
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(opts.timeout_s));
    auto line = read_first_line(cp->out_fd_, deadline, what);
    if (!line.ok()) return Status(line.status().code(), line.status().message() + " (stderr: " + opts.stderr_path + ")");
    const std::string prefix = "listening on http://";
    size_t at = line->find(prefix);
    if (at == std::string::npos) return Status(status_code::internal, "unexpected first line from " + what + ": " + line.value());
    at += std::string("listening on ").size();
    BATON_RETURN_IF_ERROR(cp->set_url(line->substr(at, line->find('\n', at) - at), what));
    return cp;
}

Status child_process::set_url(const std::string & url, const std::string & what) {
    const std::string scheme = "http://";
    const size_t colon = url.rfind(':');
    if (url.rfind(scheme, 0) != 0 || colon == std::string::npos || colon < scheme.size())
        return Status(status_code::internal, "no http://HOST:PORT from " + what + ": " + url);
    host_ = url.substr(scheme.size(), colon - scheme.size());
    port_ = std::atoi(url.c_str() + colon + 1);
    url_ = url;
    return {};
}

Result<std::unique_ptr<child_process>> child_process::start(const std::vector<std::string> & args, const std::string & stderr_path,
                                                            double timeout_s) {
    child_options o;
    o.argv = {self_exe()};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.stderr_path = stderr_path;
    o.timeout_s = timeout_s;
    return spawn(o);
}

int child_process::wait_exit(double timeout_s) {
    if (pid_ <= 0) return -1;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    int st = 0;
    while (::waitpid(pid_, &st, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, &st, 0);
            pid_ = -1;
            return -1;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    pid_ = -1;
    return exit_code(st);
}

int child_process::stop(double grace_s) {
    if (pid_ <= 0) return -1;
    ::kill(pid_, SIGTERM);
    return wait_exit(grace_s);
}

void child_process::kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int st = 0;
    ::waitpid(pid_, &st, 0);
    pid_ = -1;
}

child_process::~child_process() {
    stop(5);
    if (out_fd_ >= 0) ::close(out_fd_);
}

}  // namespace baton
