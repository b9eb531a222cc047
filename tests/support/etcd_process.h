// etcd_process.h — end-to-end test helper: a real single-member etcd (v3, `etcd` from PATH) on free
// loopback ports with its own data directory, and a tiny client for etcd's JSON gateway.
//
// etcd_process::start picks a client and a peer port (bind port 0, read it, close), runs
//   etcd --name default --data-dir DIR --listen-client-urls http://127.0.0.1:P --advertise-client-urls ...
//        --listen-peer-urls http://127.0.0.1:Q --initial-advertise-peer-urls ... --initial-cluster default=...
//        --log-level error
// through child_process (include/baton/cli/child_process.h: known_url, since etcd prints no "listening on"
// line) and polls `POST /v3/kv/range` until it answers; when etcd dies first (another process took a port
// between the probe and etcd's bind) it retries with new ports. stop() is SIGTERM and reap, kill() SIGKILL
// and reap; restart() starts it again on the same ports and data directory (the state survives). The
// destructor SIGKILLs and reaps, so a failing test never leaks an etcd.
//
// The gateway speaks JSON with base64 keys and values: range {"key":b64,"range_end":b64} answers
// {"kvs":[{"key":b64,"value":b64,"lease":"<decimal>",...}]} ("kvs" absent when nothing matched). Every
// request has a timeout. Self-contained (no test_support.cpp), so bench/cluster_bench.cpp uses it too.
// Thread-safety: the process control (start/stop/kill/restart) has one owner, and must be called on the
// thread that started it (child_process sets PR_SET_PDEATHSIG, which fires when the forking thread ends);
// the gateway calls (range, keys, ...) may run on any thread at once (one client per call).
#pragma once

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "baton/cli/child_process.h"
#include "free_port.h"  // quoted and relative: bench/cluster_bench.cpp includes etcd_process.h too

namespace baton::test {

// base64 (RFC 4648, with padding), as etcd's gateway wants keys and values.
inline std::string base64_encode(const std::string & in) {
    static const char * t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    size_t i = 0;
    for (; i + 2 < in.size(); i += 3) {
        const uint32_t v = uint32_t(uint8_t(in[i])) << 16 | uint32_t(uint8_t(in[i + 1])) << 8 | uint8_t(in[i + 2]);
        out += {t[v >> 18], t[(v >> 12) & 63], t[(v >> 6) & 63], t[v & 63]};
    }
    if (i + 1 == in.size()) {
        const uint32_t v = uint32_t(uint8_t(in[i])) << 16;
        out += {t[v >> 18], t[(v >> 12) & 63], '=', '='};
    } else if (i + 2 == in.size()) {
        const uint32_t v = uint32_t(uint8_t(in[i])) << 16 | uint32_t(uint8_t(in[i + 1])) << 8;
        out += {t[v >> 18], t[(v >> 12) & 63], t[(v >> 6) & 63], '='};
    }
    return out;
}

// base64_decode ignores padding and any character outside the alphabet.
inline std::string base64_decode(const std::string & in) {
    auto val = [](char c) -> int {
        if (c >= 'A' && c <= 'Z') return c - 'A';
        if (c >= 'a' && c <= 'z') return c - 'a' + 26;
        if (c >= '0' && c <= '9') return c - '0' + 52;
        if (c == '+' || c == '-') return 62;
        if (c == '/' || c == '_') return 63;
        return -1;
    };
    std::string out;
    uint32_t acc = 0;
    int bits = 0;
    for (char c : in) {
        const int v = val(c);
        if (v < 0) continue;
        acc = (acc << 6) | uint32_t(v);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out += char((acc >> bits) & 0xff);
        }
    }
    return out;
}

// prefix_range_end: the range_end that makes a range cover every key starting with prefix (etcd's
// "prefix + 1": the last byte below 0xff incremented, the rest dropped).
inline std::string prefix_range_end(std::string prefix) {
    while (!prefix.empty()) {
        if (uint8_t(prefix.back()) < 0xff) {
            prefix.back() = char(uint8_t(prefix.back()) + 1);
            return prefix;
        }
        prefix.pop_back();
    }
    return std::string(1, '\0');  // every key
}

struct etcd_test_kv {
    std::string key, value;
    int64_t lease = 0;  // 0: no lease
};

class etcd_process {
  public:
    // start runs a fresh etcd in a new temporary data directory; throws std::runtime_error (with etcd's
    // stderr) when it never answers within timeout_s.
    static std::unique_ptr<etcd_process> start(double timeout_s = 30) {
        std::unique_ptr<etcd_process> e(new etcd_process());
        const char * base = std::getenv("TMPDIR");
        std::string tmpl = std::string(base && *base ? base : "/tmp") + "/baton-etcd-XXXXXX";
        if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
        e->dir_ = tmpl;
        e->err_path_ = e->dir_ + "/etcd.stderr";
        std::string last;
        for (int attempt = 0; attempt < 5; ++attempt) {
            e->client_port_ = free_port();
            e->peer_port_ = free_port();
            if (e->peer_port_ == e->client_port_) continue;
            if (e->launch(timeout_s, last)) return e;
        }
        throw std::runtime_error("etcd did not start: " + last);
    }

    ~etcd_process() {
        kill();
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }
    etcd_process(const etcd_process &) = delete;
    etcd_process & operator=(const etcd_process &) = delete;

    std::string url() const { return "http://127.0.0.1:" + std::to_string(client_port_); }
    int client_port() const { return client_port_; }
    pid_t pid() const { return proc_ ? proc_->pid() : -1; }
    bool running() const { return proc_ != nullptr; }
    const std::string & data_dir() const { return dir_; }

    // stop sends SIGTERM and reaps (SIGKILL after grace_s); returns the exit code (-1: signal/killed).
    int stop(double grace_s = 10) {
        if (!proc_) return -1;
        const int rc = proc_->stop(grace_s);
        proc_.reset();
        return rc;
    }
    // kill SIGKILLs and reaps at once.
    void kill() {
        if (!proc_) return;
        proc_->kill();
        proc_.reset();
    }
    // restart starts etcd again on the same ports and data directory (after stop or kill). A port still held
    // by someone else makes etcd exit: it is retried for up to timeout_s.
    void restart(double timeout_s = 30) {
        if (proc_) stop();
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
        std::string last;
        while (std::chrono::steady_clock::now() < deadline) {
            if (launch(std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count(), last))
                return;
            std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a retry interval, not a timing assumption
        }
        throw std::runtime_error("etcd did not restart: " + last);
    }

    // range returns the keys in [key, range_end) (range_end empty: key alone), or nullopt when etcd did not
    // answer 200 within timeout_s.
    std::optional<std::vector<etcd_test_kv>> range(const std::string & key, const std::string & range_end,
                                                   double timeout_s = 5) const {
        nlohmann::json req = {{"key", base64_encode(key)}};
        if (!range_end.empty()) req["range_end"] = base64_encode(range_end);
        auto j = post_json("/v3/kv/range", req, timeout_s);
        if (!j) return std::nullopt;
        std::vector<etcd_test_kv> out;
        if (j->contains("kvs") && (*j)["kvs"].is_array())
            for (const auto & kv : (*j)["kvs"]) {
                etcd_test_kv e;
                e.key = base64_decode(kv.value("key", ""));
                e.value = base64_decode(kv.value("value", ""));
                const auto & l = kv.contains("lease") ? kv["lease"] : nlohmann::json();
                if (l.is_string()) e.lease = std::strtoll(l.get<std::string>().c_str(), nullptr, 10);
                else if (l.is_number_integer()) e.lease = l.get<int64_t>();
                out.push_back(std::move(e));
            }
        return out;
    }
    std::optional<std::vector<etcd_test_kv>> range_prefix(const std::string & prefix, double timeout_s = 5) const {
        return range(prefix, prefix_range_end(prefix), timeout_s);
    }
    // keys lists the keys under prefix (empty when etcd does not answer: callers poll).
    std::vector<std::string> keys(const std::string & prefix, double timeout_s = 5) const {
        std::vector<std::string> out;
        if (auto r = range_prefix(prefix, timeout_s))
            for (auto & kv : *r) out.push_back(kv.key);
        return out;
    }
    // lease_ttl: the remaining TTL of a lease in seconds; -1 when the lease does not exist (expired or
    // revoked); nullopt when etcd did not answer.
    std::optional<int64_t> lease_ttl(int64_t lease, double timeout_s = 5) const {
        auto j = post_json("/v3/lease/timetolive", {{"ID", std::to_string(lease)}}, timeout_s);
        if (!j) return std::nullopt;
        const auto & t = j->contains("TTL") ? (*j)["TTL"] : nlohmann::json();
        if (t.is_string()) return std::strtoll(t.get<std::string>().c_str(), nullptr, 10);
        if (t.is_number_integer()) return t.get<int64_t>();
        return -1;  // TTL 0 is omitted by the gateway's JSON encoding
    }
    // revoke_lease revokes a lease (its keys are deleted); false when etcd did not answer 200 (e.g. the lease
    // is already gone).
    bool revoke_lease(int64_t lease, double timeout_s = 5) const {
        return post_json("/v3/lease/revoke", {{"ID", std::to_string(lease)}}, timeout_s).has_value();
    }
    // answers: etcd answers a range within timeout_s.
    bool answers(double timeout_s = 2) const { return range("/", "", timeout_s).has_value(); }

    std::string stderr_text() const {
        std::ifstream f(err_path_);
        std::stringstream ss;
        ss << f.rdbuf();
        return ss.str();
    }

  private:
    etcd_process() = default;

    std::optional<nlohmann::json> post_json(const std::string & path, const nlohmann::json & body,
                                            double timeout_s) const {
        httplib::Client c("127.0.0.1", client_port_);
        const auto t = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::duration<double>(timeout_s));
        c.set_connection_timeout(t);
        c.set_read_timeout(t);
        c.set_write_timeout(t);
        auto r = c.Post(path, body.dump(), "application/json");
        if (!r || r->status != 200) return std::nullopt;
        auto j = nlohmann::json::parse(r->body, nullptr, false);
        if (j.is_discarded() || !j.is_object()) return std::nullopt;
        return j;
    }

    // exited: the child is gone (a zombie nobody reaped yet, or no such process).
    bool exited() const {
        std::ifstream f("/proc/" + std::to_string(proc_->pid()) + "/stat");
        std::string stat;
        if (!std::getline(f, stat)) return true;
        const size_t paren = stat.rfind(')');
        return paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] == 'Z';
    }

    // launch spawns etcd on the current ports and waits until it answers; false (child reaped, `last` set)
    // when it exits or does not answer in time.
    bool launch(double timeout_s, std::string & last) {
        const std::string c = url(), p = "http://127.0.0.1:" + std::to_string(peer_port_);
        child_options o;
        o.argv = {"etcd",
                  "--name",
                  "default",
                  "--data-dir",
                  dir_ + "/data",
                  "--listen-client-urls",
                  c,
                  "--advertise-client-urls",
                  c,
                  "--listen-peer-urls",
                  p,
                  "--initial-advertise-peer-urls",
                  p,
                  "--initial-cluster",
                  "default=" + p,
                  "--log-level",
                  "error"};
        o.stderr_path = err_path_;
        o.known_url = c;  // etcd prints no listening line: readiness is polled below
        auto s = child_process::spawn(o);
        if (!s.ok()) {
            last = s.status().message();
            return false;
        }
        proc_ = std::move(s.value());
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
        while (std::chrono::steady_clock::now() < deadline) {
            if (answers(1)) return true;
            if (exited()) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        last = exited() ? "etcd exited; stderr: " + stderr_text() : "etcd never answered; stderr: " + stderr_text();
        proc_->kill();
        proc_.reset();
        return false;
    }

    std::unique_ptr<child_process> proc_;
    std::string dir_, err_path_;
    int client_port_ = 0, peer_port_ = 0;
};

}  // namespace baton::test
