// cmd_mkmodel.cpp — `baton mkmodel`: write a deterministic random-weight test model.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "baton/testmodel/mkmmproj.h"
#include "baton/testmodel/mkmodel.h"
#include "cli.h"

namespace baton {

void cli_add_mkmodel(CLI::App & app, cli_run_fn & run) {
    auto p = std::make_shared<mkmodel_params>();
    auto out = std::make_shared<std::string>();
    auto mmproj = std::make_shared<std::string>();
    auto mmproj_type = std::make_shared<std::string>();
    CLI::App * sub = app.add_subcommand("mkmodel", "Generate a small deterministic GGUF test model");
    sub->add_option("--arch", p->arch,
                    "Architecture: llama, qwen3, qwen2vl, mamba2, granitehybrid, lfm2, gemma3, qwen3moe, qwen3next")
        ->required();
    sub->add_option("-o,--output", *out, "Output GGUF file")->required();
    sub->add_option("--seed", p->seed, "Seed for the random weights")->capture_default_str();
    sub->add_option("--n-embd", p->n_embd, "Embedding width (multiple of 32)")->capture_default_str();
    sub->add_option("--n-layer", p->n_layer, "Number of layers")->capture_default_str();
    sub->add_option("--n-ctx", p->n_ctx, "Training context length")->capture_default_str();
    sub->add_option("--wtype", p->wtype,
                    "Weight matrix type: f32, f16, q8_0, q4_K (rows that do not fit a block fall back per tensor)")
        ->capture_default_str();
    sub->add_option("--vocab", p->vocab, "Vocabulary: spm (SentencePiece byte fallback) or bpe (GPT-2 byte-level)")
        ->capture_default_str();
    sub->add_flag("!--no-chat-template", p->chat_template, "Write no tokenizer.chat_template (default: ChatML)");
    sub->add_flag("--fim", p->fim, "Add fill-in-the-middle tokens (<|fim_prefix|>, <|fim_suffix|>, ...) for /infill");
    sub->add_flag(
        "--rerank", p->rerank,
        "qwen3 only: add a ranking head (cls.output, labels yes/no, rank pooling) for `baton serve --rerank`; "
        "with a chat template also a rerank prompt (tokenizer.chat_template.rerank)");
    sub->add_option("--mmproj", *mmproj,
                    "Also write a matching random-weight image projector to this file, for libmtmd and llama-server's "
                    "--mmproj: Qwen2-VL's merger for --arch qwen2vl (M-RoPE; patches of 4 merged 2x2), Gemma 3's "
                    "SigLIP projector for --arch gemma3 (32x32 images, 16 embeddings each, non-causal attention among "
                    "them), else LLaVA-1.5's mlp (32x32 images, 16 embeddings each)");
    sub->add_option("--mmproj-type", *mmproj_type,
                    "With --mmproj: the projector instead of the arch's: mlp, gemma3 (for --arch gemma3), "
                    "qwen2vl_merger (for --arch qwen2vl) or qwen2a (Qwen2-Audio's: a Whisper encoder; audio clips "
                    "of up to 30 s become 750 embeddings)");
    sub->callback([&run, p, out, mmproj, mmproj_type] {
        run = [p, out, mmproj, mmproj_type] {
            Status st = mkmodel_check_params(*p);
            if (!st.ok()) return cli_fail(k_exit_usage, st.message());
            mkmmproj_params pp;
            pp.seed = p->seed;
            pp.text_n_embd = p->n_embd;
            if (p->arch == "qwen2vl") {
                pp.projector = "qwen2vl_merger";
                pp.n_embd = 32;
                pp.patch_size = 4;
            } else if (p->arch == "gemma3") {
                pp.projector = "gemma3";
                pp.patch_size = 4;  // 32x32 images: 8x8 patches pooled 2x2, 16 embeddings
            }
            if (!mmproj_type->empty()) {
                if (mmproj->empty()) return cli_fail(k_exit_usage, "--mmproj-type: needs --mmproj");
                pp.projector = *mmproj_type;
                pp.patch_size = pp.projector == "mlp" ? mkmmproj_params{}.patch_size : 4;
                pp.n_embd = pp.projector == "qwen2vl_merger" ? 32 : mkmmproj_params{}.n_embd;
            }
            if (!mmproj->empty()) {
                st = mkmmproj_check_params(pp);
                if (!st.ok()) return cli_fail(k_exit_usage, st.message());
            }
            st = mkmodel_write(*p, *out);
            if (!st.ok()) return cli_fail(k_exit_failure, st.message());
            cli_report("wrote " + p->arch + " model to " + *out);
            if (!mmproj->empty()) {
                st = mkmmproj_write(pp, *mmproj);
                if (!st.ok()) return cli_fail(k_exit_failure, st.message());
                cli_report("wrote its " + pp.projector + " projector to " + *mmproj);
            }
            return k_exit_ok;
        };
    });
}

}  // namespace baton
