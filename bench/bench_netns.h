// bench_netns.h — network namespaces with tc-shaped links for the benchmarks that need a network between their
// processes (figures 16 and 23): a hub namespace holds a bridge, each host gets a namespace of its own joined
// to it by a veth pair whose both ends are shaped with tc tbf to one rate (the host's upload and download).
// Cleanup on exit, exceptions and signals; stale namespaces of killed runs are removed at start. Every
// command is bounded in time. Header-only, like the benchmarks' other helpers.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_util.h"

namespace baton::bench {

// find_tool: the first of /usr/sbin, /usr/bin, /sbin, /bin holding name; "" when none.
inline std::string find_tool(const std::string & name) {
    for (const char * d : {"/usr/sbin/", "/usr/bin/", "/sbin/", "/bin/"}) {
        const std::string p = d + name;
        if (::access(p.c_str(), X_OK) == 0) return p;
    }
    return "";
}

// run_cmd runs argv (argv[0] a path), waits at most timeout_s; returns the exit code (-1: could not run,
// killed, or timed out) and the first bytes of its stderr in *err.
inline int run_cmd(const std::vector<std::string> & argv, std::string * err = nullptr, double timeout_s = 20) {
    int pipefd[2];
    if (::pipe(pipefd) != 0) return -1;
    const pid_t pid = ::fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        ::dup2(pipefd[1], 2);
        const int devnull = ::open("/dev/null", O_WRONLY);
        if (devnull >= 0) ::dup2(devnull, 1);
        ::close(pipefd[0]);
        ::close(pipefd[1]);
        std::vector<char *> a;
        for (const auto & s : argv) a.push_back(const_cast<char *>(s.c_str()));
        a.push_back(nullptr);
        ::execv(a[0], a.data());
        ::_exit(127);
    }
    ::close(pipefd[1]);
    ::fcntl(pipefd[0], F_SETFL, O_NONBLOCK);
    std::string e;
    int status = 0;
    const double deadline = now_ms() + timeout_s * 1000;
    for (;;) {
        char buf[512];
        ssize_t n;
        while ((n = ::read(pipefd[0], buf, sizeof buf)) > 0)
            if (e.size() < 4000) e.append(buf, size_t(n));
        const pid_t w = ::waitpid(pid, &status, WNOHANG);
        if (w == pid) break;
        if (now_ms() > deadline) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &status, 0);
            status = -1;
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ::close(pipefd[0]);
    if (err) *err = e;
    return status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The namespaces to delete from the signal handler: fixed arrays filled before the handler is installed.
inline constexpr int k_max_ns = 8;
inline char g_ip[256];
inline char g_ns[k_max_ns][64];
inline std::atomic<int> g_n_ns{0};

inline void delete_namespaces_signal_safe() {
    const int n = g_n_ns.load();
    for (int i = n - 1; i >= 0; --i) {
        const pid_t pid = ::fork();
        if (pid == 0) {
            char a0[] = "ip", a1[] = "netns", a2[] = "del";
            char * argv[] = {a0, a1, a2, g_ns[i], nullptr};
            ::execv(g_ip, argv);
            ::_exit(127);
        }
        if (pid > 0) {
            int st;
            ::waitpid(pid, &st, 0);
        }
    }
    g_n_ns.store(0);
}

inline void on_signal(int sig) {
    delete_namespaces_signal_safe();
    ::_exit(128 + sig);
}

// lab: the namespaces, veths, bridge and qdiscs of this run; the destructor deletes them.
class lab {
  public:
    struct host {
        std::string ns, addr;  // namespace, IPv4 address on the bridge's subnet
    };

    lab(std::string ip, std::string tc, std::string nsenter)
        : ip_(std::move(ip)), tc_(std::move(tc)), nsenter_(std::move(nsenter)),
          prefix_("baton-sl-" + std::to_string(::getpid())) {
        std::snprintf(g_ip, sizeof g_ip, "%s", ip_.c_str());
    }
    ~lab() { teardown(); }
    lab(const lab &) = delete;
    lab & operator=(const lab &) = delete;

    // remove_stale deletes baton-sl-<pid>-* namespaces whose process is gone (a run killed with SIGKILL).
    void remove_stale() {
        DIR * d = ::opendir("/run/netns");
        if (!d) return;
        std::vector<std::string> stale;
        for (int i = 0; i < 1000; ++i) {
            const dirent * e = ::readdir(d);
            if (!e) break;
            const std::string n = e->d_name;
            if (n.rfind("baton-sl-", 0) != 0) continue;
            const long pid = std::atol(n.c_str() + 9);
            if (pid > 0 && ::kill(pid_t(pid), 0) != 0 && errno == ESRCH) stale.push_back(n);
        }
        ::closedir(d);
        for (const auto & n : stale) {
            std::printf("removing stale namespace %s\n", n.c_str());
            run_cmd({ip_, "netns", "del", n});
        }
    }

    // add_namespace creates prefix-suffix; returns false (with the reason) when that is not possible.
    bool add_namespace(const std::string & suffix, std::string * why) {
        const std::string ns = prefix_ + "-" + suffix;
        if (g_n_ns.load() >= k_max_ns) throw std::runtime_error("too many namespaces");
        std::string err;
        if (run_cmd({ip_, "netns", "add", ns}, &err) != 0) {
            while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
            *why = "ip netns add " + ns + ": " + err;
            return false;
        }
        const int i = g_n_ns.load();
        std::snprintf(g_ns[i], sizeof g_ns[i], "%s", ns.c_str());
        g_n_ns.store(i + 1);
        return true;
    }

    // build: the hub with its bridge, and one shaped host per suffix (addresses 10.77.0.1, .2, ...).
    void build(const std::vector<std::string> & suffixes, int rate_mbit) {
        std::string why;
        hub_ = prefix_ + "-h";
        if (!add_namespace("h", &why)) throw std::runtime_error(why);
        must(in(hub_, {ip_, "link", "set", "lo", "up"}));
        must(in(hub_, {ip_, "link", "add", "br0", "type", "bridge"}));
        must(in(hub_, {ip_, "addr", "add", "10.77.0.254/24", "dev", "br0"}));
        must(in(hub_, {ip_, "link", "set", "br0", "up"}));
        const std::vector<std::string> shape = shape_of(rate_mbit);
        for (size_t i = 0; i < suffixes.size(); ++i) {
            if (!add_namespace(suffixes[i], &why)) throw std::runtime_error(why);
            const std::string ns = prefix_ + "-" + suffixes[i], peer = "v" + suffixes[i];
            const std::string addr = "10.77.0." + std::to_string(i + 1);
            must(in(hub_, {ip_, "link", "add", peer, "type", "veth", "peer", "name", "eth0", "netns", ns}));
            must(in(hub_, {ip_, "link", "set", peer, "master", "br0"}));
            must(in(hub_, {ip_, "link", "set", peer, "up"}));
            must(in(ns, {ip_, "link", "set", "lo", "up"}));
            must(in(ns, {ip_, "addr", "add", addr + "/24", "dev", "eth0"}));
            must(in(ns, {ip_, "link", "set", "eth0", "up"}));
            std::vector<std::string> q = {tc_, "qdisc", "add", "dev", "eth0"};
            q.insert(q.end(), shape.begin(), shape.end());
            must(in(ns, q));
            q = {tc_, "qdisc", "add", "dev", peer};
            q.insert(q.end(), shape.begin(), shape.end());
            must(in(hub_, q));
            hosts_[suffixes[i]] = host{ns, addr};
        }
    }

    // enter_hub moves the calling thread (call it before any other thread exists) into the hub namespace.
    void enter_hub() const {
        const std::string p = "/run/netns/" + hub_;
        const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0)
            throw std::runtime_error("setns " + p + ": " + std::strerror(errno));
        ::close(fd);
    }

    const host & at(const std::string & suffix) const { return hosts_.at(suffix); }

    // set_rate shapes every host's link to rate_mbit each way from now on (tc qdisc change).
    void set_rate(int rate_mbit) {
        const std::vector<std::string> shape = shape_of(rate_mbit);
        for (const auto & [suffix, h] : hosts_) {
            std::vector<std::string> q = {tc_, "qdisc", "change", "dev", "eth0"};
            q.insert(q.end(), shape.begin(), shape.end());
            must(in(h.ns, q));
            q = {tc_, "qdisc", "change", "dev", "v" + suffix};
            q.insert(q.end(), shape.begin(), shape.end());
            must(in(hub_, q));
        }
    }

    // in: argv run inside namespace ns. nsenter joins only the network namespace and execs argv in place (so
    // a child's pid and PR_SET_PDEATHSIG stay its own); `ip netns exec` / `ip -n` would also remount / and
    // /sys, which fails in the build root's chroot ("/" is no mount point there).
    std::vector<std::string> in(const std::string & ns, const std::vector<std::string> & argv) const {
        std::vector<std::string> a = {nsenter_, "--net=/run/netns/" + ns, "--"};
        a.insert(a.end(), argv.begin(), argv.end());
        return a;
    }

    void teardown() {
        const int n = g_n_ns.load();
        for (int i = n - 1; i >= 0; --i) run_cmd({ip_, "netns", "del", g_ns[i]});
        g_n_ns.store(0);
    }

  private:
    // tbf: burst = what the rate sends in 4 ms (at least 64 KiB, a GSO packet); queue up to 50 ms.
    static std::vector<std::string> shape_of(int rate_mbit) {
        const long burst = std::max(64L * 1024, long(rate_mbit) * 1000000L / 8 / 250);
        return {"root",    "tbf", "rate", std::to_string(rate_mbit) + "mbit", "burst", std::to_string(burst),
                "latency", "50ms"};
    }
    void must(const std::vector<std::string> & argv) {
        std::string err;
        if (run_cmd(argv, &err) != 0) {
            std::string cmd;
            for (const auto & a : argv) cmd += a + " ";
            throw std::runtime_error("failed: " + cmd + ": " + err);
        }
    }
    std::string ip_, tc_, nsenter_, prefix_, hub_;
    std::map<std::string, host> hosts_;
};

// lab_usable: removes stale namespaces of killed runs and checks that this process can make namespaces
// (CAP_NET_ADMIN, a writable /run/netns). When it cannot: in --quick mode (CI smoke) prints why `bench` is skipped
// and returns false; otherwise throws.
inline bool lab_usable(lab & L, bool quick, const char * bench) {
    L.remove_stale();
    std::string why;
    if (L.add_namespace("probe", &why)) {
        L.teardown();
        return true;
    }
    if (!quick) throw std::runtime_error("cannot create network namespaces: " + why);
    std::printf("%s: skipped: cannot create network namespaces (%s)\n", bench, why.c_str());
    return false;
}

// netns_cleanup_on_signals: SIGINT, SIGTERM, SIGHUP and SIGPIPE (stdout closed, e.g. piped into head) delete
// this run's namespaces before the process exits.
inline void netns_cleanup_on_signals() {
    struct sigaction sa{};
    sa.sa_handler = on_signal;
    ::sigaction(SIGINT, &sa, nullptr);
    ::sigaction(SIGTERM, &sa, nullptr);
    ::sigaction(SIGHUP, &sa, nullptr);
    ::sigaction(SIGPIPE, &sa, nullptr);
}

}  // namespace baton::bench
