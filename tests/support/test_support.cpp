// test_support.cpp — helpers for tests (see test_support.h).
#include "support/test_support.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "baton/testmodel/mkmmproj.h"
#include "baton/testmodel/mkmodel.h"

namespace baton::test {
namespace {

// A test that writes to a node it is terminating (ServeRegression.SpecialTokenFlood..., SIGTERM with floods
// in flight) gets EPIPE from the write, not a SIGPIPE that kills the whole test executable (seen in a run:
// "ServeRegression.SpecialTokenFloodIsRefusedOrFastAndOtherRequestsAreServed (SIGPIPE)").
[[maybe_unused]] const bool k_sigpipe_ignored = [] {
    ::signal(SIGPIPE, SIG_IGN);
    return true;
}();

}  // namespace

std::string baton_bin() {
    // BATON_TEST_BIN runs the end-to-end tests against another build's `baton` (scripts/check: the TSan
    // build's nodes and routers, driven by the release build's tests).
    if (const char * b = std::getenv("BATON_TEST_BIN"); b && *b) return b;
    return BATON_BIN;
}

std::string baton_test_node_bin() {
    if (const char * b = std::getenv("BATON_TEST_NODE_BIN"); b && *b) return b;
    return BATON_TEST_NODE_BIN;
}

std::string test_model_path(const std::string & arch, unsigned seed, int n_embd, int n_layer, const std::string & wtype,
                            const std::string & vocab, bool fim) {
    const std::string dir = BATON_TEST_MODELS;
    ::mkdir(dir.c_str(), 0755);
    const std::string path = dir + "/" + arch + "-s" + std::to_string(seed) + "-e" + std::to_string(n_embd) + "-l" +
                             std::to_string(n_layer) + (wtype == "f32" ? "" : "-w" + wtype) +
                             (vocab == "spm" ? "" : "-" + vocab) + (fim ? "-fim" : "") + ".gguf";
    mkmodel_params p;
    p.arch = arch;
    p.seed = seed;
    p.n_embd = n_embd;
    p.n_layer = n_layer;
    p.wtype = wtype;
    p.vocab = vocab;
    p.fim = fim;
    Status s = mkmodel_ensure(p, path);
    if (!s.ok()) throw std::runtime_error("mkmodel failed: " + s.to_string());
    return path;
}

std::string test_mmproj_path(int text_n_embd, unsigned seed, const std::string & projector) {
    const std::string dir = BATON_TEST_MODELS;
    ::mkdir(dir.c_str(), 0755);
    const std::string path =
        dir + "/mmproj-" + projector + "-s" + std::to_string(seed) + "-e" + std::to_string(text_n_embd) + ".gguf";
    mkmmproj_params p;
    p.projector = projector;
    p.seed = seed;
    p.text_n_embd = text_n_embd;
    if (projector == "gemma3") p.patch_size = 4;  // 32x32 images: 16 embeddings, as the mlp's
    // (qwen2vl_merger: patches of 4 merged 2x2, so a 64x32 image is an 8 x 4 grid of 32 embeddings)
    if (projector == "qwen2vl_merger") p.patch_size = 4;
    // (qwen2a: an audio projector; a clip of up to 30 s becomes 750 embeddings)
    Status s = mkmmproj_ensure(p, path);
    if (!s.ok()) throw std::runtime_error("mkmmproj failed: " + s.to_string());
    return path;
}

std::string test_reranker_path(bool with_template, unsigned seed) {
    const std::string dir = BATON_TEST_MODELS;
    ::mkdir(dir.c_str(), 0755);
    const std::string path =
        dir + "/qwen3-rerank-s" + std::to_string(seed) + (with_template ? "-bpe" : "-plain") + ".gguf";
    mkmodel_params p;
    p.arch = "qwen3";
    p.seed = seed;
    p.rerank = true;
    p.vocab = with_template ? "bpe" : "spm";
    p.chat_template = with_template;
    Status s = mkmodel_ensure(p, path);
    if (!s.ok()) throw std::runtime_error("mkmodel failed: " + s.to_string());
    return path;
}

std::string temp_dir() {
    const char * base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/baton-test-XXXXXX";
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    return tmpl;
}

const std::string & scratch_dir() {
    struct scratch {
        std::string dir = temp_dir();
        ~scratch() {
            std::error_code ec;
            std::filesystem::remove_all(dir, ec);
        }
    };
    static const scratch tmp;
    return tmp.dir;
}

proc_result run_process(const std::vector<std::string> & argv, double timeout_s) {
    int out_pipe[2], err_pipe[2];
    if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
    pid_t pid = ::fork();
    if (pid == 0) {
        ::dup2(out_pipe[1], 1);
        ::dup2(err_pipe[1], 2);
        int devnull = ::open("/dev/null", O_RDONLY);
        ::dup2(devnull, 0);
        std::vector<char *> args;
        for (const auto & a : argv) args.push_back(const_cast<char *>(a.c_str()));
        args.push_back(nullptr);
        ::execv(args[0], args.data());
        ::_exit(127);
    }
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
    proc_result r;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
    int open_fds = 2;
    while (open_fds > 0) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
        if (left <= 0) {
            r.timed_out = true;
            ::kill(pid, SIGKILL);
            break;
        }
        if (::poll(fds, 2, int(left)) < 0) continue;
        for (int i = 0; i < 2; ++i) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            char buf[65536];
            ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
            if (n <= 0) {
                ::close(fds[i].fd);
                fds[i].fd = -1;
                --open_fds;
            } else {
                (i == 0 ? r.out : r.err).append(buf, size_t(n));
            }
        }
    }
    for (auto & f : fds)
        if (f.fd >= 0) ::close(f.fd);
    int status = 0;
    ::waitpid(pid, &status, 0);
    r.exit_code = (!r.timed_out && WIFEXITED(status)) ? WEXITSTATUS(status) : -1;
    return r;
}

}  // namespace baton::test
