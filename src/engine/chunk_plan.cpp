// chunk_plan.cpp — prompt chunking shared by the oracle and the engine.
#include "baton/chunk_plan.h"

#include <algorithm>

namespace baton {

std::vector<uint32_t> chunk_plan_checkpoints(uint32_t n_begin, uint32_t n_prompt, const checkpoint_policy & p) {
    std::vector<uint32_t> at;
    if (p.every > 0)
        for (uint64_t n = p.every; n < n_prompt; n += p.every)
            if (n > n_begin) at.push_back(uint32_t(n));
    if (p.tail > 0 && n_prompt > p.tail && n_prompt - p.tail > n_begin) at.push_back(n_prompt - p.tail);
    std::sort(at.begin(), at.end());
    at.erase(std::unique(at.begin(), at.end()), at.end());
    return at;
}

std::vector<uint32_t> chunk_plan_ends(uint32_t n_begin, uint32_t n_prompt, uint32_t n_batch, bool partial_state,
                                      const checkpoint_policy & p) {
    std::vector<uint32_t> ends;
    if (n_batch == 0 || n_begin >= n_prompt) return ends;
    std::vector<uint32_t> stops;
    if (partial_state) stops = chunk_plan_checkpoints(n_begin, n_prompt, p);
    stops.push_back(n_prompt);
    uint32_t at = n_begin;
    for (uint32_t stop : stops) {
        while (at < stop) {
            at = std::min(stop, at + n_batch);
            ends.push_back(at);
        }
    }
    return ends;
}

}  // namespace baton
