// engine_fixture.h — shared helpers for engine tests: cached models, engines, prompts, blob surgery.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <span>

#include "baton/blob.h"
#include "baton/engine.h"
#include "baton/generate.h"
#include "baton/model.h"
#include "baton/testmodel/mkmodel.h"
#include "engine_test_seam.h"
#include "support/test_support.h"

namespace baton::test {

// family_case: a model family and whether its KV cache is unified. family_cases: every family mkmodel makes with
// a unified cache, and non-unified too for llama, or for every family (non_unified_all), and qwen2vl (M-RoPE: its
// cells carry x, y and the token, so its states, deltas and tiers take another cell layout); a sanitized build
// keeps llama and granitehybrid (one attention-only, one hybrid). family_case_name names a parameterized test's case.
struct family_case {
    std::string arch;
    bool unified = true;
};
inline std::vector<family_case> family_cases(bool non_unified_all = false) {
    std::vector<family_case> out;
    for (const auto & a : mkmodel_archs()) {
        if (k_sanitized_build && a != "llama" && a != "granitehybrid") continue;
        out.push_back({a, true});
        if (non_unified_all || a == "llama") out.push_back({a, false});
    }
    if (!k_sanitized_build) out.push_back({"qwen2vl", true});
    return out;
}
inline std::string family_case_name(const ::testing::TestParamInfo<family_case> & info) {
    return info.param.arch + (info.param.unified ? "_unified" : "_non_unified");
}

inline std::shared_ptr<const loaded_model> model_for(const std::string & arch, unsigned seed = 1) {
    static std::map<std::string, std::shared_ptr<const loaded_model>> cache;
    const std::string key = arch + "/" + std::to_string(seed);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    auto m = loaded_model::load(test_model_path(arch, seed));
    if (!m.ok()) throw std::runtime_error(m.status().to_string());
    std::shared_ptr<const loaded_model> sp(std::move(m.value()));
    cache[key] = sp;
    return sp;
}

inline engine_config engine_cfg(uint32_t slots = 1, uint32_t n_ctx = 2048) {
    engine_config c;
    c.ctx.n_ctx = n_ctx;
    c.ctx.n_seq_max = slots;
    return c;
}

// family_test: the base of the suites parameterized over family_cases — the case's model, its vocabulary size,
// a name for messages, and family_cfg (engine_cfg with the case's KV unification).
class family_test : public ::testing::TestWithParam<family_case> {
  protected:
    std::shared_ptr<const loaded_model> m() { return model_for(GetParam().arch); }
    int32_t n_vocab() { return int32_t(m()->identity().n_vocab); }
    std::string what() { return GetParam().arch + (GetParam().unified ? " unified" : " non-unified"); }
    engine_config family_cfg(uint32_t slots, uint32_t n_ctx) {
        engine_config c = engine_cfg(slots, n_ctx);
        c.ctx.kv_unified = GetParam().unified;
        return c;
    }
};

// logit_recorder keeps, per request id, the logits every generated token was sampled from (through the
// engine's test seam). One per engine made by make_engine.
class logit_recorder {
  public:
    void record(uint64_t id, std::span<const float> logits) {
        std::lock_guard lk(mu_);
        by_request_[id].emplace_back(logits.begin(), logits.end());
    }
    std::vector<std::vector<float>> take(uint64_t id) {
        std::lock_guard lk(mu_);
        auto node = by_request_.extract(id);
        return node ? std::move(node.mapped()) : std::vector<std::vector<float>>{};
    }

  private:
    std::mutex mu_;
    std::map<uint64_t, std::vector<std::vector<float>>> by_request_;
};

inline std::map<const engine *, std::shared_ptr<logit_recorder>> & recorders() {
    static std::map<const engine *, std::shared_ptr<logit_recorder>> r;
    return r;
}

// make_engine creates an engine whose sampled logits are recorded (see run_task). desync_after, when set,
// becomes the seam's desync hook.
inline std::unique_ptr<engine> make_engine(const std::shared_ptr<const loaded_model> & m, const engine_config & c,
                                           std::function<bool(uint64_t, uint32_t)> desync_after = {}) {
    auto rec = std::make_shared<logit_recorder>();
    auto seam = std::make_shared<engine_test_seam>();
    seam->on_sample = [rec](uint64_t id, std::span<const float> logits) { rec->record(id, logits); };
    seam->desync_after = std::move(desync_after);
    auto e = engine_test_access::create(m, c, seam);
    if (!e.ok()) throw std::runtime_error(e.status().to_string());
    recorders()[e.value().get()] = rec;
    return std::move(e.value());
}

// run_result: engine_run_to_end's result plus the logits each token was sampled from.
struct run_result : engine_result {
    std::vector<std::vector<float>> logits;  // [n_tokens][n_vocab]
};

// A deterministic prompt of n tokens: BOS then ids drawn from the non-control part of the vocabulary.
inline std::vector<token_id> make_prompt(size_t n, unsigned seed, int32_t n_vocab) {
    std::mt19937 rng(seed);
    std::vector<token_id> p = {1};
    while (p.size() < n) p.push_back(token_id(5 + rng() % uint32_t(n_vocab - 5)));
    return p;
}

// concat: a followed by b (prompts built from parts).
inline std::vector<token_id> concat(std::vector<token_id> a, const std::vector<token_id> & b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

inline run_result run_task(engine & e, engine_task t) {
    run_result r;
    auto h = e.submit(std::move(t));
    if (!h.ok()) {
        r.done = h.status();
        return r;
    }
    static_cast<engine_result &>(r) = engine_run_to_end(h.value(), std::chrono::seconds(300));
    if (auto it = recorders().find(&e); it != recorders().end()) r.logits = it->second->take(h.value()->id());
    return r;
}

inline gen_request greedy(std::vector<token_id> prompt, int n = 32) {
    gen_request r;
    r.prompt = std::move(prompt);
    r.n_predict = n;
    r.sampling.temperature = 0;
    return r;
}

// The oracle's output for the same request and context config.
inline generate_output oracle(const loaded_model & m, const gen_request & r, const engine_config & c) {
    generate_params p;
    p.prompt = r.prompt;
    p.n_predict = r.n_predict;
    p.sampling = r.sampling;
    p.record_logits = true;
    p.ctx = c.ctx;
    auto out = generate_run(m, p);
    if (!out.ok()) throw std::runtime_error(out.status().to_string());
    return std::move(out.value());
}

// blob_rewrite parses bytes, lets f edit the parts, and writes a new blob (checksums recomputed).
template <typename F>
std::vector<uint8_t> blob_rewrite(const std::vector<uint8_t> & bytes, F f) {
    auto v = blob_parse(std::span<const uint8_t>(bytes.data(), bytes.size()));
    if (!v.ok()) throw std::runtime_error(v.status().to_string());
    const blob_view & b = v.value();
    std::vector<uint8_t> state(b.state.begin(), b.state.end());
    std::vector<int32_t> tokens = b.tokens;
    std::vector<float> logits = b.logits.value_or(std::vector<float>{});
    blob_parts parts;
    parts.identity = b.identity;
    parts.context = b.context;
    parts.checkpoints = b.checkpoints;
    if (b.request) parts.request = *b.request;  // borrows b, which outlives parts
    parts.generation = b.generation;
    f(parts, state, tokens, logits);
    parts.state = state;
    parts.tokens = tokens;
    parts.logits = logits;
    blob_buffer_sink sink;
    Status st = blob_write(parts, sink);
    if (!st.ok()) throw std::runtime_error(st.to_string());
    return std::move(sink.bytes());
}

inline blob_ptr validated(std::vector<uint8_t> bytes) {
    auto b = validated_blob::parse(std::move(bytes), blob_limits{});
    if (!b.ok()) throw std::runtime_error(b.status().to_string());
    return b.value();
}

}  // namespace baton::test
