// serve_bench.cpp — `baton serve` vs llama-server on the same GGUF, threads, context, slots and batch sizes
// (flash attention off on both — `-fa off` to each, whose default is on — unified KV on both): prompt processing and generation tok/s with 1 and 4
// concurrent streams, runs interleaved between the two servers, median of N runs with min/max; each ratio
// is the median of the per-run ratios (run i of Baton against run i of llama-server, back to back).
//
// Figures per server and concurrency c (c streams started together, distinct random token prompts so
// neither server's prompt cache helps, ignore_eos so every stream generates exactly --gen tokens):
//   pp tok/s = c * prompt_tokens / (time until the last stream's first token)
//   tg tok/s = c * (gen - 1) / (time from the last first token to the last stream's end)
//   chat ms  = median time of one short chat request (system + user message through each server's Jinja
//              chat template, one generated token); its ratio is llama-server's time over Baton's
// Target: Baton >= 0.97x llama-server on every figure.
//
// Usage: serve_bench [--quick] [--model GGUF] [--baton PATH] [--llama-server PATH] [-t N] [-c N] [-np N]
//                    [--runs N] [--prompt N] [--gen N]
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <map>
#include <random>
#include <thread>

#include "bench_net.h"
#include "bench_util.h"

using namespace baton;
using namespace baton::bench;
using json = nlohmann::json;

namespace {

struct options {
    std::string model, baton_bin, llama_bin = "/usr/bin/llama-server";
    int threads = 2, ctx = 4096, slots = 4, runs = 5, prompt = 256, gen = 64;
};

// start runs a server (Baton or llama-server) on a port picked beforehand and waits for /health.
std::unique_ptr<bench_process> start(const std::string & name, std::vector<std::string> argv, int port) {
    return bench_process::start(std::move(argv), name, 60, "http://127.0.0.1:" + std::to_string(port));
}

struct figures {
    double pp = 0, tg = 0;
};

figures measure(int port, int conc, const options & o, unsigned seed) {
    std::vector<std::vector<int>> prompts(static_cast<size_t>(conc));
    std::mt19937 rng(seed);
    for (auto & p : prompts) {
        p.push_back(1);  // BOS
        while (int(p.size()) < o.prompt) p.push_back(5 + int(rng() % 400));
    }
    std::vector<stream_timing> t(static_cast<size_t>(conc));
    const double t0 = now_ms();
    std::vector<std::thread> th;
    const json no_cache = {{"cache_prompt", false}};  // llama-server's prompt cache off (Baton ignores the field)
    for (int i = 0; i < conc; ++i)
        th.emplace_back([&, i] { t[size_t(i)] = stream_completion("127.0.0.1", port, prompts[size_t(i)], o.gen, 600, no_cache); });
    for (auto & x : th) x.join();
    double first = 0, end = 0;
    for (const auto & x : t) {
        if (!x.ok || x.completion_tokens != o.gen) {
            std::fprintf(stderr, "serve_bench: a request to port %d failed: %s\n", port, x.ok ? "short completion" : x.error.c_str());
            std::exit(1);
        }
        first = std::max(first, x.t_send + x.ttft_ms);
        end = std::max(end, x.t_send + x.total_ms);
    }
    figures f;
    f.pp = conc * o.prompt / ((first - t0) / 1000.0);
    f.tg = conc * (o.gen - 1) / ((end - first) / 1000.0);
    return f;
}

// measure_chat: the median milliseconds of one short chat request (a system and a user message through
// the server's Jinja chat template, one generated token), n requests one after another with distinct user
// messages: the per-request cost of rendering, tokenizing and prefilling a chat (the shared system turn
// comes from each server's prompt cache).
double measure_chat(int port, int n, unsigned seed) {
    httplib::Client cl("127.0.0.1", port);
    cl.set_read_timeout(std::chrono::seconds(120));
    std::vector<double> ms;
    for (int i = 0; i < n; ++i) {
        const json body = {
            {"messages",
             {{{"role", "system"}, {"content", "You are a concise assistant. Answer in one word."}},
              {{"role", "user"},
               {"content", "Question " + std::to_string(seed * 1000 + unsigned(i)) + ": name a colour."}}}},
            {"max_tokens", 1},
            {"temperature", 0}};  // both servers' prompt caches on (their defaults): the system turn is reused
        const double t0 = now_ms();
        auto r = cl.Post("/v1/chat/completions", body.dump(), "application/json");
        if (!r || r->status != 200) {
            std::fprintf(stderr, "serve_bench: a chat request to port %d failed: %s\n", port,
                         r ? r->body.c_str() : "no response");
            std::exit(1);
        }
        ms.push_back(now_ms() - t0);
    }
    return summarize(ms).median;
}

std::string exe_dir() {
    char buf[4096];
    const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    std::string p(buf, n > 0 ? size_t(n) : 0);
    return p.substr(0, p.find_last_of('/'));
}

}  // namespace

int main(int argc, char ** argv) {
    options o;
    o.baton_bin = exe_dir() + "/../apps/baton";
    const bool quick = quick_mode(argc, argv);
    if (quick) o.runs = 2, o.prompt = 128, o.gen = 32;
    for (int i = 1; i + 1 < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&] { return std::string(argv[++i]); };
        if (a == "--model") o.model = next();
        else if (a == "--baton") o.baton_bin = next();
        else if (a == "--llama-server") o.llama_bin = next();
        else if (a == "-t") o.threads = std::stoi(next());
        else if (a == "-c") o.ctx = std::stoi(next());
        else if (a == "-np") o.slots = std::stoi(next());
        else if (a == "--runs") o.runs = std::stoi(next());
        else if (a == "--prompt") o.prompt = std::stoi(next());
        else if (a == "--gen") o.gen = std::stoi(next());
    }
    if (o.model.empty()) o.model = bench_model("llama", 512, 8);
    const std::string t = std::to_string(o.threads), c = std::to_string(o.ctx), np = std::to_string(o.slots);
    const int bp = free_port();
    auto baton_srv = start("baton",
                           {o.baton_bin,
                            "serve",
                            "-m",
                            o.model,
                            "-t",
                            t,
                            "-c",
                            c,
                            "-np",
                            np,
                            "-b",
                            "512",
                            "-ub",
                            "512",
                            "-fa",
                            "off",
                            "--kv-unified",
                            "--host",
                            "127.0.0.1",
                            "--port",
                            std::to_string(bp)},
                           bp);
    const int lp = free_port();
    auto llama_srv = start("llama-server", {o.llama_bin, "-m", o.model, "-t", t, "-tb", t, "-c", c, "-np", np, "-b", "512",
                                            "-ub", "512", "-fa", "off", "-kvu", "--no-webui", "--host", "127.0.0.1",
                                            "--port", std::to_string(lp)}, lp);
    std::printf("serve_bench: %s, -t %d -c %d -np %d, prompt %d, gen %d, %d runs\n", o.model.c_str(), o.threads, o.ctx,
                o.slots, o.prompt, o.gen, o.runs);
    // Warm-up both (first-use allocations, page cache).
    measure(bp, 1, o, 999);
    measure(lp, 1, o, 999);
    struct series { std::vector<double> pp, tg; };
    std::map<std::pair<std::string, int>, series> all;
    for (int run = 0; run < o.runs; ++run)
        for (int conc : {1, 4})
            for (const auto & [sname, s] : {std::pair{"baton", baton_srv.get()}, std::pair{"llama-server", llama_srv.get()}}) {
                const figures f = measure(s->port(), conc, o, unsigned(run * 10 + conc));  // same prompts for both
                all[{sname, conc}].pp.push_back(f.pp);
                all[{sname, conc}].tg.push_back(f.tg);
            }
    // Chat requests through the Jinja template on both (llama-server's --jinja is its default too).
    std::vector<double> chat_b, chat_l, chat_r;
    for (int run = 0; run < o.runs; ++run) {
        chat_b.push_back(measure_chat(bp, quick ? 5 : 20, unsigned(run)));
        chat_l.push_back(measure_chat(lp, quick ? 5 : 20, unsigned(run)));
        chat_r.push_back(chat_l.back() / chat_b.back());  // > 1: Baton answers a chat faster
    }
    std::printf("\n%-10s %-3s %28s %28s %7s\n", "figure", "c", "baton median [min, max]", "llama-server median [min, max]", "ratio");
    bool all_ok = true;
    for (int conc : {1, 4})
        for (const char * what : {"pp", "tg"}) {
            const bool pp = std::string(what) == "pp";
            const stats b = summarize(pp ? all[{"baton", conc}].pp : all[{"baton", conc}].tg);
            const stats l = summarize(pp ? all[{"llama-server", conc}].pp : all[{"llama-server", conc}].tg);
            // Pair by pair: run i of Baton against run i of llama-server (measured back to back).
            const auto & bs = pp ? all[{"baton", conc}].pp : all[{"baton", conc}].tg;
            const auto & ls = pp ? all[{"llama-server", conc}].pp : all[{"llama-server", conc}].tg;
            std::vector<double> pairs;
            for (size_t i = 0; i < bs.size() && i < ls.size(); ++i) pairs.push_back(bs[i] / ls[i]);
            const stats r = summarize(pairs);
            const double ratio = r.median;
            const bool ok = ratio >= 0.97;
            all_ok = all_ok && ok;
            std::printf("%-10s %-3d %10.1f [%7.1f, %7.1f] %10.1f [%7.1f, %7.1f] %6.3fx %s\n", pp ? "pp tok/s" : "tg tok/s", conc,
                        b.median, b.min, b.max, l.median, l.min, l.max, ratio, ok ? "ok" : "BELOW 0.97x");
            const std::string name = std::string("serve_") + what + "_c" + std::to_string(conc);
            result(name + "_baton", b, "tok/s", "-", true);
            result(name + "_llama_server", l, "tok/s", "-", true);
            result(name + "_ratio", r, "x", ">= 0.97", ok);
        }
    {
        const stats b = summarize(chat_b), l = summarize(chat_l), r = summarize(chat_r);
        const bool ok = r.median >= 0.97;
        all_ok = all_ok && ok;
        std::printf("%-10s %-3d %10.2f [%7.2f, %7.2f] %10.2f [%7.2f, %7.2f] %6.3fx %s\n", "chat ms", 1, b.median, b.min,
                    b.max, l.median, l.min, l.max, r.median, ok ? "ok" : "BELOW 0.97x");
        result("serve_chat_ms_baton", b, "ms", "-", true);
        result("serve_chat_ms_llama_server", l, "ms", "-", true);
        result("serve_chat_speed_ratio", r, "x", ">= 0.97", ok);
    }
    return all_ok ? 0 : 3;
}
