// migration_test.cpp — live migration through the engine (request_handle::migrate, blob_generation): a generation
// paused on one engine and resumed from its state on another (nothing shared but the bytes) answers token for
// token, byte for byte and logit for logit what one engine answers without moving, on every family, greedy,
// seeded and under a grammar, paused before its first token, after the first, mid-way and near the end, and
// moved twice; a state whose generated tokens the resuming request cannot take is refused with the slot empty.
#include <cstdio>
#include <functional>

#include <llama.h>

#include "engine_fixture.h"

namespace baton {
namespace {

using namespace baton::test;

struct gen_mode {
    std::string name;
    sampling_params sampling;
};

std::vector<gen_mode> gen_modes() {
    sampling_params greedy_p;
    greedy_p.temperature = 0;
    sampling_params seeded;
    seeded.seed = 42;
    sampling_params grammar = seeded;
    grammar.grammar.gbnf = "root ::= [a-z ]+";
    return {{"greedy", greedy_p}, {"seeded", seeded}, {"seeded_grammar", grammar}};
}

// What one side of a migration saw: the token events (replayed ones apart), the terminal event, the logits each
// token it sampled came from.
struct side {
    std::vector<event_token> replayed, tokens;
    Result<event_done> done{Status(status_code::internal, "no terminal event")};
    std::vector<std::vector<float>> logits;
    std::string text() const {
        std::string t;
        for (const auto & e : tokens) t += e.text;
        return t + (done.ok() ? done->tail : std::string());
    }
};

// run_side runs task on e; once `migrate_at` tokens were generated here (0: before the first), asks it to migrate
// (never when migrate_at < 0).
side run_side(engine & e, engine_task task, int migrate_at) {
    side out;
    auto h = e.submit(std::move(task));
    if (!h.ok()) {
        out.done = h.status();
        return out;
    }
    if (migrate_at == 0) h.value()->migrate();
    for (;;) {
        engine_event ev;
        if (!h.value()->next(ev, std::chrono::seconds(300))) {
            out.done = Status(status_code::deadline_exceeded, "no event in 300 s");
            break;
        }
        if (auto * t = std::get_if<event_token>(&ev)) {
            (t->replayed ? out.replayed : out.tokens).push_back(*t);
            if (!t->replayed && int(out.tokens.size()) == migrate_at) h.value()->migrate();
        } else if (auto * d = std::get_if<event_done>(&ev)) {
            out.done = std::move(*d);
            break;
        } else if (auto * err = std::get_if<event_error>(&ev)) {
            out.done = err->error;
            break;
        }
    }
    if (auto it = recorders().find(&e); it != recorders().end()) out.logits = it->second->take(h.value()->id());
    return out;
}

// run_moved: run_side asking to move once `at` tokens were generated, again while the generation ended before the
// request reached the engine — the tokens can come faster than a client asks (regression: flaky under a loaded
// ctest, a tiny model finishing 2 or 6 tokens after the point); such a run did not move. At most 5 runs.
side run_moved(engine & e, const std::function<engine_task()> & task, int at) {
    side s;
    for (int attempt = 0; attempt < 5; ++attempt) {
        s = run_side(e, task(), at);
        if (!s.done.ok() || s.done->finish == finish_reason::migrated) break;
    }
    return s;
}

std::vector<token_id> ids(const std::vector<event_token> & evs) {
    std::vector<token_id> out;
    for (const auto & e : evs) out.push_back(e.token);
    return out;
}

class Migration : public family_test {
  protected:
    engine_config cfg() {
        engine_config c = family_cfg(2, 2048);
        // A sliding-window model resumes exactly only with flash attention (engine::resumes_exactly; the test
        // below pins why): the others are tested with it off, the default on the CPU.
        c.ctx.flash_attn = llama_model_n_swa(m()->get()) > 0;
        return c;
    }
};

TEST_P(Migration, AGenerationMovedToAnotherEngineContinuesAsIfItHadNotMoved) {
    const engine_config c = cfg();
    constexpr int n_predict = 24;
    unsigned prompt_seed = 100;
    uint64_t migrated = 0;
    for (const gen_mode & mode : gen_modes()) {
        for (int at : {0, 1, 9, n_predict - 2}) {
            const std::string where = what() + ", " + mode.name + ", moved after " + std::to_string(at) + " tokens";
            auto single = make_engine(m(), c);
            auto b = make_engine(m(), c);
            gen_request req;
            req.prompt = make_prompt(40 + at, ++prompt_seed, n_vocab());
            req.n_predict = n_predict;
            req.sampling = mode.sampling;
            req.ignore_eos = true;  // every run reaches every point
            req.n_probs = 2;
            const side want = run_side(*single, task_generate{req}, -1);
            ASSERT_TRUE(want.done.ok()) << where << ": " << want.done.status().to_string();
            ASSERT_EQ(want.tokens.size(), size_t(n_predict)) << where;

            auto a = make_engine(m(), c);
            const side from = run_moved(*a, [&] { return engine_task{task_generate{req}}; }, at);
            ASSERT_TRUE(from.done.ok()) << where << ": " << from.done.status().to_string();
            ASSERT_EQ(from.done->finish, finish_reason::migrated) << where;
            EXPECT_EQ(from.done->tail, "") << where << ": the held-back text stays with the generation";
            const size_t k = from.tokens.size();
            ASSERT_GE(k, size_t(at)) << where;
            const std::vector<token_id> want_ids = ids(want.tokens);
            ASSERT_EQ(ids(from.tokens), std::vector<token_id>(want_ids.begin(), want_ids.begin() + std::ptrdiff_t(k)))
                << where;
            EXPECT_EQ(from.done->usage.generated_tokens, k) << where;
            blob_ptr state = validated(from.done->blob);
            ASSERT_TRUE(state->view().generation.has_value()) << where;
            EXPECT_EQ(state->view().generation->n_generated, k) << where;
            EXPECT_EQ(state->view().tokens.size(), req.prompt.size() + k) << where;
            ++migrated;
            EXPECT_EQ(a->metrics().migrations_out, 1u) << where;

            const side to = run_side(*b, task_decode{state, req}, -1);
            ASSERT_TRUE(to.done.ok()) << where << ": " << to.done.status().to_string();
            // The replayed tokens are the ones generated before the move, with the text emitted then.
            ASSERT_EQ(ids(to.replayed), ids(from.tokens)) << where;
            for (size_t i = 0; i < k; ++i) EXPECT_EQ(to.replayed[i].text, from.tokens[i].text) << where << " #" << i;
            // The rest is what the single engine generated from there: tokens, text, probs, logits bit for bit.
            EXPECT_EQ(concat(ids(from.tokens), ids(to.tokens)), ids(want.tokens)) << where;
            EXPECT_EQ(from.text() + to.text(), want.text()) << where;
            ASSERT_EQ(to.tokens.size(), want.tokens.size() - k) << where;
            for (size_t i = 0; i < to.tokens.size(); ++i)
                EXPECT_EQ(to.tokens[i].probs, want.tokens[k + i].probs) << where;
            ASSERT_EQ(to.logits.size(), want.logits.size() - k) << where;
            for (size_t i = 0; i < to.logits.size(); ++i)
                EXPECT_TRUE(to.logits[i] == want.logits[k + i]) << where << ": logits differ at token " << k + i;
            EXPECT_EQ(to.done->finish, want.done->finish) << where;
            EXPECT_EQ(to.done->usage.prompt_tokens, want.done->usage.prompt_tokens) << where;
            EXPECT_EQ(to.done->usage.generated_tokens, want.done->usage.generated_tokens) << where;
            EXPECT_EQ(to.done->usage.cached_tokens, from.done->usage.cached_tokens) << where;
            EXPECT_EQ(b->metrics().migrations_in, 1u) << where;
            EXPECT_EQ(b->metrics().migrated_tokens_in, k) << where;
        }
    }
    EXPECT_EQ(migrated, 12u) << what();
}

// Moved twice (a -> b -> c), seeded under a grammar, with a stop string the output often begins to match: the
// held-back text travels too.
TEST_P(Migration, AGenerationMovedTwiceContinuesAsIfItHadNotMoved) {
    const engine_config c = cfg();
    auto single = make_engine(m(), c);
    auto a = make_engine(m(), c);
    auto b = make_engine(m(), c);
    auto cc = make_engine(m(), c);
    gen_request req;
    req.prompt = make_prompt(64, 7, n_vocab());
    req.n_predict = 30;
    req.sampling = gen_modes().back().sampling;
    req.stop = {"e zq"};  // (output ending in "e" or "e z" is held back, and travels with the generation)
    const side want = run_side(*single, task_generate{req}, -1);
    ASSERT_TRUE(want.done.ok()) << want.done.status().to_string();
    if (want.tokens.size() < 12)
        GTEST_SKIP() << what() << ": the answer ends after " << want.tokens.size() << " tokens";
    const side first = run_moved(*a, [&] { return engine_task{task_generate{req}}; }, 4);
    ASSERT_TRUE(first.done.ok() && first.done->finish == finish_reason::migrated) << what();
    const side second = run_moved(*b, [&] { return engine_task{task_decode{validated(first.done->blob), req}}; }, 4);
    ASSERT_TRUE(second.done.ok() && second.done->finish == finish_reason::migrated) << what();
    ASSERT_EQ(ids(second.replayed), ids(first.tokens)) << what();
    blob_ptr twice = validated(second.done->blob);
    EXPECT_EQ(twice->view().generation->n_generated, first.tokens.size() + second.tokens.size()) << what();
    const side third = run_side(*cc, task_decode{twice, req}, -1);
    ASSERT_TRUE(third.done.ok()) << third.done.status().to_string();
    EXPECT_EQ(ids(third.replayed), concat(ids(first.tokens), ids(second.tokens))) << what();
    EXPECT_EQ(concat(concat(ids(first.tokens), ids(second.tokens)), ids(third.tokens)), ids(want.tokens)) << what();
    EXPECT_EQ(first.text() + second.text() + third.text(), want.text()) << what();
    EXPECT_EQ(third.done->finish, want.done->finish) << what();
    EXPECT_EQ(third.done->stop_word, want.done->stop_word) << what();
}

INSTANTIATE_TEST_SUITE_P(AllArchs, Migration, ::testing::ValuesIn(family_cases()), family_case_name);

// Why a node offers to move a sliding-window model's generations only with flash attention on: without it, a
// state restored elsewhere has its window's cells at other offsets (the cells that left the window are not in
// the state), and the attention's product over the cells (V stored transposed) may round differently — on some
// hosts the logits differ in their last bits at some points; with flash attention they never do. Whether they
// differ without it depends on the CPU code ggml picks (measured: some of the 5 points differed on the earlier
// CI host; none on an AVX-512 Zen 4 host, 2026-12-07), so the test pins what the restriction relies on — exact
// with flash attention, and the engine offering to move only then — and reports the count without it.
TEST(MigrationExactness, SlidingWindowModelsMoveOnlyWithFlashAttention) {
    const auto swa = model_for("gemma3");
    const auto dense = model_for("llama");
    ASSERT_GT(llama_model_n_swa(swa->get()), 0);
    for (bool fa : {false, true}) {
        engine_config c = engine_cfg(1, 1024);
        c.ctx.flash_attn = fa;
        EXPECT_EQ(make_engine(swa, c)->resumes_exactly(), fa);
        EXPECT_TRUE(make_engine(dense, c)->resumes_exactly());
        size_t differ = 0, points = 0;
        for (int at : {13, 14, 15, 17, 19}) {  // past the window of 32 (a 20-token prompt)
            gen_request req = greedy(make_prompt(20, 300 + unsigned(at), int32_t(swa->identity().n_vocab)), 24);
            req.ignore_eos = true;
            auto single = make_engine(swa, c), a = make_engine(swa, c), b = make_engine(swa, c);
            const side want = run_side(*single, task_generate{req}, -1);
            const side from = run_moved(*a, [&] { return engine_task{task_generate{req}}; }, at);
            ASSERT_TRUE(from.done.ok() && from.done->finish == finish_reason::migrated);
            const side to = run_side(*b, task_decode{validated(from.done->blob), req}, -1);
            ASSERT_TRUE(to.done.ok());
            const size_t k = from.tokens.size();
            bool same = to.logits.size() == want.logits.size() - k;
            for (size_t i = 0; same && i < to.logits.size(); ++i) same = to.logits[i] == want.logits[k + i];
            differ += same ? 0 : 1;
            ++points;
        }
        if (fa) EXPECT_EQ(differ, 0u) << "flash attention: exact at every point";
        else std::printf("without flash attention %zu of %zu points differ on this host\n", differ, points);
    }
}

// ---- refusals (one family: the checks are the engine's, not the model's) ----

gen_request llama_request(const loaded_model & model, unsigned seed) {
    gen_request req = greedy(make_prompt(32, seed, int32_t(model.identity().n_vocab)), 12);
    req.ignore_eos = true;
    return req;
}

// The state of a greedy generation paused after 6 tokens.
std::vector<uint8_t> paused_state(engine & e, const gen_request & req) {
    const side s = run_moved(e, [&] { return engine_task{task_generate{req}}; }, 6);
    if (!s.done.ok() || s.done->finish != finish_reason::migrated) throw std::runtime_error("no migration");
    return s.done->blob;
}

void expect_no_slot_holds(const engine & e, size_t n_tokens, const std::string & why) {
    for (const auto & s : e.slots()) EXPECT_NE(s.n_tokens, n_tokens) << why << ": slot " << s.id << " holds the state";
}

TEST(MigrationRefusal, GeneratedTokensTheRequestsGrammarCannotTakeAreRefusedWithTheSlotEmpty) {
    const auto model = model_for("llama");
    auto a = make_engine(model, engine_cfg(1, 1024));
    auto b = make_engine(model, engine_cfg(1, 1024));
    const gen_request req = llama_request(*model, 5);
    blob_ptr state = validated(paused_state(*a, req));
    gen_request other = req;  // the same request but for a grammar its answer does not follow
    other.sampling.grammar.gbnf = "root ::= \"0\"+";
    const side r = run_side(*b, task_decode{state, other}, -1);
    ASSERT_FALSE(r.done.ok());
    EXPECT_EQ(r.done.status().code(), status_code::incompatible) << r.done.status().to_string();
    EXPECT_TRUE(r.replayed.empty() && r.tokens.empty());
    expect_no_slot_holds(*b, state->view().tokens.size(), "grammar refused");
    EXPECT_EQ(b->metrics().migrations_in, 0u);
    // The engine goes on: the same state under its own request resumes.
    const side ok = run_side(*b, task_decode{state, req}, -1);
    EXPECT_TRUE(ok.done.ok()) << ok.done.status().to_string();
}

TEST(MigrationRefusal, AnEndOfGenerationTokenAmongTheGeneratedIsRefused) {
    const auto model = model_for("llama");
    auto a = make_engine(model, engine_cfg(1, 1024));
    auto b = make_engine(model, engine_cfg(1, 1024));
    const gen_request req = llama_request(*model, 6);
    const std::vector<uint8_t> bytes = paused_state(*a, req);
    const token_id eos = llama_vocab_eos(model->vocab());
    ASSERT_GE(eos, 0);
    // A generated token replaced by the end-of-text token (a well-formed blob: a writer that meant it).
    const std::vector<uint8_t> forged =
        blob_rewrite(bytes, [&](blob_parts &, std::vector<uint8_t> &, std::vector<int32_t> & tokens,
                                std::vector<float> &) { tokens[tokens.size() - 2] = eos; });
    const side r = run_side(*b, task_decode{validated(forged), req}, -1);
    ASSERT_FALSE(r.done.ok());
    EXPECT_EQ(r.done.status().code(), status_code::incompatible) << r.done.status().to_string();
    EXPECT_NE(r.done.status().message().find("end-of-generation"), std::string::npos) << r.done.status().message();
    expect_no_slot_holds(*b, validated(forged)->view().tokens.size(), "eog");
}

TEST(MigrationRefusal, APrefillTaskIgnoresMigrateAndTheHostCacheTakesNoGeneration) {
    const auto model = model_for("llama");
    engine_config c = engine_cfg(1, 1024);
    auto a = make_engine(model, c);
    const gen_request req = llama_request(*model, 7);
    auto h = a->submit(task_prefill{req});
    ASSERT_TRUE(h.ok());
    h.value()->migrate();
    engine_result r = engine_run_to_end(h.value());
    ASSERT_TRUE(r.done.ok()) << r.done.status().to_string();
    EXPECT_EQ(r.done->finish, finish_reason::stop);
    EXPECT_FALSE(validated(r.done->blob)->view().generation.has_value());
    // A paused generation is a decode task's to resume, not a cache entry.
    const engine_result put = run_task(*a, task_cache_put{validated(paused_state(*a, req))});
    ASSERT_FALSE(put.done.ok());
    EXPECT_EQ(put.done.status().code(), status_code::invalid_argument) << put.done.status().to_string();
}

}  // namespace
}  // namespace baton
