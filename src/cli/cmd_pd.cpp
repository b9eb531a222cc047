// cmd_pd.cpp — `baton prefill` and `baton decode`: prefill/decode through a file, the simplest PD.
//
// prefill runs the prompt in a one-slot engine and writes the blob (with the request embedded);
// decode restores it through the engine's one restore routine and generates with the embedded options,
// printing exactly what `baton generate` prints for the same prompt and options.
#include <CLI/CLI.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "baton/engine.h"
#include "baton/model.h"
#include "baton/openai/openai.h"
#include "baton/pd/pd_request.h"
#include "cli.h"

namespace baton {

namespace {

Status write_file_atomic(const std::string & path, const std::vector<uint8_t> & bytes) {
    const std::string tmp = path + ".tmp." + std::to_string(::getpid());
    int fd = ::open(tmp.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) return {status_code::io_error, "cannot write '" + path + "': " + std::strerror(errno)};
    blob_fd_sink sink(fd);
    Status st = sink.write(bytes.data(), bytes.size());
    if (::close(fd) != 0 && st.ok()) st = Status(status_code::io_error, "cannot write '" + path + "': " + std::strerror(errno));
    if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0)
        st = Status(status_code::io_error, "cannot write '" + path + "': " + std::strerror(errno));
    if (!st.ok()) ::unlink(tmp.c_str());
    return st;
}

Result<std::vector<uint8_t>> read_file(const std::string & path, uint64_t max_bytes) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return Status(status_code::io_error, "cannot read '" + path + "': " + std::strerror(errno));
    f.seekg(0, std::ios::end);
    const auto size = f.tellg();
    if (size < 0) return Status(status_code::io_error, "cannot read '" + path + "'");
    if (uint64_t(size) > max_bytes)
        return Status(status_code::too_large, "'" + path + "' is " + std::to_string(uint64_t(size)) + " bytes, over the limit of " + std::to_string(max_bytes));
    f.seekg(0);
    std::vector<uint8_t> bytes(static_cast<size_t>(size));
    f.read(reinterpret_cast<char *>(bytes.data()), size);
    if (!f) return Status(status_code::io_error, "cannot read '" + path + "': short read");
    return bytes;
}

struct pd_options {
    std::string model_path, prompt, out_path, blob_path;
    int32_t n_predict = 32;
    bool n_given = false;
    sampling_params sampling;
    context_config ctx;
    cli_device_flags device;
    model_load_params load;
};

void add_common(CLI::App * sub, pd_options & o) {
    sub->add_option("--model", o.model_path, "GGUF model file")->required();
    sub->add_option("--ctx-size", o.ctx.n_ctx, "Context size in tokens")->capture_default_str();
    sub->add_option("--threads", o.ctx.n_threads, "Threads")->capture_default_str();
    cli_add_device_flags(*sub, o.device, o.ctx);
}

int run_prefill(pd_options & o) {
    Status st = cli_device_resolve(o.device, o.load.offload, o.ctx);
    if (st.ok()) st = sampling_check(o.sampling);
    if (st.ok()) st = context_check(o.ctx);
    if (st.ok() && o.n_predict < 0) st = Status(status_code::invalid_argument, "n-predict: must be >= 0");
    if (!st.ok()) return cli_fail(k_exit_usage, st.message());
    auto model = loaded_model::load(o.model_path, o.load);
    if (!model.ok()) return cli_fail(k_exit_failure, model.status().message());
    std::shared_ptr<const loaded_model> m(std::move(model.value()));
    openai_request req;
    req.input = openai_prompt_text{o.prompt};
    req.max_tokens = o.n_predict;
    req.sampling = o.sampling;
    auto embedded = pd_request_encode(req);
    if (!embedded.ok()) return cli_fail(k_exit_failure, embedded.status().message());
    auto gen = openai_to_gen(req, *m);
    if (!gen.ok()) return cli_fail(k_exit_failure, gen.status().message());
    gen->request_json = std::move(embedded.value());
    engine_config cfg;
    cfg.ctx = o.ctx;
    auto eng = engine::create(m, cfg);
    if (!eng.ok()) return cli_fail(k_exit_failure, eng.status().message());
    auto h = eng.value()->submit(task_prefill{std::move(gen.value())});
    if (!h.ok()) return cli_fail(k_exit_failure, h.status().message());
    engine_result r = engine_run_to_end(h.value());
    if (!r.done.ok()) return cli_fail(k_exit_failure, r.done.status().message());
    st = write_file_atomic(o.out_path, r.done->blob);
    if (!st.ok()) return cli_fail(k_exit_failure, st.message());
    cli_report("wrote " + std::to_string(r.done->blob.size()) + "-byte blob for " +
               std::to_string(r.done->usage.prompt_tokens) + " prompt tokens to " + o.out_path);
    return k_exit_ok;
}

int run_decode(pd_options & o) {
    Status st = cli_device_resolve(o.device, o.load.offload, o.ctx);
    if (st.ok()) st = context_check(o.ctx);
    if (st.ok() && o.n_given && o.n_predict < 0) st = Status(status_code::invalid_argument, "n-predict: must be >= 0");
    if (!st.ok()) return cli_fail(k_exit_usage, st.message());
    engine_config cfg;
    cfg.ctx = o.ctx;
    auto bytes = read_file(o.blob_path, cfg.limits.max_bytes);
    if (!bytes.ok()) return cli_fail(k_exit_failure, bytes.status().message());
    auto blob = validated_blob::parse(std::move(bytes.value()), cfg.limits);
    if (!blob.ok()) return cli_fail(k_exit_failure, "invalid blob: " + blob.status().message());
    if (!blob.value()->view().request) return cli_fail(k_exit_failure, "invalid blob: request: no embedded request");
    auto req = pd_request_decode(*blob.value()->view().request, pd_request_limits{});
    if (!req.ok()) return cli_fail(k_exit_failure, "invalid blob: request: " + req.status().message());
    if (o.n_given) req->max_tokens = o.n_predict;
    auto model = loaded_model::load(o.model_path, o.load);
    if (!model.ok()) return cli_fail(k_exit_failure, model.status().message());
    std::shared_ptr<const loaded_model> m(std::move(model.value()));
    auto gen = openai_to_gen(req.value(), *m);
    if (!gen.ok()) return cli_fail(k_exit_failure, gen.status().message());
    auto eng = engine::create(m, cfg);
    if (!eng.ok()) return cli_fail(k_exit_failure, eng.status().message());
    auto h = eng.value()->submit(task_decode{blob.value(), std::move(gen.value())});
    if (!h.ok()) return cli_fail(k_exit_failure, h.status().message());
    for (;;) {
        engine_event ev;
        if (!h.value()->next(ev, std::chrono::minutes(10))) return cli_fail(k_exit_failure, "decode timed out");
        const std::string & text = engine_event_text(ev);
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::fflush(stdout);
        if (std::holds_alternative<event_token>(ev)) continue;
        if (const auto * e = std::get_if<event_error>(&ev)) {
            std::fputc('\n', stdout);
            return cli_fail(k_exit_failure, (e->error.code() == status_code::incompatible ? "incompatible blob: " : "restore failed: ") +
                                                e->error.message());
        }
        std::fputc('\n', stdout);
        return k_exit_ok;
    }
}

}  // namespace

void cli_add_prefill(CLI::App & app, cli_run_fn & run) {
    auto o = std::make_shared<pd_options>();
    CLI::App * sub = app.add_subcommand("prefill", "Run a prompt and write its state blob (request embedded) to a file");
    add_common(sub, *o);
    sub->add_option("-p,--prompt", o->prompt, "Prompt text")->required();
    sub->add_option("-o,--output", o->out_path, "Blob file to write")->required();
    sub->add_option("--n-predict", o->n_predict, "Tokens the decode side generates at most (also -n)")
        ->capture_default_str();
    cli_add_sampling_flags(*sub, o->sampling);
    sub->callback([&run, o] { run = [o] { return run_prefill(*o); }; });
}

void cli_add_decode(CLI::App & app, cli_run_fn & run) {
    auto o = std::make_shared<pd_options>();
    CLI::App * sub = app.add_subcommand("decode", "Restore a blob written by prefill and generate with its embedded options");
    add_common(sub, *o);
    sub->add_option("--blob", o->blob_path, "Blob file to restore")->required();
    sub->add_option("--n-predict", o->n_predict, "Override the embedded token count (also -n)")
        ->each([o](const std::string &) { o->n_given = true; });
    sub->callback([&run, o] { run = [o] { return run_decode(*o); }; });
}

}  // namespace baton
