// router_overhead_bench.cpp — figure 9: what `baton route` adds to a stream, at 1, 64 and 1,000
// concurrent streams (quick: 1 and 16).
//
// One `baton serve` node (--role both, 512x8 llama (quick: 128x2), 8 slots, --queue-max 1024 so that N streams sent
// straight to it are all admitted: 8 run, the rest wait in its queue instead of getting 503) and
// `baton route --decode NODE` in front (its default --node-queue: as many as the node has slots, so the node holds 16 of the router's
// requests, the rest wait at the router). Per level N, rounds alternate router-first and direct-first;
// each round opens N connections at once and sends one streaming /v1/completions on each (distinct
// 16-token prompt, max_tokens 16, temperature 0, ignore_eos) from ONE thread that polls every socket
// (no thread per stream), timestamping every token event as it arrives.
//   TTFT = request written -> first token event; TPOT = (last token - first token) / (tokens - 1) per
//   stream; median and P99 over the streams of every round of a level.
//   Router CPU per 1,000 tokens = (utime + stime of the router process over the router rounds of a level,
//   from /proc/<pid>/stat) / tokens streamed through it x 1000.
//   RSS per open stream = (the router's highest VmRSS while the level's streams are open - its VmRSS
//   right before the round) / N, at the largest level (most of those streams wait in the router's queue).
// The client, the router and the node share the machine's cores; every figure includes that contention.
#include <fcntl.h>
#include <poll.h>

#include <csignal>
#include <sys/resource.h>

#include <fstream>
#include <sstream>

#include "bench_net.h"
#include "raw_tcp.h"

using namespace baton;
using namespace baton::bench;

namespace {

// One streamed completion driven by the poll loop.
struct poll_stream {
    int fd = -1;
    std::string request;
    size_t sent = 0;
    double t_send = 0;              // ms: the request's last byte written
    bool head_done = false, chunked = false, done = false, failed = false;
    std::string head, body, error;
    // chunked decoding: 0 size line, 1 data, 2 the CRLF after data
    int cstate = 0;
    size_t chunk_left = 0;
    std::string size_line;
    size_t scan = 0;                // body offset of the next SSE event
    std::vector<double> token_ms;   // arrival of every token event, relative to t_send
    int completion_tokens = 0;

    void fail(std::string why) {
        failed = true;
        if (error.empty()) error = std::move(why);
    }
    // feed takes bytes received at `at` (ms).
    void feed(const char * p, size_t n, double at) {
        if (!head_done) {
            head.append(p, n);
            const size_t end = head.find("\r\n\r\n");
            if (end == std::string::npos) return;
            std::string rest = head.substr(end + 4);
            head.resize(end + 2);
            for (char & c : head) c = char(std::tolower(static_cast<unsigned char>(c)));
            head_done = true;
            chunked = head.find("\r\ntransfer-encoding: chunked") != std::string::npos;
            if (head.compare(0, 13, "http/1.1 200 ") != 0) fail("HTTP " + head.substr(9, 3));
            if (!rest.empty()) feed_body(rest.data(), rest.size(), at);
            return;
        }
        feed_body(p, n, at);
    }
    void feed_body(const char * p, size_t n, double at) {
        if (!chunked) {
            body.append(p, n);
        } else {
            while (n > 0) {
                if (cstate == 0) {
                    const char c = *p++;
                    --n;
                    if (c != '\n') {
                        size_line += c;
                        continue;
                    }
                    chunk_left = std::strtoull(size_line.c_str(), nullptr, 16);
                    size_line.clear();
                    if (chunk_left == 0) {
                        done = true;  // last chunk (trailers ignored)
                        break;
                    }
                    cstate = 1;
                } else if (cstate == 1) {
                    const size_t k = std::min(chunk_left, n);
                    body.append(p, k);
                    p += k;
                    n -= k;
                    chunk_left -= k;
                    if (chunk_left == 0) cstate = 2;
                } else {
                    const char c = *p++;
                    --n;
                    if (c == '\n') cstate = 0;
                }
            }
        }
        size_t end;
        while ((end = body.find("\n\n", scan)) != std::string::npos) {
            const std::string_view ev(body.data() + scan, end - scan);
            scan = end + 2;
            if (ev.find("\"finish_reason\":null") != std::string_view::npos) token_ms.push_back(at - t_send);
            if (ev.find("\"error\"") != std::string_view::npos) fail("error event: " + std::string(ev.substr(0, 200)));
            if (const size_t u = ev.find("\"completion_tokens\":"); u != std::string_view::npos)
                completion_tokens = std::atoi(std::string(ev.substr(u + 20, 12)).c_str());
            if (ev == "data: [DONE]") done = true;
        }
        if (failed && head_done && !chunked && body.size() > 0) error += ": " + body.substr(0, 200);
    }
    // tpot_ms as bench_net.h's stream_timing: (last token event - first) / (completion_tokens - 1). A token
    // whose text is empty (an incomplete UTF-8 sequence) sends no event of its own.
    double tpot_ms() const {
        if (completion_tokens < 2 || token_ms.size() < 2) return 0;
        return (token_ms.back() - token_ms.front()) / double(completion_tokens - 1);
    }
};

long rss_kib(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
    return -1;
}

// cpu_s: utime + stime of pid in seconds (fields 14 and 15 of /proc/<pid>/stat).
double cpu_s(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const size_t rp = s.rfind(')');
    if (rp == std::string::npos) return 0;
    std::istringstream in(s.substr(rp + 2));
    std::string field;
    unsigned long long ut = 0, st = 0;
    for (int i = 3; i <= 15 && in >> field; ++i) {
        if (i == 14) ut = std::stoull(field);
        if (i == 15) st = std::stoull(field);
    }
    return double(ut + st) / double(::sysconf(_SC_CLK_TCK));
}

struct round_result {
    std::vector<poll_stream> streams;
    long rss_peak_kib = 0;
    double wall_ms = 0;
};

// run_round opens n connections to port at once and drives one streamed completion on each from this
// thread. rss_pid: a process whose VmRSS is sampled (~every 20 ms) while streams are open (0: none).
round_result run_round(int port, int n, int n_prompt, int n_gen, int n_vocab, uint32_t seed, pid_t rss_pid, double timeout_s) {
    round_result rr;
    rr.streams.resize(size_t(n));
    for (int i = 0; i < n; ++i) {
        poll_stream & s = rr.streams[size_t(i)];
        const std::string body = nlohmann::json({{"prompt", random_prompt(size_t(n_prompt), seed + uint32_t(i), n_vocab)},
                                                 {"max_tokens", n_gen},
                                                 {"temperature", 0},
                                                 {"stream", true},
                                                 {"ignore_eos", true},
                                                 {"stream_options", {{"include_usage", true}}}})
                                     .dump();
        s.request = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                    "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
        s.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (s.fd < 0) throw std::runtime_error("socket: " + std::string(std::strerror(errno)));
        raw_set_nodelay(s.fd);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(uint16_t(port));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::connect(s.fd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 && errno != EINPROGRESS) s.fail("connect: " + std::string(std::strerror(errno)));
    }
    const double t0 = now_ms(), deadline = t0 + timeout_s * 1000;
    double next_rss = 0;
    std::vector<pollfd> pfds;
    std::vector<size_t> idx;
    char buf[65536];
    for (;;) {
        pfds.clear();
        idx.clear();
        for (size_t i = 0; i < rr.streams.size(); ++i) {
            poll_stream & s = rr.streams[i];
            if (s.done || s.failed) continue;
            pfds.push_back({s.fd, short(s.sent < s.request.size() ? POLLOUT : POLLIN), 0});
            idx.push_back(i);
        }
        const double now = now_ms();
        if (rss_pid > 0 && now >= next_rss) {
            rr.rss_peak_kib = std::max(rr.rss_peak_kib, rss_kib(rss_pid));
            next_rss = now + 20;
        }
        if (pfds.empty()) break;
        if (now > deadline) {
            for (size_t i : idx) rr.streams[i].fail("timed out");
            break;
        }
        const int k = ::poll(pfds.data(), nfds_t(pfds.size()), 20);
        if (k <= 0) continue;
        const double at = now_ms();
        for (size_t j = 0; j < pfds.size(); ++j) {
            if (!pfds[j].revents) continue;
            poll_stream & s = rr.streams[idx[j]];
            if (s.sent < s.request.size()) {
                const ssize_t w = ::send(s.fd, s.request.data() + s.sent, s.request.size() - s.sent, MSG_NOSIGNAL);
                if (w < 0 && (errno == EAGAIN || errno == EINTR)) continue;
                if (w <= 0) {
                    s.fail("send: " + std::string(std::strerror(errno)));
                    continue;
                }
                s.sent += size_t(w);
                if (s.sent == s.request.size()) s.t_send = now_ms();
                continue;
            }
            for (;;) {
                const ssize_t r = ::recv(s.fd, buf, sizeof buf, 0);
                if (r < 0 && errno == EINTR) continue;
                if (r < 0 && errno == EAGAIN) break;
                if (r <= 0) {
                    if (!s.done) s.fail(r == 0 ? "connection closed before [DONE]" : "recv: " + std::string(std::strerror(errno)));
                    break;
                }
                s.feed(buf, size_t(r), at);
                if (s.done || s.failed) break;
            }
        }
    }
    rr.wall_ms = now_ms() - t0;
    for (auto & s : rr.streams) {
        ::close(s.fd);
        if (!s.failed && s.completion_tokens != n_gen)
            s.fail("got " + std::to_string(s.token_ms.size()) + " token events, usage " + std::to_string(s.completion_tokens));
    }
    return rr;
}

struct level_acc {
    std::vector<double> ttft, tpot;
    int errors = 0, streams = 0, no_text = 0;
    double wall_ms = 0;  // summed over rounds
    long tokens = 0;
    std::string first_error;
    void add(const round_result & rr) {
        wall_ms += rr.wall_ms;
        for (const auto & s : rr.streams) {
            ++streams;
            if (s.failed) {
                if (errors++ == 0) first_error = s.error;
                continue;
            }
            tokens += long(s.completion_tokens);
            // All of its tokens had empty text (greedy + ignore_eos can repeat EOS): complete, but no token
            // event to time.
            if (s.token_ms.empty()) {
                ++no_text;
                continue;
            }
            ttft.push_back(s.token_ms.front());
            tpot.push_back(s.tpot_ms());
        }
    }
};

}  // namespace

int main(int argc, char ** argv) try {
    std::signal(SIGPIPE, SIG_IGN);  // a peer that closes early is an error to report, not a kill (writev has no MSG_NOSIGNAL)
    const bool quick = quick_mode(argc, argv);
    // 1,000 client sockets here plus the router's and the node's: lift the soft descriptor limit (the
    // children inherit it).
    rlimit rl{};
    if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        ::setrlimit(RLIMIT_NOFILE, &rl);
    }
    const std::vector<int> levels = quick ? std::vector<int>{1, 16} : std::vector<int>{1, 64, 1000};
    const int n_prompt = 16, n_gen = quick ? 8 : 16;
    // Full: the 512x8 llama of figures 2-5 (a token takes a few ms, as TPOT needs); quick: the tiny 128x2.
    const std::string model = quick ? bench_model("llama", 128, 2) : bench_model("llama", 512, 8);
    const int n_vocab = model_n_vocab(model);
    auto nargs = node_args(model, "both", quick ? 1 : 2, 8, 4096);
    for (size_t i = 0; i + 1 < nargs.size(); ++i)
        if (nargs[i] == "--queue-max") nargs[i + 1] = "1024";
    auto node = bench_process::start(nargs, "node");
    auto route = bench_process::start({baton_exe(), "route", "--decode", node->url(), "-m", model, "--fallback", "fail", "--health-interval", "30"},
                                      "router");
    for (int port : {node->port(), route->port()}) {  // warm-up: first use of slots and connections
        round_result w = run_round(port, 8, n_prompt, 4, n_vocab, 999, 0, 60);
        for (const auto & s : w.streams)
            if (s.failed) throw std::runtime_error("warm-up: " + s.error);
    }
    std::printf("%-7s %6s %7s %10s %10s %10s %10s %8s %8s %14s\n", "path", "N", "streams", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "tok/s",
                "errors", "CPU ms/1k tok");
    int errors_total = 0;
    stats headline_stats;
    for (int n : levels) {
        const int rounds = quick ? (n == 1 ? 3 : 1) : (n == 1 ? 20 : n <= 64 ? 4 : 2);
        level_acc acc[2];  // 0 router, 1 direct
        double router_cpu = 0;
        long rss_idle = 0, rss_peak = 0;
        for (int r = 0; r < rounds; ++r) {
            for (int k = 0; k < 2; ++k) {
                const int mode = (r % 2 == 0) ? k : 1 - k;  // alternate which path goes first
                const bool via_router = mode == 0;
                const uint32_t seed = uint32_t(n * 7919 + r * 131 + mode * 17) * 1000u;
                const double c0 = via_router ? cpu_s(route->pid()) : 0;
                const long idle = via_router ? rss_kib(route->pid()) : 0;
                round_result rr = run_round(via_router ? route->port() : node->port(), n, n_prompt, n_gen, n_vocab, seed,
                                            via_router ? route->pid() : 0, quick ? 30 : 300);
                if (via_router) {
                    router_cpu += cpu_s(route->pid()) - c0;
                    if (rr.rss_peak_kib - idle > rss_peak - rss_idle) {
                        rss_peak = rr.rss_peak_kib;
                        rss_idle = idle;
                    }
                }
                acc[mode].add(rr);
            }
        }
        const std::string N = std::to_string(n);
        for (int mode = 0; mode < 2; ++mode) {
            level_acc & a = acc[mode];
            errors_total += a.errors;
            const std::string tag = mode == 0 ? "router" : "direct";
            const double cpu_per_1k = mode == 0 && a.tokens > 0 ? router_cpu * 1000.0 / double(a.tokens) * 1000.0 : 0;
            std::printf("%-7s %6d %7d %10.1f %10.1f %10.2f %10.2f %8.0f %8d %14s%s%s\n", tag.c_str(), n, a.streams, percentile(a.ttft, 50),
                        percentile(a.ttft, 99), percentile(a.tpot, 50), percentile(a.tpot, 99),
                        a.wall_ms > 0 ? double(a.tokens) / (a.wall_ms / 1000) : 0.0, a.errors,
                        mode == 0 ? std::to_string(cpu_per_1k).substr(0, 6).c_str() : "-", a.errors ? "  first error: " : "", a.first_error.c_str());
            const stats st = summarize(a.ttft), sp = summarize(a.tpot);
            const std::string b = "router_overhead/" + tag + "/" + N + "/";
            result_at(b + "ttft_p50", {percentile(a.ttft, 50), st.min, st.max, st.n}, "ms", "info", true, {9, tag + " P50 TTFT", double(n)});
            result_value(b + "ttft_p99", percentile(a.ttft, 99), "ms", "info", true, st.min, st.max, st.n);
            result_at(b + "tpot_p50", {percentile(a.tpot, 50), sp.min, sp.max, sp.n}, "ms", "info", true, {9, tag + " P50 TPOT", double(n)});
            result_value(b + "tpot_p99", percentile(a.tpot, 99), "ms", "info", true, sp.min, sp.max, sp.n);
            result_value(b + "errors", a.errors, "errors", "== 0", a.errors == 0, a.errors, a.errors, size_t(a.streams));
            const double tok_s = a.wall_ms > 0 ? double(a.tokens) / (a.wall_ms / 1000) : 0;
            result_value(b + "tokens_per_s", tok_s, "tok/s", "info", true, tok_s, tok_s, size_t(a.tokens));
            result_value(b + "streams_without_text", a.no_text, "streams", "info", true, a.no_text, a.no_text, size_t(a.streams));
            if (mode == 0) result_value(b + "cpu_ms_per_1k_tokens", cpu_per_1k, "ms", "info", true, cpu_per_1k, cpu_per_1k, size_t(a.tokens));
        }
        // Ratios router / direct (P50 and P99 of TTFT and TPOT).
        for (const char * what : {"ttft", "tpot"}) {
            const bool t = std::string(what) == "ttft";
            for (double p : {50.0, 99.0}) {
                const double rv = percentile(t ? acc[0].ttft : acc[0].tpot, p), dv = percentile(t ? acc[1].ttft : acc[1].tpot, p);
                const double ratio = dv > 0 ? rv / dv : 0;
                const std::string name = "router_overhead/ratio/" + N + "/" + what + "_p" + std::to_string(int(p));
                result_value(name, ratio, "x", "info", true, ratio, ratio, size_t(acc[0].streams));
                if (!t && p == 50.0 && n == levels.back()) {
                    headline_stats = {ratio, ratio, ratio, size_t(acc[0].streams)};
                }
            }
        }
        if (n == levels.back()) {
            const double per = double(rss_peak - rss_idle) / double(n);
            std::printf("router RSS: %ld KiB idle, %ld KiB peak with %d streams open: %.1f KiB per open stream\n", rss_idle, rss_peak, n, per);
            result_value("router_overhead/router_rss_kib_per_stream/" + N, per, "KiB", "info", true, per, per, size_t(n));
            result_value("router_overhead/router_rss_idle_kib", double(rss_idle), "KiB", "info", true, double(rss_idle), double(rss_idle), 1);
        }
    }
    result_value("router_overhead_errors", errors_total, "errors", "== 0", errors_total == 0, errors_total, errors_total, 0);
    headline(9, "router_tpot_p50_vs_direct_at_" + std::to_string(levels.back()) + "_streams", headline_stats, "x",
             "info (0 errors required)", errors_total == 0);
    return errors_total == 0 ? 0 : 1;
} catch (const std::exception & e) {
    std::fprintf(stderr, "router_overhead_bench: %s\n", e.what());
    return 1;
}
