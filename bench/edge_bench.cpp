// edge_bench.cpp — figure 8: a ~16 MiB state blob moved through real Baton processes over loopback, each
// transfer divided by raw TCP (raw_tcp.h) measured in the same run, run by run.
//
// Setup: a 128x64 llama (16 KiB of f16 K/V per token) so a 1024-token prompt makes a ~16 MiB blob for a
// little compute; a prefill node and a decode node (`-np 1`), `baton route` in front of both, and a second
// router in front of two in-process fake nodes (below). The blob is the prefill node's real /v1/prefill
// answer. Per run, in this order (one unmeasured warm-up run first):
//   raw TCP up / down   raw_tcp_pair: n bytes one way over a loopback socket pair, warm buffers.
//   upload              POST /v1/decode of the blob with its first byte flipped (bad magic) to the decode
//                       node with a raw-socket client (one writev), timed from the first byte sent to the
//                       response headers. The node reads the whole body before it calls the handler
//                       (http_server.cpp read_body), then the parse refuses the blob at byte 0 (422) — the
//                       parse costs microseconds (printed: parse_reject_us), so this is the body transfer
//                       (and the node's zero-fill of its body buffer: memset_blob_ms sizes that)
//                       plus one small response. For comparison the full verify of the valid blob
//                       (blob_parse, in-process: parse_valid_ms) is what a real /v1/decode adds on top.
//   download            GET /v1/slots/0/state from the prefill node (its slot holds the 1024-token
//                       state) with a raw-socket client: transfer = response headers -> last body byte
//                       (the node serializes the state before it sends the headers; that part is
//                       reported separately as download_serialize_ms), plus the same with the
//                       cpp-httplib client (request -> last byte, serialize included).
//   relay (metrics)     a PD completion (same prompt, max_tokens 1, so the prefill node's prefix cache makes
//                       the prefill near-free) through the real router; the deltas of
//                       baton_router_blob_bytes_total / baton_router_blob_transfer_seconds_total per
//                       request: prefill node's headers at the router -> the blob's last byte in at the
//                       router (the decode upload runs concurrently and is not included).
//   relay first-in -> last-out   the second router between a fake prefill node that answers /v1/prefill
//                       with the same blob from a warm buffer and a fake decode node that reads /v1/decode
//                       into a warm buffer: from the fake prefill's first blob byte sent to the fake
//                       decode's last blob byte received (same process, same clock). Both hops, the
//                       router's connect to the decode node and its relay buffer included.
// Targets (issue): upload and download >= 0.8x raw TCP, relay >= 0.6x.
#include <poll.h>

#include <csignal>

#include <atomic>
#include <mutex>

#include "baton/blob.h"
#include "bench_net.h"
#include "raw_tcp.h"

using namespace baton;
using namespace baton::bench;

namespace {

double gbps(size_t bytes, double ms) { return double(bytes) / (ms / 1000.0) / 1e9; }

// lower_copy: ASCII-lowercased copy (header names).
std::string lower_copy(std::string s) {
    for (char & c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// head_field: the value of header `name` (lowercase) in a lowercased head, or "".
std::string head_field(const std::string & lhead, const std::string & name) {
    const size_t at = lhead.find("\r\n" + name + ":");
    if (at == std::string::npos) return "";
    size_t b = at + name.size() + 3;
    while (b < lhead.size() && lhead[b] == ' ') ++b;
    return lhead.substr(b, lhead.find("\r\n", b) - b);
}

// timed_http_client: one keep-alive HTTP/1.1 connection with plain send()/recv() that timestamps the
// response's headers and its last body byte. Content-Length bodies only (every response timed here).
class timed_http_client {
  public:
    struct timing {
        int status = -1;
        double t0 = 0, head_ms = 0, end_ms = 0;  // head_ms / end_ms: relative to t0 (request's first byte)
        size_t body_bytes = 0;
    };
    explicit timed_http_client(int port) : port_(port), fd_(raw_connect_loopback(port)) {}
    ~timed_http_client() { ::close(fd_); }
    timed_http_client(const timed_http_client &) = delete;
    timed_http_client & operator=(const timed_http_client &) = delete;

    // exchange sends one request (head + body in one writev) and reads the response body into out (warm,
    // large enough; a larger body is a failure). text: the first bytes of the body, for error messages.
    timing exchange(const std::string & method, const std::string & path, const std::string & ctype, const void * body, size_t n,
                    std::vector<char> & out, std::string * text = nullptr) {
        timing t;
        if (closed_ || peer_closed()) reconnect();  // e.g. the server's --idle-timeout ended a quiet keep-alive connection
        std::string head = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port_) + "\r\n";
        if (n > 0 || method == "POST" || method == "PUT") head += "Content-Type: " + ctype + "\r\nContent-Length: " + std::to_string(n) + "\r\n";
        head += "\r\n";
        t.t0 = now_ms();
        if (!raw_send_head_body(fd_, head, body, n)) return t;
        size_t end;
        while ((end = pending_.find("\r\n\r\n")) == std::string::npos) {
            char buf[65536];
            const ssize_t r = ::recv(fd_, buf, sizeof buf, 0);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) return t;
            pending_.append(buf, size_t(r));
        }
        t.head_ms = now_ms() - t.t0;
        const std::string lhead = lower_copy(pending_.substr(0, end + 2));
        pending_.erase(0, end + 4);
        if (lhead.compare(0, 9, "http/1.1 ") != 0) return t;
        const int status = std::atoi(lhead.c_str() + 9);
        const std::string cl = head_field(lhead, "content-length");
        if (cl.empty()) return t;
        const size_t len = size_t(std::strtoull(cl.c_str(), nullptr, 10));
        closed_ = head_field(lhead, "connection") == "close";
        if (len > out.size()) return t;
        const size_t have = std::min(len, pending_.size());
        std::memcpy(out.data(), pending_.data(), have);
        pending_.erase(0, have);
        if (!raw_recv_all(fd_, out.data() + have, len - have)) return t;
        t.end_ms = now_ms() - t.t0;
        t.body_bytes = len;
        t.status = status;
        if (text) text->assign(out.data(), std::min<size_t>(len, 300));
        return t;
    }

  private:
    bool peer_closed() const {
        char c;
        const ssize_t r = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
    }
    void reconnect() {
        ::close(fd_);
        pending_.clear();
        fd_ = raw_connect_loopback(port_);
        closed_ = false;
    }
    int port_;
    int fd_;
    bool closed_ = false;
    std::string pending_;
};

// fake_node: a minimal node on 127.0.0.1 for the router's relay, in this process (one thread per
// connection; the router opens one connection per request). It answers GET /health, GET /v1/models (4
// slots) and, as a prefill node, POST /v1/prefill with `blob` from a warm buffer (first_out_ms: when its
// first byte was handed to the kernel), or, as a decode node, POST /v1/decode by reading the body into a
// warm buffer (last_in_ms: when its last byte arrived) and answering a small completion JSON.
class fake_node {
  public:
    fake_node(bool prefill, const std::vector<uint8_t> & blob) : prefill_(prefill), blob_(blob), in_(blob.size() + (1 << 20), 1) {
        lfd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        if (lfd_ < 0 || ::bind(lfd_, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 || ::listen(lfd_, 64) != 0 ||
            ::getsockname(lfd_, reinterpret_cast<sockaddr *>(&a), &len) != 0)
            throw std::runtime_error("fake_node: bind/listen: " + std::string(std::strerror(errno)));
        port_ = ntohs(a.sin_port);
        accept_th_ = std::thread([this] { accept_loop(); });
    }
    ~fake_node() {
        stop_ = true;
        accept_th_.join();
        ::close(lfd_);
        std::lock_guard<std::mutex> lk(mu_);
        for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
        for (auto & t : conns_) t.join();
        for (int fd : fds_) ::close(fd);
    }
    int port() const { return port_; }
    std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
    double first_out_ms() const { return first_out_ms_.load(); }
    double last_in_ms() const { return last_in_ms_.load(); }

  private:
    void accept_loop() {
        while (!stop_) {
            pollfd p{lfd_, POLLIN, 0};
            if (::poll(&p, 1, 50) <= 0) continue;
            const int fd = ::accept4(lfd_, nullptr, nullptr, SOCK_CLOEXEC);
            if (fd < 0) continue;
            raw_set_nodelay(fd);
            std::lock_guard<std::mutex> lk(mu_);
            fds_.push_back(fd);
            conns_.emplace_back([this, fd] { serve(fd); });
        }
    }
    void serve(int fd) {
        std::string pending;
        for (;;) {
            size_t end;
            while ((end = pending.find("\r\n\r\n")) == std::string::npos) {
                char buf[16384];
                const ssize_t r = ::recv(fd, buf, sizeof buf, 0);
                if (r <= 0) return;
                pending.append(buf, size_t(r));
            }
            const std::string lhead = lower_copy(pending.substr(0, end + 2));
            pending.erase(0, end + 4);
            const size_t len = size_t(std::strtoull(head_field(lhead, "content-length").c_str(), nullptr, 10));
            if (len > in_.size()) return;
            const size_t have = std::min(len, pending.size());
            std::memcpy(in_.data(), pending.data(), have);
            pending.erase(0, have);
            if (!raw_recv_all(fd, in_.data() + have, len - have)) return;
            const double t_in = now_ms();
            std::string body, ctype = "application/json";
            if (lhead.rfind("get /health ", 0) == 0) {
                body = "{\"status\":\"ok\"}";
            } else if (lhead.rfind("get /v1/models ", 0) == 0) {
                body = "{\"object\":\"list\",\"data\":[{\"id\":\"fake\",\"object\":\"model\",\"meta\":{\"n_slots\":4}}]}";
            } else if (prefill_ && lhead.rfind("post /v1/prefill ", 0) == 0) {
                const std::string h = "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nX-Baton-Prompt-Tokens: 1\r\n"
                                      "X-Baton-Cached-Tokens: 0\r\nContent-Length: " + std::to_string(blob_.size()) + "\r\n\r\n";
                first_out_ms_ = now_ms();
                if (!raw_send_head_body(fd, h, blob_.data(), blob_.size())) return;
                continue;
            } else if (!prefill_ && lhead.rfind("post /v1/decode ", 0) == 0) {
                last_in_ms_ = t_in;
                body = "{\"id\":\"fake\",\"object\":\"text_completion\",\"created\":0,\"model\":\"fake\",\"choices\":[{\"index\":0,\"text\":\"\","
                       "\"finish_reason\":\"length\"}],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1,\"total_tokens\":2}}";
            } else {
                const std::string nf = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
                raw_send_all(fd, nf.data(), nf.size());
                return;
            }
            const std::string resp = "HTTP/1.1 200 OK\r\nContent-Type: " + ctype + "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
            if (!raw_send_all(fd, resp.data(), resp.size())) return;
        }
    }

    const bool prefill_;
    const std::vector<uint8_t> & blob_;
    std::vector<char> in_;
    int lfd_ = -1, port_ = 0;
    std::atomic<bool> stop_{false};
    std::atomic<double> first_out_ms_{0}, last_in_ms_{0};
    std::thread accept_th_;
    std::mutex mu_;
    std::vector<int> fds_;              // guarded by mu_
    std::vector<std::thread> conns_;    // guarded by mu_
};

// router_blob_counters reads baton_router_blob_bytes_total and _transfer_seconds_total from /metrics.
bool router_blob_counters(const bench_process & r, double & bytes, double & seconds) {
    httplib::Client c(r.host(), r.port());
    c.set_read_timeout(std::chrono::seconds(10));
    auto res = c.Get("/metrics");
    if (!res || res->status != 200) return false;
    auto value = [&](const std::string & name, double & out) {
        const size_t at = res->body.find("\n" + name + " ");
        if (at == std::string::npos) return false;
        out = std::strtod(res->body.c_str() + at + name.size() + 2, nullptr);
        return true;
    };
    return value("baton_router_blob_bytes_total", bytes) && value("baton_router_blob_transfer_seconds_total", seconds);
}

}  // namespace

int main(int argc, char ** argv) try {
    std::signal(SIGPIPE, SIG_IGN);  // a peer that closes early is an error to report, not a kill (writev has no MSG_NOSIGNAL)
    const bool quick = quick_mode(argc, argv);
    const int runs = quick ? 3 : 15;
    const int n_prompt = 1024;
    const std::string model = bench_model("llama", 128, 64, 4096);
    const int n_vocab = model_n_vocab(model);
    const int threads = quick ? 1 : 2;
    auto pre = bench_process::start(node_args(model, "prefill", threads, 1, 2048), "prefill");
    auto dec = bench_process::start(node_args(model, "decode", threads, 1, 2048), "decode");
    auto route_cmd = route_args(pre->url(), dec->url(), model);
    route_cmd.insert(route_cmd.end(), {"--health-interval", "30", "--pd-transfer", "relay"});  // the relay is measured
    auto route = bench_process::start(route_cmd, "router");

    // The blob: the prefill node's own /v1/prefill answer for a 1024-token prompt.
    const std::vector<int> prompt = random_prompt(size_t(n_prompt), 5, n_vocab);
    const std::string prefill_body = nlohmann::json({{"prompt", prompt}, {"max_tokens", 1}, {"temperature", 0}}).dump();
    std::vector<char> scratch(size_t(64) << 20, 1);  // warm receive buffer for every response
    std::string text;
    timed_http_client pre_client(pre->port()), dec_client(dec->port());
    auto first = pre_client.exchange("POST", "/v1/prefill", "application/json", prefill_body.data(), prefill_body.size(), scratch, &text);
    if (first.status != 200) throw std::runtime_error("POST /v1/prefill: HTTP " + std::to_string(first.status) + ": " + text);
    const std::vector<uint8_t> blob(scratch.begin(), scratch.begin() + ptrdiff_t(first.body_bytes));
    const size_t n = blob.size();
    std::vector<uint8_t> bad = blob;
    bad[0] ^= 0xff;  // bad magic: refused at byte 0, after the node has read the whole body
    std::printf("blob: %zu bytes (%.2f MiB) from a %d-token prefill of llama 128x64 (prefill took %.0f ms)\n", n, double(n) / (1 << 20),
                n_prompt, first.end_ms);

    // In-process parse costs, to size what the node adds to the upload measurement.
    std::vector<double> parse_valid, parse_reject;
    for (int i = 0; i < 5; ++i) {
        double t0 = now_ms();
        auto v = blob_parse(blob);
        parse_valid.push_back(now_ms() - t0);
        if (!v.ok()) throw std::runtime_error("the prefill blob does not parse: " + v.status().to_string());
        t0 = now_ms();
        auto r = blob_parse(bad);
        parse_reject.push_back((now_ms() - t0) * 1000);
        if (r.ok()) throw std::runtime_error("the bad-magic blob parsed");
    }

    // What zero-filling a warm n-byte buffer costs (std::vector::resize on a pooled buffer does it before
    // a body is received into it).
    std::vector<double> memset_ms;
    for (int i = 0; i < 5; ++i) {
        const double t0 = now_ms();
        std::memset(scratch.data(), i, n);
        memset_ms.push_back(now_ms() - t0);
    }
    fake_node fake_pre(true, blob), fake_dec(false, blob);
    auto fake_route_cmd = route_args(fake_pre.url(), fake_dec.url(), model);
    fake_route_cmd.insert(fake_route_cmd.end(), {"--health-interval", "30", "--pd-transfer", "relay"});
    auto fake_route = bench_process::start(fake_route_cmd, "router (fake nodes)");

    raw_tcp_pair raw(n);
    httplib::Client hc(pre->host(), pre->port());
    hc.set_keep_alive(true);
    hc.set_tcp_nodelay(true);
    hc.set_read_timeout(std::chrono::seconds(60));
    httplib::Client rc(route->host(), route->port()), frc(fake_route->host(), fake_route->port());
    for (auto * c : {&rc, &frc}) {
        c->set_keep_alive(true);
        c->set_read_timeout(std::chrono::seconds(120));
    }
    const std::string completion = nlohmann::json({{"prompt", prompt}, {"max_tokens", 1}, {"temperature", 0}}).dump();

    enum { T_RAW_UP, T_RAW_DOWN, T_UP, T_DOWN, T_DOWN_HTTPLIB, T_RELAY_METRICS, T_RELAY_FIFO, T_N };
    const char * names[T_N] = {"raw_tcp_up", "raw_tcp_down", "upload_decode_node", "download_prefill_node", "download_prefill_node_httplib",
                               "relay_router_metrics", "relay_first_in_last_out"};
    std::vector<double> g[T_N], ratio[T_N], serialize_ms, upload_status;
    for (int r = -1; r < runs; ++r) {
        double ms[T_N] = {};
        double t0 = now_ms();
        if (!raw.up(n)) throw std::runtime_error("raw TCP up failed");
        ms[T_RAW_UP] = now_ms() - t0;
        t0 = now_ms();
        if (!raw.down(n)) throw std::runtime_error("raw TCP down failed");
        ms[T_RAW_DOWN] = now_ms() - t0;

        auto up = dec_client.exchange("POST", "/v1/decode", "application/octet-stream", bad.data(), bad.size(), scratch, &text);
        if (up.status != 422 && up.status != 400) throw std::runtime_error("upload: expected 422, got " + std::to_string(up.status) + ": " + text);
        ms[T_UP] = up.head_ms;

        auto down = pre_client.exchange("GET", "/v1/slots/0/state", "", nullptr, 0, scratch, &text);
        if (down.status != 200 || down.body_bytes < n / 2) throw std::runtime_error("download: HTTP " + std::to_string(down.status) + ": " + text);
        ms[T_DOWN] = down.end_ms - down.head_ms;
        const size_t n_down = down.body_bytes;  // the slot state's blob (no embedded request): about n
        t0 = now_ms();
        size_t got = 0;
        auto hres = hc.Get("/v1/slots/0/state", [&](const char * d, size_t len) {
            if (len > scratch.size() - got) return false;
            std::memcpy(scratch.data() + got, d, len);
            got += len;
            return true;
        });
        ms[T_DOWN_HTTPLIB] = now_ms() - t0;
        if (!hres || hres->status != 200 || got != n_down) throw std::runtime_error("download (httplib) failed");

        double b0 = 0, s0 = 0, b1 = 0, s1 = 0;
        if (!router_blob_counters(*route, b0, s0)) throw std::runtime_error("router /metrics: no blob counters");
        auto rres = rc.Post("/v1/completions", completion, "application/json");
        if (!rres || rres->status != 200) throw std::runtime_error("PD completion via the router failed: " + (rres ? rres->body.substr(0, 300) : "transport"));
        if (!router_blob_counters(*route, b1, s1) || b1 - b0 < double(n) / 2 || s1 <= s0) throw std::runtime_error("router blob counters did not move");
        ms[T_RELAY_METRICS] = (s1 - s0) * 1000;
        const double relay_bytes = b1 - b0;

        auto fres = frc.Post("/v1/completions", completion, "application/json");
        if (!fres || fres->status != 200) throw std::runtime_error("relay via fake nodes failed: " + (fres ? fres->body.substr(0, 300) : "transport"));
        ms[T_RELAY_FIFO] = fake_dec.last_in_ms() - fake_pre.first_out_ms();
        if (!(ms[T_RELAY_FIFO] > 0)) throw std::runtime_error("relay via fake nodes: no timestamps");
        if (r < 0) continue;
        serialize_ms.push_back(down.head_ms);
        const size_t bytes[T_N] = {n, n, n, n_down, n_down, size_t(relay_bytes), n};
        for (int t = 0; t < T_N; ++t) {
            g[t].push_back(gbps(bytes[t], ms[t]));
            const int base = (t == T_DOWN || t == T_DOWN_HTTPLIB || t == T_RAW_DOWN) ? T_RAW_DOWN : T_RAW_UP;
            ratio[t].push_back(gbps(bytes[t], ms[t]) / gbps(n, ms[base]));
        }
    }
    std::printf("\n%-34s %10s %10s %10s %12s\n", "16 MiB blob over loopback, GB/s", "median", "min", "max", "x raw TCP");
    for (int t = 0; t < T_N; ++t) {
        const stats sg = summarize(g[t]), sr = summarize(ratio[t]);
        std::printf("%-34s %10.3f %10.3f %10.3f %12.3f\n", names[t], sg.median, sg.min, sg.max, sr.median);
        result_at(std::string("edge/") + names[t] + "_gbps", sg, "GB/s", "info", true, {8, "GB/s", double(t)});
        if (t == T_RAW_UP || t == T_RAW_DOWN) continue;
        const double target = (t == T_RELAY_METRICS || t == T_RELAY_FIFO) ? 0.6 : 0.8;
        const bool gated = t == T_UP || t == T_DOWN || t == T_RELAY_FIFO;
        char tt[32];
        std::snprintf(tt, sizeof tt, ">= %.1fx", target);
        result(std::string("edge/") + names[t] + "_vs_raw_tcp", sr, "x", gated ? tt : "info", !gated || sr.median >= target);
    }
    const stats ss = summarize(serialize_ms), spv = summarize(parse_valid), spr = summarize(parse_reject);
    result("edge/download_serialize_ms", ss, "ms", "info", true);
    result("edge/parse_valid_ms", spv, "ms", "info", true);
    result("edge/parse_reject_us", spr, "us", "info", true);
    result("edge/memset_blob_ms", summarize(memset_ms), "ms", "info", true);
    std::printf("(%d runs; download_prefill_node = headers -> last byte; the node's serialize before the headers: %.2f ms median;\n"
                " in-process blob_parse of the valid blob %.2f ms, of the bad-magic upload %.1f us)\n",
                runs, ss.median, spv.median, spr.median);
    // Headline: the gated transfer furthest below its target (relative), named.
    struct gate {
        int t;
        double target;
    };
    const gate gates[] = {{T_UP, 0.8}, {T_DOWN, 0.8}, {T_RELAY_FIFO, 0.6}};
    int worst = 0;
    bool all_ok = true;
    for (int i = 0; i < 3; ++i) {
        const double v = summarize(ratio[gates[i].t]).median / gates[i].target;
        all_ok = all_ok && v >= 1.0;
        if (v < summarize(ratio[gates[worst].t]).median / gates[worst].target) worst = i;
    }
    headline(8, std::string("edge_worst_vs_raw_tcp (") + names[gates[worst].t] + ")", summarize(ratio[gates[worst].t]), "x",
             "upload, download >= 0.8x; relay >= 0.6x", all_ok);
    return 0;
} catch (const std::exception & e) {
    std::fprintf(stderr, "edge_bench: %s\n", e.what());
    return 1;
}
