// bench_net.h — process and HTTP helpers for the benchmarks that drive real `baton serve` / `baton route`
// processes over loopback: a child process on an ephemeral port (optionally pinned with taskset), a
// streaming OpenAI client that timestamps every SSE chunk, prompts as exact token arrays, percentiles.
//
// Processes: bench_process::start runs argv with "--port 0" through child_process (include/baton/cli/child_process.h:
// the listening line read with a deadline), polls /health until 200; the destructor SIGKILLs and reaps the
// child, so a failing benchmark never leaks processes. All traffic stays on 127.0.0.1.
// Thread-safety: stream_completion may run on many threads at once (one client per call).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <httplib.h>
#include <llama.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "baton/cli/child_process.h"
#include "baton/model.h"
#include "bench_util.h"

namespace baton::bench {

// baton_exe is the `baton` executable: $BATON_BIN, else <BATON_BUILD or build>/apps/baton.
inline std::string baton_exe() {
    if (const char * b = std::getenv("BATON_BIN"); b && *b) return b;
    const char * d = std::getenv("BATON_BUILD");
    return std::string(d && *d ? d : "build") + "/apps/baton";
}

class bench_process {
  public:
    // start runs argv (argv[0] a path, or a program such as "taskset" looked up in PATH) plus "--port 0"
    // through child_process (the project's one process helper) and waits until /health answers 200.
    // Throws std::runtime_error with the child's stderr on failure. known_url: for a server that does not
    // print its address (llama-server), where it was told to listen (no "--port 0" is added).
    static std::unique_ptr<bench_process> start(std::vector<std::string> argv, const std::string & name, double timeout_s = 120,
                                                const std::string & known_url = "") {
        std::unique_ptr<bench_process> p(new bench_process());
        p->name_ = name;
        char tmpl[] = "/tmp/baton-bench-XXXXXX";
        const int efd = ::mkstemp(tmpl);
        if (efd < 0) throw std::runtime_error("mkstemp");
        ::close(efd);
        p->err_path_ = tmpl;
        child_options o;
        o.argv = std::move(argv);
        o.stderr_path = p->err_path_;
        o.timeout_s = timeout_s;
        o.known_url = known_url;
        auto c = child_process::spawn(o);
        if (!c.ok()) throw std::runtime_error(name + ": " + c.status().message() + "; stderr: " + p->stderr_tail());
        p->proc_ = std::move(c.value());
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
        for (;;) {
            httplib::Client hc(p->host(), p->port());
            hc.set_connection_timeout(std::chrono::seconds(5));
            hc.set_read_timeout(std::chrono::seconds(5));
            auto r = hc.Get("/health");
            if (r && r->status == 200) break;
            if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error(name + ": never healthy");
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return p;
    }

    ~bench_process() {
        if (proc_) proc_->kill();
        if (!err_path_.empty()) ::unlink(err_path_.c_str());
    }
    bench_process(const bench_process &) = delete;
    bench_process & operator=(const bench_process &) = delete;

    const std::string & host() const { return proc_->host(); }
    int port() const { return proc_->port(); }
    std::string url() const { return proc_->url(); }
    const std::string & name() const { return name_; }
    pid_t pid() const { return proc_->pid(); }  // the child's pid (taskset execs the program in place)
    // stop: SIGTERM, up to grace_s for the child to exit on its own (then SIGKILL); its exit code, -1 when it
    // died of a signal or had to be killed (child_process::stop). The process is gone afterwards.
    int stop(double grace_s) { return proc_->stop(grace_s); }

    std::string stderr_tail() const {
        FILE * f = std::fopen(err_path_.c_str(), "r");
        if (!f) return "";
        std::string s;
        char buf[4096];
        size_t n;
        while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
        std::fclose(f);
        return s.size() > 2000 ? s.substr(s.size() - 2000) : s;
    }

  private:
    bench_process() = default;
    std::unique_ptr<child_process> proc_;
    std::string name_, err_path_;
};

// free_port: a loopback port free right now (for servers that cannot take --port 0, such as llama-server).
inline int free_port() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a);
    socklen_t n = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr *>(&a), &n);
    ::close(fd);
    return ntohs(a.sin_port);
}

// node_args: `baton serve` arguments. cpus: taskset CPU list ("" = unpinned).
inline std::vector<std::string> node_args(const std::string & model, const std::string & role, int threads, int slots, int n_ctx,
                                          const std::string & cpus = "") {
    std::vector<std::string> a;
    if (!cpus.empty()) a = {"taskset", "-c", cpus};
    std::vector<std::string> s = {baton_exe(), "serve", "-m", model, "--role", role, "-t", std::to_string(threads), "-np",
                                  std::to_string(slots), "-c", std::to_string(n_ctx), "--queue-max", "256"};
    a.insert(a.end(), s.begin(), s.end());
    return a;
}

inline std::vector<std::string> route_args(const std::string & prefill_url, const std::string & decode_url, const std::string & model) {
    return {baton_exe(), "route", "--prefill", prefill_url, "--decode", decode_url, "-m", model, "--fallback", "fail"};
}

// random_prompt: BOS then n-1 ids drawn from the model's ordinary tokens (ids >= 5), seeded.
inline std::vector<int> random_prompt(size_t n, uint32_t seed, int n_vocab) {
    std::mt19937 rng{seed};
    std::vector<int> p = {1};
    while (p.size() < n) p.push_back(int(5 + rng() % uint32_t(n_vocab - 5)));
    return p;
}

// One streamed completion, timed on the client.
struct stream_timing {
    bool ok = false;
    std::string error;
    double t_send = 0;              // ms (now_ms clock)
    double ttft_ms = 0;             // send -> first SSE data chunk
    double total_ms = 0;            // send -> [DONE]
    int completion_tokens = 0;      // from the usage chunk
    int cached_tokens = -1;         // usage.prompt_tokens_details.cached_tokens, -1 when absent
    std::vector<double> chunk_ms;   // arrival of every token-bearing chunk, relative to t_send
    std::string text;               // the choice's text, the chunks' "text" fields joined
    // tpot_ms: (last token chunk - first chunk) / (completion_tokens - 1); 0 when fewer than 2 tokens.
    double tpot_ms() const {
        if (completion_tokens < 2 || chunk_ms.size() < 2) return 0;
        return (chunk_ms.back() - chunk_ms.front()) / double(completion_tokens - 1);
    }
};

// stream_completion POSTs a streaming /v1/completions with a token-array prompt to base (host, port) and
// times it. Temperature 0, ignore_eos, include_usage; `extra` fields are added to the body (e.g.
// llama-server's "cache_prompt"). Works against Baton and llama-server alike.
inline stream_timing stream_completion(const std::string & host, int port, const std::vector<int> & prompt, int max_tokens,
                                       double timeout_s = 300, const nlohmann::json & extra = nlohmann::json::object()) {
    stream_timing t;
    nlohmann::json body = {{"prompt", prompt},   {"max_tokens", max_tokens},  {"temperature", 0},
                           {"stream", true},     {"ignore_eos", true},        {"stream_options", {{"include_usage", true}}}};
    body.update(extra);
    httplib::Client c(host, port);
    const auto to = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::duration<double>(timeout_s));
    c.set_connection_timeout(std::chrono::seconds(10));
    c.set_read_timeout(to);
    c.set_write_timeout(to);
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = body.dump();
    req.set_header("Content-Type", "application/json");
    int status = 0;
    std::string buf;
    bool first = true;
    req.response_handler = [&](const httplib::Response & r) {
        status = r.status;
        return true;
    };
    req.content_receiver = [&](const char * data, size_t n, uint64_t, uint64_t) {
        const double at = now_ms() - t.t_send;
        if (first) {
            t.ttft_ms = at;
            first = false;
        }
        buf.append(data, n);
        // Each SSE event is one chunk from the node; token chunks are the ones with "finish_reason":null.
        if (std::string_view(data, n).find("\"finish_reason\":null") != std::string_view::npos) t.chunk_ms.push_back(at);
        return true;
    };
    t.t_send = now_ms();
    auto res = c.send(req);
    t.total_ms = now_ms() - t.t_send;
    if (!res) {
        t.error = "transport: " + httplib::to_string(res.error());
        return t;
    }
    if (status != 200) {
        t.error = "HTTP " + std::to_string(status) + ": " + buf.substr(0, 300);
        return t;
    }
    if (buf.find("data: [DONE]") == std::string::npos || buf.find("\"error\"") != std::string::npos) {
        t.error = "stream did not end with [DONE]: " + buf.substr(buf.size() > 300 ? buf.size() - 300 : 0);
        return t;
    }
    const size_t u = buf.rfind("\"completion_tokens\":");
    if (u != std::string::npos) t.completion_tokens = std::atoi(buf.c_str() + u + 20);
    const size_t c_at = buf.rfind("\"cached_tokens\":");
    if (c_at != std::string::npos) t.cached_tokens = std::atoi(buf.c_str() + c_at + 16);
    t.ok = t.completion_tokens > 0;
    if (!t.ok) t.error = "no usage chunk";
    for (size_t at = 0; (at = buf.find("data: {", at)) != std::string::npos;) {
        const size_t end = buf.find('\n', at);
        const auto j =
            nlohmann::json::parse(buf.substr(at + 6, end == std::string::npos ? end : end - at - 6), nullptr, false);
        if (j.is_object() && j.contains("choices") && j["choices"].is_array() && !j["choices"].empty() &&
            j["choices"][0].is_object() && j["choices"][0].contains("text") && j["choices"][0]["text"].is_string())
            t.text += j["choices"][0]["text"].get<std::string>();
        at = end == std::string::npos ? buf.size() : end;
    }
    return t;
}

// percentile of v (nearest rank, p in [0, 100]); 0 for an empty vector.
inline double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t k = size_t(std::ceil(p / 100.0 * double(v.size())));
    return v[std::min(v.size() - 1, k == 0 ? 0 : k - 1)];
}

// result_value prints a RESULT line for a single measured value (no distribution).
inline void result_value(const std::string & name, double value, const std::string & unit, const std::string & target_text, bool ok,
                         double vmin, double vmax, size_t n) {
    stats s;
    s.median = value;
    s.min = vmin;
    s.max = vmax;
    s.n = n;
    result(name, s, unit, target_text, ok);
}

// model_n_vocab: the vocabulary size of a GGUF (loads the vocabulary only).
inline int model_n_vocab(const std::string & path) {
    llama_quiet_logs();
    llama_backend_once();
    llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    llama_model * m = llama_model_load_from_file(path.c_str(), mp);
    if (!m) throw std::runtime_error("cannot load " + path);
    const int n = llama_vocab_n_tokens(llama_model_get_vocab(m));
    llama_model_free(m);
    return n;
}

// metric_sum: the sum of the samples of Prometheus metric `name` in text whose labels contain `label` (every
// sample when label is empty); -1 when none matched.
inline double metric_sum(const std::string & text, const std::string & name, const std::string & label = "") {
    double sum = 0;
    bool any = false;
    size_t at = 0;
    while (at < text.size()) {
        size_t end = text.find('\n', at);
        if (end == std::string::npos) end = text.size();
        const std::string_view line(text.data() + at, end - at);
        at = end + 1;
        if (line.substr(0, name.size()) != name || line.size() <= name.size() ||
            (line[name.size()] != '{' && line[name.size()] != ' '))
            continue;
        const size_t sp = line.rfind(' ');
        if (line.substr(0, sp).find(label) == std::string_view::npos) continue;
        sum += std::atof(std::string(line.substr(sp + 1)).c_str());
        any = true;
    }
    return any ? sum : -1;
}

// process_metric: GET /metrics of p and metric_sum of one metric (labels containing `label`); 0 when absent.
// Throws when /metrics does not answer.
inline double process_metric(const std::string & host, int port, const std::string & name,
                             const std::string & label = "") {
    httplib::Client c(host, port);
    c.set_connection_timeout(std::chrono::seconds(5));
    c.set_read_timeout(std::chrono::seconds(10));
    auto r = c.Get("/metrics");
    if (!r || r->status != 200)
        throw std::runtime_error("GET /metrics of " + host + ":" + std::to_string(port) + " failed");
    return std::max(0.0, metric_sum(r->body, name, label));
}

// process_metric: one sample of p's /metrics, named as Prometheus prints it ("name" or "name{labels}"; labels
// matched as a substring); 0 when absent.
inline double process_metric(const bench_process & p, const std::string & sample) {
    const size_t brace = sample.find('{');
    if (brace == std::string::npos) return process_metric(p.host(), p.port(), sample);
    return process_metric(p.host(), p.port(), sample.substr(0, brace),
                          sample.substr(brace + 1, sample.size() - brace - 2));
}

}  // namespace baton::bench
