// member_process.h — end-to-end test helper for cluster members: a `baton serve` / `baton route` child on a
// port chosen before it starts (a node must be told its own URL with --advertise), restartable on the same
// port, with signals sent by pid (SIGSTOP/SIGCONT/SIGTERM/SIGKILL).
//
// node_process (node_process.h) always passes --port 0 and learns the port afterwards, too late for
// --advertise. member_process::start picks a free port (bind 0, close), runs argv plus "--port P" (and
// "--advertise http://127.0.0.1:P" when asked) through child_process (include/baton/cli/child_process.h,
// which reads the "listening on" line with a deadline), and, when asked, polls /health until 200. When the
// child exits before listening (another process took the port between the probe and its bind), it retries
// with a new port (only when its stderr says the address was in use). port = 0 passes "--port 0" instead (a
// router). restart() runs the same argv again on the same port. The destructor SIGKILLs and reaps (SIGCONT
// first, harmless, in case the test stopped it), so a failing test never leaks a process, and removes its
// stderr files. Self-contained (no test_support.cpp): bench/cluster_bench.cpp uses it too.
// Thread-safety: one owner; start/restart/stop/kill on the thread that owns it (child_process sets
// PR_SET_PDEATHSIG, which fires when the forking thread ends). client() may be called from any thread.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <httplib.h>

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

#include "baton/cli/child_process.h"
#include "etcd_process.h"  // free_port (quoted and relative: bench/cluster_bench.cpp includes this header too)

namespace baton::test {

struct member_options {
    std::vector<std::string> argv;  // the program and its arguments, without --port/--advertise
    int port = -1;                  // -1: a free port picked here; 0: "--port 0"; > 0: that port
    bool advertise = false;         // also pass "--advertise http://127.0.0.1:PORT"
    bool wait_health = true;        // poll GET /health until 200 (a router with no node yet answers 503)
    double timeout_s = 90;          // for the listening line and for /health
};

class member_process {
  public:
    static std::unique_ptr<member_process> start(member_options o) {
        std::unique_ptr<member_process> m(new member_process());
        const char * base = std::getenv("TMPDIR");
        std::string tmpl = std::string(base && *base ? base : "/tmp") + "/baton-member-XXXXXX";
        if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
        m->dir_ = tmpl;
        m->opts_ = std::move(o);
        const bool pick = m->opts_.port < 0;
        std::string last;
        for (int attempt = 0; attempt < (pick ? 4 : 1); ++attempt) {
            m->port_ = pick ? free_port() : m->opts_.port;
            if (m->launch(last)) return m;
            if (!m->lost_port_race()) break;  // any other failure would only repeat
        }
        throw std::runtime_error(last);
    }

    ~member_process() {
        if (proc_) {
            ::kill(proc_->pid(), SIGCONT);
            proc_->kill();
        }
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);  // the stderr files: read by the test before this point
    }
    member_process(const member_process &) = delete;
    member_process & operator=(const member_process &) = delete;

    const std::string & host() const { return host_; }
    int port() const { return port_; }
    std::string url() const { return "http://" + host_ + ":" + std::to_string(port_); }
    pid_t pid() const { return proc_ ? proc_->pid() : -1; }
    bool running() const { return proc_ != nullptr; }

    // signal sends sig to the child (no reaping): SIGSTOP, SIGCONT, SIGTERM, SIGKILL...
    void signal(int sig) const {
        if (proc_) ::kill(proc_->pid(), sig);
    }
    // terminate: SIGTERM, then wait up to timeout_s; the exit code, -1 after a signal or the timeout (then
    // SIGKILLed). Reaped either way.
    int terminate(double timeout_s = 30) {
        if (!proc_) return -1;
        const int rc = proc_->stop(timeout_s);
        proc_.reset();
        return rc;
    }
    // wait_exit waits up to timeout_s for the child to exit by itself (SIGKILL after that); as terminate.
    int wait_exit(double timeout_s) {
        if (!proc_) return -1;
        const int rc = proc_->wait_exit(timeout_s);
        proc_.reset();
        return rc;
    }
    // kill: SIGKILL and reap at once.
    void kill() {
        if (!proc_) return;
        ::kill(proc_->pid(), SIGCONT);
        proc_->kill();
        proc_.reset();
    }
    // exited: the child has ended (a zombie not yet reaped) without being reaped here.
    bool exited() const {
        if (!proc_) return true;
        std::ifstream f("/proc/" + std::to_string(proc_->pid()) + "/stat");
        std::string stat;
        if (!std::getline(f, stat)) return true;
        const size_t paren = stat.rfind(')');
        return paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] == 'Z';
    }
    // restart runs the same command again on the same port (the old child, if any, is SIGKILLed first).
    // Throws std::runtime_error with the child's stderr when it does not come up.
    void restart() {
        kill();
        opts_.port = port_;
        std::string last;
        // The port was ours a moment ago; a client's connection may still hold it briefly: a few tries.
        for (int attempt = 0; attempt < 3; ++attempt) {
            if (launch(last)) return;
            if (!lost_port_race()) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(500));  // a retry interval, not a timing assumption
        }
        throw std::runtime_error(last);
    }

    // client: an HTTP client with connection/read/write timeouts of timeout_s.
    std::unique_ptr<httplib::Client> client(double timeout_s = 60) const {
        auto c = std::make_unique<httplib::Client>(host_, port_);
        const auto t = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::duration<double>(timeout_s));
        c->set_connection_timeout(t);
        c->set_read_timeout(t);
        c->set_write_timeout(t);
        return c;
    }

    // stderr_text: the child's stderr, of every start (oldest first).
    std::string stderr_text() const {
        std::string all;
        for (int i = 0; i < launches_; ++i) {
            std::ifstream f(err_path(i));
            std::stringstream ss;
            ss << f.rdbuf();
            if (launches_ > 1) all += "--- start " + std::to_string(i + 1) + " ---\n";
            all += ss.str();
        }
        return all;
    }

  private:
    member_process() = default;

    std::string err_path(int i) const { return dir_ + "/stderr-" + std::to_string(i) + ".txt"; }

    // lost_port_race: the last start failed because the port was taken ("Address already in use").
    bool lost_port_race() const {
        std::ifstream f(err_path(launches_ - 1));
        std::stringstream ss;
        ss << f.rdbuf();
        return ss.str().find("in use") != std::string::npos;
    }

    bool launch(std::string & last) {
        child_options c;
        c.argv = opts_.argv;
        c.argv.insert(c.argv.end(), {"--port", std::to_string(port_)});
        if (opts_.advertise) c.argv.insert(c.argv.end(), {"--advertise", "http://127.0.0.1:" + std::to_string(port_)});
        c.port_zero = false;
        c.stderr_path = err_path(launches_++);
        c.timeout_s = opts_.timeout_s;
        auto p = child_process::spawn(c);
        if (!p.ok()) {
            last = p.status().message() + "; stderr:\n" + stderr_text();
            return false;
        }
        proc_ = std::move(p.value());
        host_ = proc_->host();
        port_ = proc_->port();
        if (!opts_.wait_health) return true;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(opts_.timeout_s);
        while (std::chrono::steady_clock::now() < deadline) {
            auto r = client(5)->Get("/health");
            if (r && r->status == 200) return true;
            if (exited()) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        last = "never became healthy; stderr:\n" + stderr_text();
        proc_->kill();
        proc_.reset();
        return false;
    }

    member_options opts_;
    std::unique_ptr<child_process> proc_;
    std::string dir_, host_ = "127.0.0.1";
    int port_ = 0;
    int launches_ = 0;
};

}  // namespace baton::test
