// sampling_replay_test.cpp — sampling_replay (sampling.h): a fresh chain brought to where another chain stood after
// k sampled tokens samples exactly what that chain samples from then on, for every sampler configuration the
// engine builds (seeded dist with top-k/top-p/min-p, penalties, logit_bias, a grammar), and libllama's dist
// sampler draws once per call whatever its candidates (the fact the replay rests on).
#include <llama.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "engine_fixture.h"

namespace baton {
namespace {

using namespace baton::test;

// Deterministic logits for step i: random, with a few peaks so that top-p/min-p keep from one to many candidates.
std::vector<float> step_logits(int32_t n_vocab, unsigned seed, size_t step) {
    std::mt19937 rng(seed * 7919u + unsigned(step));
    std::normal_distribution<float> d(0.0f, 2.0f);
    std::vector<float> l(static_cast<size_t>(n_vocab));
    for (auto & x : l) x = d(rng);
    const size_t peaks = rng() % 4;
    for (size_t p = 0; p < peaks; ++p) l[rng() % l.size()] += 6.0f + float(rng() % 8);
    return l;
}

struct replay_case {
    std::string name;
    sampling_params p;
};

std::vector<replay_case> replay_cases() {
    std::vector<replay_case> out;
    sampling_params base;
    base.seed = 1234;
    out.push_back({"default_seeded", base});
    sampling_params wide = base;
    wide.top_k = 0, wide.top_p = 1.0f, wide.min_p = 0.0f, wide.temperature = 1.5f;
    out.push_back({"whole_vocabulary", wide});
    sampling_params narrow = base;  // often one candidate left: dist still draws
    narrow.top_k = 0, narrow.top_p = 1.0f, narrow.min_p = 0.6f;
    out.push_back({"min_p_often_one_candidate", narrow});
    sampling_params one = base;
    one.top_k = 1;
    out.push_back({"top_k_1", one});
    sampling_params pen = base;
    pen.repeat_penalty = 1.3f, pen.frequency_penalty = 0.5f, pen.presence_penalty = 0.4f, pen.repeat_last_n = 8;
    pen.logit_bias = {{7, 3.0f}, {11, -INFINITY}};
    out.push_back({"penalties_and_bias", pen});
    sampling_params gram = base;
    gram.grammar.gbnf = "root ::= [a-z ]+";
    out.push_back({"grammar", gram});
    sampling_params greedy_pen;
    greedy_pen.temperature = 0;
    greedy_pen.repeat_penalty = 1.5f, greedy_pen.repeat_last_n = 16;
    out.push_back({"greedy_penalties", greedy_pen});
    return out;
}

std::vector<int32_t> sample_steps(llama_sampler * chain, int32_t n_vocab, unsigned seed, size_t from, size_t to) {
    std::vector<int32_t> out;
    for (size_t i = from; i < to; ++i) {
        const std::vector<float> l = step_logits(n_vocab, seed, i);
        auto t = sampling_sample(chain, l.data(), l.size());
        if (!t.ok()) throw std::runtime_error(t.status().to_string());
        out.push_back(t.value());
        if (t.value() < 0) break;
    }
    return out;
}

TEST(SamplingReplay, AReplayedChainSamplesWhatTheOriginalSamplesFromThenOn) {
    const auto m = model_for("llama");
    const llama_vocab * vocab = m->vocab();
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    constexpr size_t n_steps = 48;
    for (const replay_case & c : replay_cases()) {
        for (unsigned seed : {1u, 2u, 3u}) {
            sampling_params p = c.p;
            if (p.temperature > 0) p.seed = 1000 + seed;
            auto a = sampling_make_chain(p, vocab);
            ASSERT_TRUE(a.ok()) << c.name << ": " << a.status().to_string();
            const std::vector<int32_t> all = sample_steps(a.value().get(), n_vocab, seed, 0, n_steps);
            ASSERT_FALSE(all.empty());
            ASSERT_GE(all.back(), 0) << c.name << ": the chain ran out of candidates";
            for (size_t k : {size_t(0), size_t(1), size_t(5), size_t(23), n_steps - 1}) {
                auto b = sampling_make_chain(p, vocab);
                ASSERT_TRUE(b.ok());
                ASSERT_TRUE(sampling_replay(b.value().get(), std::span<const int32_t>(all.data(), k)).ok());
                const std::vector<int32_t> rest = sample_steps(b.value().get(), n_vocab, seed, k, n_steps);
                EXPECT_EQ(rest, std::vector<int32_t>(all.begin() + std::ptrdiff_t(k), all.end()))
                    << c.name << " seed " << seed << ": replayed over the first " << k << " tokens";
            }
        }
    }
}

// Without the RNG's draws the replay would be wrong: a chain that only accepts the tokens samples differently (so
// the test above can fail).
TEST(SamplingReplay, AcceptingWithoutTheDrawsDiverges) {
    const auto m = model_for("llama");
    const llama_vocab * vocab = m->vocab();
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    sampling_params p;
    p.seed = 77, p.top_k = 0, p.top_p = 1.0f, p.min_p = 0.0f, p.temperature = 1.5f;
    auto a = sampling_make_chain(p, vocab);
    ASSERT_TRUE(a.ok());
    const std::vector<int32_t> all = sample_steps(a.value().get(), n_vocab, 9, 0, 40);
    auto b = sampling_make_chain(p, vocab);
    ASSERT_TRUE(b.ok());
    for (size_t i = 0; i < 10; ++i) llama_sampler_accept(b.value().get(), all[i]);
    EXPECT_NE(sample_steps(b.value().get(), n_vocab, 9, 10, 40), std::vector<int32_t>(all.begin() + 10, all.end()));
}

// The fact sampling_replay rests on: libllama's dist sampler advances its RNG by the same amount on every call,
// whatever the candidates (one, two or the whole vocabulary).
TEST(SamplingReplay, LibllamaDistDrawsOncePerCallWhateverTheCandidates) {
    for (uint32_t seed = 0; seed < 50; ++seed) {
        auto pick_after = [&](size_t first_size) {
            llama_sampler * d = llama_sampler_init_dist(seed);
            std::vector<llama_token_data> first;
            for (size_t i = 0; i < first_size; ++i) first.push_back({llama_token(i), float(i % 3), 0.0f});
            llama_token_data_array a1 = {first.data(), first.size(), -1, false};
            llama_sampler_apply(d, &a1);
            std::vector<llama_token_data> flat;
            for (int i = 0; i < 64; ++i) flat.push_back({i, 0.0f, 0.0f});
            llama_token_data_array a2 = {flat.data(), flat.size(), -1, false};
            llama_sampler_apply(d, &a2);
            const int64_t picked = a2.selected;
            llama_sampler_free(d);
            return picked;
        };
        const int64_t after_two = pick_after(2);
        EXPECT_EQ(pick_after(1), after_two) << "seed " << seed;
        EXPECT_EQ(pick_after(1000), after_two) << "seed " << seed;
    }
}

TEST(SamplingReplay, ATokenTheGrammarCannotAcceptIsRefused) {
    const auto m = model_for("llama");
    const llama_vocab * vocab = m->vocab();
    sampling_params p;
    p.temperature = 0;
    p.grammar.gbnf = "root ::= [a-z ]+";
    auto c = sampling_make_chain(p, vocab);
    ASSERT_TRUE(c.ok());
    // A token whose text has a character outside [a-z ] (libllama's grammar sampler throws on it; an end-of-generation
    // token it would abort on never reaches the replay: the engine refuses those first).
    const token_pieces pieces = sampling_token_pieces(vocab);
    int32_t bad_token = -1;
    for (size_t i = 0; i < pieces->size() && bad_token < 0; ++i) {
        const std::string & t = (*pieces)[i];
        // (a printable piece with no lowercase letter or space: nothing of it continues the grammar)
        const bool printable = std::all_of(t.begin(), t.end(), [](char ch) { return ch > 0x20 && ch < 0x7f; });
        if (!t.empty() && printable && t.find_first_of("abcdefghijklmnopqrstuvwxyz ") == std::string::npos &&
            !llama_vocab_is_eog(vocab, llama_token(i)) && !llama_vocab_is_control(vocab, llama_token(i)))
            bad_token = int32_t(i);
    }
    ASSERT_GE(bad_token, 0);
    const std::vector<int32_t> bad = {bad_token};
    Status st = sampling_replay(c.value().get(), bad);
    SCOPED_TRACE("token " + std::to_string(bad_token) + " \"" + (*pieces)[size_t(bad_token)] + "\"");
    EXPECT_EQ(st.code(), status_code::incompatible) << st.to_string();
}

}  // namespace
}  // namespace baton
