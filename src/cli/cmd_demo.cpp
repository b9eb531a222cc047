// cmd_demo.cpp — `baton demo`: the README's main job. Starts a prefill node, a decode node and a router on
// loopback, streams a chat answer through the router (prefill -> blob -> decode), prints time to first
// token, tokens/s, blob size and transfer time, then stops everything it started (also on Ctrl-C).
#include <CLI/CLI.hpp>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "baton/cli/child_process.h"
#include "baton/pd/pd_protocol.h"
#include "baton/testmodel/mkmodel.h"
#include "cli.h"

namespace baton {

namespace {

using json = nlohmann::json;
using steady = std::chrono::steady_clock;

struct demo_options {
    std::string model, prompt = "Explain in one paragraph why prefill and decode run on different nodes.";
    int32_t n_predict = 64;
    double timeout_s = 120;
};

// One metric sample from Prometheus text; 0 when absent.
double metric(const std::string & text, const std::string & name) {
    const size_t at = text.find("\n" + name + " ");
    return at == std::string::npos ? 0 : std::atof(text.c_str() + at + name.size() + 2);
}

// The stream's text pieces from SSE chunks (choices[0].delta.content).
struct sse_reader {
    std::string pending;
    int pieces = 0;
    int64_t completion_tokens = -1;  // from the usage chunk
    bool error = false;
    void feed(const char * data, size_t n) {
        pending.append(data, n);
        size_t end;
        while ((end = pending.find("\n\n")) != std::string::npos) {
            const std::string ev = pending.substr(0, end);
            pending.erase(0, end + 2);
            if (ev.rfind("data: ", 0) != 0 || ev == "data: [DONE]") continue;
            const json j = json::parse(ev.substr(6), nullptr, false);
            if (j.is_discarded()) continue;
            if (j.contains("error")) {
                error = true;
                std::fputc('\n', stdout);  // the answer's line ends here; the reason is a log line
                std::fflush(stdout);
                log_error("demo: stream error: {}", j["error"].dump());
                continue;
            }
            if (j.contains("usage") && j["usage"].is_object()) completion_tokens = j["usage"].value("completion_tokens", int64_t(-1));
            if (!j.contains("choices") || j["choices"].empty()) continue;
            const json & d = j["choices"][0]["delta"];
            if (d.contains("content") && d["content"].is_string()) {
                const std::string s = d["content"].get<std::string>();
                std::fwrite(s.data(), 1, s.size(), stdout);
                std::fflush(stdout);
                ++pieces;
            }
        }
    }
};

int run_demo(demo_options o) {
    sigset_t set = cli_block_stop_signals();
    // On Ctrl-C the watcher stops the demo's own children (and nothing else) and aborts the request;
    // main then returns and the child_process destructors reap them.
    static std::atomic<bool> interrupted{false};
    static std::atomic<pid_t> children[3] = {0, 0, 0};
    static std::atomic<httplib::Client *> active_client{nullptr};
    std::thread([set]() mutable {
        int sig = 0;
        sigwait(&set, &sig);
        interrupted = true;
        std::fputc('\n', stdout);
        std::fflush(stdout);
        log_warn("demo: interrupted, stopping everything it started");
        for (auto & c : children)
            if (pid_t p = c.load(); p > 0) ::kill(p, SIGTERM);
        if (httplib::Client * c = active_client.load()) c->stop();
    }).detach();

    char dir_tmpl[] = "/tmp/baton-demo-XXXXXX";
    const std::string dir = ::mkdtemp(dir_tmpl) ? dir_tmpl : "/tmp";
    if (o.model.empty()) {
        o.model = dir + "/demo-llama.gguf";
        mkmodel_params p;
        p.arch = "llama";
        p.n_embd = 256;
        p.n_layer = 4;
        log_info("demo: no -m given, generating a demo model (llama 256x4, random weights)");
        Status st = mkmodel_write(p, o.model);
        if (!st.ok()) return cli_fail(k_exit_failure, st.message());
    }
    // The children log as the demo was told to (into their files in dir).
    const cli_log_flags & lf = cli_log_settings();
    const std::vector<std::string> log_args = {"--log-level", log_level_name(lf.level), "--log-format",
                                               log_format_name(lf.format)};
    auto with_log = [&](std::vector<std::string> args) {
        args.insert(args.end(), log_args.begin(), log_args.end());
        return args;
    };
    auto prefill =
        child_process::start(with_log({"serve", "-m", o.model, "--role", "prefill", "-np", "1"}), dir + "/prefill.log");
    if (!prefill.ok()) return cli_fail(k_exit_failure, "prefill node: " + prefill.status().message());
    children[0] = prefill.value()->pid();
    auto decode =
        child_process::start(with_log({"serve", "-m", o.model, "--role", "decode", "-np", "1"}), dir + "/decode.log");
    if (!decode.ok()) return cli_fail(k_exit_failure, "decode node: " + decode.status().message());
    children[1] = decode.value()->pid();
    auto router = child_process::start(with_log({"route", "--prefill", prefill.value()->url(), "--decode",
                                                 decode.value()->url(), "--pd-min-tokens", "1", "-m", o.model}),
                                       dir + "/router.log");
    if (!router.ok()) return cli_fail(k_exit_failure, "router: " + router.status().message());
    children[2] = router.value()->pid();
    std::printf("prefill node  %s\ndecode node   %s\nrouter        %s   (logs in %s)\n\n", prefill.value()->url().c_str(),
                decode.value()->url().c_str(), router.value()->url().c_str(), dir.c_str());
    std::printf("user> %s\nassistant> ", o.prompt.c_str());
    std::fflush(stdout);

    httplib::Client client(router.value()->url());
    client.set_read_timeout(std::chrono::duration<double>(o.timeout_s));
    active_client = &client;
    struct unregister {
        ~unregister() { active_client = nullptr; }
    } unregister_client;
    // One tiny warm-up request first, so one-time costs (first graph allocation) stay out of the figures.
    client.Post("/v1/completions", json({{"prompt", "warm up"}, {"max_tokens", 1}}).dump(), "application/json");
    const json body = {{"messages", json::array({{{"role", "user"}, {"content", o.prompt}}})},
                       {"max_tokens", o.n_predict}, {"temperature", 0.7}, {"seed", 42}, {"stream", true},
                       {"stream_options", {{"include_usage", true}}}};
    sse_reader reader;
    steady::time_point t0 = steady::now(), t_first{}, t_end{};
    std::string route;
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/chat/completions";
    req.body = body.dump();
    req.set_header("Content-Type", "application/json");
    req.response_handler = [&](const httplib::Response & r) {
        route = r.get_header_value(std::string(pd_header_route));
        return r.status == 200;
    };
    req.content_receiver = [&](const char * d, size_t n, uint64_t, uint64_t) {
        if (t_first == steady::time_point{}) t_first = steady::now();
        reader.feed(d, n);
        return !interrupted.load();
    };
    auto res = client.send(req);
    t_end = steady::now();
    std::printf("\n\n");
    if (interrupted) return k_exit_failure;
    if (!res) return cli_fail(k_exit_failure, "request failed: " + httplib::to_string(res.error()));
    if (res->status != 200) return cli_fail(k_exit_failure, "router answered " + std::to_string(res->status) + ": " + res->body);
    // The state went from the prefill node to the decode node directly (the router moved none of it): its
    // size and fetch time are the decode node's figures.
    httplib::Client dclient(decode.value()->url());
    dclient.set_read_timeout(10, 0);
    auto m = dclient.Get("/metrics");
    const std::string mt = m ? m->body : "";
    const double ttft_ms = std::chrono::duration<double, std::milli>(t_first - t0).count();
    const double gen_s = std::chrono::duration<double>(t_end - t_first).count();
    const int64_t n_tok = reader.completion_tokens > 0 ? reader.completion_tokens : reader.pieces;
    std::printf("route %s | time to first token %.1f ms | %lld tokens in %.2f s (%.1f tok/s after the first) | "
                "state %.2f MiB, fetched by the decode node from the prefill node in %.2f ms\n(after one warm-up "
                "request; the state and fetch figures cover both)\n",
                route.c_str(), ttft_ms, (long long)n_tok, gen_s, gen_s > 0 ? double(n_tok - 1) / gen_s : 0.0,
                metric(mt, "baton_state_fetch_bytes_total") / (1 << 20),
                1000 * metric(mt, "baton_state_fetch_seconds_total"));
    return reader.error ? k_exit_failure : k_exit_ok;
}

}  // namespace

void cli_add_demo(CLI::App & app, cli_run_fn & run) {
    auto o = std::make_shared<demo_options>();
    CLI::App * sub = app.add_subcommand("demo", "Run a prefill node, a decode node and a router on loopback and stream a chat answer through them");
    sub->add_option("-m,--model", o->model, "GGUF model (default: generate a demo model)");
    sub->add_option("-p,--prompt", o->prompt, "User message")->capture_default_str();
    sub->add_option("-n,--n-predict", o->n_predict, "Tokens to generate at most")->capture_default_str();
    sub->callback([&run, o] { run = [o] { return run_demo(*o); }; });
}

}  // namespace baton
