// test_support.h — shared helpers for Baton's tests: cached test models and subprocesses with timeouts.
#pragma once

#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace baton::test {

// k_sanitized_build: this executable is built with ASan or TSan.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool k_sanitized_build = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool k_sanitized_build = true;
#else
inline constexpr bool k_sanitized_build = false;
#endif
#else
inline constexpr bool k_sanitized_build = false;
#endif

// k_sanitized: this process or the `baton` it starts runs under ASan or TSan, which inflate RSS several-fold
// and slow everything 2-15x: tests skip only their bounds on a process's memory or latency there (every
// other assertion still runs; the release suite asserts them all). Sanitized: a sanitized build, or
// BATON_TEST_SANITIZED=1 beside a BATON_TEST_BIN of a sanitized build (scripts/check drives the ASan and
// TSan builds' `baton` with the release build's e2e tests).
inline const bool k_sanitized = [] {
    const char * e = std::getenv("BATON_TEST_SANITIZED");
    return k_sanitized_build || (e && std::string_view(e) == "1");
}();

// test_model_path returns a test model of arch (made by mkmodel with the given seed and default size on
// first use, then cached in the build tree). Safe when test processes race: files appear by rename.
// wtype and vocab are mkmodel_params' (f32/spm, the defaults, keep the file names they always had; others
// add "-w<wtype>" / "-<vocab>" to the name; fim adds the fill-in-the-middle tokens and "-fim").
std::string test_model_path(const std::string & arch, unsigned seed = 1, int n_embd = 64, int n_layer = 4,
                            const std::string & wtype = "f32", const std::string & vocab = "spm", bool fim = false);

// test_reranker_path returns a qwen3 reranker (mkmodel's rerank: a ranking head, rank pooling), cached like
// test_model_path's: with_template, the bpe vocabulary and a rerank prompt template
// (tokenizer.chat_template.rerank); without, the spm vocabulary, no templates, and llama-server's plain layout
// <s> query </s></s> document </s>.
std::string test_reranker_path(bool with_template, unsigned seed = 1);

// test_mmproj_path returns an image projector for a text model of width text_n_embd, cached like
// test_model_path's: LLaVA-style by default (mkmmproj's mlp: 32x32 images of 16 embeddings), or mkmmproj's gemma3
// (32x32 images of 16 embeddings decoded with non-causal attention among them; for the gemma3 test model), or
// mkmmproj's qwen2a (an audio projector: a clip of up to 30 s becomes 750 embeddings).
std::string test_mmproj_path(int text_n_embd = 64, unsigned seed = 1, const std::string & projector = "mlp");

struct proc_result {
    int exit_code = -1;   // -1 when killed by a signal or the timeout
    bool timed_out = false;
    std::string out, err;
};

// run_process runs argv (argv[0] is a path) with stdin closed, capturing stdout/stderr; kills it after
// timeout_s seconds.
proc_result run_process(const std::vector<std::string> & argv, double timeout_s = 120);

// baton_bin is the path of the built `baton` executable ($BATON_TEST_BIN when set).
std::string baton_bin();
// baton_test_node_bin is the path of `baton-test-node` ($BATON_TEST_NODE_BIN when set): the CLI plus the
// --test-corrupt-state / --test-truncate-blob faults (tests/support/test_node_main.cpp).
std::string baton_test_node_bin();

// temp_dir returns a fresh directory under $TMPDIR (or /tmp) for this test process.
std::string temp_dir();
// scratch_dir returns one temp_dir of this test process, made on first use and removed with what it holds
// when the process exits.
const std::string & scratch_dir();

}  // namespace baton::test
