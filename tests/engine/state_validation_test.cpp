// state_validation_test.cpp — the state payload as the engine learns and checks it on real exports of every
// model family, the crafted-state search (no crafted state, resealed behind fresh checksums, ever leaves a
// slot unusable), and failures injected after each step of the one restore routine.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "baton/state_payload.h"
#include "engine_fixture.h"

namespace baton::test {
namespace {

const char * const k_families[] = {"llama",    "mamba2",    "granitehybrid", "lfm2", "gemma3",
                                   "qwen3moe", "qwen3next", "qwen2vl"};  // M-RoPE: 24-byte cells (x, y, token)

engine_config chunked_cfg(uint32_t slots = 1) {
    engine_config c = engine_cfg(slots, 1024);
    c.ctx.n_batch = 32;  // a 110-token prompt in 4 chunks: partial-state families get checkpoints
    c.ctx.n_ubatch = 32;
    c.park_idle = false;
    return c;
}

struct prefilled {
    std::vector<uint8_t> blob;
    gen_request req;
};

prefilled prefill(engine & e, const loaded_model & m, unsigned seed = 3) {
    prefilled p;
    p.req = greedy(make_prompt(110, seed, int32_t(m.identity().n_vocab)), 8);
    p.req.ignore_eos = true;  // 8 tokens on every family (a random model may pick its end token first)
    auto r = run_task(e, task_prefill{p.req});
    if (!r.done.ok()) throw std::runtime_error(r.done.status().to_string());
    p.blob = std::move(r.done.value().blob);
    return p;
}

std::vector<token_id> decode(engine & e, const std::vector<uint8_t> & blob, const gen_request & req,
                             Status * error = nullptr) {
    auto r = run_task(e, task_decode{validated(blob), req});
    if (error) *error = r.done.ok() ? Status() : r.done.status();
    return r.tokens;
}

void expect_slot_empty(engine & e, const std::string & why) {
    for (const slot_info & s : e.slots()) {
        EXPECT_EQ(s.n_tokens, 0u) << why;
        EXPECT_EQ(s.pos_min, -1) << why;
        EXPECT_EQ(s.pos_max, -1) << why;
        EXPECT_EQ(s.n_checkpoints, 0u) << why;
    }
}

// A refused state never reached the slot: whatever it held (here: the last decode's sequence) it still
// holds, and its memory agrees with its tokens.
void expect_slot_consistent(engine & e, const std::string & why) {
    for (const slot_info & s : e.slots()) EXPECT_EQ(int64_t(s.pos_max) + 1, int64_t(s.n_tokens)) << why;
}

TEST(StateValidation, EveryFamilyLearnsItsLayoutAndRestoresItsOwnStates) {
    for (const char * arch : k_families) {
        SCOPED_TRACE(arch);
        auto m = model_for(arch);
        for (bool unified : {true, false}) {
            engine_config c = chunked_cfg(2);
            c.ctx.kv_unified = unified;
            auto e = make_engine(m, c);
            ASSERT_TRUE(e->state_validation().ok()) << e->state_validation().to_string();
            const prefilled p = prefill(*e, *m);
            auto v = blob_parse(p.blob);
            ASSERT_TRUE(v.ok());
            if (m->has_partial_state() && m->n_swa() == 0) {
                EXPECT_GT(v->checkpoints.size(), 0u);
            }
            Status st;
            const auto out = decode(*e, p.blob, p.req, &st);
            ASSERT_TRUE(st.ok()) << st.to_string();
            EXPECT_EQ(out.size(), 8u);
            EXPECT_EQ(e->metrics().restores_ok, 1u);
        }
    }
}

// offsets in a unified llama state: the 8-byte header, n_stream (+8), cell_count (+12), then 12-byte cells
// (pos, n_seq_id, seq_id) from +16.
constexpr size_t k_n_stream = 8, k_cell_count = 12, k_cells = 16;
size_t cell_pos(size_t i) { return k_cells + 12 * i; }

void put_i32(std::vector<uint8_t> & b, size_t off, int32_t v) {
    for (int i = 0; i < 4; ++i) b[off + size_t(i)] = uint8_t(uint32_t(v) >> (8 * i));
}

using mutation = std::function<void(std::vector<uint8_t> & state)>;

std::vector<std::pair<std::string, mutation>> crafted_states(size_t n_tokens, size_t state_bytes) {
    std::vector<std::pair<std::string, mutation>> out;
    const int32_t n = int32_t(n_tokens);
    for (size_t cell : {size_t(0), size_t(1), n_tokens / 2, n_tokens - 1}) {
        for (int32_t pos : {-1, INT32_MIN, n, 1048582, n + 1000, cell == 0 ? 1 : 0}) {
            out.emplace_back("cell " + std::to_string(cell) + " pos " + std::to_string(pos),
                             [=](std::vector<uint8_t> & s) { put_i32(s, cell_pos(cell), pos); });
        }
        out.emplace_back("cell " + std::to_string(cell) + " n_seq_id 0",
                         [=](std::vector<uint8_t> & s) { put_i32(s, cell_pos(cell) + 4, 0); });
        out.emplace_back("cell " + std::to_string(cell) + " n_seq_id 2",
                         [=](std::vector<uint8_t> & s) { put_i32(s, cell_pos(cell) + 4, 2); });
        out.emplace_back("cell " + std::to_string(cell) + " seq_id -7",
                         [=](std::vector<uint8_t> & s) { put_i32(s, cell_pos(cell) + 8, -7); });
    }
    for (int32_t count : {0, n - 1, n + 1, n * 2, INT32_MAX, -1})
        out.emplace_back("cell_count " + std::to_string(count),
                         [=](std::vector<uint8_t> & s) { put_i32(s, k_cell_count, count); });
    for (int32_t streams : {0, 2, 256})
        out.emplace_back("n_stream " + std::to_string(streams),
                         [=](std::vector<uint8_t> & s) { put_i32(s, k_n_stream, streams); });
    out.emplace_back("header", [](std::vector<uint8_t> & s) { s[0] ^= 0x01; });
    const size_t after_cells = cell_pos(n_tokens);
    out.emplace_back("v_trans flipped", [=](std::vector<uint8_t> & s) { s[after_cells] ^= 1; });
    out.emplace_back("n_layer + 1", [=](std::vector<uint8_t> & s) { s[after_cells + 4] += 1; });
    out.emplace_back("reserved", [=](std::vector<uint8_t> & s) { s[after_cells + 8] ^= 1; });
    out.emplace_back("k type", [=](std::vector<uint8_t> & s) { s[after_cells + 16] ^= 8; });
    out.emplace_back("k row bytes", [=](std::vector<uint8_t> & s) { s[after_cells + 20] ^= 2; });
    for (size_t cut : {size_t(3), size_t(9), after_cells, state_bytes / 2, state_bytes - 1})
        out.emplace_back("truncated to " + std::to_string(cut), [=](std::vector<uint8_t> & s) { s.resize(cut); });
    out.emplace_back("a trailing byte", [](std::vector<uint8_t> & s) { s.push_back(0); });
    std::mt19937 rng(2026);
    for (int i = 0; i < 120; ++i) {  // random flips in the metadata, where libllama trusts what it reads
        const size_t off = rng() % std::min(after_cells + 32, state_bytes);
        const uint8_t bit = uint8_t(1u << (rng() % 8));
        out.emplace_back("flip +" + std::to_string(off), [=](std::vector<uint8_t> & s) { s[off] ^= bit; });
    }
    for (int i = 0; i < 30; ++i) {  // and anywhere: KV data flips are accepted (only a MAC can tell), harmlessly
        const size_t off = rng() % state_bytes;
        out.emplace_back("flip anywhere +" + std::to_string(off), [=](std::vector<uint8_t> & s) { s[off] ^= 0x10; });
    }
    return out;
}

// The finding: a resealed, randomly mutated state got 422 "memory holds positions -1..1048582", and
// afterwards every valid blob for that slot got 422 until the node restarted.
TEST(StateValidationRegression, CraftedStateSearchNeverPoisonsTheSlot) {
    auto m = model_for("llama");
    auto e = make_engine(m, chunked_cfg(1));
    const prefilled p = prefill(*e, *m);
    const std::vector<token_id> want = decode(*e, p.blob, p.req);
    ASSERT_EQ(want.size(), 8u);
    const size_t n_tokens = p.req.prompt.size();
    const size_t state_bytes = blob_parse(p.blob)->state.size();
    size_t refused = 0, accepted = 0;
    for (const auto & [name, mutate] : crafted_states(n_tokens, state_bytes)) {
        SCOPED_TRACE(name);
        const auto crafted = blob_rewrite(p.blob, [&](blob_parts &, std::vector<uint8_t> & state,
                                                      std::vector<int32_t> &, std::vector<float> &) { mutate(state); });
        auto r = run_task(*e, task_slot_restore{0, validated(crafted)});
        if (r.done.ok()) {
            ++accepted;
        } else {
            ++refused;
            EXPECT_EQ(r.done.status().code(), status_code::corrupt) << r.done.status().to_string();
            expect_slot_consistent(*e, name);
        }
        Status st;
        EXPECT_EQ(decode(*e, p.blob, p.req, &st), want) << st.to_string();
        ASSERT_TRUE(st.ok()) << st.to_string();
    }
    EXPECT_GT(refused, 100u);
    EXPECT_GT(accepted, 0u);  // data flips: the bytes' meaning is the model's, only a MAC can refuse them
}

// An M-RoPE model's cells (libllama's export: pos, n_seq_id, x, y, token, seq_id) carry a second copy of the
// position and the token: a state whose copy disagrees with the cell's position or the blob's token is
// refused before libllama sees it, and the slot still serves the genuine blob.
TEST(StateValidationRegression, MRopeCellsWithAnotherTwoDPositionOrTokenAreRefused) {
    auto m = model_for("qwen2vl");
    auto e = make_engine(m, chunked_cfg(1));
    ASSERT_TRUE(e->state_validation().ok()) << e->state_validation().to_string();
    const prefilled p = prefill(*e, *m);
    const std::vector<token_id> want = decode(*e, p.blob, p.req);
    ASSERT_EQ(want.size(), 8u);
    constexpr size_t k_mrope_cell = 24;  // pos, n_seq_id, x, y, tok, seq_id
    for (size_t cell : {size_t(0), size_t(57)}) {
        for (size_t field : {size_t(8), size_t(12), size_t(16)}) {  // x, y, tok
            const std::string name = "cell " + std::to_string(cell) + " field +" + std::to_string(field);
            SCOPED_TRACE(name);
            const auto crafted = blob_rewrite(
                p.blob, [&](blob_parts &, std::vector<uint8_t> & state, std::vector<int32_t> &, std::vector<float> &) {
                    state[k_cells + k_mrope_cell * cell + field] ^= 0x02;
                });
            auto r = run_task(*e, task_slot_restore{0, validated(crafted)});
            ASSERT_FALSE(r.done.ok());
            EXPECT_EQ(r.done.status().code(), status_code::corrupt) << r.done.status().to_string();
            EXPECT_NE(r.done.status().message().find(field == 16 ? "the blob has" : "2-D position"), std::string::npos)
                << r.done.status().message();
            expect_slot_consistent(*e, name);
            Status st;
            EXPECT_EQ(decode(*e, p.blob, p.req, &st), want) << st.to_string();
        }
    }
}

// A hybrid's recurrent part and its checkpoints come from the blob too.
TEST(StateValidationRegression, CraftedRecurrentStateAndCheckpointsAreRefused) {
    for (const char * arch : {"granitehybrid", "mamba2", "gemma3"}) {
        SCOPED_TRACE(arch);
        auto m = model_for(arch);
        auto e = make_engine(m, chunked_cfg(1));
        const prefilled p = prefill(*e, *m);
        const std::vector<token_id> want = decode(*e, p.blob, p.req);
        const auto v = blob_parse(p.blob);
        ASSERT_TRUE(v.ok());
        // The last 4-byte-aligned position fields of the state and of every checkpoint, one by one: -1.
        std::vector<std::vector<uint8_t>> crafted;
        for (size_t off = 8; off + 4 <= std::min<size_t>(v->state.size(), 72); off += 4)
            crafted.push_back(blob_rewrite(p.blob, [&](blob_parts &, std::vector<uint8_t> & s, std::vector<int32_t> &,
                                                       std::vector<float> &) { put_i32(s, off, -1); }));
        std::vector<std::vector<uint8_t>> cps;
        for (size_t i = 0; i < v->checkpoints.size(); ++i) {
            cps.emplace_back(v->checkpoints[i].data.begin(), v->checkpoints[i].data.end());
            for (size_t off = 8; off + 4 <= std::min<size_t>(cps.back().size(), 32); off += 4) {
                std::vector<uint8_t> edited = cps[i];  // outlives the rewrite, which borrows it
                put_i32(edited, off, -1);
                crafted.push_back(
                    blob_rewrite(p.blob, [&](blob_parts & parts, std::vector<uint8_t> &, std::vector<int32_t> &,
                                             std::vector<float> &) { parts.checkpoints[i].data = edited; }));
            }
        }
        size_t refused = 0;
        for (const auto & c : crafted) {
            auto r = run_task(*e, task_slot_restore{0, validated(c)});
            if (!r.done.ok()) {
                ++refused;
                expect_slot_consistent(*e, arch);
            }
            Status st;
            EXPECT_EQ(decode(*e, p.blob, p.req, &st), want) << st.to_string();
        }
        EXPECT_GT(refused, crafted.size() / 2);
    }
}

TEST(StateValidation, InjectedFailureAfterEachRestoreStepLeavesTheSlotEmptyAndConsistent) {
    for (const char * arch : {"llama", "granitehybrid", "gemma3"}) {
        SCOPED_TRACE(arch);
        auto m = model_for(arch);
        auto fail_at = std::make_shared<std::optional<restore_step>>();
        auto seam = std::make_shared<engine_test_seam>();
        seam->restore_fail_after = [fail_at](restore_step s) {
            if (*fail_at != s) return false;
            fail_at->reset();  // once: the next restore goes through
            return true;
        };
        auto made = engine_test_access::create(m, chunked_cfg(1), seam);
        ASSERT_TRUE(made.ok());
        engine & e = *made.value();
        const prefilled p = prefill(e, *m);
        const std::vector<token_id> want = decode(e, p.blob, p.req);
        ASSERT_EQ(want.size(), 8u);
        for (restore_step step :
             {restore_step::cleared, restore_step::applied, restore_step::verified, restore_step::registered}) {
            *fail_at = step;
            Status st;
            decode(e, p.blob, p.req, &st);
            EXPECT_EQ(st.code(), status_code::engine_error) << st.to_string();
            expect_slot_empty(e, "after step " + std::to_string(int(step)));
            EXPECT_EQ(decode(e, p.blob, p.req, &st), want) << st.to_string();
        }
        EXPECT_GE(e.metrics().restore_failures.at("engine_error"), 4u);
    }
}

TEST(StateValidation, AKeyedEngineSignsItsStatesAndRefusesUnsignedOnes) {
    auto m = model_for("llama");
    auto key = blob_key::make({"a cluster secret of 32 bytes...."});
    ASSERT_TRUE(key.ok());
    engine_config c = chunked_cfg(1);
    c.limits.key = key.value();
    auto e = make_engine(m, c);
    const prefilled p = prefill(*e, *m);
    EXPECT_TRUE(validated_blob::parse(p.blob, c.limits).ok());
    auto unsigned_blob =
        blob_rewrite(p.blob, [](blob_parts &, std::vector<uint8_t> &, std::vector<int32_t> &, std::vector<float> &) {});
    EXPECT_EQ(validated_blob::parse(unsigned_blob, c.limits).status().code(), status_code::unauthenticated);
}

}  // namespace
}  // namespace baton::test
