// bench_util.h — shared helpers for Baton's benchmarks: repeated measurement (median, min, max), result
// lines in the machine-readable format bench/run collects, and cached benchmark models.
//
// Every benchmark prints a human table on stdout and one JSON line per figure prefixed with "RESULT ":
//   RESULT {"name":..., "value":..., "unit":..., "target":..., "ok":true|false, "min":..., "max":..., "n":...}
// optionally with "fig" (figure number), "series" and "x" so bench_report can plot it, and one headline line
// per figure prefixed with "FIGURE " (same fields plus "fig"): bench/results/latest.json holds the headlines.
#pragma once

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "baton/testmodel/mkmodel.h"

namespace baton::bench {

struct stats {
    double median = 0, min = 0, max = 0;
    size_t n = 0;
};

inline stats summarize(std::vector<double> v) {
    stats s;
    if (v.empty()) return s;
    std::sort(v.begin(), v.end());
    s.n = v.size();
    s.min = v.front();
    s.max = v.back();
    s.median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
    return s;
}

inline double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// result prints one figure. target_text is human-readable ("<= 1%"); ok says whether it is met.
inline void result(const std::string & name, const stats & s, const std::string & unit, const std::string & target_text, bool ok) {
    std::printf("RESULT {\"name\":\"%s\",\"value\":%.6g,\"unit\":\"%s\",\"target\":\"%s\",\"ok\":%s,\"min\":%.6g,\"max\":%.6g,\"n\":%zu}\n",
                name.c_str(), s.median, unit.c_str(), target_text.c_str(), ok ? "true" : "false", s.min, s.max, s.n);
    std::fflush(stdout);
}

// plot_point places a RESULT on a figure's plot: series name and x coordinate.
struct plot_point {
    int fig = 0;
    std::string series;
    double x = 0;
};

inline std::string json_fields(const std::string & name, const stats & s, const std::string & unit, const std::string & target_text,
                               bool ok) {
    char buf[1024];
    std::snprintf(buf, sizeof buf, "\"name\":\"%s\",\"value\":%.6g,\"unit\":\"%s\",\"target\":\"%s\",\"ok\":%s,\"min\":%.6g,\"max\":%.6g,\"n\":%zu",
                  name.c_str(), s.median, unit.c_str(), target_text.c_str(), ok ? "true" : "false", s.min, s.max, s.n);
    return buf;
}

// result_at prints a RESULT placed on a plot.
inline void result_at(const std::string & name, const stats & s, const std::string & unit, const std::string & target_text, bool ok,
                      const plot_point & p) {
    std::printf("RESULT {%s,\"fig\":%d,\"series\":\"%s\",\"x\":%.6g}\n", json_fields(name, s, unit, target_text, ok).c_str(), p.fig,
                p.series.c_str(), p.x);
    std::fflush(stdout);
}

// headline prints the one FIGURE line of figure fig (its entry in bench/results/latest.json).
inline void headline(int fig, const std::string & name, const stats & s, const std::string & unit, const std::string & target_text, bool ok) {
    std::printf("FIGURE {%s,\"fig\":%d}\n", json_fields(name, s, unit, target_text, ok).c_str(), fig);
    std::fflush(stdout);
}

// bench_models_dir: where benchmark models are cached, $BATON_BENCH_DIR (default build/bench-models), created.
inline std::string bench_models_dir() {
    const char * env = std::getenv("BATON_BENCH_DIR");
    const std::string dir = env && *env ? env : "build/bench-models";
    ::mkdir(dir.c_str(), 0755);
    return dir;
}

// bench_model returns a cached benchmark model (made with mkmodel on first use) under $BATON_BENCH_DIR
// (default build/bench-models). wtype: mkmodel's weight type (f32, f16, q8_0, q4_K); a non-f32 model's
// file name ends in -<wtype>.
inline std::string bench_model(const std::string & arch, int n_embd, int n_layer, int n_ctx = 8192,
                               const std::string & wtype = "f32") {
    const std::string path = bench_models_dir() + "/" + arch + "-" + std::to_string(n_embd) + "x" +
                             std::to_string(n_layer) + (wtype == "f32" ? "" : "-" + wtype) + ".gguf";
    mkmodel_params p;
    p.arch = arch;
    p.n_embd = n_embd;
    p.n_layer = n_layer;
    p.n_ctx = n_ctx;
    p.wtype = wtype;
    Status s = mkmodel_ensure(p, path);
    if (!s.ok()) {
        std::fprintf(stderr, "bench: %s\n", s.to_string().c_str());
        std::exit(1);
    }
    return path;
}

// quick_mode: `--quick` on the command line (smoke mode: fewer sizes and runs).
inline bool quick_mode(int argc, char ** argv) {
    for (int i = 1; i < argc; ++i)
        if (std::string(argv[i]) == "--quick") return true;
    return false;
}

// arg_int: the integer after `flag` on the command line (std::atoi), else dflt.
inline int arg_int(int argc, char ** argv, const std::string & flag, int dflt) {
    for (int i = 1; i + 1 < argc; ++i)
        if (argv[i] == flag) return std::atoi(argv[i + 1]);
    return dflt;
}

}  // namespace baton::bench
