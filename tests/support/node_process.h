// node_process.h — end-to-end test helper: a real `baton serve` (or `baton route`) child process on an
// ephemeral port, and HTTP clients with timeouts.
//
// node_process::start runs the binary with --port 0, reads "listening on http://HOST:PORT" from its
// stdout (with a deadline), then polls /health until 200. The destructor SIGKILLs and reaps a child that
// is still running, so a failing test never leaks processes. Header-only so any test binary can use it.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <httplib.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/test_support.h"

namespace baton::test {

class node_process {
  public:
    // start runs argv0 (default: baton) with args plus "--port 0" and waits until it is ready.
    static std::unique_ptr<node_process> start(const std::vector<std::string> & args, double timeout_s = 90,
                                               const std::string & argv0 = baton_bin()) {
        std::unique_ptr<node_process> n(new node_process());
        n->err_path_ = temp_dir() + "/stderr.txt";
        int out_pipe[2];
        if (::pipe2(out_pipe, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
        std::vector<std::string> argv = {argv0};
        argv.insert(argv.end(), args.begin(), args.end());
        argv.push_back("--port");
        argv.push_back("0");
        const pid_t pid = ::fork();
        if (pid == 0) {
            ::dup2(out_pipe[1], 1);
            int err = ::open(n->err_path_.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
            if (err >= 0) ::dup2(err, 2);
            int devnull = ::open("/dev/null", O_RDONLY);
            ::dup2(devnull, 0);
            std::vector<char *> cargs;
            for (const auto & a : argv) cargs.push_back(const_cast<char *>(a.c_str()));
            cargs.push_back(nullptr);
            ::execv(cargs[0], cargs.data());
            ::_exit(127);
        }
        ::close(out_pipe[1]);
        n->pid_ = pid;
        n->out_fd_ = out_pipe[0];
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
        std::string line;
        while (line.find('\n') == std::string::npos) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
            if (left <= 0) throw std::runtime_error("node did not print its address in time; stderr: " + n->stderr_text());
            pollfd p = {n->out_fd_, POLLIN, 0};
            if (::poll(&p, 1, int(left)) <= 0) continue;
            char buf[256];
            const ssize_t r = ::read(n->out_fd_, buf, sizeof buf);
            if (r <= 0) throw std::runtime_error("node exited before listening; stderr: " + n->stderr_text());
            line.append(buf, size_t(r));
        }
        const std::string prefix = "listening on http://";
        const size_t at = line.find(prefix);
        if (at == std::string::npos) throw std::runtime_error("unexpected first line: " + line);
        const std::string hostport = line.substr(at + prefix.size(), line.find('\n', at) - at - prefix.size());
        const size_t colon = hostport.rfind(':');
        n->host_ = hostport.substr(0, colon);
        n->port_ = std::stoi(hostport.substr(colon + 1));
        while (true) {
            auto c = n->client(5);
            auto r = c->Get("/health");
            if (r && r->status == 200) break;
            if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("node never became healthy");
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return n;
    }

    ~node_process() {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            int st = 0;
            ::waitpid(pid_, &st, 0);
        }
        if (out_fd_ >= 0) ::close(out_fd_);
    }

    const std::string & host() const { return host_; }
    int port() const { return port_; }
    pid_t pid() const { return pid_; }
    std::string url() const { return "http://" + host_ + ":" + std::to_string(port_); }

    // client returns an HTTP client with connection/read/write timeouts of timeout_s.
    std::unique_ptr<httplib::Client> client(double timeout_s = 60) const {
        auto c = std::make_unique<httplib::Client>(host_, port_);
        const auto t = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::duration<double>(timeout_s));
        c->set_connection_timeout(t);
        c->set_read_timeout(t);
        c->set_write_timeout(t);
        return c;
    }

    // terminate sends SIGTERM and waits up to timeout_s; returns the exit code, or -1 (signal/timeout,
    // after which the child is killed).
    int terminate(double timeout_s = 30) {
        if (pid_ <= 0) return -1;
        ::kill(pid_, SIGTERM);
        return wait_exit(timeout_s);
    }

    int wait_exit(double timeout_s) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
        int st = 0;
        for (;;) {
            const pid_t r = ::waitpid(pid_, &st, WNOHANG);
            if (r == pid_) break;
            if (std::chrono::steady_clock::now() > deadline) {
                ::kill(pid_, SIGKILL);
                ::waitpid(pid_, &st, 0);
                pid_ = -1;
                return -1;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        pid_ = -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    }

    // rss_kb reads VmRSS from /proc (0 if unavailable).
    long rss_kb() const {
        std::ifstream f("/proc/" + std::to_string(pid_) + "/status");
        std::string line;
        while (std::getline(f, line))
            if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
        return 0;
    }

    std::string stderr_text() const {
        std::ifstream f(err_path_);
        std::stringstream ss;
        ss << f.rdbuf();
        return ss.str();
    }

  private:
    node_process() = default;
    pid_t pid_ = -1;
    int out_fd_ = -1;
    std::string host_;
    int port_ = 0;
    std::string err_path_;
};

}  // namespace baton::test
