// scheduler.cpp — the scheduler thread: one step = admit -> cancel -> park -> plan batch -> guard -> decode
// -> sample.
#include <llama.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "baton/base/buffer_pool.h"
#include "baton/base/log.h"
#include "engine_impl.h"
#include "engine_test_seam.h"

namespace baton {

namespace {
double seconds_since(steady::time_point t) { return std::chrono::duration<double>(steady::now() - t).count(); }
double ms_between(steady::time_point a, steady::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

// media_at: the image whose embeddings stand at prompt position k, if one does.
const media_span * media_at(const std::vector<media_span> & spans, uint32_t k) {
    for (const auto & sp : spans)
        if (k >= sp.begin && k < sp.begin + sp.n) return &sp;
    return nullptr;
}

// media_cut: a batch part holds text tokens or one image's embeddings, never both: [have, n_end) ends where the
// image it starts in ends, or where the next image begins.
uint32_t media_cut(const std::vector<media_span> & spans, uint32_t have, uint32_t n_end) {
    for (const auto & sp : spans) {
        if (have < sp.begin) return std::min(n_end, sp.begin);
        if (have < sp.begin + sp.n) return std::min(n_end, sp.begin + sp.n);
    }
    return n_end;
}
}  // namespace

token_probs probs_of(const std::vector<float> & logits, token_id chosen, int32_t n_top) {
    // log-softmax in double: the same bytes give the same numbers on every node.
    double mx = -INFINITY;
    for (float l : logits) mx = std::max(mx, double(l));
    double sum = 0;
    for (float l : logits) sum += std::exp(double(l) - mx);
    const double log_z = mx + std::log(sum);
    auto lp = [&](token_id t) { return float(double(logits[size_t(t)]) - log_z); };
    token_probs p;
    p.logprob = (chosen >= 0 && size_t(chosen) < logits.size()) ? lp(chosen) : -INFINITY;
    const size_t n = std::min(size_t(std::max(n_top, 0)), logits.size());
    if (n == 0) return p;
    std::vector<token_id> ids(logits.size());
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = token_id(i);
    std::partial_sort(ids.begin(), ids.begin() + std::ptrdiff_t(n), ids.end(), [&](token_id a, token_id b) {
        const float la = logits[size_t(a)], lb = logits[size_t(b)];
        return la != lb ? la > lb : a < b;
    });
    for (size_t i = 0; i < n; ++i) p.top.push_back({ids[i], lp(ids[i])});
    return p;
}

void engine_impl::deliver(const request_ptr & h, engine_event ev) {
    publish();
    h->push(std::move(ev));
}

void engine_impl::run() {
    for (;;) {
        slot * idle = nullptr;  // nothing to do but snapshot this idle slot
        {
            lock_guard lk(mu);
            const auto has_work = [&]() BATON_REQUIRES(mu) {
                if (stopping || !queue.empty()) return true;
                for (const auto & s : slots)
                    if (s.task) return true;
                return false;
            };
            if (!has_work()) idle = idle_snapshot_due();
            if (!idle) cv.wait(mu, has_work);
            if (stopping) break;
            if (has_work()) idle = nullptr;
            if (!idle && std::none_of(slots.begin(), slots.end(), [](const slot & s) { return s.task != nullptr; }))
                gather_arrivals();
        }
        if (idle) snapshot_idle_slot(*idle);
        else step();
    }
    // Shutdown: every task ends with an explicit error, nothing is lost.
    for (auto & s : slots)
        if (s.task) finish(s, finish_reason::cancelled, Status(status_code::cancelled, "engine stopped"));
    lock_guard lk(mu);
    for (auto & [task, h] : queue) h->push(event_error{Status(status_code::cancelled, "engine stopped")});
    queue.clear();
}

size_t engine_impl::new_prompt_tokens(const std::vector<token_id> & prompt) const {
    size_t held = 0;
    for (const auto & s : slots)
        if (!s.task && s.owner == 0) held = std::max(held, common_prefix(slot_held_tokens(s), prompt));
    return prompt.size() - held;
}

void engine_impl::gather_arrivals() {
    constexpr auto k_max_wait = std::chrono::microseconds(2000);  // from the first arrival
    constexpr auto k_quiet = std::chrono::microseconds(1000);     // from the latest: a lone request waits this
    if (prompt_ms_per_token <= 0) return;                         // no estimate yet
    const auto t0 = steady::now();
    auto t_last = t0;
    size_t counted = 0, n_tasks = 0;  // queue entries looked at so far, generation tasks among them
    double tokens = 0;
    for (;;) {
        for (; counted < queue.size(); ++counted) {
            const engine_task & task = queue[counted].first;
            const gen_request * req = nullptr;
            if (const auto * g = std::get_if<task_generate>(&task)) req = &g->req;
            else if (const auto * p = std::get_if<task_prefill>(&task)) req = &p->req;
            if (!req) continue;
            ++n_tasks;
            tokens += double(new_prompt_tokens(req->prompt));
        }
        if (n_tasks == 0 || n_tasks >= slots.size() || tokens >= double(cfg.ctx.n_batch)) return;
        const auto wait = std::min<steady::duration>(
            k_max_wait, std::chrono::duration_cast<steady::duration>(
                            std::chrono::duration<double, std::milli>(0.01 * tokens * prompt_ms_per_token)));
        const size_t seen = queue.size();
        if (!cv.wait_until(mu, std::min(t0 + wait, t_last + k_quiet),
                           [&]() BATON_REQUIRES(mu) { return stopping || queue.size() != seen; }))
            return;
        if (stopping) return;
        t_last = steady::now();
    }
}

// ---- idle snapshots (slot.h, idle_blob): an idle slot's state serialized before anyone needs it ----

slot * engine_impl::idle_snapshot_due() {
    if (!parks() && !host_cache.enabled()) return nullptr;
    // Only under pressure: while the node holds one conversation (no other slot holds a state, the cache
    // holds nothing), nothing would serialize its slot, and a snapshot would only delay its next turn.
    size_t holding = 0;
    for (const auto & s : slots) holding += slot_held_tokens(s).empty() ? 0 : 1;
    if (holding < 2 && host_cache.entries() == 0) return nullptr;
    slot * due = nullptr;  // the least recently used first: the next a new conversation takes
    for (auto & s : slots) {
        if (s.task || s.owner != 0 || s.parked || s.idle_blob || s.tokens.empty()) continue;
        if (s.idle_snapshot_failed_step == step_no) continue;              // failed, and nothing ran since
        if (!parks() && s.tokens.size() < cfg.reuse_min_tokens) continue;  // cache_out would not keep it
        if (!due || s.last_used < due->last_used) due = &s;
    }
    return due;
}

void engine_impl::snapshot_idle_slot(slot & s) {
    const auto t0 = steady::now();
    auto snap = baton::slot_snapshot(env, s, state_scratch);
    if (!snap.ok()) {
        // Not taken again for this state: cache_out and parking try (and report) on their own.
        log_warn("engine: slot {}'s idle state could not be snapshot: {}", s.id, snap.status().message());
        s.idle_snapshot_failed_step = step_no;
        return;
    }
    s.idle_blob = std::move(snap.value());
    bump([&](engine_metrics & m) {
        ++m.idle_snapshots;
        m.idle_snapshot_seconds += seconds_since(t0);
    });
    publish();
}

void engine_impl::step() {
    ++step_no;
    phase_admit();
    phase_cancel();
    if (phase_park()) phase_admit();  // tasks that arrived while slots were parked join this step's batch
    const std::vector<batch_part> parts = phase_plan_batch();
    if (!parts.empty()) {
        phase_guard(parts);
        if (!phase_decode(parts)) {
            publish();
            return;
        }
    }
    phase_sample();
    publish();
}

// ---- admit: slot operations run now; generation tasks bind to a slot when one is free ----

void engine_impl::phase_admit() {
    std::deque<std::pair<engine_task, request_ptr>> waiting;
    {
        lock_guard lk(mu);
        waiting.swap(queue);
    }
    std::deque<std::pair<engine_task, request_ptr>> keep;
    for (auto & [task, h] : waiting) {
        if (h->cancelled()) {
            deliver(h, event_error{Status(status_code::cancelled, "request cancelled before it started")});
            continue;
        }
        if (!admit_one(task, h)) keep.emplace_back(std::move(task), h);
    }
    if (keep.empty()) return;
    lock_guard lk(mu);
    for (auto it = keep.rbegin(); it != keep.rend(); ++it) queue.push_front(std::move(*it));
}

bool engine_impl::admit_one(engine_task & task, const request_ptr & h) {
    if (std::holds_alternative<task_slot_save>(task) || std::holds_alternative<task_slot_restore>(task) ||
        std::holds_alternative<task_slot_erase>(task)) {
        run_slot_op(task, h);
        return true;
    }
    // Choose the slot before taking anything out of the task: a task that finds no free slot stays queued
    // intact (regression: a moved-from request was re-queued and later bound with an empty prompt).
    if (auto * cp = std::get_if<task_cache_put>(&task)) {
        // A state from a shared tier, for the prompts queued after it: it must be this node's (identity and
        // layout; its bytes were verified by the parser) before the cache takes it.
        // A delta (the tier's entry past a base this node holds) is joined with the host-cache entry or idle
        // slot that holds its base, and the whole state is kept.
        Status st = !host_cache.enabled()
                        ? Status(status_code::unsupported, "cache_put: the host prompt cache is off (--cache-ram 0)")
                    : cp->blob->view().generation
                        ? Status(status_code::invalid_argument,
                                 "cache_put: the state continues a generation in progress (a decode task's to resume)")
                        : blob_check_compatible(cp->blob->view(), env.identity, env.context);
        blob_ptr whole = cp->blob;
        if (st.ok() && whole->view().base_tokens > 0) {
            auto joined = cache_join(whole->view());
            if (joined.ok()) whole = std::move(joined.value());
            else st = joined.status();
        }
        if (st.ok()) {
            cache_keep(std::move(whole));
            deliver(h, event_done{});
        } else {
            deliver(h, event_error{st});
        }
        return true;
    }
    gen_request * req = nullptr;
    task_kind kind = task_kind::generate;
    if (auto * g = std::get_if<task_generate>(&task)) req = &g->req;
    else if (auto * p = std::get_if<task_prefill>(&task)) req = &p->req, kind = task_kind::prefill;
    else if (auto * d = std::get_if<task_decode>(&task)) req = &d->req, kind = task_kind::decode;
    if (!req) return true;
    const std::vector<token_id> no_prompt;
    int32_t id = -1;
    if (kind == task_kind::decode && std::get<task_decode>(task).blob->view().base_tokens > 0) {
        // A delta goes to the slot that holds its base: it waits while that slot is busy, and is refused when
        // no slot holds it (the sender's idea of this node's cache is out of date).
        const blob_view & d = std::get<task_decode>(task).blob->view();
        bool held_busy = false;
        for (const auto & s : slots) {
            if (!slot_holds_base(s, d)) continue;
            if (s.task || s.owner != 0) held_busy = true;
            else if (id < 0) id = s.id;
        }
        if (id < 0 && held_busy) return false;
        if (id < 0) {
            Status st(status_code::incompatible, "base: no slot holds the delta's base of " +
                                                     std::to_string(d.base_tokens) +
                                                     " tokens (evicted, or never here)");
            count_restore(st, 0, std::get<task_decode>(task).blob->size());
            deliver(h, event_error{st});
            return true;
        }
    } else if (kind != task_kind::decode && share_wait(req->prompt)) {
        return false;  // stays queued until the slot computing its prefix has it
    } else {
        id = pick_slot(kind == task_kind::decode ? no_prompt : req->prompt);
    }
    if (id < 0) return false;
    auto t = std::make_unique<active_task>();
    t->h = h;
    t->t_start = steady::now();
    t->kind = kind;
    t->req = std::move(*req);
    bind_task(slots[size_t(id)], std::move(t), task);
    return true;
}

Result<blob_ptr> engine_impl::cache_join(const blob_view & d) {
    if (!env.shape_error.ok())
        return Status(status_code::unsupported,
                      "cache_put: this node cannot validate states: " + env.shape_error.message());
    const std::span<const token_id> base(d.tokens.data(), d.base_tokens);
    if (blob_ptr e = host_cache.holding(base))
        return state_join_delta(env, e->view().state, uint32_t(e->view().tokens.size()), e->view().checkpoints, d);
    for (const auto & s : slots)
        if (!s.task && s.owner == 0 && slot_holds_base(s, d)) return slot_join_delta(env, s, d, state_scratch);
    return Status(status_code::incompatible,
                  "base: neither the host cache nor an idle slot holds the delta's base of " +
                      std::to_string(d.base_tokens) + " tokens");
}

size_t engine_impl::reuse_min(const std::vector<token_id> & prompt) const {
    return std::max<size_t>(1, std::min<size_t>(cfg.reuse_min_tokens, prompt.empty() ? 0 : prompt.size() - 1));
}

// pick_slot: the free slot holding the longest useful prefix of prompt, if reusing it keeps at least as many
// of its tokens as it drops; else an empty free slot; else the least recently used free slot. -1 when every
// slot is taken. (Regression, prefix_routing_bench: every tenant's prompt began with the same 150-token
// preamble, so each new tenant truncated the first slot holding any other tenant's 2,048-token prompt to
// those 150 tokens while slots stood empty; the next request of that tenant found nothing.)
int32_t engine_impl::pick_slot(const std::vector<token_id> & prompt) const {
    int32_t reuse = -1, empty = -1, lru = -1;
    size_t best_lcp = 0;
    for (const auto & s : slots) {
        if (s.task || s.owner != 0) continue;
        const std::vector<token_id> & held = slot_held_tokens(s);
        const size_t lcp = common_prefix(held, prompt);
        if (lcp >= reuse_min(prompt) && 2 * lcp >= held.size() && lcp > best_lcp) reuse = s.id, best_lcp = lcp;
        if (held.empty() && empty < 0) empty = s.id;
        if (lru < 0 || s.last_used < slots[size_t(lru)].last_used) lru = s.id;
    }
    return reuse >= 0 ? reuse : empty >= 0 ? empty : lru;
}

// ---- prefix sharing: with a unified KV cache a cell can belong to several sequences, so a prefix one slot
// computed serves another slot by llama_memory_seq_cp (no copy of the cells, no computation). Models with
// partial state (recurrent, hybrid, sliding-window) are left out: their state at a prefix is not a subset of
// their state at the end, and a non-unified cache copies only whole streams between sequences. ----

bool engine_impl::prefix_share_on() const { return cfg.ctx.kv_unified && !partial_state; }

namespace {
// The prompt tokens a slot's memory can give: at most all but the last (its logits are needed to sample).
size_t usable_prefix(const std::vector<token_id> & held, const std::vector<token_id> & prompt) {
    return std::min(common_prefix(held, prompt), prompt.empty() ? size_t(0) : prompt.size() - 1);
}
}  // namespace

bool engine_impl::share_wait(const std::vector<token_id> & prompt) const {
    if (!prefix_share_on()) return false;
    size_t now = 0, coming = 0;
    for (const auto & s : slots) {
        now = std::max(now, usable_prefix(slot_held_tokens(s), prompt));
        const active_task * t = s.task.get();
        if (t && t->n_generated == 0 && !t->need_sample && s.tokens.size() < t->seq.size())
            coming = std::max(coming, usable_prefix(t->seq, prompt));
    }
    return coming >= reuse_min(prompt) && coming >= now + reuse_min(prompt);
}

void engine_impl::share_prefix(slot & s, const gen_request & req) {
    if (!prefix_share_on()) return;
    const std::vector<token_id> & prompt = req.prompt;
    const slot * from = nullptr;
    size_t best = usable_prefix(slot_held_tokens(s), prompt);
    for (const auto & o : slots) {
        if (&o == &s) continue;
        // In memory (a parked slot's tokens are empty), and never part of an image that is kept whole.
        const size_t n = media_keep_limit(req.media, usable_prefix(o.tokens, prompt));
        if (n >= reuse_min(prompt) && n > best) from = &o, best = n;
    }
    if (!from) return;
    slot_clear(ctx.get(), s);
    llama_memory_seq_cp(llama_get_memory(ctx.get()), from->id, s.id, 0, from->positions.pos_of(best));
    s.tokens.assign(prompt.begin(), prompt.begin() + std::ptrdiff_t(best));
    s.positions = from->positions;
    s.positions.keep(best);
    bump([&](engine_metrics & m) {
        ++m.prefix_shares;
        m.prefix_shared_tokens += best;
    });
}

void engine_impl::bind_task(slot & s, std::unique_ptr<active_task> t, engine_task & task) {
    s.last_used = step_no;
    // ignore_eos: as llama-server, end-of-generation tokens are never sampled (a -inf bias on each), so the
    // text goes on instead of holding an end token it then ignores.
    sampling_params sp = t->req.sampling;
    if (t->req.ignore_eos)
        for (token_id e : eog) sp.logit_bias.emplace_back(e, -std::numeric_limits<float>::infinity());
    auto chain = sampling_make_chain(sp, model->vocab(), pieces);
    if (!chain.ok()) return deliver(t->h, event_error{chain.status()});
    t->chain = std::move(chain.value());
    t->text = text_stream(t->req.stop);
    if (t->kind == task_kind::decode) {
        // Decode-apply: the one restore routine, then sample the first token from the shipped logits.
        const validated_blob & blob = *std::get<task_decode>(task).blob;
        if (!blob.view().logits) {
            Status st(status_code::incompatible, "logits: the blob carries no trailing logits; /v1/decode needs a blob from prefill");
            count_restore(st, 0, blob.size());
            deliver(t->h, event_error{st});
            return;
        }
        s.owner = t->h->id();
        cache_out(s, blob.view().tokens);
        if (parks()) park_idle_slots();  // as below: the restored cells take the low cells
        const auto t0 = steady::now();
        Status st = slot_restore_delta(env, s, blob, s.owner, state_scratch);
        count_restore(st, seconds_since(t0), blob.size());
        count_delta(st, blob.view());
        if (!st.ok()) {
            s.owner = 0;
            deliver(t->h, event_error{st});
            return;
        }
        t->seq = s.tokens;
        t->usage.prompt_tokens = uint32_t(s.tokens.size());
        t->usage.cached_tokens = uint32_t(s.tokens.size());
        if (const auto & g = blob.view().generation) {
            // A generation that paused on another node (live migration): rebuilt from its generated tokens.
            Status rs = resume_generation(s, *t, *g);
            if (!rs.ok()) {
                slot_clear(ctx.get(), s);
                s.owner = 0;
                deliver(t->h, event_error{rs});
                return;
            }
        }
        t->t_prompt_done = steady::now();
        t->need_sample = true;
        if (t->req.return_progress && !blob.view().generation) {  // the whole prompt arrived with the state
                                                                  // (a resumed generation's went out before)
            const uint32_t n = t->usage.prompt_tokens;
            t->h->push(event_progress{n, n, n, ms_between(t->t_start, t->t_prompt_done)});
        }
        s.task = std::move(t);
        return;
    }
    s.owner = t->h->id();
    cache_out(s, t->req.prompt);
    share_prefix(s, t->req);
    // The slot is about to work, so the park phase would move the idle slots out of the cache in this step
    // anyway: moved now, before a state is restored into s, that state's cells take the low cells they leave
    // (a restore behind resident idle cells widened every decode of the task over both).
    if (parks()) park_idle_slots();
    cache_in(s, t->req.prompt);
    take_parked(s, t->req.prompt);
    if (Status st = slot_check_memory(ctx.get(), s); !st.ok()) repair(s, st);
    s.task = std::move(t);
    start_prompt(s, *s.task);
}

// ---- the host prompt cache (prompt_cache.h) ----

void engine_impl::cache_out(slot & s, const std::vector<token_id> & next) {
    blob_ptr ready = std::move(s.idle_blob);
    s.idle_blob.reset();
    if (!host_cache.enabled()) return;
    const std::vector<token_id> & held = slot_held_tokens(s);
    if (held.size() < cfg.reuse_min_tokens || common_prefix(held, next) + cfg.reuse_min_tokens > held.size()) return;
    blob_ptr b = s.parked ? s.parked : std::move(ready);
    if (b && !s.parked) bump([](engine_metrics & m) { ++m.idle_snapshots_used; });
    if (!b) {
        const auto t0 = steady::now();
        auto snap = baton::slot_snapshot(env, s, state_scratch);  // (not the member of that name)
        bump([&](engine_metrics & m) { m.cache_ram_store_seconds += seconds_since(t0); });
        if (!snap.ok()) {
            log_warn("engine: slot {}'s state could not be kept in the host prompt cache: {}", s.id,
                     snap.status().message());
            return;
        }
        b = std::move(snap.value());
    }
    if (cfg.state_kept) cfg.state_kept(b, b->view().tokens.size());
    cache_keep(std::move(b));
}

void engine_impl::cache_keep(blob_ptr b) {
    const prompt_cache::put_outcome put = host_cache.put(std::move(b), partial_state);
    bump([&](engine_metrics & m) {
        m.cache_ram_stores += put.kept ? 1 : 0;
        m.cache_ram_evictions += put.evicted;
    });
}

void engine_impl::cache_in(slot & s, const std::vector<token_id> & prompt) {
    if (!host_cache.enabled()) return;
    const prompt_cache::match m = host_cache.best(prompt, partial_state);
    const size_t have = std::min(common_prefix(slot_held_tokens(s), prompt), prompt.size() - 1);
    if (m.n < reuse_min(prompt) || m.n <= have) return;
    const blob_ptr b = host_cache.use(m.index);
    slot_clear(ctx.get(), s);
    if (Status st = slot_restore(env, s, *b, s.owner); !st.ok()) {
        log_warn("engine: a host prompt cache entry could not be restored into slot {}, computing the prompt: {}", s.id,
                 st.message());
        return;
    }
    bump([&](engine_metrics & m2) {
        ++m2.cache_ram_hits;
        m2.cache_ram_hit_tokens += m.n;
    });
}

// take_parked brings a parked slot's state back when the prompt reuses enough of it, else drops it.
void engine_impl::take_parked(slot & s, const std::vector<token_id> & prompt) {
    if (!s.parked) return;
    const size_t lcp = common_prefix(s.parked->view().tokens, prompt);
    if (lcp < reuse_min(prompt)) return slot_clear(ctx.get(), s);
    const auto t0 = steady::now();
    Status st = slot_unpark(env, s, s.owner);
    if (!st.ok()) log_warn("engine: unpark of slot {} failed, recomputing its prompt: {}", s.id, st.message());
    bump([&](engine_metrics & m) {
        m.unparks += st.ok() ? 1 : 0;
        m.park_seconds += seconds_since(t0);
    });
}

void engine_impl::start_prompt(slot & s, active_task & t) {
    const size_t keep_max = media_keep_limit(t.req.media, t.req.prompt.size() - 1);
    const prepare_outcome pr = slot_prepare_prompt(ctx.get(), s, t.req.prompt, keep_max, partial_state);
    t.seq = t.req.prompt;
    const uint32_t n = uint32_t(t.seq.size());
    t.plan = chunk_plan_ends(pr.n_keep, n, cfg.ctx.n_batch, partial_state, cfg.ctx.checkpoints);
    if (partial_state) t.checkpoint_at = chunk_plan_checkpoints(pr.n_keep, n, cfg.ctx.checkpoints);
    if (t.kind == task_kind::prefill && t.req.on_state_part && t.req.state_part_tokens > 0 && t.req.delta_base == 0) {
        // A multiple of the micro-batch, counted from where the prompt starts computing: the stops then fall on
        // the micro-batch boundaries libllama would split a whole chunk at, so the cells are computed exactly as
        // without parts (the same micro-batches in the same order).
        const uint32_t ub = std::max<uint32_t>(1, std::min(cfg.ctx.n_ubatch, cfg.ctx.n_batch));
        const uint32_t p = std::max(t.req.state_part_tokens, (n + state_parts_max - 1) / state_parts_max);
        t.part_tokens = (p + ub - 1) / ub * ub;
    }
    add_part_stops(t, pr.n_keep);
    t.usage.prompt_tokens = n;
    t.usage.cached_tokens = pr.n_keep;
    if (t.req.return_progress) {
        t.progress = true;
        t.h->push(event_progress{n, pr.n_keep, pr.n_keep, ms_between(t.t_start, steady::now())});
    }
    bump([&](engine_metrics & m) {
        m.prompt_tokens += n;
        m.cached_tokens += pr.n_keep;
        m.prefix_reuse_hits += pr.n_keep > 0 ? 1 : 0;
        m.checkpoint_restores += pr.used_checkpoint ? 1 : 0;
        m.reprefills += pr.reprefill ? 1 : 0;
    });
}

void engine_impl::run_slot_op(engine_task & task, const request_ptr & h) {
    int32_t id = -1;
    if (auto * s = std::get_if<task_slot_save>(&task)) id = s->slot;
    if (auto * r = std::get_if<task_slot_restore>(&task)) id = r->slot;
    if (auto * e = std::get_if<task_slot_erase>(&task)) id = e->slot;
    slot & s = slots[size_t(id)];
    event_done done;
    done.slot = id;
    if (s.task || s.owner != 0) {
        deliver(h, event_error{Status(status_code::busy, "slot " + std::to_string(id) + " is busy")});
        return;
    }
    done.usage.cached_tokens = uint32_t(s.tokens.size());  // save and erase: what the slot holds (held)
    if (std::holds_alternative<task_slot_erase>(task)) {
        slot_clear(ctx.get(), s);
    } else if (std::holds_alternative<task_slot_save>(task) && s.parked) {
        // Already a blob of this slot, made for host memory: copied out, or rewritten with the node's key
        // (parking never spends a MAC on a blob that does not leave the node).
        if (const blob_key * key = cfg.limits.key.get()) {
            blob_buffer_sink sink;
            if (Status st = blob_write(blob_view_parts(s.parked->view()), sink, key); !st.ok())
                return deliver(h, event_error{st});
            done.blob = std::move(sink.bytes());
        } else {
            const std::vector<uint8_t> & b = s.parked->bytes();
            done.blob = buffer_pool::shared().take(b.size());
            done.blob.assign(b.begin(), b.end());
        }
        bump([&](engine_metrics & m) { m.blob_bytes_out += done.blob.size(); });
    } else if (auto * r = std::get_if<task_slot_restore>(&task)) {
        s.idle_blob.reset();
        const auto t0 = steady::now();
        Status st = slot_restore_delta(env, s, *r->blob, 0, state_scratch);
        count_restore(st, seconds_since(t0), r->blob->size());
        count_delta(st, r->blob->view());
        if (!st.ok()) return deliver(h, event_error{st});
        done.usage.cached_tokens = uint32_t(s.tokens.size());
    } else {
        const auto t0 = steady::now();
        blob_buffer_sink sink;
        Status st =
            slot_export(ctx.get(), s, env.identity, env.context, true, "", sink, state_scratch, cfg.limits.key.get());
        if (!st.ok()) return deliver(h, event_error{st});
        done.blob = std::move(sink.bytes());
        bump([&](engine_metrics & m) {
            m.blob_bytes_out += done.blob.size();
            m.serialize_seconds += seconds_since(t0);
        });
    }
    s.last_used = step_no;
    deliver(h, std::move(done));
}

void engine_impl::count_restore(const Status & st, double seconds, size_t bytes) {
    bump([&](engine_metrics & m) {
        m.blob_bytes_in += bytes;
        m.restore_seconds += seconds;
        if (st.ok()) ++m.restores_ok;
        else ++m.restore_failures[status_code_name(st.code())];
    });
}

void engine_impl::count_delta(const Status & st, const blob_view & b) {
    if (!st.ok() || b.base_tokens == 0) return;
    bump([&](engine_metrics & m) {
        ++m.deltas_in;
        m.delta_base_tokens_in += b.base_tokens;
    });
}

// ---- cancel: end tasks whose client went away ----

void engine_impl::phase_cancel() {
    for (auto & s : slots)
        if (s.task && s.task->h->cancelled()) finish(s, finish_reason::cancelled, Status(status_code::cancelled, "request cancelled"));
}

// ---- park: while any slot works, idle slots move their state out of a unified KV cache ----
// Every decode attends over all used cells of a unified cache, so idle cells slow every working slot
// (measured: a 256-token prompt took 1.5x as long with three idle 320-token slots resident).

bool engine_impl::parks() const {
    // A purely recurrent model's memory is a fixed state per sequence: idle slots cost nothing to others.
    return cfg.park_idle && cfg.ctx.kv_unified && !model->is_recurrent();
}

bool engine_impl::phase_park() {
    if (!parks()) return false;
    const bool any_working = std::any_of(slots.begin(), slots.end(), [](const slot & s) { return s.task != nullptr; });
    return any_working && park_idle_slots();
}

bool engine_impl::park_idle_slots() {
    bool parked_any = false;
    for (auto & s : slots) {
        if (s.task || s.owner != 0 || s.tokens.empty()) continue;
        const auto t0 = steady::now();
        const bool ready = s.idle_blob != nullptr;
        auto parked = slot_park(env, s, state_scratch);
        parked_any = true;  // (a failed park cleared the slot: time spent all the same)
        if (!parked.ok()) {
            log_warn("engine: could not park slot {} (its cache is dropped): {}", s.id, parked.status().message());
            continue;
        }
        bump([&](engine_metrics & m) {
            ++m.parks;
            m.idle_snapshots_used += ready ? 1 : 0;
            m.park_seconds += seconds_since(t0);
        });
    }
    return parked_any;
}

// ---- plan batch: the next token of every generating slot, then prompt chunks within n_batch ----

std::vector<batch_part> engine_impl::phase_plan_batch() {
    std::vector<batch_part> parts;
    uint32_t budget = cfg.ctx.n_batch;
    for (int pass = 0; pass < 2; ++pass) {
        for (size_t i = 0; i < slots.size() && budget > 0; ++i) {
            slot & s = slots[i];
            if (!s.task || s.task->need_sample || s.task->plan.empty()) continue;
            const uint32_t have = uint32_t(s.tokens.size());
            const uint32_t next = s.task->plan.front();
            const bool generating = next == have + 1 && s.task->n_generated > 0;
            if ((pass == 0) != generating) continue;
            uint32_t n_end = media_cut(s.task->req.media, have, std::min(next, have + budget));
            if (const media_span * sp = media_at(s.task->req.media, have); sp && sp->non_causal && have == sp->begin) {
                // An image whose embeddings attend to each other goes in one piece (check_request: it fits one
                // micro-batch), past any chunk end inside it; with less budget left, in a later step.
                if (sp->n > budget) continue;
                n_end = sp->begin + sp->n;
            }
            parts.push_back({i, have, n_end});
            budget -= n_end - have;
        }
    }
    return parts;
}

// ---- guard: never decode on a slot whose bookkeeping disagrees with its memory ----

void engine_impl::phase_guard(const std::vector<batch_part> & parts) {
    for (const auto & p : parts) {
        slot & s = slots[p.slot];
        Status st = slot_check_memory(ctx.get(), s);
        if (!st.ok()) repair(s, st);
    }
}

void engine_impl::repair(slot & s, const Status & why) {
    log_error("engine: invariant violated, repairing: {}", why.message());
    bump([](engine_metrics & m) { ++m.invariant_repairs; });
    s.idle_blob.reset();
    llama_memory_seq_rm(llama_get_memory(ctx.get()), s.id, -1, -1);
    s.tokens.clear();
    s.positions.clear();
    s.checkpoints.clear();
    s.logits.clear();
    if (!s.task) return;
    // Recompute everything the task needs in memory, from position 0.
    active_task & t = *s.task;
    const uint32_t n = uint32_t(t.seq.size());
    t.plan = chunk_plan_ends(0, n, cfg.ctx.n_batch, partial_state, cfg.ctx.checkpoints);
    t.checkpoint_at.clear();
    if (partial_state) t.checkpoint_at = chunk_plan_checkpoints(0, uint32_t(t.req.prompt.size()), cfg.ctx.checkpoints);
    add_part_stops(t, 0);  // (parts already handed on stay valid: the same tokens compute the same cells)
    t.need_sample = false;
}

// add_part_stops: a streamed prefill's prompt also stops at every multiple of its part size past the parts
// handed on, so each part leaves as soon as its cells are computed.
void engine_impl::add_part_stops(active_task & t, uint32_t n_begin) {
    if (t.part_tokens == 0) return;
    const uint32_t n = uint32_t(t.seq.size());
    for (uint32_t e = n_begin + t.part_tokens; e < n; e += t.part_tokens)
        if (e > t.part_end) t.plan.push_back(e);
    std::sort(t.plan.begin(), t.plan.end());
    t.plan.erase(std::unique(t.plan.begin(), t.plan.end()), t.plan.end());
}

// send_part exports the cells computed since the last part (the first part: the whole state so far) and hands
// them on. last: the prompt is in, the part carries the logits and the request.
Status engine_impl::send_part(slot & s, bool last) {
    active_task & t = *s.task;
    const auto t0 = steady::now();
    blob_buffer_sink sink;
    const std::string none;
    const std::string & request = last ? t.req.request_json : none;
    Status st = t.part_end > 0
                    ? slot_export_delta(env, s, t.part_end, request, sink, state_scratch, cfg.limits.key.get(), last)
                    : slot_export(ctx.get(), s, env.identity, env.context, last, request, sink, state_scratch,
                                  cfg.limits.key.get());
    if (!st.ok()) return st;
    state_part_info info;
    info.last = last;
    info.n_tokens = uint32_t(s.tokens.size());
    info.n_checkpoints = uint32_t(s.checkpoints.size());
    bump([&](engine_metrics & m) {
        ++m.state_parts_out;
        m.blob_bytes_out += sink.bytes().size();
        m.serialize_seconds += seconds_since(t0);
    });
    t.part_end = info.n_tokens;
    t.req.on_state_part(std::move(sink.bytes()), info);
    return {};
}

// ---- decode: one llama_decode for the text of all parts, one per image part; the repaired parts re-plan from 0
// next step ----

bool engine_impl::phase_decode(const std::vector<batch_part> & in) {
    std::vector<batch_part> text;
    std::vector<std::pair<batch_part, const media_span *>> images;
    batch.n_tokens = 0;
    for (const auto & p : in) {
        slot & s = slots[p.slot];
        if (uint32_t(s.tokens.size()) != p.n_begin) continue;  // repaired by the guard: planned again next step
        active_task & t = *s.task;
        t.batch_row = -1;
        if (const media_span * sp = media_at(t.req.media, p.n_begin)) {
            images.emplace_back(p, sp);
            continue;
        }
        // Media tokens outside every span: cells of an image this engine was not given (a restored state's,
        // dropped by a repair), which its tokens cannot compute again.
        if (std::any_of(t.seq.begin() + p.n_begin, t.seq.begin() + p.n_end, media_token_is)) {
            slot_clear(ctx.get(), s);
            fail_task(s, Status(status_code::engine_error,
                                "the cells of an image in this sequence were lost and cannot be computed again from "
                                "its tokens (the image was encoded on another node)"));
            continue;
        }
        for (uint32_t k = p.n_begin; k < p.n_end; ++k) {
            const int32_t row = batch.n_tokens++;
            batch.token[row] = t.seq[k];
            batch.pos[row] = s.positions.pos_of(k);
            batch.n_seq_id[row] = 1;
            batch.seq_id[row][0] = s.id;
            batch.logits[row] = (k + 1 == p.n_end && p.n_end == t.seq.size()) ? 1 : 0;
            if (batch.logits[row]) t.batch_row = row;
        }
        text.push_back(p);
    }
    bool ok = true;
    if (!text.empty()) ok = decode_batch(batch, text);
    for (const auto & [p, sp] : images) {
        slot & s = slots[p.slot];
        if (!s.task) continue;
        active_task & t = *s.task;
        if (sp->non_causal && (p.n_begin != sp->begin || p.n_end != sp->begin + sp->n)) {
            // Never computed from a piece: its cells would differ from the whole image's (media_keep_limit keeps
            // a prefix from ending inside one; this is the guard behind it).
            slot_clear(ctx.get(), s);
            fail_task(s, Status(status_code::engine_error, "an image whose embeddings attend to each other would be "
                                                           "decoded in pieces (positions " +
                                                               std::to_string(p.n_begin) + ".." +
                                                               std::to_string(p.n_end) + ")"));
            continue;
        }
        if (!media_batch.embd) media_batch = llama_batch_init(int32_t(cfg.ctx.n_batch), int32_t(n_embd_inp), 1);
        const uint32_t n = p.n_end - p.n_begin;
        std::memcpy(media_batch.embd, sp->embd->data() + size_t(p.n_begin - sp->begin) * n_embd_inp,
                    sizeof(float) * n * n_embd_inp);
        media_batch.n_tokens = int32_t(n);
        // On an M-RoPE model embeddings take four position components each, section by section: an image's its
        // position, its row and column past it, and 0; any other medium's (audio) its position thrice, and 0. From a
        // buffer of 4n, put in place of the batch's own for this decode.
        llama_pos * const own_pos = media_batch.pos;
        if (positions_2d) {
            const llama_pos at = s.positions.pos_of(sp->begin);
            grid_pos.assign(size_t(4) * n, 0);
            for (uint32_t k = 0; k < n; ++k) {
                const uint32_t i = p.n_begin - sp->begin + k;
                const llama_pos q = s.positions.pos_of(p.n_begin + k);
                grid_pos[k] = sp->grid_w ? at : q;
                grid_pos[n + k] = sp->grid_w ? at + llama_pos(i / sp->grid_w) : q;
                grid_pos[2 * size_t(n) + k] = sp->grid_w ? at + llama_pos(i % sp->grid_w) : q;
            }
            media_batch.pos = grid_pos.data();
        }
        for (uint32_t k = 0; k < n; ++k) {
            if (!positions_2d) media_batch.pos[k] = llama_pos(p.n_begin + k);
            media_batch.n_seq_id[k] = 1;
            media_batch.seq_id[k][0] = s.id;
            media_batch.logits[k] = (k + 1 == n && p.n_end == t.seq.size()) ? 1 : 0;
            if (media_batch.logits[k]) t.batch_row = int32_t(k);
        }
        if (sp->non_causal) llama_set_causal_attn(ctx.get(), false);
        ok = decode_batch(media_batch, {p}) && ok;
        if (sp->non_causal) llama_set_causal_attn(ctx.get(), true);
        media_batch.pos = own_pos;
    }
    return ok;
}

// decode_batch runs one llama_decode of b (holding parts) and moves each part's slot past its chunk.
bool engine_impl::decode_batch(llama_batch & b, const std::vector<batch_part> & parts) {
    const auto t_decode = steady::now();
    int32_t rc = llama_decode(ctx.get(), b);
    if (rc == 0 && b.token && b.n_tokens >= 16) {
        const double ms = ms_between(t_decode, steady::now()) / b.n_tokens;
        prompt_ms_per_token = prompt_ms_per_token > 0 ? 0.8 * prompt_ms_per_token + 0.2 * ms : ms;
    }
    if (rc == 1) {
        // No room in the KV cache: drop the memory of idle slots (LRU caches) and try once more.
        for (auto & s : slots)
            if (!s.task && !s.tokens.empty()) slot_clear(ctx.get(), s);
        rc = llama_decode(ctx.get(), b);
    }
    bump([](engine_metrics & m) { ++m.decode_calls; });
    if (rc != 0) {
        for (const auto & p : parts) {
            slot & s = slots[p.slot];
            slot_clear(ctx.get(), s);
            fail_task(s, Status(status_code::engine_error, "llama_decode failed (" + std::to_string(rc) +
                                                               "): the context is full or the batch was rejected"));
        }
        return false;
    }
    for (const auto & p : parts) after_chunk(slots[p.slot], p.n_end);
    return true;
}

void engine_impl::after_chunk(slot & s, uint32_t n_end) {
    active_task & t = *s.task;
    for (const media_span & m : t.req.media)  // an M-RoPE image whose first embeddings just went in
        if (m.grid_w && m.begin >= s.tokens.size() && m.begin < n_end)
            s.positions.add({m.begin, m.n, m.grid_w, m.grid_h});
    s.tokens.insert(s.tokens.end(), t.seq.begin() + s.tokens.size(), t.seq.begin() + n_end);
    while (!t.plan.empty() && t.plan.front() <= n_end) t.plan.erase(t.plan.begin());
    if (std::find(t.checkpoint_at.begin(), t.checkpoint_at.end(), n_end) != t.checkpoint_at.end()) {
        Status st = slot_take_checkpoint(ctx.get(), s, cfg.ctx.checkpoints.max);
        if (!st.ok()) log_warn("engine: checkpoint of slot {} not taken: {}", s.id, st.message());
    }
    if (t.progress) {
        t.progress = n_end < t.seq.size();
        t.h->push(
            event_progress{uint32_t(t.seq.size()), t.usage.cached_tokens, n_end, ms_between(t.t_start, steady::now())});
    }
    if (t.part_tokens > 0 && n_end < t.seq.size() && n_end >= t.part_end + t.part_tokens) {
        Status st = send_part(s, false);
        if (!st.ok()) return fail_task(s, st);
    }
    if (n_end != t.seq.size()) return;
    const float * lg = llama_get_logits_ith(ctx.get(), t.batch_row);
    if (!lg) return fail_task(s, Status(status_code::engine_error, "no logits for slot " + std::to_string(s.id)));
    s.logits.assign(lg, lg + n_vocab);
    t.need_sample = true;
    if (t.n_generated == 0) t.t_prompt_done = steady::now();
}

// ---- sample: every slot with fresh logits draws its next token, emits it, and finishes or continues ----

void engine_impl::phase_sample() {
    for (auto & s : slots)
        if (s.task && s.task->need_sample) sample_one(s);
}

void engine_impl::sample_one(slot & s) {
    active_task & t = *s.task;
    t.need_sample = false;
    if (t.kind == task_kind::prefill && t.part_tokens > 0) {
        Status st = send_part(s, true);
        if (!st.ok()) return fail_task(s, st);
        return finish(s, finish_reason::stop);
    }
    if (t.kind == task_kind::prefill) {
        const auto t0 = steady::now();
        blob_buffer_sink sink;
        const uint32_t base = std::min<uint32_t>(t.req.delta_base, uint32_t(s.tokens.size()) - 1);
        Status st = base > 0
                        ? slot_export_delta(env, s, base, t.req.request_json, sink, state_scratch, cfg.limits.key.get())
                        : slot_export(ctx.get(), s, env.identity, env.context, true, t.req.request_json, sink,
                                      state_scratch, cfg.limits.key.get());
        if (!st.ok()) return fail_task(s, st);
        bump([&](engine_metrics & m) {
            m.deltas_out += base > 0 ? 1 : 0;
            m.blob_bytes_out += sink.bytes().size();
            m.serialize_seconds += seconds_since(t0);
        });
        return finish(s, finish_reason::stop, {}, std::move(sink.bytes()));
    }
    if (t.h->migrate_requested()) return migrate_out(s);
    // (n_predict 0, or a resumed generation that arrived with all of its tokens: n_predict < 0 is no limit)
    if (t.n_generated >= uint32_t(t.req.n_predict)) return finish(s, finish_reason::length);
    const auto sampled = sampling_sample(t.chain.get(), s.logits.data(), s.logits.size());
    if (!sampled.ok()) return fail_task(s, sampled.status());
    const token_id tok = sampled.value();
    if (tok < 0) return finish(s, finish_reason::stop);  // no token may follow (see sample_from_logits)
    if (!t.req.ignore_eos && llama_vocab_is_eog(model->vocab(), tok)) return finish(s, finish_reason::stop);
    // The context is full when the prompt and the answer fill it: a token that would stand past its last cell
    // is not emitted (llama-server's count: prompt + generated <= the slot's context).
    if (t.seq.size() + 1 > env.n_ctx_slot) {
        t.context_full = true;
        return finish(s, finish_reason::length);
    }
    event_token ev;
    ev.token = tok;
    if (t.req.n_probs >= 0) ev.probs = probs_of(s.logits, tok, t.req.n_probs);
    ev.text = t.text.push(text_token_piece(model->vocab(), tok));
    if (seam && seam->on_sample) seam->on_sample(t.h->id(), s.logits);
    t.h->push(std::move(ev));
    ++t.n_generated;
    bump([](engine_metrics & m) { ++m.generated_tokens; });
    if (t.text.stopped()) return finish(s, finish_reason::stop);
    if (t.n_generated >= uint32_t(t.req.n_predict)) return finish(s, finish_reason::length);
    if (t.seq.size() + 1 >= env.n_ctx_slot) {  // (the next would not fit)
        t.context_full = true;
        return finish(s, finish_reason::length);
    }
    t.seq.push_back(tok);
    t.plan = {uint32_t(t.seq.size())};
    if (seam && seam->desync_after && seam->desync_after(t.h->id(), t.n_generated))
        llama_memory_seq_rm(llama_get_memory(ctx.get()), s.id, -1, -1);  // behind the slot's back
}

// ---- live migration (docs/cluster.md "Live migration") ----

// migrate_out: the task pauses here, between two tokens, with the logits of the last one fresh. Its state leaves
// as a blob with a generation section — the prompt and the tokens generated so far, their cells and the logits
// the next token is sampled from — and the task ends with finish migrated: the text held back (a possible stop
// string's start, a split UTF-8 character) is not flushed, the node the generation moves to emits it.
void engine_impl::migrate_out(slot & s) {
    active_task & t = *s.task;
    const auto t0 = steady::now();
    blob_buffer_sink sink;
    blob_generation g;
    g.n_generated = t.n_generated;
    g.n_cached = t.usage.cached_tokens;
    Status st = slot_export(ctx.get(), s, env.identity, env.context, true, t.req.request_json, sink, state_scratch,
                            cfg.limits.key.get(), g);
    if (!st.ok()) return fail_task(s, st);
    bump([&](engine_metrics & m) {
        ++m.migrations_out;
        m.blob_bytes_out += sink.bytes().size();
        m.serialize_seconds += seconds_since(t0);
    });
    finish(s, finish_reason::migrated, {}, std::move(sink.bytes()));
}

// resume_generation: a restored state continues a generation that paused elsewhere (blob_generation). Its last
// g.n_generated tokens were generated: the sampler chain accepts them and its RNG advances once per token
// (sampling_replay), the text stream takes their text, and each goes out as a replayed event_token (its text
// was emitted where it was generated; the consumer rebuilds the output so far from them). Then the task samples
// the next token from the restored logits, exactly as the paused node would have.
Status engine_impl::resume_generation(slot & s, active_task & t, const blob_generation & g) {
    const size_t n = s.tokens.size();
    const std::span<const token_id> generated(s.tokens.data() + (n - g.n_generated), g.n_generated);
    for (token_id tok : generated) {
        if (media_token_is(tok) || tok < 0 || tok >= n_vocab)
            return Status(status_code::incompatible, "generation: a generated token is not a token of this vocabulary");
        // (a generation ends at one, or bans them under ignore_eos; libllama's grammar sampler aborts on one it
        // cannot accept)
        if (llama_vocab_is_eog(model->vocab(), tok))
            return Status(status_code::incompatible, "generation: a generated token is an end-of-generation token");
    }
    BATON_RETURN_IF_ERROR(sampling_replay(t.chain.get(), generated));
    t.usage.prompt_tokens = uint32_t(n - g.n_generated);
    t.usage.cached_tokens = g.n_cached;
    t.n_generated = g.n_generated;
    for (token_id tok : generated) {
        event_token ev;
        ev.token = tok;
        ev.replayed = true;
        ev.text = t.text.push(text_token_piece(model->vocab(), tok));
        t.h->push(std::move(ev));
    }
    bump([&](engine_metrics & m) {
        ++m.migrations_in;
        m.migrated_tokens_in += g.n_generated;
    });
    return {};
}

// ---- finishing ----

void engine_impl::finish(slot & s, finish_reason why, Status error, std::vector<uint8_t> blob) {
    std::unique_ptr<active_task> t = std::move(s.task);
    s.owner = 0;
    s.last_used = step_no;
    if (!error.ok()) return deliver(t->h, event_error{std::move(error)});
    event_done done;
    done.finish = why;
    done.blob = std::move(blob);
    done.tail = why == finish_reason::migrated ? std::string() : t->text.flush();  // (migrated: the next node's)
    done.stop_word = t->text.stop_word();
    done.context_full = t->context_full;
    done.slot = s.id;
    done.usage = t->usage;
    done.usage.generated_tokens = t->n_generated;
    const auto now = steady::now();
    if (t->t_prompt_done == steady::time_point{}) t->t_prompt_done = now;
    done.ms_prompt = ms_between(t->t_start, t->t_prompt_done);
    done.ms_generate = ms_between(t->t_prompt_done, now);
    deliver(t->h, std::move(done));
    // After the answer went out: the state the slot holds now (prompt and answer) for a shared tier.
    if (cfg.state_kept && cfg.keep_finished && why != finish_reason::cancelled && why != finish_reason::migrated &&
        s.tokens.size() >= cfg.reuse_min_tokens) {
        auto snap = baton::slot_snapshot(env, s, state_scratch);
        if (snap.ok()) {
            cfg.state_kept(snap.value(), std::min(t->req.prompt.size(), s.tokens.size()));
            s.idle_blob = std::move(snap.value());  // the same bytes serve the host cache or parking later
        } else log_warn("engine: slot {}'s state could not be offered to the tier: {}", s.id, snap.status().message());
    }
}

void engine_impl::fail_task(slot & s, Status error) {
    if (s.task) finish(s, finish_reason::error, std::move(error));
}

void engine_impl::publish() {
    std::vector<std::shared_ptr<const std::vector<token_id>>> before;
    {
        lock_guard lk(pub_mu);
        for (const auto & si : slot_snapshot) before.push_back(si.tokens);
    }
    std::vector<slot_info> snap;
    uint32_t busy = 0;
    uint64_t parked_bytes = 0, idle_blob_bytes = 0;
    llama_memory_t mem = llama_get_memory(ctx.get());
    for (const auto & s : slots) {
        slot_info si;
        si.id = s.id;
        si.busy = s.task != nullptr || s.owner != 0;
        const std::vector<token_id> & held = slot_held_tokens(s);
        si.n_tokens = uint32_t(held.size());
        const size_t k = snap.size();
        if (k < before.size() && before[k] && *before[k] == held) si.tokens = before[k];
        else si.tokens = std::make_shared<const std::vector<token_id>>(held);
        si.parked = s.parked != nullptr;
        si.n_checkpoints = uint32_t(s.parked ? s.parked->view().checkpoints.size() : s.checkpoints.size());
        parked_bytes += s.parked ? s.parked->size() : 0;
        idle_blob_bytes += s.idle_blob ? s.idle_blob->size() : 0;
        si.pos_min = llama_memory_seq_pos_min(mem, s.id);
        si.pos_max = llama_memory_seq_pos_max(mem, s.id);
        busy += si.busy ? 1 : 0;
        snap.push_back(si);
    }
    lock_guard lk(pub_mu);
    slot_snapshot = std::move(snap);
    metrics.slots_busy = busy;
    metrics.parked_bytes = parked_bytes;
    metrics.idle_snapshot_bytes = idle_blob_bytes;
    metrics.cache_ram_bytes = host_cache.bytes();
    metrics.cache_ram_entries = host_cache.entries();
    cache_snapshot = host_cache.prefixes();
}

}  // namespace baton
