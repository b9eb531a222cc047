// mkmodel.cpp — writes Baton's deterministic GGUF test models through gguf.h: the parameters' rules, the
// general.* keys, and the file written whole and renamed into place. What differs per architecture is in
// testmodel_arch.*, the vocabularies in testmodel_vocab.*.
#include "baton/testmodel/mkmodel.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <iterator>
#include <memory>

#include "testmodel_arch.h"
#include "testmodel_vocab.h"

namespace baton {
namespace {

using namespace testmodel;

bool one_of(const std::string & v, const std::vector<std::string> & allowed) {
    return std::find(allowed.begin(), allowed.end(), v) != allowed.end();
}

std::string list_of(const std::vector<std::string> & v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i == 0 ? "" : i + 1 == v.size() ? " or " : ", ") + v[i];
    return s;
}

// A ranking head's labels, as Qwen3-Reranker's conversion writes them: the score is the first one's
// probability (libllama's rank pooling ends in a softmax over the labels for qwen3).
constexpr const char * k_rerank_labels[] = {"yes", "no"};

// The rerank prompt (tokenizer.chat_template.rerank): llama-server puts the query and the document in
// place of {query} and {document} and tokenizes the result with its control tokens.
constexpr const char * k_rerank_template =
    "<|im_start|>system\nJudge whether the Document answers the Query. Answer only \"yes\" or \"no\"."
    "<|im_end|>\n<|im_start|>user\n<Query>: {query}\n<Document>: {document}<|im_end|>\n<|im_start|>assistant\n";

// set_rerank_keys: what makes a model a reranker to libllama and llama-server — rank pooling, the
// classifier's labels, and either the rerank template (with a chat template) or, without one, the
// sentence markers of llama-server's plain layout BOS query EOS SEP document EOS (SEP is the EOS token, as
// in RoBERTa-style rerankers: <s> query </s></s> document </s>).
void set_rerank_keys(gguf_context * g, const mkmodel_params & mp, const vocab_data & vocab) {
    gguf_set_val_u32(g, (mp.arch + ".pooling_type").c_str(), 4);  // LLAMA_POOLING_TYPE_RANK
    std::vector<const char *> labels(std::begin(k_rerank_labels), std::end(k_rerank_labels));
    gguf_set_arr_str(g, (mp.arch + ".classifier.output_labels").c_str(), labels.data(), labels.size());
    if (mp.chat_template) {
        gguf_set_val_str(g, "tokenizer.chat_template.rerank", k_rerank_template);
        return;
    }
    const uint32_t eos = mp.vocab == "bpe" ? uint32_t(vocab.tokens.size() - 1) : 2;
    gguf_set_val_bool(g, "tokenizer.ggml.add_eos_token", true);
    gguf_set_val_bool(g, "tokenizer.ggml.add_sep_token", true);
    gguf_set_val_u32(g, "tokenizer.ggml.seperator_token_id", eos);  // (libllama's spelling)
}

}  // namespace

const std::vector<std::string> & mkmodel_archs() {
    static const std::vector<std::string> archs = {"llama",  "mamba2",   "granitehybrid", "lfm2",
                                                   "gemma3", "qwen3moe", "qwen3next"};
    return archs;
}

const std::vector<std::string> & mkmodel_wtypes() {
    static const std::vector<std::string> w = {"f32", "f16", "q8_0", "q4_K"};
    return w;
}

const std::vector<std::string> & mkmodel_vocabs() {
    static const std::vector<std::string> v = {"spm", "bpe"};
    return v;
}

Status mkmodel_check_params(const mkmodel_params & p) {
    std::vector<std::string> archs = mkmodel_archs();
    archs.insert(archs.begin() + 1, "qwen3");
    archs.insert(archs.begin() + 2, "qwen2vl");
    if (!one_of(p.arch, archs))
        return {status_code::invalid_argument,
                "arch: unknown architecture '" + p.arch + "' (expected " + list_of(archs) + ")"};
    if (!one_of(p.wtype, mkmodel_wtypes()))
        return {status_code::invalid_argument,
                "wtype: unknown weight type '" + p.wtype + "' (expected " + list_of(mkmodel_wtypes()) + ")"};
    if (!one_of(p.vocab, mkmodel_vocabs()))
        return {status_code::invalid_argument,
                "vocab: unknown vocabulary '" + p.vocab + "' (expected " + list_of(mkmodel_vocabs()) + ")"};
    if (p.n_embd < 32 || p.n_embd > 8192 || p.n_embd % 32 != 0)
        return {status_code::invalid_argument,
                "n-embd: " + std::to_string(p.n_embd) + " is not a multiple of 32 in 32..8192"};
    if (p.n_layer < 1 || p.n_layer > 256)
        return {status_code::invalid_argument, "n-layer: " + std::to_string(p.n_layer) + " is not in 1..256"};
    if (is_hybrid_arch(p.arch) && p.n_layer < 2)
        return {status_code::invalid_argument, "n-layer: hybrid architecture '" + p.arch + "' needs at least 2 layers"};
    if (p.arch == "gemma3" && p.n_layer < 2)
        return {status_code::invalid_argument,
                "n-layer: gemma3 needs at least 2 layers (a sliding-window and a global one)"};
    if (p.rerank && p.arch != "qwen3")
        return {status_code::invalid_argument,
                "rerank: a ranking head is written for qwen3 only (the architecture libllama reads cls.output for "
                "in a decoder-only model), not '" +
                    p.arch + "'"};
    if (p.n_ctx < 16 || p.n_ctx > (1 << 20))
        return {status_code::invalid_argument, "n-ctx: " + std::to_string(p.n_ctx) + " is not in 16..1048576"};
    return {};
}

Status mkmodel_ensure(const mkmodel_params & params, const std::string & path) {
    if (!testmodel::gguf_file_absent(path)) return {};
    return mkmodel_write(params, path);
}

Status mkmodel_write(const mkmodel_params & mp, const std::string & path) {
    BATON_RETURN_IF_ERROR(mkmodel_check_params(mp));
    vocab_data vocab = mp.vocab == "bpe" ? build_bpe_vocab() : build_spm_vocab();
    if (mp.fim) add_fim_tokens(vocab, mp.vocab == "bpe");
    const arch_shape s = shape_of(mp, int(vocab.tokens.size()));

    // Open the temporary file first so an unwritable path fails before any work, with the OS reason.
    auto started = testmodel::gguf_file_start(path);
    if (!started.ok()) return started.status();
    const std::string tmp = std::move(started.value());

    // The ggml context holds only tensor descriptions (at most 32 per layer plus the 4 global ones); the
    // data lives in tensor_maker::data, exactly as large as each tensor's type needs.
    ggml_init_params ip = {size_t(s.n_layer * 32 + 8) * ggml_tensor_overhead(), nullptr, true};
    std::unique_ptr<ggml_context, decltype(&ggml_free)> ctx(ggml_init(ip), ggml_free);
    std::unique_ptr<gguf_context, decltype(&gguf_free)> g(gguf_init_empty(), gguf_free);
    if (!ctx || !g) {
        ::unlink(tmp.c_str());
        return {status_code::internal, "mkmodel: out of memory for the model tensors"};
    }
    gguf_set_val_str(g.get(), "general.architecture", mp.arch.c_str());
    gguf_set_val_str(g.get(), "general.name", ("baton-test-" + mp.arch).c_str());
    gguf_set_val_u32(g.get(), "general.file_type", ftype_of(mp.wtype));
    set_hparams(g.get(), mp, s);
    if (mp.vocab == "bpe") set_bpe_vocab(g.get(), vocab, mp.chat_template);
    else set_spm_vocab(g.get(), vocab, mp.chat_template);
    if (mp.rerank) set_rerank_keys(g.get(), mp, vocab);

    tensor_maker tm;
    tm.ctx = ctx.get();
    tm.gctx = g.get();
    tm.r = rng{mp.seed};
    tm.wtype = wtype_of(mp.wtype);
    const int64_t E = s.n_embd, V = s.n_vocab;
    // gemma3 scales the embeddings by sqrt(E) on input: draw them 1/sqrt(E) as large so the residual
    // stream does not drown the layers' outputs.
    tm.add("token_embd.weight", {E, V}, 'w', mp.arch == "gemma3" ? 1.0f / std::sqrt(float(E)) : 1.0f);
    for (int il = 0; il < s.n_layer; ++il) add_layer(tm, mp.arch, il, s);
    // lfm2 names its final norm token_embd_norm; an untied output matrix keeps the random model from
    // echoing its input token (with tied embeddings the residual stream predicts itself).
    tm.add(mp.arch == "lfm2" ? "token_embd_norm.weight" : "output_norm.weight", {E}, 'o');
    tm.add("output.weight", {E, V}, 'w', 4.0f / std::sqrt(float(E)));
    // The ranking head: one row per classifier label, over the last token's normalized hidden state.
    if (mp.rerank)
        tm.add("cls.output.weight", {E, int64_t(std::size(k_rerank_labels))}, 'w', 4.0f / std::sqrt(float(E)));

    return testmodel::gguf_file_finish(g.get(), tmp, path);
}

}  // namespace baton
