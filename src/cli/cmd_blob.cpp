// cmd_blob.cpp — `baton blob inspect FILE` and `baton blob verify FILE [-m MODEL]`.
//
// inspect prints every header field and section frame with its checksum status, even for a corrupt blob (a
// lenient walk), then the decoded contents when the blob is valid. verify is the yes/no form for scripts:
// exit 0 when the blob is valid (and compatible with MODEL on a node with the given -c/-np/KV layout, the
// same defaults as `baton serve`), 1 with the
// reason on stderr otherwise.
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "baton/blob.h"
#include "baton/context.h"
#include "baton/model.h"
#include "cli.h"

namespace baton {
namespace {

Result<std::vector<uint8_t>> read_blob_file(const std::string & path, uint64_t max_bytes) {
    std::ifstream f(path, std::ios::binary | std::ios::ate);
    if (!f) return Status(status_code::io_error, "cannot read '" + path + "': " + std::strerror(errno));
    const std::streamoff size = f.tellg();
    if (size < 0) return Status(status_code::io_error, "cannot read '" + path + "': not a regular file");
    if (uint64_t(size) > max_bytes)
        return Status(status_code::too_large,
                      "'" + path + "' is " + std::to_string(size) + " bytes > max_bytes " + std::to_string(max_bytes));
    std::vector<uint8_t> bytes(static_cast<size_t>(size));
    f.seekg(0);
    if (!f.read(reinterpret_cast<char *>(bytes.data()), size))
        return Status(status_code::io_error, "cannot read '" + path + "': read error");
    return bytes;
}

std::string hex64(uint64_t v) {
    char b[24];
    std::snprintf(b, sizeof b, "0x%016" PRIx64, v);
    return b;
}

const char * ok_bad(bool ok) { return ok ? "OK" : "BAD"; }

void print_layout(const std::string & path, const blob_layout & l) {
    std::printf("file:            %s (%zu bytes)\n", path.c_str(), l.size);
    std::printf("magic:           %s\n", l.magic_ok ? "BATNBLOB (ok)" : "BAD (not a Baton state blob)");
    if (!l.header_complete) {
        std::printf("header:          %s\n", l.stopped.c_str());
        return;
    }
    std::printf("version:         %u.%u\n", l.version_major, l.version_minor);
    std::string flag_names;
    if (l.flags & 1) flag_names += " has_logits";
    if (l.flags & 2) flag_names += " has_request";
    if (l.flags & ~3u) flag_names += " +unknown";
    std::printf("flags:           0x%08x (%s)\n", l.flags, flag_names.empty() ? "none" : flag_names.c_str() + 1);
    std::printf("n_sections:      %u (found %zu)\n", l.n_sections, l.sections.size());
    std::printf("total_bytes:     %" PRIu64 "%s\n", l.total_bytes,
                l.total_bytes == l.size ? "" : l.total_bytes > l.size ? " (file is shorter: truncated)" : " (file is longer: trailing bytes)");
    std::printf("header checksum: %s %s", hex64(l.header_checksum_stored).c_str(),
                ok_bad(l.header_checksum_stored == l.header_checksum_computed));
    if (l.header_checksum_stored != l.header_checksum_computed)
        std::printf(" (computed %s)", hex64(l.header_checksum_computed).c_str());
    std::printf("\nsections:\n");
    for (size_t i = 0; i < l.sections.size(); ++i) {
        const auto & s = l.sections[i];
        std::printf("  #%-2zu %-12s at +%-10" PRIu64 " %12" PRIu64 " bytes  flags 0x%x  ", i, s.name.c_str(), s.offset,
                    s.length, s.flags);
        if (!s.complete)
            std::printf("INCOMPLETE (runs past the end)\n");
        else if (s.checksum_stored == s.checksum_computed)
            std::printf("checksum %s OK\n", hex64(s.checksum_stored).c_str());
        else
            std::printf("checksum %s BAD (computed %s)\n", hex64(s.checksum_stored).c_str(),
                        hex64(s.checksum_computed).c_str());
    }
    if (!l.stopped.empty()) std::printf("walk stopped:    %s\n", l.stopped.c_str());
}

void print_view(const blob_view & v) {
    const auto & id = v.identity;
    std::printf("identity:        arch %s, n_layer %u, n_embd %u, n_vocab %u, libllama %s\n", id.arch.c_str(), id.n_layer,
                id.n_embd, id.n_vocab, id.llama_version.c_str());
    std::printf("fingerprint:     %s\n", identity_fingerprint_hex(id.fingerprint).c_str());
    const auto & c = v.context;
    std::printf("context:         type_k %s, type_v %s, flash_attn %s, kv_unified %s, n_seq_max %u, n_ctx %u\n",
                identity_kv_type_name(c.type_k).c_str(), identity_kv_type_name(c.type_v).c_str(),
                c.flash_attn ? "on" : "off", c.kv_unified ? "on" : "off", c.n_seq_max, c.n_ctx);
    std::printf("tokens:          %zu [", v.tokens.size());
    const size_t shown = std::min<size_t>(v.tokens.size(), 16);
    for (size_t i = 0; i < shown; ++i) std::printf("%s%d", i ? " " : "", v.tokens[i]);
    std::printf("%s]\n", v.tokens.size() > shown ? " ..." : "");
    std::printf("state:           %zu bytes\n", v.state.size());
    std::printf("checkpoints:     %zu\n", v.checkpoints.size());
    for (size_t i = 0; i < v.checkpoints.size(); ++i) {
        const auto & cp = v.checkpoints[i];
        std::printf("  [%zu] n_tokens %u, positions %d..%d, %zu bytes\n", i, cp.n_tokens, cp.pos_min, cp.pos_max,
                    cp.data.size());
    }
    if (v.logits) std::printf("logits:          present (%zu f32)\n", v.logits->size());
    else
        std::printf("logits:          absent\n");
    if (v.request) std::printf("request:         %s\n", v.request->c_str());
    else
        std::printf("request:         absent\n");
}

int run_inspect(const std::string & path) {
    const blob_limits limits;
    auto bytes = read_blob_file(path, limits.max_bytes);
    if (!bytes.ok()) return cli_fail(k_exit_failure, bytes.status().message());
    print_layout(path, blob_walk(bytes.value()));
    auto v = blob_parse(bytes.value(), limits);
    if (!v.ok()) {
        std::printf("valid:           no: %s\n", v.status().to_string().c_str());
        std::fflush(stdout);
        return cli_fail(k_exit_failure, path + ": " + v.status().to_string());
    }
    print_view(v.value());
    std::printf("valid:           yes\n");
    return k_exit_ok;
}

int run_verify(const std::string & path, const std::string & model_path, const context_config & cc) {
    auto bytes = read_blob_file(path, blob_limits{}.max_bytes);
    if (!bytes.ok()) return cli_fail(k_exit_failure, bytes.status().message());
    auto v = blob_parse(bytes.value());
    if (!v.ok()) return cli_fail(k_exit_failure, path + ": " + v.status().to_string());
    if (!model_path.empty()) {
        auto model = loaded_model::load(model_path);
        if (!model.ok()) return cli_fail(k_exit_failure, model.status().message());
        const kv_layout & node_layout = cc;  // the config's layout part
        Status st = blob_check_compatible(v.value(), model.value()->identity(), node_layout);
        if (!st.ok()) return cli_fail(k_exit_failure, path + ": not compatible with " + model_path + ": " + st.message());
    }
    std::printf("%s: ok (%zu tokens, %zu state bytes%s)\n", path.c_str(), v->tokens.size(), v->state.size(),
                model_path.empty() ? "" : ", compatible with the model");
    return k_exit_ok;
}

}  // namespace

void cli_add_blob(CLI::App & app, cli_run_fn & run) {
    CLI::App * sub = app.add_subcommand("blob", "Inspect or verify a state blob");
    sub->require_subcommand(1);
    auto path = std::make_shared<std::string>();
    auto model = std::make_shared<std::string>();
    CLI::App * inspect = sub->add_subcommand("inspect", "Print every header field and section of a blob (also a corrupt one)");
    inspect->add_option("file", *path, "Blob file")->required();
    inspect->callback([&run, path] { run = [path] { return run_inspect(*path); }; });
    CLI::App * verify = sub->add_subcommand("verify", "Exit 0 if the blob is valid (and compatible with MODEL), 1 otherwise");
    verify->add_option("file", *path, "Blob file")->required();
    verify->allow_non_standard_option_names();  // -np, as in `baton serve`
    verify->add_option("-m,--model", *model, "GGUF model the blob must be restorable into");
    // The node the blob is meant for: the same flags and defaults as `baton serve`.
    auto node = std::make_shared<context_config>();
    verify->add_option("-c,--ctx-size", node->n_ctx, "With -m: the node's context size")->capture_default_str();
    verify->add_option("-np,--parallel", node->n_seq_max, "With -m: the node's slot count")->capture_default_str();
    verify->add_flag("--kv-unified,!--no-kv-unified", node->kv_unified, "With -m: the node's KV layout (default unified)");
    verify->callback([&run, path, model, node] { run = [path, model, node] { return run_verify(*path, *model, *node); }; });
}

}  // namespace baton
