// cli.h — the `baton` command line: one executable, one subcommand per job.
//
// Exit codes: 0 success, 1 the job failed (unreadable file, invalid blob, engine error), 2 bad arguments.
// Each subcommand lives in its own cmd_*.cpp and registers itself through a cli_add_* function.
#pragma once

#include <signal.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "baton/base/log.h"
#include "baton/cli/cli_main.h"
#include "baton/cluster/etcd_client.h"

namespace CLI {
class App;
}

namespace baton {

// A subcommand's run function returns the process exit code.
using cli_run_fn = std::function<int()>;

// cli_version_string: "baton X (libllama Y, build bN)".
std::string cli_version_string();

// Registration functions, one per cmd_*.cpp. Each adds its subcommand to app and stores its run function.
void cli_add_mkmodel(CLI::App & app, cli_run_fn & run);
void cli_add_generate(CLI::App & app, cli_run_fn & run);
void cli_add_prefill(CLI::App & app, cli_run_fn & run);
void cli_add_decode(CLI::App & app, cli_run_fn & run);
void cli_add_blob(CLI::App & app, cli_run_fn & run);
void cli_add_route(CLI::App & app, cli_run_fn & run);
void cli_add_serve(CLI::App & app, cli_run_fn & run);
void cli_add_demo(CLI::App & app, cli_run_fn & run);
void cli_add_devices(CLI::App & app, cli_run_fn & run);

// cli_block_stop_signals prepares a long-running subcommand (serve, route, demo) to take SIGINT and SIGTERM
// with sigwait: it restores their default dispositions (a shell starts background jobs with SIGINT
// ignored, and an ignored signal is discarded even while blocked), blocks both in the calling thread so
// every thread started afterwards inherits the mask, and ignores SIGPIPE. Returns the set to sigwait on.
// REQUIRES: called before the process starts any thread.
sigset_t cli_block_stop_signals();

struct http_limits;
struct http_cors;
// cli_add_http_flags adds the HTTP edge's limits and deadlines (--header-timeout, --idle-timeout,
// --body-timeout, --write-timeout, --max-header-bytes, --max-headers, --max-connections, --http-threads) and
// llama-server's CORS flags (--cors-origins, --cors-methods, --cors-headers, --cors-credentials) to a
// subcommand: `baton serve` and `baton route` take the same flags with the same defaults.
// Also llama-server's static-file flags (--path DIR, --webui/--ui and --no-webui/--no-ui) into statics.
struct cli_static_flags {
    std::string path;   // --path
    bool webui = true;  // --webui / --no-webui
};
void cli_add_http_flags(CLI::App & sub, http_limits & limits, uint32_t & threads, http_cors & cors,
                        cli_static_flags & statics);

// cli_webui_dir: the web UI Debian installs with llama.cpp-tools (llama-server's default pages).
inline constexpr const char * cli_webui_dir = "/usr/share/llama.cpp/llama-server/default-ui";
// cli_static_dir: --path when given; else with --webui (the default) cli_webui_dir; else "" (no static files).
// (A directory that is not there serves nothing: the edge checks it, http_static.h.)
std::string cli_static_dir(const cli_static_flags & f);

struct sampling_params;
// cli_add_sampling_flags adds llama-server's sampling flags with its defaults and meanings: --temp, --top-k,
// --top-p, --min-p, --repeat-penalty, --repeat-last-n, --presence-penalty, --frequency-penalty, -s/--seed
// (-1: random). The values are checked by sampling_check after parsing.
void cli_add_sampling_flags(CLI::App & sub, sampling_params & p);

// The etcd flags `baton serve` and `baton route` share (docs/cluster.md): --etcd, --cluster, --etcd-user,
// --etcd-password, --etcd-cacert, --etcd-cert, --etcd-key. etcd_help says what --etcd does for the subcommand.
struct cli_etcd_flags {
    std::string urls, user, password;
    tls_client_files tls;
};
void cli_add_etcd_flags(CLI::App & sub, cli_etcd_flags & f, std::string & cluster, const std::string & etcd_help);
// cli_etcd_config: the etcd configuration the flags ask for (nullopt without --etcd); the password from
// BATON_ETCD_PASSWORD when --etcd-password is not given. invalid_argument naming the flag.
Result<std::optional<etcd_config>> cli_etcd_config(const cli_etcd_flags & f);

struct context_config;
struct offload_config;
// llama-server's placement, KV cache and batch flags, the same on serve, generate, prefill, decode and the
// benches (cli_device.cpp): -ngl/--n-gpu-layers N|auto|all, -dev/--device, -sm/--split-mode,
// -ts/--tensor-split, -mg/--main-gpu, --mlock, --no-mmap, -fa/--flash-attn on|off|auto,
// -ctk/--cache-type-k, -ctv/--cache-type-v, -b/--batch-size, -ub/--ubatch-size, -tb/--threads-batch.
// Defaults are llama-server's (-ngl auto, every GPU device ggml found, -fa auto, f16 KV) except -b 512.
struct cli_device_flags {
    std::string n_gpu_layers = "auto", devices, split_mode = "layer", tensor_split, flash_attn = "auto";
    std::string cache_type_k = "f16", cache_type_v = "f16";
    int32_t main_gpu = 0;
    bool mlock = false, no_mmap = false;
};
void cli_add_device_flags(CLI::App & sub, cli_device_flags & f, context_config & ctx);
// cli_device_resolve folds the flags into the model's offload config and the context config.
// invalid_argument naming the flag.
Status cli_device_resolve(const cli_device_flags & f, offload_config & offload, context_config & ctx);

// cli_long_form: the long option a lone one-letter option (-m, -c, -t, -s, -n) stands for in the subcommands
// with llama-server's multi-letter flags (serve, generate, prefill, decode), or nullptr. Those subcommands
// define only the long names and show cli_short_forms_footer() ("Short forms: -m = --model, ...") in --help.
const char * cli_long_form(std::string_view arg);
std::string cli_short_forms_footer();

// cli_fail prints "baton: MSG" to stderr and returns code: the message a command exits with, plain (not a
// log line), so a person at a terminal reads the reason last.
int cli_fail(int code, const std::string & msg);
// cli_report prints "baton: MSG" to stderr: what a one-shot command did ("wrote ..."), its own output beside
// stdout's, plain like cli_fail. Diagnostics go to the logger (base/log.h) instead.
void cli_report(const std::string & msg);

// --log-level and --log-format, which every subcommand takes (cli_main adds them and applies them with
// log_configure before the subcommand runs). cli_log_settings: the values given, for a command that starts
// other baton processes (`baton demo` hands them on).
struct cli_log_flags {
    log_level level = log_level::info;
    log_format format = log_format::text;
};
void cli_add_log_flags(CLI::App & sub, cli_log_flags & f);
const cli_log_flags & cli_log_settings();

}  // namespace baton
