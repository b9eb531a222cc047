// image_bench.cpp — figure 21: image prompts. Time to the first token of a chat with one image through PD (a
// router, a prefill node with the projector, a decode node without) vs a single node, and vs Debian's llama-server
// on the same GGUF + projector; and what a decode node saves by not loading the projector.
//
// A 512x8 llama (quick: 128x2) and a matching LLaVA-style projector from mkmmproj (a 512-wide, 6-block vision
// transformer on 224x224 images in 14-pixel patches: 256 embeddings per image; quick: 128-wide, 2 blocks, 112x112,
// 64 embeddings). Every server -t 2, -np 1, -c 2048, flash attention off, unpinned. A request: a chat of one user
// message, "Here is a picture: " + the image (a 224x224 BMP whose pixels follow from the run's seed, as a data: URL)
// + "What is in it?", max_tokens 1, temperature 0, not streamed: its wall time on the client is the TTFT (prompt,
// image and one token). Each run sends a new image (so no server reuses the image's cells; the text before it is
// reused by all alike) to the three targets in rotating order, after one warm-up each; medians of 8 runs (quick 2).
// Memory: VmRSS of the decode node (no projector) and of the single node (with it), both after serving; the
// projector file's size beside it. Targets: PD TTFT <= 1.10x the single node's; Baton's single-node TTFT <= 1.05x
// llama-server's; the decode node's RSS below the single node's by >= 0.8x the projector file.
//
// Audio, the same way (info, no target): a chat with one clip (input_audio, a 1-s WAV whose samples follow from
// the run's seed) with mkmmproj's qwen2a projector (a Whisper encoder, 512-wide x 4 blocks; quick: 128 x 2) on the
// same text model: a clip becomes 750 embeddings. TTFT single / PD / llama-server, medians of 4 runs (quick 2).
// M-RoPE images, the same way (info, full mode only): Qwen2-VL's merger (512-wide x 6 blocks, 14-pixel patches
// merged 2x2) on a 512x8 qwen2vl text model; a 448x448 image is a 16 x 16 grid of 256 embeddings that takes 16
// positions. Medians of 4 runs.
#include <sys/stat.h>

#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "baton/base/base64.h"
#include "baton/testmodel/mkmmproj.h"
#include "bench_net.h"
#include "bench_util.h"
#include "support/test_audio.h"
#include "support/test_image.h"

using namespace baton;
using namespace baton::bench;
using json = nlohmann::json;

namespace {

long rss_kib(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(f, line);)
        if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
    return 0;
}

// projector: mkmmproj's `kind` projector for a text model of width text_n_embd, cached in the bench models' dir
// (image_size and patch apply to image projectors).
std::string projector(const std::string & kind, int text_n_embd, int n_embd, int n_layer, int image_size = 32,
                      int patch = 8) {
    const std::string path = bench_models_dir() + "/mmproj-" + kind + "-t" + std::to_string(text_n_embd) + "-v" +
                             std::to_string(n_embd) + "x" + std::to_string(n_layer) +
                             (kind == "qwen2a" ? "" : "-i" + std::to_string(image_size)) + ".gguf";
    mkmmproj_params p;
    p.projector = kind;
    p.text_n_embd = text_n_embd;
    p.n_embd = n_embd;
    p.n_layer = n_layer;
    p.image_size = image_size;
    p.patch_size = patch;
    Status s = mkmmproj_ensure(p, path);
    if (!s.ok()) throw std::runtime_error("mkmmproj: " + s.to_string());
    return path;
}

std::string chat_body(const std::string & image) {
    const json content =
        json::array({{{"type", "text"}, {"text", "Here is a picture: "}},
                     {{"type", "image_url"}, {"image_url", {{"url", "data:image/bmp;base64," + base64_encode(image)}}}},
                     {{"type", "text"}, {"text", "What is in it?"}}});
    return json{{"messages", {{{"role", "user"}, {"content", content}}}}, {"max_tokens", 1}, {"temperature", 0}}.dump();
}

std::string audio_body(const std::string & wav) {
    const json content =
        json::array({{{"type", "text"}, {"text", "Listen: "}},
                     {{"type", "input_audio"}, {"input_audio", {{"data", base64_encode(wav)}, {"format", "wav"}}}},
                     {{"type", "text"}, {"text", "What is it?"}}});
    return json{{"messages", {{{"role", "user"}, {"content", content}}}}, {"max_tokens", 1}, {"temperature", 0}}.dump();
}

// ttft_ms: one chat's wall time (max_tokens 1) and its prompt tokens.
double ttft_ms(const bench_process & p, const std::string & body, int * prompt_tokens = nullptr) {
    httplib::Client c(p.host(), p.port());
    c.set_read_timeout(std::chrono::seconds(300));
    const double t0 = now_ms();
    auto r = c.Post("/v1/chat/completions", body, "application/json");
    const double ms = now_ms() - t0;
    if (!r || r->status != 200)
        throw std::runtime_error(p.name() + ": chat failed: " + (r ? r->body.substr(0, 300) : "no answer"));
    if (prompt_tokens) *prompt_tokens = json::parse(r->body)["usage"]["prompt_tokens"].get<int>();
    return ms;
}

// The three targets for one projector: a single node, a router over a prefill node with the projector and a
// decode node without it, and llama-server.
struct targets {
    std::unique_ptr<bench_process> single, pre, dec, router, llama;
};

targets start_targets(const std::string & model, const std::string & mmproj, int n_ctx) {
    const std::vector<std::string> common = {"-m",  model, "-t",  "2",  "-c", std::to_string(n_ctx),
                                             "-np", "1",   "-fa", "off"};
    auto serve = [&](const std::string & role, bool with_projector, const std::string & name) {
        std::vector<std::string> a = {baton_exe(), "serve", "--role", role};
        a.insert(a.end(), common.begin(), common.end());
        if (with_projector) a.insert(a.end(), {"--mmproj", mmproj});
        return bench_process::start(a, name);
    };
    targets t;
    t.single = serve("both", true, "baton single");
    t.pre = serve("prefill", true, "baton prefill");
    t.dec = serve("decode", false, "baton decode");
    t.router = bench_process::start(
        {baton_exe(), "route", "--prefill", t.pre->url(), "--decode", t.dec->url(), "--fallback", "fail"},
        "baton route");
    const int lp = free_port();
    std::vector<std::string> l = {"/usr/bin/llama-server", "--no-webui", "--host", "127.0.0.1", "--port",
                                  std::to_string(lp),      "--mmproj",   mmproj};
    l.insert(l.end(), common.begin(), common.end());
    t.llama = bench_process::start(l, "llama-server", 120, "http://127.0.0.1:" + std::to_string(lp));
    return t;
}

struct ttfts {
    stats single, pd, llama, pd_ratio, llama_ratio;
    int prompt_tokens = 0;
};

// measure: `runs` requests (body_of(seed), a new medium each) to the three in rotating order after a warm-up.
ttfts measure(const targets & t, int runs, const std::function<std::string(uint32_t)> & body_of) {
    const std::vector<const bench_process *> ts = {t.single.get(), t.router.get(), t.llama.get()};
    std::vector<std::vector<double>> ms(3);
    std::vector<double> pd_ratio, llama_ratio;
    int prompt_tokens[3] = {0, 0, 0};
    for (int r = -1; r < runs; ++r) {  // r == -1: warm-up
        const std::string body = body_of(uint32_t(100 + r));
        double x[3] = {0, 0, 0};
        for (int k = 0; k < 3; ++k) {
            const int i = (k + (r + 3)) % 3;  // rotating order
            x[i] = ttft_ms(*ts[size_t(i)], body, &prompt_tokens[i]);
        }
        if (r < 0) continue;
        for (int i = 0; i < 3; ++i) ms[size_t(i)].push_back(x[i]);
        pd_ratio.push_back(x[1] / x[0]);
        llama_ratio.push_back(x[0] / x[2]);
    }
    if (prompt_tokens[0] != prompt_tokens[1] || prompt_tokens[0] != prompt_tokens[2])
        throw std::runtime_error("prompt tokens differ: baton " + std::to_string(prompt_tokens[0]) + ", PD " +
                                 std::to_string(prompt_tokens[1]) + ", llama-server " +
                                 std::to_string(prompt_tokens[2]));
    return {summarize(ms[0]),    summarize(ms[1]),       summarize(ms[2]),
            summarize(pd_ratio), summarize(llama_ratio), prompt_tokens[0]};
}

void print_ttfts(const ttfts & m) {
    std::printf("%-14s %10s\n", "target", "TTFT ms");
    std::printf("%-14s %10.1f\n%-14s %10.1f\n%-14s %10.1f\n", "baton single", m.single.median, "baton PD", m.pd.median,
                "llama-server", m.llama.median);
}

// report_info: a medium's TTFTs and ratios with no target, as RESULT lines named prefix/....
void report_info(const std::string & prefix, const ttfts & m) {
    result(prefix + "/ttft_ms/single", m.single, "ms", "reported", true);
    result(prefix + "/ttft_ms/pd", m.pd, "ms", "reported", true);
    result(prefix + "/ttft_ms/llama_server", m.llama, "ms", "reported", true);
    result(prefix + "/pd_over_single", m.pd_ratio, "x", "info", true);
    result(prefix + "/baton_over_llama_server", m.llama_ratio, "x", "info", true);
}

}  // namespace

int main(int argc, char ** argv) try {
    const bool quick = quick_mode(argc, argv);
    const int runs = quick ? 2 : 8;
    const int text_w = quick ? 128 : 512, image_size = quick ? 112 : 224;
    const std::string model = quick ? bench_model("llama", 128, 2) : bench_model("llama", 512, 8);
    const std::string mmproj =
        quick ? projector("mlp", text_w, 128, 2, image_size, 14) : projector("mlp", text_w, 512, 6, image_size, 14);
    struct stat st{};
    ::stat(mmproj.c_str(), &st);
    const double mmproj_mib = double(st.st_size) / (1 << 20);

    ttfts img;
    double rss_single = 0, rss_dec = 0, rss_pre = 0, rss_llama = 0;
    {
        const targets t = start_targets(model, mmproj, 2048);
        img = measure(t, runs, [&](uint32_t seed) {
            return chat_body(test::test_bmp(uint32_t(image_size), uint32_t(image_size), seed));
        });
        rss_single = double(rss_kib(t.single->pid())) / 1024, rss_dec = double(rss_kib(t.dec->pid())) / 1024;
        rss_pre = double(rss_kib(t.pre->pid())) / 1024, rss_llama = double(rss_kib(t.llama->pid())) / 1024;
    }
    std::printf("prompt tokens: %d (one image of %dx%d)\n", img.prompt_tokens, image_size, image_size);
    print_ttfts(img);
    result_at("images/ttft_ms/single", img.single, "ms", "reported", true, {21, "TTFT ms", 0});
    result_at("images/ttft_ms/pd", img.pd, "ms", "reported", true, {21, "TTFT ms", 1});
    result_at("images/ttft_ms/llama_server", img.llama, "ms", "reported", true, {21, "TTFT ms", 2});
    result("images/pd_over_single", img.pd_ratio, "x", "<= 1.10", img.pd_ratio.median <= 1.10);
    const bool llama_ok = img.llama_ratio.median <= 1.05;
    result("images/baton_over_llama_server", img.llama_ratio, "x", "<= 1.05", llama_ok);

    const double saved = rss_single - rss_dec;
    std::printf(
        "RSS MiB: single %.1f, prefill %.1f, decode %.1f (saved %.1f; projector file %.1f MiB), llama-server %.1f\n",
        rss_single, rss_pre, rss_dec, saved, mmproj_mib, rss_llama);
    auto one = [](double v) { return stats{v, v, v, 1}; };
    result("images/rss_mib/single", one(rss_single), "MiB", "reported", true);
    result("images/rss_mib/decode", one(rss_dec), "MiB", "reported", true);
    result("images/rss_mib/llama_server", one(rss_llama), "MiB", "reported", true);
    result("images/projector_mib", one(mmproj_mib), "MiB", "reported", true);
    const bool mem_ok = saved >= 0.8 * mmproj_mib;
    result("images/decode_rss_saved_mib", one(saved), "MiB", ">= 0.8x the projector file", mem_ok);

    // Audio: a 1-s clip through the qwen2a projector (750 embeddings), the same three targets.
    {
        const std::string aproj = quick ? projector("qwen2a", text_w, 128, 2) : projector("qwen2a", text_w, 512, 4);
        const targets t = start_targets(model, aproj, 2048);
        const ttfts aud =
            measure(t, quick ? 2 : 4, [](uint32_t seed) { return audio_body(test::test_wav(1000, seed)); });
        std::printf("prompt tokens: %d (one 1-s clip)\n", aud.prompt_tokens);
        print_ttfts(aud);
        report_info("audio", aud);
    }
    // M-RoPE images (info): Qwen2-VL's merger on a qwen2vl text model of the same size. Full mode only (quick runs
    // the same code path above).
    if (!quick) {
        const std::string qproj = projector("qwen2vl_merger", text_w, 512, 6, 448, 14);
        const targets t = start_targets(bench_model("qwen2vl", 512, 8), qproj, 2048);
        const ttfts q = measure(t, 4, [](uint32_t seed) { return chat_body(test::test_bmp(448, 448, seed)); });
        std::printf("prompt tokens: %d (one 448x448 image on a 16 x 16 grid, M-RoPE)\n", q.prompt_tokens);
        print_ttfts(q);
        report_info("images_mrope", q);
    }
    headline(21, "images/pd_over_single", img.pd_ratio, "x", "<= 1.10", img.pd_ratio.median <= 1.10);
    return 0;
} catch (const std::exception & e) {
    std::fprintf(stderr, "image_bench: %s\n", e.what());
    return 1;
}
