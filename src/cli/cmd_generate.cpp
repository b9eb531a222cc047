// cmd_generate.cpp — `baton generate`: single-process generation to stdout (the oracle).
#include <CLI/CLI.hpp>

#include <cstdio>

#include "baton/generate.h"
#include "baton/model.h"
#include "cli.h"

namespace baton {

void cli_add_generate(CLI::App & app, cli_run_fn & run) {
    auto p = std::make_shared<generate_params>();
    auto model_path = std::make_shared<std::string>();
    auto prompt = std::make_shared<std::string>();
    auto device = std::make_shared<cli_device_flags>();
    CLI::App * sub = app.add_subcommand("generate", "Generate text from a prompt in one process (greedy at --temp 0)");
    sub->add_option("--model", *model_path, "GGUF model file")->required();
    sub->add_option("-p,--prompt", *prompt, "Prompt text")->required();
    sub->add_option("--n-predict", p->n_predict, "Tokens to generate at most (also -n)")->capture_default_str();
    cli_add_sampling_flags(*sub, p->sampling);
    sub->add_option("--ctx-size", p->ctx.n_ctx, "Context size in tokens")->capture_default_str();
    sub->add_option("--threads", p->ctx.n_threads, "Threads")->capture_default_str();
    cli_add_device_flags(*sub, *device, p->ctx);
    sub->callback([&run, p, model_path, prompt, device] {
        run = [p, model_path, prompt, device] {
            p->prompt = *prompt;
            model_load_params lp;
            Status st = cli_device_resolve(*device, lp.offload, p->ctx);
            if (st.ok()) st = sampling_check(p->sampling);
            if (st.ok()) st = context_check(p->ctx);
            if (st.ok() && p->n_predict < 0) st = Status(status_code::invalid_argument, "n-predict: must be >= 0");
            if (!st.ok()) return cli_fail(k_exit_usage, st.message());
            auto model = loaded_model::load(*model_path, lp);
            if (!model.ok()) return cli_fail(k_exit_failure, model.status().message());
            auto out = generate_run(*model.value(), *p, [](const std::string & piece) {
                std::fwrite(piece.data(), 1, piece.size(), stdout);
                std::fflush(stdout);
            });
            if (!out.ok()) return cli_fail(k_exit_failure, out.status().message());
            std::fputc('\n', stdout);
            return k_exit_ok;
        };
    });
}

}  // namespace baton
