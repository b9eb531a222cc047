// valkey_process.h — test helper: a real valkey-server (from PATH) on a free loopback port, without
// persistence, and a tiny RESP client that tests use to reach behind the code under test (corrupt a part,
// flush, set ACL users, change maxmemory).
//
// valkey_process::start picks a port (free_port) and runs
//   valkey-server --bind 127.0.0.1 --port P --save "" --appendonly no --dir DIR --logfile "" EXTRA...
// with stdout and stderr to DIR/valkey.log, then polls PING until it answers (any reply: with --requirepass
// it is -NOAUTH); when the server exits first (another process took the port) it retries with a new port.
// EXTRA are more options ("--requirepass", "pw", "--maxmemory", "2mb", ...). kill() is SIGKILL and reap;
// stop() SIGTERM, reap, SIGKILL after a grace period; pause()/resume() SIGSTOP/SIGCONT; restart() runs it
// again on the same port and options. The child dies with this process (PR_SET_PDEATHSIG) and the
// destructor kills and reaps it, so a failing test never leaks a server. Every wait is bounded.
// Thread-safety: one owner, on the thread that started it (PR_SET_PDEATHSIG fires when that thread ends).
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "free_port.h"

namespace baton::test {

// valkey_reply: one RESP reply as text: a status, an error (type '-'), an integer, a bulk string (its bytes;
// nil: is_nil), or an array (the elements' texts joined with '\n').
struct valkey_reply {
    char type = 0;  // '+', '-', ':', '$', '*'; 0: no reply (connection or timeout failure)
    bool is_nil = false;
    std::string text;
};

class valkey_process {
  public:
    static std::unique_ptr<valkey_process> start(std::vector<std::string> extra = {}, double timeout_s = 20) {
        std::unique_ptr<valkey_process> v(new valkey_process());
        const char * base = std::getenv("TMPDIR");
        std::string tmpl = std::string(base && *base ? base : "/tmp") + "/baton-valkey-XXXXXX";
        if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
        v->dir_ = tmpl;
        v->extra_ = std::move(extra);
        std::string last;
        for (int attempt = 0; attempt < 5; ++attempt) {
            v->port_ = free_port();
            if (v->launch(timeout_s, last)) return v;
        }
        throw std::runtime_error("valkey-server did not start: " + last);
    }

    ~valkey_process() {
        kill();
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }
    valkey_process(const valkey_process &) = delete;
    valkey_process & operator=(const valkey_process &) = delete;

    int port() const { return port_; }
    pid_t pid() const { return pid_; }
    const std::string & dir() const { return dir_; }

    void kill() {
        if (pid_ <= 0) return;
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        pid_ = -1;
    }
    void stop(double grace_s = 10) {
        if (pid_ <= 0) return;
        ::kill(pid_, SIGTERM);
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s);
        while (std::chrono::steady_clock::now() < deadline) {
            if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
                pid_ = -1;
                return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        kill();
    }
    void pause() { ::kill(pid_, SIGSTOP); }
    void resume() { ::kill(pid_, SIGCONT); }
    // restart runs the server again on the same port (after stop or kill); retries while the port is still
    // held (TIME_WAIT is no obstacle: valkey sets SO_REUSEADDR).
    void restart(double timeout_s = 20) {
        if (pid_ > 0) stop();
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
        std::string last;
        while (std::chrono::steady_clock::now() < deadline) {
            if (launch(std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count(), last))
                return;
            std::this_thread::sleep_for(std::chrono::milliseconds(100));  // a retry interval, not a timing assumption
        }
        throw std::runtime_error("valkey-server did not restart: " + last);
    }

    // command sends one command (after AUTH with auth, when given) on a fresh connection and returns the
    // last reply; type 0 when the server does not answer within timeout_s.
    valkey_reply command(const std::vector<std::string> & args, const std::vector<std::string> & auth = {},
                         double timeout_s = 5) const {
        const int fd = connect_fd(timeout_s);
        if (fd < 0) return {};
        valkey_reply r;
        if (!auth.empty()) {
            std::vector<std::string> a{"AUTH"};
            a.insert(a.end(), auth.begin(), auth.end());
            if (!send_all(fd, encode(a)) || !read_reply(fd, r) || r.type == '-') {
                ::close(fd);
                return r;
            }
        }
        r = {};
        if (send_all(fd, encode(args))) read_reply(fd, r);
        ::close(fd);
        return r;
    }

    std::string log_text() const {
        std::ifstream f(dir_ + "/valkey.log");
        std::stringstream ss;
        ss << f.rdbuf();
        return ss.str();
    }

  private:
    valkey_process() = default;

    static std::string encode(const std::vector<std::string> & args) {
        std::string out = "*" + std::to_string(args.size()) + "\r\n";
        for (const std::string & a : args) out += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
        return out;
    }
    static bool send_all(int fd, const std::string & s) {
        size_t off = 0;
        while (off < s.size()) {
            const ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
            if (n <= 0) return false;
            off += size_t(n);
        }
        return true;
    }
    static bool read_exact(int fd, std::string & out, size_t n) {
        while (out.size() < n) {
            char buf[65536];
            const ssize_t got = ::recv(fd, buf, std::min(sizeof buf, n - out.size()), 0);
            if (got <= 0) return false;
            out.append(buf, size_t(got));
        }
        return true;
    }
    static bool read_line(int fd, std::string & line) {
        line.clear();
        char c;
        while (::recv(fd, &c, 1, 0) == 1) {
            if (c == '\n') {
                if (!line.empty() && line.back() == '\r') line.pop_back();
                return true;
            }
            line += c;
        }
        return false;
    }
    static bool read_reply(int fd, valkey_reply & r) {
        std::string line;
        if (!read_line(fd, line) || line.empty()) return false;
        r.type = line[0];
        const std::string rest = line.substr(1);
        if (r.type == '$') {
            const long n = std::strtol(rest.c_str(), nullptr, 10);
            if (n < 0) {
                r.is_nil = true;
                return true;
            }
            std::string body;
            if (!read_exact(fd, body, size_t(n) + 2)) return false;
            r.text = body.substr(0, size_t(n));
            return true;
        }
        if (r.type == '*') {
            const long n = std::strtol(rest.c_str(), nullptr, 10);
            for (long i = 0; i < n; ++i) {
                valkey_reply e;
                if (!read_reply(fd, e)) return false;
                r.text += (i ? "\n" : "") + e.text;
            }
            return true;
        }
        r.text = rest;
        return true;
    }
    int connect_fd(double timeout_s) const {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) return -1;
        timeval tv{};
        tv.tv_sec = time_t(timeout_s);
        tv.tv_usec = suseconds_t((timeout_s - double(tv.tv_sec)) * 1e6);
        ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(uint16_t(port_));
        if (::connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0) {
            ::close(fd);
            return -1;
        }
        return fd;
    }

    bool exited() {
        if (pid_ <= 0) return true;
        if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
            pid_ = -1;
            return true;
        }
        return false;
    }

    // launch spawns valkey-server on port_ and waits until it answers PING; false (child reaped, `last` set)
    // when it exits or does not answer in time.
    bool launch(double timeout_s, std::string & last) {
        std::vector<std::string> argv = {
            "valkey-server", "--bind", "127.0.0.1", "--port", std::to_string(port_), "--save", "",
            "--appendonly",  "no",     "--dir",     dir_,     "--logfile",           ""};
        argv.insert(argv.end(), extra_.begin(), extra_.end());
        const std::string log = dir_ + "/valkey.log";
        std::vector<char *> args;  // made before fork: the child only makes system calls
        for (std::string & a : argv) args.push_back(a.data());
        args.push_back(nullptr);
        const pid_t parent = ::getpid();
        const pid_t pid = ::fork();
        if (pid < 0) {
            last = "fork failed";
            return false;
        }
        if (pid == 0) {
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (::getppid() != parent) ::_exit(127);
            const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
            if (fd >= 0) {
                ::dup2(fd, 1);
                ::dup2(fd, 2);
            }
            const int null_fd = ::open("/dev/null", O_RDONLY);
            if (null_fd >= 0) ::dup2(null_fd, 0);
            ::execvp(args[0], args.data());
            ::_exit(127);
        }
        pid_ = pid;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
        while (std::chrono::steady_clock::now() < deadline) {
            if (command({"PING"}, {}, 1).type != 0) return true;
            if (exited()) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        last =
            exited() ? "valkey-server exited; log: " + log_text() : "valkey-server never answered; log: " + log_text();
        kill();
        return false;
    }

    pid_t pid_ = -1;
    int port_ = 0;
    std::string dir_;
    std::vector<std::string> extra_;
};

}  // namespace baton::test
