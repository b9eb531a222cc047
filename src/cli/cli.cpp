// cli.cpp — top-level argument parsing and dispatch.
#include "cli.h"

#include <CLI/CLI.hpp>

#include <cstdlib>

#include <cstdio>
#include <vector>

#include "baton/build_info.h"
#include "baton/http/http_server.h"
#include "baton/model.h"
#include "baton/sampling.h"

namespace baton {

std::string cli_version_string() {
    std::string s = std::string("baton ") + BATON_VERSION_STRING + " (libllama " + libllama_version();
    if (std::string(BATON_LLAMA_BUILD_NUMBER).size() > 0) s += ", build b" BATON_LLAMA_BUILD_NUMBER;
    return s + ")";
}

sigset_t cli_block_stop_signals() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    signal(SIGPIPE, SIG_IGN);
    return set;
}

void cli_add_etcd_flags(CLI::App & sub, cli_etcd_flags & f, std::string & cluster, const std::string & etcd_help) {
    sub.add_option("--etcd", f.urls,
                   etcd_help + ": URL[,URL...] of etcd's client endpoints, http:// or https:// (docs/cluster.md)");
    sub.add_option("--cluster", cluster, "With --etcd: the cluster's name (keys under /baton/NAME/)")
        ->capture_default_str();
    sub.add_option("--etcd-user", f.user, "With --etcd: authenticate to etcd as this user");
    sub.add_option("--etcd-password", f.password, "With --etcd-user: its password (or set BATON_ETCD_PASSWORD)");
    sub.add_option("--etcd-cacert", f.tls.ca_file, "With https:// --etcd: the CA that signs etcd's certificate (PEM)");
    sub.add_option("--etcd-cert", f.tls.cert_file, "With https:// --etcd: a client certificate for etcd (PEM)");
    sub.add_option("--etcd-key", f.tls.key_file, "With --etcd-cert: its private key (PEM)");
}

Result<std::optional<etcd_config>> cli_etcd_config(const cli_etcd_flags & f) {
    if (f.urls.empty()) {
        if (!f.user.empty() || !f.tls.ca_file.empty() || !f.tls.cert_file.empty())
            return Status(status_code::invalid_argument, "--etcd-user/--etcd-cacert/--etcd-cert: need --etcd");
        return std::optional<etcd_config>();
    }
    std::string password = f.password;
    if (password.empty())
        if (const char * p = std::getenv("BATON_ETCD_PASSWORD"); p && *p) password = p;
    auto c = etcd_config_parse(f.urls, f.user, password, f.tls);
    if (!c.ok()) return c.status();
    return std::optional<etcd_config>(std::move(c.value()));
}

std::string cli_static_dir(const cli_static_flags & f) {
    if (!f.path.empty()) return f.path;
    return f.webui ? cli_webui_dir : "";
}

void cli_add_http_flags(CLI::App & sub, http_limits & l, uint32_t & threads, http_cors & cors,
                        cli_static_flags & statics) {
    sub.add_option("--path", statics.path,
                   "Directory of static files served at the paths no endpoint takes, without the API key (as "
                   "llama-server's --path; default: the web UI of llama.cpp-tools when installed)");
    sub.add_flag("--webui,--ui,!--no-webui,!--no-ui", statics.webui,
                 std::string("Serve llama.cpp-tools' web UI (") + cli_webui_dir +
                     ") at / when no --path is given (default on)");
    sub.add_option("--header-timeout", l.header_timeout_s,
                   "Seconds a client has to send a request's line and headers, in total (a client trickling bytes does not extend it)")
        ->capture_default_str();
    sub.add_option("--idle-timeout", l.idle_timeout_s, "Seconds a keep-alive connection may stay idle between requests")->capture_default_str();
    sub.add_option("--body-timeout", l.body_timeout_s, "Seconds a client has to send a request's body, in total")->capture_default_str();
    sub.add_option("--write-timeout", l.write_timeout_s,
                   "Seconds a write to a client may take (an event, or a 256-KiB slice of a larger body): a client "
                   "that stops reading a response or stream is dropped and its request cancelled")
        ->capture_default_str();
    sub.add_option("--max-header-bytes", l.max_header_bytes, "Largest request line + headers, bytes (larger: 431 and close)")->capture_default_str();
    sub.add_option("--max-headers", l.max_headers, "Most header fields in a request (more: 431 and close)")->capture_default_str();
    sub.add_option("--max-connections", l.max_connections, "Most open client connections; beyond: an immediate 503 and close")->capture_default_str();
    sub.add_option_function<double>(
           "--max-body-memory",
           [&l](double mib) {
               if (!(mib >= 1 && mib <= 1048576))
                   throw CLI::ValidationError("--max-body-memory: must be in 1..1048576 MiB");
               l.max_body_memory = uint64_t(mib * 1024 * 1024);
           },
           "Memory committed to incoming request bodies across all connections, MiB (bodies grow as bytes arrive; "
           "a larger announced body: 413; a body that would pass it: 503 + Retry-After)")
        ->default_str(std::to_string(l.max_body_memory >> 20));
    sub.add_option("--http-threads,--threads-http", threads,
                   "Event-loop threads of the HTTP edge (connections and streams hold none)")
        ->capture_default_str();
    sub.add_option_function<std::string>(
           "--cors-origins",
           [&cors](const std::string & v) {
               auto o = http_cors_parse_origins(v);
               if (!o.ok()) throw CLI::ValidationError(o.status().message());
               cors.origins = std::move(o.value());
           },
           "Comma-separated origins browsers may call from (*: any, reflected; localhost: only localhost origins)")
        ->default_str("*");
    sub.add_option("--cors-methods", cors.methods, "Methods a CORS preflight allows")->capture_default_str();
    sub.add_option("--cors-headers", cors.headers, "Request headers a CORS preflight allows")->capture_default_str();
    sub.add_flag("--cors-credentials,!--no-cors-credentials", cors.credentials,
                 "Allow credentials on cross-origin requests (default on, as llama-server)");
}

void cli_add_sampling_flags(CLI::App & sub, sampling_params & p) {
    sub.add_option("--temp,--temperature", p.temperature, "Temperature (0: greedy)")->capture_default_str();
    sub.add_option("--top-k", p.top_k, "Top-k sampling (0: off)")->capture_default_str();
    sub.add_option("--top-p", p.top_p, "Top-p sampling (1: off)")->capture_default_str();
    sub.add_option("--min-p", p.min_p, "Min-p sampling (0: off)")->capture_default_str();
    sub.add_option("--repeat-penalty", p.repeat_penalty, "Penalty for repeated tokens (1: off)")->capture_default_str();
    sub.add_option("--repeat-last-n", p.repeat_last_n, "Tokens the repeat penalties look back at (0: off)")
        ->capture_default_str();
    sub.add_option("--presence-penalty", p.presence_penalty, "Presence penalty (0: off)")->capture_default_str();
    sub.add_option("--frequency-penalty", p.frequency_penalty, "Frequency penalty (0: off)")->capture_default_str();
    sub.add_option_function<int64_t>(
           "--seed",
           [&p](int64_t v) {
               if (v < -1 || v > int64_t(UINT32_MAX))
                   throw CLI::ValidationError("--seed: must be -1 (random) or 0..4294967295");
               p.seed = v < 0 ? 0xFFFFFFFFu : uint32_t(v);
           },
           "Sampling seed (-1: a random one)")
        ->default_str("-1");
}

namespace {
struct short_form {
    const char * short_name;
    const char * long_name;
};
constexpr short_form k_short_forms[] = {
    {"-m", "--model"}, {"-c", "--ctx-size"}, {"-t", "--threads"}, {"-s", "--seed"}, {"-n", "--n-predict"}};
}  // namespace

const char * cli_long_form(std::string_view arg) {
    for (const auto & f : k_short_forms)
        if (arg == f.short_name) return f.long_name;
    return nullptr;
}

std::string cli_short_forms_footer() {
    std::string s = "Short forms:";
    for (const auto & f : k_short_forms) s += std::string(" ") + f.short_name + " = " + f.long_name + ",";
    s.back() = '.';
    return s;
}

// The two plain prints to stderr in src/ (scripts/check-logging allows this file only): a command's exit
// message and its report. Everything else a process says on stderr is a log line.
int cli_fail(int code, const std::string & msg) {
    std::fprintf(stderr, "baton: %s\n", msg.c_str());
    return code;
}

void cli_report(const std::string & msg) { std::fprintf(stderr, "baton: %s\n", msg.c_str()); }

namespace {
cli_log_flags g_log_flags;  // written while parsing, before the subcommand (and any thread) runs
}  // namespace

const cli_log_flags & cli_log_settings() { return g_log_flags; }

void cli_add_log_flags(CLI::App & sub, cli_log_flags & f) {
    sub.add_option_function<std::string>(
           "--log-level",
           [&f](const std::string & v) {
               auto l = log_level_parse(v);
               if (!l.ok()) throw CLI::ValidationError("--log-level: " + l.status().message());
               f.level = l.value();
           },
           "debug | info | warn | error | off: the least severe log lines written to stderr")
        ->default_str(log_level_name(f.level));
    sub.add_option_function<std::string>(
           "--log-format",
           [&f](const std::string & v) {
               auto l = log_format_parse(v);
               if (!l.ok()) throw CLI::ValidationError("--log-format: " + l.status().message());
               f.format = l.value();
           },
           "text | json: log lines as text, or as one JSON object each (for log pipelines)")
        ->default_str(log_format_name(f.format));
}

int cli_main(int argc, char ** argv) {
    CLI::App app{"Baton: prefill/decode disaggregated inference for llama.cpp models (GGUF)", "baton"};
    app.set_version_flag("--version", cli_version_string());
    app.require_subcommand(1);
    // One line per subcommand; each cmd_*.cpp defines its cli_add_* function.
    using add_fn = void (*)(CLI::App &, cli_run_fn &);
    static const add_fn adders[] = {
        cli_add_mkmodel, cli_add_generate, cli_add_prefill, cli_add_decode,  cli_add_blob,
        cli_add_route,   cli_add_serve,    cli_add_demo,    cli_add_devices,
    };
    std::vector<cli_run_fn> runs(std::size(adders));
    try {
        for (size_t i = 0; i < runs.size(); ++i) adders[i](app, runs[i]);
        // --log-level/--log-format on every command that runs (the leaves: `blob inspect`, not `blob`).
        std::vector<CLI::App *> pending = app.get_subcommands([](CLI::App *) { return true; });
        while (!pending.empty()) {
            CLI::App * sub = pending.back();
            pending.pop_back();
            auto children = sub->get_subcommands([](CLI::App *) { return true; });
            if (children.empty()) cli_add_log_flags(*sub, g_log_flags);
            pending.insert(pending.end(), children.begin(), children.end());
        }
    } catch (const CLI::Error & e) {  // a flag defined twice: a bug in Baton, reported instead of aborting
        return cli_fail(k_exit_failure, std::string("internal: the command line is defined wrongly: ") + e.what());
    }
    // CLI11 cannot hold a one-letter option next to llama-server's multi-letter ones that start with the same
    // letter (-n and -np/-ngl, -m and -mg, -c and -ctk, -t and -tb/-ts, -s and -sm: it would read -ngl as
    // -n gl). In the subcommands that take both, a lone -m/-c/-t/-s/-n is spelled out before parsing (not
    // where it is the value of -p/--prompt); their --help says so (cli_short_forms_footer).
    const std::string_view sub = argc > 1 ? std::string_view(argv[1]) : std::string_view();
    const bool spell_out = sub == "serve" || sub == "generate" || sub == "prefill" || sub == "decode";
    std::vector<std::string> args;
    for (int i = argc - 1; i >= 1; --i) {
        const std::string_view prev = i > 1 ? std::string_view(argv[i - 1]) : std::string_view();
        const char * long_form = spell_out && prev != "-p" && prev != "--prompt" ? cli_long_form(argv[i]) : nullptr;
        args.emplace_back(long_form ? long_form : argv[i]);
    }
    try {
        app.parse(args);
    } catch (const CLI::CallForHelp & e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp & e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion & e) {
        return app.exit(e);
    } catch (const CLI::ParseError & e) {
        app.exit(e);
        return k_exit_usage;
    }
    log_configure(g_log_flags.level, g_log_flags.format);  // before the subcommand logs anything
    for (auto & r : runs)
        if (r) return r();
    return cli_fail(k_exit_usage, "no subcommand given (see --help)");
}

}  // namespace baton
