// sampling.cpp — sampler chain construction.
#include "baton/sampling.h"

#include <llama.h>

#include <cmath>
#include <string_view>
#include <vector>

#include "baton/text.h"
#include "utf8_guard.h"

namespace baton {

void sampler_deleter::operator()(llama_sampler * s) const { llama_sampler_free(s); }

Status sampling_check(const sampling_params & p) {
    auto bad = [](const std::string & m) { return Status(status_code::invalid_argument, m); };
    if (!std::isfinite(p.temperature) || p.temperature < 0 || p.temperature > 100)
        return bad("temperature: " + std::to_string(p.temperature) + " is not in 0..100");
    if (p.top_k < 0) return bad("top_k: " + std::to_string(p.top_k) + " is negative");
    if (!std::isfinite(p.top_p) || p.top_p <= 0 || p.top_p > 1)
        return bad("top_p: " + std::to_string(p.top_p) + " is not in (0, 1]");
    if (!std::isfinite(p.min_p) || p.min_p < 0 || p.min_p > 1)
        return bad("min_p: " + std::to_string(p.min_p) + " is not in [0, 1]");
    if (!std::isfinite(p.repeat_penalty) || p.repeat_penalty <= 0 || p.repeat_penalty > 10)
        return bad("repeat_penalty: " + std::to_string(p.repeat_penalty) + " is not in (0, 10]");
    if (p.repeat_last_n < 0 || p.repeat_last_n > 4096)
        return bad("repeat_last_n: " + std::to_string(p.repeat_last_n) + " is not in 0..4096");
    if (!std::isfinite(p.frequency_penalty) || std::fabs(p.frequency_penalty) > 2)
        return bad("frequency_penalty: " + std::to_string(p.frequency_penalty) + " is not in -2..2");
    if (!std::isfinite(p.presence_penalty) || std::fabs(p.presence_penalty) > 2)
        return bad("presence_penalty: " + std::to_string(p.presence_penalty) + " is not in -2..2");
    if (p.logit_bias.size() > 1024) return bad("logit_bias: at most 1024 entries");
    for (const auto & [token, bias] : p.logit_bias) {
        if (token < 0) return bad("logit_bias: token " + std::to_string(token) + " is negative");
        if (!(bias == -INFINITY || (bias >= -100 && bias <= 100)))
            return bad("logit_bias: bias " + std::to_string(bias) + " of token " + std::to_string(token) +
                       " is not in -100..100 (or false: never)");
    }
    if (p.grammar.gbnf.size() > grammar_bytes_max) return bad("grammar: more than 1 MiB");
    if (p.grammar.trigger_patterns.size() > 16) return bad("grammar_triggers: at most 16 patterns");
    if (p.grammar.lazy && p.grammar.trigger_patterns.empty())
        return bad("grammar_triggers: a lazy grammar needs at least one trigger pattern");
    if (p.grammar.gbnf.empty() && (p.grammar.lazy || !p.grammar.trigger_patterns.empty()))
        return bad("grammar_triggers: triggers without a grammar");
    BATON_RETURN_IF_ERROR(grammar_limits_check(p.grammar_bounds));
    if (!p.grammar.gbnf.empty()) BATON_RETURN_IF_ERROR(grammar_check(p.grammar.gbnf, p.grammar_bounds));
    return {};
}

namespace {

Status grammar_rejected() {
    return {status_code::invalid_argument, "grammar: libllama's GBNF parser rejected it (or a trigger pattern)"};
}

// make_grammar: the grammar sampler. The only caller of libllama's grammar constructors: a grammar that
// grammar_check refuses never reaches them (their parser recurses on the grammar's shape).
Result<llama_sampler *> make_grammar(const sampling_params & p, const llama_vocab * vocab) {
    const sampling_grammar & g = p.grammar;
    BATON_RETURN_IF_ERROR(grammar_check(g.gbnf, p.grammar_bounds));
    llama_sampler * s = nullptr;
    if (!g.lazy) {
        s = llama_sampler_init_grammar(vocab, g.gbnf.c_str(), "root");
    } else {
        std::vector<const char *> patterns;
        for (const auto & t : g.trigger_patterns) patterns.push_back(t.c_str());
        s = llama_sampler_init_grammar_lazy_patterns(vocab, g.gbnf.c_str(), "root", patterns.data(), patterns.size(),
                                                     nullptr, 0);
    }
    if (!s) return grammar_rejected();
    return s;
}

}  // namespace

Result<int32_t> sampling_sample(llama_sampler * chain, const float * logits, size_t n) {
    std::vector<llama_token_data> cur(n);
    for (size_t i = 0; i < n; ++i) cur[i] = {llama_token(i), logits[i], 0.0f};
    llama_token_data_array arr = {cur.data(), cur.size(), -1, false};
    try {
        llama_sampler_apply(chain, &arr);
        if (arr.selected < 0 || size_t(arr.selected) >= arr.size || arr.data[arr.selected].logit == -INFINITY)
            return int32_t(-1);
        const llama_token t = arr.data[arr.selected].id;
        llama_sampler_accept(chain, t);
        return int32_t(t);
    } catch (const std::exception & e) {  // libllama's grammar sampler reports a broken state by throwing
        return Status(status_code::engine_error, std::string("sampling: ") + e.what());
    }
}

Status sampling_replay(llama_sampler * chain, std::span<const int32_t> generated) {
    if (generated.empty()) return {};
    try {
        for (int32_t t : generated) llama_sampler_accept(chain, t);
    } catch (const std::exception & e) {  // (libllama's grammar sampler throws on a token it cannot accept)
        return Status(status_code::incompatible,
                      std::string("generation: the sampler refused a generated token: ") + e.what());
    }
    const int n = llama_sampler_chain_n(chain);
    for (int i = 0; i < n; ++i) {
        llama_sampler * s = llama_sampler_chain_get(chain, i);
        if (std::string_view(llama_sampler_name(s)) != "dist") continue;
        // One draw per sampled token: two candidates, so no draw is skipped as trivial.
        for (size_t k = 0; k < generated.size(); ++k) {
            llama_token_data two[2] = {{0, 0.0f, 0.0f}, {1, 0.0f, 0.0f}};
            llama_token_data_array arr = {two, 2, -1, false};
            llama_sampler_apply(s, &arr);
        }
    }
    return {};
}

Status sampling_check_grammar(const sampling_params & p, const llama_vocab * vocab) {
    if (p.grammar.gbnf.empty()) return {};
    auto g = make_grammar(p, vocab);
    if (!g.ok()) return g.status();
    llama_sampler_free(g.value());
    return {};
}

token_pieces sampling_token_pieces(const llama_vocab * vocab) {
    auto out = std::make_shared<std::vector<std::string>>();
    const int32_t n = llama_vocab_n_tokens(vocab);
    out->reserve(size_t(n));
    for (int32_t t = 0; t < n; ++t) out->push_back(text_token_piece(vocab, t));
    return out;
}

Result<sampler_ptr> sampling_make_chain(const sampling_params & p, const llama_vocab * vocab,
                                        const token_pieces & pieces) {
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    llama_sampler_chain_params cp = llama_sampler_chain_default_params();
    cp.no_perf = true;
    sampler_ptr chain(llama_sampler_chain_init(cp));
    if (!p.logit_bias.empty()) {
        std::vector<llama_logit_bias> biases;
        for (const auto & [token, bias] : p.logit_bias) biases.push_back({token, bias});
        llama_sampler_chain_add(chain.get(),
                                llama_sampler_init_logit_bias(n_vocab, int32_t(biases.size()), biases.data()));
    }
    if (!p.grammar.gbnf.empty()) {
        auto g = make_grammar(p, vocab);
        if (!g.ok()) return g.status();
        llama_sampler_chain_add(chain.get(), utf8_guard_make(pieces ? pieces : sampling_token_pieces(vocab)));
        llama_sampler_chain_add(chain.get(), g.value());
    }
    if (p.repeat_penalty != 1.0f || p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f)
        llama_sampler_chain_add(chain.get(), llama_sampler_init_penalties(n_vocab, p.repeat_last_n, p.repeat_penalty,
                                                                          p.frequency_penalty, p.presence_penalty));
    if (p.temperature <= 0.0f) {
        llama_sampler_chain_add(chain.get(), llama_sampler_init_greedy());
        return chain;
    }
    if (p.top_k > 0) llama_sampler_chain_add(chain.get(), llama_sampler_init_top_k(p.top_k));
    if (p.top_p < 1.0f) llama_sampler_chain_add(chain.get(), llama_sampler_init_top_p(p.top_p, 1));
    if (p.min_p > 0.0f) llama_sampler_chain_add(chain.get(), llama_sampler_init_min_p(p.min_p, 1));
    llama_sampler_chain_add(chain.get(), llama_sampler_init_temp(p.temperature));
    llama_sampler_chain_add(chain.get(), llama_sampler_init_dist(p.seed));
    return chain;
}

}  // namespace baton
