// cli.cpp — top-level argument parsing and dispatch.
#include "cli.h"

#include <CLI/CLI.hpp>
#include <llama.h>

#include <cstdio>
#include <vector>

#include "baton/build_info.h"

namespace baton {

std::string cli_version_string() {
    std::string s = std::string("baton ") + BATON_VERSION_STRING + " (libllama " + llama_version();
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

int cli_fail(int code, const std::string & msg) {
    std::fprintf(stderr, "baton: %s\n", msg.c_str());
    return code;
}

int cli_main(int argc, char ** argv) {
    CLI::App app{"Baton: prefill/decode disaggregated inference for llama.cpp models (GGUF)", "baton"};
    app.set_version_flag("--version", cli_version_string());
    app.require_subcommand(1);
    // One line per subcommand; each cmd_*.cpp defines its cli_add_* function.
    using add_fn = void (*)(CLI::App &, cli_run_fn &);
    static const add_fn adders[] = {
        cli_add_mkmodel,
        cli_add_generate,
        cli_add_prefill,
        cli_add_decode,
        cli_add_blob,
        cli_add_route,
        cli_add_serve,
        cli_add_demo,
    };
    std::vector<cli_run_fn> runs(std::size(adders));
    for (size_t i = 0; i < runs.size(); ++i) adders[i](app, runs[i]);
    try {
        app.parse(argc, argv);
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
    for (auto & r : runs)
        if (r) return r();
    return cli_fail(k_exit_usage, "no subcommand given (see --help)");
}

}  // namespace baton
