// bench_engine.h — helpers for the benchmarks that drive an engine in process (restore_bench, device_bench):
// a seeded random prompt, and a task run to its end (the benchmark exits on a submission error).
// Thread-safety: plain functions; engine_run_or_exit waits on its own task only.
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "baton/engine.h"

namespace baton::bench {

// engine_prompt_of: BOS then n-1 ordinary token ids (>= 5) of a vocabulary of n_vocab, seeded by n (the same
// length gives the same prompt in every run and every benchmark).
inline std::vector<token_id> engine_prompt_of(size_t n, int32_t n_vocab) {
    std::mt19937 rng{uint32_t(n)};
    std::vector<token_id> p = {1};
    while (p.size() < n) p.push_back(token_id(5 + rng() % uint32_t(n_vocab - 5)));
    return p;
}

// engine_run_or_exit submits t and waits (up to 20 minutes) for its result; a refused submission ends the
// benchmark (exit 1) with the reason.
inline engine_result engine_run_or_exit(engine & e, engine_task t) {
    auto h = e.submit(std::move(t));
    if (!h.ok()) {
        std::fprintf(stderr, "bench: %s\n", h.status().to_string().c_str());
        std::exit(1);
    }
    return engine_run_to_end(h.value(), std::chrono::minutes(20));
}

}  // namespace baton::bench
