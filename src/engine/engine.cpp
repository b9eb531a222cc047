// engine.cpp — the engine's public face: creation, task submission and validation, request handles.
#include "baton/engine.h"

#include <llama.h>

#include "baton/base/buffer_pool.h"
#include "engine_impl.h"
#include "engine_test_seam.h"
#include "state_probe.h"

namespace baton {

const char * finish_reason_name(finish_reason r) {
    switch (r) {
        case finish_reason::none: return "none";
        case finish_reason::stop: return "stop";
        case finish_reason::length: return "length";
        case finish_reason::cancelled: return "cancelled";
        case finish_reason::error: return "error";
        case finish_reason::migrated: return "migrated";
    }
    return "none";
}

// ---- request_handle ----

bool request_handle::next(engine_event & ev, std::chrono::milliseconds timeout) {
    lock_guard lk(mu_);
    if (!cv_.wait_for(mu_, timeout, [&]() BATON_REQUIRES(mu_) { return !events_.empty(); })) return false;
    ev = std::move(events_.front());
    events_.pop_front();
    return true;
}

bool request_handle::try_next(engine_event & ev) {
    lock_guard lk(mu_);
    if (events_.empty()) return false;
    ev = std::move(events_.front());
    events_.pop_front();
    return true;
}

void request_handle::set_notify(std::function<void()> fn) {
    lock_guard lk(mu_);
    notify_ = std::move(fn);
}

void request_handle::push(engine_event ev) {
    std::function<void()> notify;
    {
        lock_guard lk(mu_);
        events_.push_back(std::move(ev));
        notify = notify_;
    }
    cv_.notify_all();
    if (notify) notify();
}

// ---- validated_blob ----

validated_blob::~validated_blob() {
    view_ = blob_view{};
    buffer_pool::shared().give(std::move(bytes_));
}

Result<std::shared_ptr<const validated_blob>> validated_blob::parse(std::vector<uint8_t> bytes, const blob_limits & limits) {
    std::shared_ptr<validated_blob> b(new validated_blob());
    b->bytes_ = std::move(bytes);
    auto v = blob_parse(std::span<const uint8_t>(b->bytes_.data(), b->bytes_.size()), limits);
    if (!v.ok()) return v.status();
    b->view_ = std::move(v.value());
    return std::shared_ptr<const validated_blob>(std::move(b));
}

// ---- engine ----

engine::engine(std::unique_ptr<engine_impl> impl) : impl_(std::move(impl)) {}

engine::~engine() { stop(); }

void engine::stop() {
    {
        lock_guard lk(impl_->mu);
        impl_->stopping = true;
    }
    impl_->cv.notify_all();
    if (impl_->thread.joinable()) impl_->thread.join();
}

engine_impl::~engine_impl() {
    if (batch.token) llama_batch_free(batch);
    if (media_batch.embd) llama_batch_free(media_batch);
}

Result<std::unique_ptr<engine>> engine::create(std::shared_ptr<const loaded_model> model, const engine_config & cfg) {
    auto impl = engine_impl::create(std::move(model), cfg, nullptr);
    if (!impl.ok()) return impl.status();
    return std::unique_ptr<engine>(new engine(std::move(impl.value())));
}

Result<std::unique_ptr<engine_impl>> engine_impl::create(std::shared_ptr<const loaded_model> model,
                                                         const engine_config & cfg,
                                                         std::shared_ptr<const engine_test_seam> seam) {
    if (!model) return Status(status_code::invalid_argument, "engine: no model");
    auto impl = std::make_unique<engine_impl>();
    impl->model = model;
    impl->seam = std::move(seam);
    impl->cfg = cfg;
    impl->cfg.ctx = context_resolve(*model, context_normalized(cfg.ctx));
    auto ctx = context_make(*model, impl->cfg.ctx);
    if (!ctx.ok()) return ctx.status();
    impl->ctx = std::move(ctx.value());
    impl->partial_state = model->has_partial_state();
    impl->positions_2d = model->positions_2d();
    impl->n_vocab = int32_t(model->identity().n_vocab);
    impl->n_embd_inp = uint32_t(llama_model_n_embd_inp(model->get()));
    impl->pieces = sampling_token_pieces(model->vocab());
    impl->eog = text_eog_tokens(model->vocab());
    impl->batch = llama_batch_init(int32_t(impl->cfg.ctx.n_batch), 0, 1);

    const model_identity & mi = model->identity();
    impl->env.ctx = impl->ctx.get();
    impl->env.identity = mi;
    const context_config & c = impl->cfg.ctx;
    impl->env.context = c;  // the kv_layout part of the config, with the cells libllama really made
    impl->env.context.n_ctx = llama_n_ctx(impl->ctx.get());
    // Each slot owns an equal share of the KV cells (like llama-server's -np), so the slots together can
    // never need more cells than exist and one slot can never starve another, whatever the KV layout.
    impl->env.n_ctx_slot = llama_n_ctx(impl->ctx.get()) / c.n_seq_max;
    // The structure of this node's own states, which every incoming state must match (state_payload.h).
    auto shape = state_probe(impl->ctx.get(), *model, 0);
    if (shape.ok()) impl->env.shape = std::move(shape.value());
    else impl->env.shape_error = shape.status();
    if (impl->seam && impl->seam->restore_fail_after) {
        impl->faults.fail_after = impl->seam->restore_fail_after;
        impl->env.faults = &impl->faults;
    }

    if (cfg.cache_ram_mib < -1)
        return Status(status_code::invalid_argument, "cache-ram: " + std::to_string(cfg.cache_ram_mib) +
                                                         " MiB (0 turns the cache off, -1 lifts the limit)");
    impl->host_cache = prompt_cache(cfg.cache_ram_mib < 0 ? SIZE_MAX : size_t(cfg.cache_ram_mib) << 20);

    impl->slots.resize(c.n_seq_max);
    for (size_t i = 0; i < impl->slots.size(); ++i) impl->slots[i].id = int32_t(i);
    {
        lock_guard lk(impl->pub_mu);  // before the scheduler starts, but the analysis holds every write to it
        impl->metrics.slots_total = c.n_seq_max;
    }
    impl->publish();
    engine_impl * raw = impl.get();
    impl->thread = std::thread([raw] { raw->run(); });
    return impl;
}

namespace {

Status check_request(const gen_request & r, const engine_impl & e, bool needs_prompt) {
    const int32_t n_vocab = e.n_vocab;
    const uint32_t n_ctx_slot = e.env.n_ctx_slot;
    BATON_RETURN_IF_ERROR(sampling_check(r.sampling));
    if (r.n_predict < 0) return {status_code::invalid_argument, "max_tokens: " + std::to_string(r.n_predict) + " is negative"};
    if (!needs_prompt) return {};
    if (r.prompt.empty()) return {status_code::invalid_argument, "prompt: is empty"};
    BATON_RETURN_IF_ERROR(media_spans_check(r.prompt, r.media, e.n_embd_inp, e.cfg.ctx.n_ubatch,
                                            e.positions_2d));  // (media tokens only where images are)
    if (e.partial_state && std::any_of(r.media.begin(), r.media.end(), [](const media_span & m) { return m.grid_w; }))
        return {status_code::invalid_argument, "prompt: images with M-RoPE grid positions on a model with recurrent or "
                                               "sliding-window memory are not served"};
    for (size_t i = 0; i < r.prompt.size(); ++i)
        if (!media_token_is(r.prompt[i]) && (r.prompt[i] < 0 || r.prompt[i] >= n_vocab))
            return {status_code::invalid_argument, "prompt: token " + std::to_string(r.prompt[i]) + " at index " +
                                                       std::to_string(i) + " is not in 0.." + std::to_string(n_vocab - 1)};
    if (r.prompt.size() >= n_ctx_slot) return context_exceeded_status(r.prompt.size(), n_ctx_slot);
    return {};
}

}  // namespace

Result<request_ptr> engine::submit(engine_task task) {
    const int32_t n_slots = int32_t(impl_->slots.size());
    auto check_slot = [&](int32_t id) -> Status {
        if (id < 0 || id >= n_slots)
            return {status_code::not_found, "slot " + std::to_string(id) + " does not exist (0.." + std::to_string(n_slots - 1) + ")"};
        return {};
    };
    Status st;
    if (auto * g = std::get_if<task_generate>(&task)) st = check_request(g->req, *impl_, true);
    else if (auto * p = std::get_if<task_prefill>(&task)) st = check_request(p->req, *impl_, true);
    else if (auto * d = std::get_if<task_decode>(&task)) {
        st = d->blob ? check_request(d->req, *impl_, false) : Status(status_code::invalid_argument, "decode: no blob");
    } else if (auto * s = std::get_if<task_slot_save>(&task)) st = check_slot(s->slot);
    else if (auto * r = std::get_if<task_slot_restore>(&task)) {
        st = check_slot(r->slot);
        if (st.ok() && !r->blob) st = Status(status_code::invalid_argument, "restore: no blob");
    } else if (auto * e = std::get_if<task_slot_erase>(&task)) st = check_slot(e->slot);
    else if (auto * c = std::get_if<task_cache_put>(&task); c && !c->blob)
        st = Status(status_code::invalid_argument, "cache_put: no blob");
    if (!st.ok()) return st;

    lock_guard lk(impl_->mu);
    if (impl_->stopping) return Status(status_code::unavailable, "engine is shutting down");
    if (impl_->queue.size() >= size_t(impl_->cfg.ctx.n_seq_max) + impl_->cfg.queue_max)
        return Status(status_code::unavailable, "queue full: " + std::to_string(impl_->queue.size()) + " tasks waiting for a slot");
    auto h = std::make_shared<request_handle>(impl_->next_id++);
    impl_->queue.emplace_back(std::move(task), h);
    impl_->cv.notify_all();
    return h;
}

engine_metrics engine::metrics() const {
    lock_guard lk(impl_->pub_mu);
    return impl_->metrics;
}

std::vector<slot_info> engine::slots() const {
    lock_guard lk(impl_->pub_mu);
    return impl_->slot_snapshot;
}

std::vector<std::shared_ptr<const std::vector<token_id>>> engine::cached_prefixes() const {
    lock_guard lk(impl_->pub_mu);
    return impl_->cache_snapshot;
}

const loaded_model & engine::model() const { return *impl_->model; }
const engine_config & engine::config() const { return impl_->cfg; }
const model_identity & engine::identity() const { return impl_->env.identity; }
const kv_layout & engine::layout() const { return impl_->env.context; }
Status engine::state_validation() const { return impl_->env.shape_error; }
bool engine::resumes_exactly() const {
    return llama_model_n_swa(impl_->model->get()) == 0 || impl_->env.context.flash_attn;
}
Result<std::vector<uint8_t>> engine::delta_of(const blob_view & full, uint32_t n_base, const blob_key * key) const {
    return state_delta_of(impl_->env, full, n_base, key);
}

Result<std::unique_ptr<state_stream_assembler>> engine::stream_assembler() const {
    const restore_env & env = impl_->env;
    if (!env.shape_error.ok()) return Status(status_code::unsupported, "state stream: " + env.shape_error.message());
    return std::make_unique<state_stream_assembler>(env.shape, env.n_ctx_slot, impl_->cfg.limits);
}

const std::string & engine_event_text(const engine_event & ev) {
    static const std::string none;
    if (const auto * t = std::get_if<event_token>(&ev)) return t->text;
    if (const auto * d = std::get_if<event_done>(&ev)) return d->tail;
    return none;
}

engine_result engine_run_to_end(const request_ptr & h, std::chrono::milliseconds timeout) {
    engine_result r;
    const auto deadline = steady::now() + timeout;
    for (;;) {
        engine_event ev;
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now());
        if (left.count() <= 0 || !h->next(ev, left)) {
            h->cancel();
            r.done = Status(status_code::deadline_exceeded, "request timed out");
            return r;
        }
        r.text += engine_event_text(ev);
        if (auto * t = std::get_if<event_token>(&ev)) {
            r.tokens.push_back(t->token);
            continue;
        }
        if (std::holds_alternative<event_progress>(ev)) continue;
        if (auto * e = std::get_if<event_error>(&ev)) r.done = std::move(e->error);
        else r.done = std::move(std::get<event_done>(ev));
        return r;
    }
}

}  // namespace baton
