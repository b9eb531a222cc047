// node_process.h — end-to-end test helper: a real `baton serve` (or `baton route`) child process on an
// ephemeral port, and HTTP clients with timeouts.
//
// node_process::start runs the binary with --port 0 through child_process (include/baton/cli/child_process.h, which
// reads "listening on http://HOST:PORT" from its stdout with a deadline), then polls /health until 200. The
// destructor SIGKILLs and reaps a child that is still running, so a failing test never leaks processes.
#pragma once

#include <signal.h>  // tests kill(2) their nodes
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

#include "baton/cli/child_process.h"
#include "support/free_port.h"
#include "support/test_support.h"

namespace baton::test {

class node_process {
  public:
    // start runs argv0 with args plus "--port 0" (through child_process, the project's one process helper)
    // and waits until /health answers 200. argv0 defaults to baton, or to baton-test-node when an argument
    // asks for one of its faults (--test-...).
    static std::unique_ptr<node_process> start(const std::vector<std::string> & args, double timeout_s = 90,
                                               std::string argv0 = {}) {
        if (argv0.empty()) {
            argv0 = baton_bin();
            for (const auto & a : args)
                if (a.rfind("--test-", 0) == 0) argv0 = baton_test_node_bin();
        }
        std::unique_ptr<node_process> n(new node_process());
        n->err_path_ = temp_dir() + "/stderr.txt";
        child_options o;
        o.argv = {argv0};
        o.argv.insert(o.argv.end(), args.begin(), args.end());
        o.stderr_path = n->err_path_;
        o.timeout_s = timeout_s;
        auto p = child_process::spawn(o);
        if (!p.ok()) throw std::runtime_error(p.status().message() + "; stderr: " + n->stderr_text());
        n->proc_ = std::move(p.value());
        if (!n->wait_healthy(timeout_s)) throw std::runtime_error("node never became healthy");
        return n;
    }

    // start_at runs `baton` with args on a port of the caller's (plus "--port PORT"): a node restarted where it
    // was (a rolling restart behind a router that lists it). Waits until /health answers 200.
    static std::unique_ptr<node_process> start_at(const std::vector<std::string> & args, int port,
                                                  double timeout_s = 90) {
        std::unique_ptr<node_process> n(new node_process());
        n->err_path_ = temp_dir() + "/stderr-" + std::to_string(port) + ".txt";
        child_options o;
        o.argv = {baton_bin()};
        o.argv.insert(o.argv.end(), args.begin(), args.end());
        o.argv.insert(o.argv.end(), {"--port", std::to_string(port)});
        o.stderr_path = n->err_path_;
        o.timeout_s = timeout_s;
        o.port_zero = false;
        o.known_url = "http://127.0.0.1:" + std::to_string(port);
        auto p = child_process::spawn(o);
        if (!p.ok()) throw std::runtime_error(p.status().message() + "; stderr: " + n->stderr_text());
        n->proc_ = std::move(p.value());
        if (!n->wait_healthy(timeout_s)) throw std::runtime_error("node never became healthy: " + n->stderr_text());
        return n;
    }

    // start_llama_server runs Debian's llama-server (the behaviour anchor; tests skip without it) on a free
    // loopback port with args and waits until /health answers 200. nullptr when the binary is missing.
    static std::unique_ptr<node_process> start_llama_server(const std::vector<std::string> & args,
                                                            double timeout_s = 90) {
        const std::string bin = "/usr/bin/llama-server";
        if (::access(bin.c_str(), X_OK) != 0) return nullptr;
        for (int attempt = 0;; ++attempt) {  // another process may take the free port first: try another
            std::unique_ptr<node_process> n(new node_process());
            n->err_path_ = temp_dir() + "/llama-server-stderr.txt";
            const int port = free_port();
            child_options o;
            o.argv = {bin, "--host", "127.0.0.1", "--port", std::to_string(port), "--no-webui"};
            o.argv.insert(o.argv.end(), args.begin(), args.end());
            o.stderr_path = n->err_path_;
            o.port_zero = false;
            o.known_url = "http://127.0.0.1:" + std::to_string(port);
            auto p = child_process::spawn(o);
            if (!p.ok()) throw std::runtime_error(p.status().message() + "; stderr: " + n->stderr_text());
            n->proc_ = std::move(p.value());
            if (n->wait_healthy(timeout_s)) return n;
            if (attempt == 2) throw std::runtime_error("llama-server never became healthy: " + n->stderr_text());
        }
    }

    ~node_process() {
        if (proc_) proc_->kill();  // a failing test must not wait for a graceful exit
    }

    const std::string & host() const { return proc_->host(); }
    int port() const { return proc_->port(); }
    pid_t pid() const { return proc_->pid(); }
    std::string url() const { return proc_->url(); }

    // client returns an HTTP client with connection/read/write timeouts of timeout_s.
    std::unique_ptr<httplib::Client> client(double timeout_s = 60) const {
        auto c = std::make_unique<httplib::Client>(host(), port());
        const auto t = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::duration<double>(timeout_s));
        c->set_connection_timeout(t);
        c->set_read_timeout(t);
        c->set_write_timeout(t);
        return c;
    }

    // terminate sends SIGTERM and waits up to timeout_s; returns the exit code, or -1 (signal/timeout,
    // after which the child is killed).
    int terminate(double timeout_s = 30) { return proc_->stop(timeout_s); }
    int wait_exit(double timeout_s) { return proc_->wait_exit(timeout_s); }
    // kill: SIGKILL and reap (a node dying, not draining).
    void kill() { proc_->kill(); }

    // rss_kb reads VmRSS from /proc (0 if unavailable).
    long rss_kb() const {
        std::ifstream f("/proc/" + std::to_string(pid()) + "/status");
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
    // exited: the child is a zombie (it exited; child_process reaps it later).
    bool exited() const {
        std::ifstream f("/proc/" + std::to_string(pid()) + "/stat");
        std::string stat;
        std::getline(f, stat);
        const size_t paren = stat.rfind(')');
        return paren == std::string::npos || (paren + 2 < stat.size() && stat[paren + 2] == 'Z');
    }
    // wait_healthy polls /health until 200 (true), the deadline, or the child's exit (false).
    bool wait_healthy(double timeout_s) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
        while (true) {
            auto c = client(5);
            auto r = c->Get("/health");
            if (r && r->status == 200) return true;
            if (std::chrono::steady_clock::now() > deadline || exited()) return false;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }
    std::unique_ptr<child_process> proc_;
    std::string err_path_;
};

}  // namespace baton::test
