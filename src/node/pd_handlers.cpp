// pd_handlers.cpp — the node's side of the PD protocol (include/baton/pd/): POST /v1/prefill runs a prompt
// into a blob that embeds the resolved request (pd_request.h), POST /v1/decode verifies such a blob totally,
// restores it through the engine's one restore routine and answers as /v1/completions or /v1/chat/completions
// would have on one node. Also the blob and task plumbing the slot-state endpoints share: run_to_done,
// blob_parse_edge (verification on the bridge pool, rejects counted by reason) and send_blob. Direct transfer
// (docs/router.md): a prefill asked to hold its state keeps it under a lease (state_hold.h) and answers with
// its id; GET/DELETE /v1/states/{id} serve and release it; a decode told where a state is fetches it
// (fetch_held) and goes on exactly as with a blob in its body.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <span>

#include "baton/base/buffer_pool.h"
#include "baton/blob.h"
#include "baton/blob_pack.h"
#include "baton/pd/kv_events.h"
#include "baton/pd/pd_protocol.h"
#include "baton/pd/pd_request.h"
#include "baton/state_stream.h"
#include "node_impl.h"
#include "node_test_seam.h"

namespace baton {

net::awaitable<Result<event_done>> node_impl::run_to_done(http_exchange & ex, engine_task task) {
    const auto lim = wait_limits(deadline_from_now());
    auto h = eng->submit(std::move(task));
    if (!h.ok()) co_return h.status();
    event_watch w(h.value(), ex.executor());
    for (;;) {
        engine_event ev;
        Status st = co_await event_wait(w, ev, lim, &ex);
        if (!st.ok()) co_return st;
        if (auto * e = std::get_if<event_error>(&ev)) co_return std::move(e->error);
        if (auto * d = std::get_if<event_done>(&ev)) co_return std::move(*d);
    }
}

Result<blob_ptr> node_impl::blob_parse_counted(std::vector<uint8_t> bytes) {
    auto b = validated_blob::parse(std::move(bytes), cfg.engine.limits);
    if (!b.ok()) metrics.count_blob_reject(b.status().code());
    return b;
}

net::awaitable<Result<blob_ptr>> node_impl::blob_parse_edge(std::vector<uint8_t> bytes) {
    co_return co_await http->offload(
        [this, bytes = std::move(bytes)]() mutable { return blob_parse_counted(std::move(bytes)); });
}

namespace {
// The tokens a and b begin with alike.
size_t common_prefix_len(std::span<const token_id> a, std::span<const token_id> b) {
    return size_t(std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin());
}
}  // namespace

net::awaitable<void> node_impl::tier_warm(const std::vector<token_id> & prompt) {
    tier_link * t = tier.get();
    if (!t) co_return;
    size_t held = 0;
    for (const slot_info & s : eng->slots())
        if (s.tokens) held = std::max(held, common_prefix_len(*s.tokens, prompt));
    for (const auto & c : eng->cached_prefixes()) held = std::max(held, common_prefix_len(*c, prompt));
    if (prompt.size() < held + 1 + pd_kv_block_tokens) co_return;  // not a whole block more to gain
    // Each entry is parsed like any state from outside (blob_parse_counted, on the bridge-pool thread of the
    // fetch), once, and its tokens must be the prompt's (never trust a key); base first, the engine joins a
    // delta with the entry or slot that holds its base (task_cache_put).
    auto parse = [this](std::vector<uint8_t> bytes) { return blob_parse_counted(std::move(bytes)); };
    auto chain = co_await http->offload([t, &prompt, held, &parse] { return t->fetch(prompt, held, parse); });
    if (!chain) co_return;
    for (const blob_ptr & b : *chain)
        if (common_prefix_len(b->view().tokens, prompt) < pd_kv_block_tokens) co_return;
    for (blob_ptr & b : *chain)
        if (!eng->submit(task_cache_put{std::move(b)}).ok()) co_return;  // refused later: the prompt is computed
}

net::awaitable<void> node_impl::send_blob(http_exchange & ex, std::vector<uint8_t> blob, http_headers headers) {
    size_t cut = blob.size();
    if (seam && seam->on_blob_out) cut = std::min(cut, seam->on_blob_out(blob));
    bool ok = co_await ex.begin(200, "application/octet-stream", std::move(headers), uint64_t(blob.size()));
    if (ok) ok = co_await ex.write(blob.data(), cut);
    if (ok && cut < blob.size()) ex.abort();  // the test seam cut the blob: the connection drops mid-body
    else if (ok) co_await ex.end();
    buffer_pool::shared().give(std::move(blob));
}

net::awaitable<Result<std::optional<std::vector<uint8_t>>>> node_impl::pack_for(const http_exchange & ex,
                                                                                std::span<const uint8_t> blob) {
    if (cfg.state_compress_level <= 0 || !accepts_blob_pack(ex.request().header("Accept-Encoding")))
        co_return std::optional<std::vector<uint8_t>>{};
    const auto t0 = steady_clock::now();
    auto p = co_await http->offload([&] { return blob_pack(blob, cfg.state_compress_level); });
    if (!p.ok()) co_return p.status();
    metrics.count_state_packed(blob.size(), p->size(), std::chrono::duration<double>(steady_clock::now() - t0).count());
    co_return std::optional<std::vector<uint8_t>>(std::move(p.value()));
}

net::awaitable<Result<std::vector<uint8_t>>> node_impl::unpack_body(std::vector<uint8_t> bytes,
                                                                    std::string_view coding) {
    if (coding.empty() || coding == "identity") co_return bytes;
    if (coding != blob_pack_coding) {
        metrics.count_blob_reject(status_code::unsupported);
        co_return Status(status_code::unsupported, "Content-Encoding \"" + std::string(coding) +
                                                       "\": a state comes as it is or packed (" +
                                                       std::string(blob_pack_coding) + ")");
    }
    // Off the event loop, bounded before anything is allocated; a packed state that does not unpack is refused
    // like a blob that does not check.
    const auto t0 = steady_clock::now();
    auto blob = co_await http->offload([&] { return blob_unpack(bytes, cfg.max_blob_bytes); });
    buffer_pool::shared().give(std::move(bytes));
    if (!blob.ok()) {
        metrics.count_blob_reject(blob.status().code());
        co_return blob.status();
    }
    metrics.count_state_unpacked(std::chrono::duration<double>(steady_clock::now() - t0).count());
    co_return std::move(blob.value());
}

namespace {

// prefill_trace: however a prefill ends, its timeline (the prompt, then the state sent) goes to the live view.
struct prefill_trace {
    prefill_trace(live_log & l, const http_exchange & e) : log(l), ex(e) { r.unix_ms = live_log::now_unix_ms(); }
    prefill_trace(const prefill_trace &) = delete;
    prefill_trace & operator=(const prefill_trace &) = delete;

    live_log & log;
    const http_exchange & ex;
    steady_clock::time_point t0 = steady_clock::now(), t_run{}, t_done{};
    live_request r;

    double secs(steady_clock::time_point t) const { return std::chrono::duration<double>(t - t0).count(); }
    ~prefill_trace() {
        const auto now = steady_clock::now();
        r.id = ex.request().id;
        r.path = ex.request().path;
        r.route = "prefill";
        r.status = ex.status();
        r.total_s = secs(now);
        if (t_done != steady_clock::time_point{}) {
            r.steps.push_back(live_step{"prompt", "", secs(t_run), secs(t_done), 0});
            r.steps.push_back(live_step{"send", "", secs(t_done), secs(now), bytes});
        }
        log.record(std::move(r));
    }
    uint64_t bytes = 0;
};

}  // namespace

net::awaitable<void> node_impl::on_prefill(http_exchange & ex) {
    prefill_trace trace(live, ex);
    Status st = check_role(cfg.role != node_role::decode, pd_path_prefill.data());
    if (!st.ok()) co_return (void) co_await ex.respond_error(st);
    // The body is the client's request as the client wrote it; the router names its endpoint in a header
    // (absent: /v1/completions). The blob embeds the request as this node resolved it (pd_request.h): its
    // defaults filled in, a chat rendered and tokenized, so the decode node needs neither.
    const std::string_view ep_name = ex.request().header(pd_header_endpoint);
    auto endpoint =
        ep_name.empty() ? Result<openai_endpoint>(openai_endpoint::completions) : openai_endpoint_parse(ep_name);
    if (!endpoint.ok())
        co_return (void) co_await ex.respond_error(Status(
            status_code::invalid_argument, std::string(pd_header_endpoint) + ": " + endpoint.status().message()));
    auto oreq = co_await prepare(ex.request().body_text(), endpoint.value());
    if (!oreq.ok()) co_return (void) co_await ex.respond_error(oreq.status());
    auto embedded = pd_request_encode(oreq.value());
    if (!embedded.ok()) co_return (void) co_await ex.respond_error(embedded.status());
    const uint32_t n_ctx = n_ctx_slot();
    auto gen = co_await http->offload([&] { return openai_to_gen(oreq.value(), *model, n_ctx); });
    if (!gen.ok()) co_return (void) co_await ex.respond_error(gen.status());
    gen->request_json = std::move(embedded.value());
    gen->return_progress = false;  // (the embedded request keeps it: the decode node reports the progress)
    if (const std::string_view base = ex.request().header(pd_header_delta_base); !base.empty()) {
        uint32_t n = 0;
        auto [p, ec] = std::from_chars(base.data(), base.data() + base.size(), n);
        if (ec != std::errc() || p != base.data() + base.size())
            co_return (void) co_await ex.respond_error(
                Status(status_code::invalid_argument,
                       std::string(pd_header_delta_base) + ": must be a token count (0 or more)"));
        gen->delta_base = n;
    }
    auto ticket = admit();
    if (!ticket.ok()) co_return (void) co_await ex.respond_error(ticket.status());
    co_await tier_warm(gen->prompt);
    if (ex.request().header(pd_header_state_hold) == "1" && ex.request().header(pd_header_state_stream) == "1" &&
        cfg.state_stream_tokens > 0 && gen->delta_base == 0)
        co_return co_await prefill_streamed(ex, std::move(gen.value()), std::move(ticket.value()));
    trace.t_run = steady_clock::now();
    auto done = co_await run_to_done(ex, task_prefill{std::move(gen.value())});
    if (!done.ok()) co_return (void) co_await ex.respond_error(done.status());
    trace.t_done = steady_clock::now();
    trace.bytes = done->blob.size();
    trace.r.prompt_tokens = done->usage.prompt_tokens;
    if (ex.request().header(pd_header_state_hold) == "1") {
        const uint64_t bytes = done->blob.size();
        auto id = held->put(std::move(done->blob), steady_clock::now());
        if (!id.ok()) co_return (void) co_await ex.respond_error(id.status());  // no room: busy, another node
        http_response r = json_response({{"state", id.value()}, {"bytes", bytes}});
        r.headers = {{std::string(pd_header_prompt_tokens), std::to_string(done->usage.prompt_tokens)},
                     {std::string(pd_header_cached_tokens), std::to_string(done->usage.cached_tokens)},
                     {std::string(pd_header_state_id), id.value()}};
        co_return (void) co_await ex.respond(std::move(r));
    }
    http_headers headers = {{std::string(pd_header_prompt_tokens), std::to_string(done->usage.prompt_tokens)},
                            {std::string(pd_header_cached_tokens), std::to_string(done->usage.cached_tokens)}};
    auto packed = co_await pack_for(ex, done->blob);
    if (!packed.ok()) co_return (void) co_await ex.respond_error(packed.status());
    if (packed->has_value()) {
        headers.emplace_back("Content-Encoding", std::string(blob_pack_coding));
        buffer_pool::shared().give(std::move(done->blob));
        co_return co_await send_blob(ex, std::move(**packed), std::move(headers));
    }
    co_await send_blob(ex, std::move(done->blob), std::move(headers));
}

net::awaitable<void> node_impl::prefill_streamed(http_exchange & ex, gen_request gen, admission_ptr ticket) {
    auto stream = std::make_shared<held_stream>();
    stream->append(state_stream_writer::head());
    // The part callback runs on the scheduler thread, one part after another; the writer chains them.
    auto writer = std::make_shared<state_stream_writer>();
    gen.state_part_tokens = cfg.state_stream_tokens;
    gen.on_state_part = [stream, writer](std::vector<uint8_t> blob, const state_part_info & info) {
        stream->append(writer->part_head(blob));
        stream->append(std::move(blob));
        if (!info.last) return;
        stream->append(writer->end(info.n_tokens, info.n_checkpoints));
        stream->close();
    };
    const size_t n_prompt = gen.prompt.size();
    auto id = held->put_stream(stream, steady_clock::now());
    if (!id.ok()) co_return (void) co_await ex.respond_error(id.status());  // no room: busy, another node
    auto h = eng->submit(task_prefill{std::move(gen)});
    if (!h.ok()) {
        held->release(id.value());
        co_return (void) co_await ex.respond_error(h.status());
    }
    // A stream whose lease ends before its prompt does (released: the request ended; expired) cancels the prompt.
    stream->set_on_abandon([w = std::weak_ptr<request_handle>(h.value())] {
        if (auto p = w.lock()) p->cancel();
    });
    net::co_spawn(ex.executor(), stream_prefill_run(h.value(), stream, std::move(ticket)), net::detached);
    http_response r = json_response({{"state", id.value()}, {"stream", true}});
    r.headers = {{std::string(pd_header_prompt_tokens), std::to_string(n_prompt)},
                 {std::string(pd_header_state_id), id.value()}};
    co_await ex.respond(std::move(r));
}

net::awaitable<void> node_impl::stream_prefill_run(request_ptr h, std::shared_ptr<held_stream> stream,
                                                   admission_ptr ticket) {
    // The prompt runs on whether or not anyone fetches yet (the decode node may connect later); it ends at the
    // node's --timeout like any request, and a failure ends the stream with an error frame (the decode node
    // then refuses the state and the router falls back).
    event_watch w(h, co_await net::this_coro::executor);
    const auto lim = wait_limits(deadline_from_now());
    Status failed;
    for (;;) {
        engine_event ev;
        Status st = co_await event_wait(w, ev, lim, nullptr);
        if (!st.ok()) {
            failed = st;
            break;
        }
        if (auto * e = std::get_if<event_error>(&ev)) {
            failed = std::move(e->error);
            break;
        }
        if (std::holds_alternative<event_done>(ev)) break;
    }
    if (!failed.ok()) stream->append(state_stream_writer::error(failed.message()));
    stream->close();  // (already closed after the last part when the prompt went through)
    ticket.reset();
}

net::awaitable<void> node_impl::send_stream(http_exchange & ex, std::shared_ptr<held_stream> stream) {
    auto n = async_notify::make(ex.executor());
    stream->watch(n);
    struct unwatch {
        held_stream & s;
        const notify_ptr & n;
        ~unwatch() { s.unwatch(n); }
    } unwatch_guard{*stream, n};
    if (!co_await ex.begin(200, std::string(state_stream_media_type), {}, std::nullopt)) co_return;
    const auto deadline = deadline_from_now();
    size_t next = 0;
    const long cut = seam && seam->stream_cut_after_frames >= 0
                         ? long(seam->stream_cut_after_frames) + seam->streams_served.fetch_add(1)
                         : -1;
    for (;;) {
        std::vector<held_stream::frame> frames;
        const bool closed = stream->frames_from(next, frames);
        for (const auto & f : frames) {
            if (cut >= 0 && next == size_t(cut)) {
                ex.abort();  // tests: the prefill node dies after this many frames
                co_return;
            }
            std::span<const uint8_t> bytes(*f);
            std::vector<uint8_t> changed;
            // (a part's blob is the only frame longer than the stream's head and a frame head together)
            if (seam && seam->on_blob_out && bytes.size() > state_stream_head_bytes + state_stream_frame_head_bytes) {
                changed.assign(bytes.begin(), bytes.end());  // a part's blob: the test node's faults apply
                seam->on_blob_out(changed);
                bytes = changed;
            }
            if (!co_await ex.write(bytes.data(), bytes.size())) co_return;
            held->count_served(bytes.size());
            ++next;
        }
        if (closed) break;
        if (!frames.empty()) continue;
        if (!co_await n->wait_until(deadline)) {  // (not inside &&: GCC miscompiles co_await there)
            ex.abort();
            co_return;
        }
    }
    co_await ex.end();
}

net::awaitable<Result<std::vector<uint8_t>>> node_impl::fetch_stream(http_upstream & up, const std::string & where) {
    auto asm_ = eng->stream_assembler();
    if (!asm_.ok()) co_return Status(asm_.status().code(), where + ": " + asm_.status().message());
    state_stream_assembler & joiner = *asm_.value();
    state_stream_reader reader(cfg.max_blob_bytes);
    std::vector<uint8_t> buf(size_t(1) << 20);
    uint64_t got = 0;
    std::optional<stream_end> end;
    auto refused = [&](const Status & st) {
        metrics.count_blob_reject(st.code());
        return Status(st.code(), where + ": " + st.message());
    };
    const auto t0 = steady_clock::now();
    for (;;) {
        auto r = co_await up.read_some(buf.data(), buf.size());
        if (!r.ok()) co_return Status(status_code::dependency_failed, where + ": " + r.status().message());
        if (r.value() == 0) break;
        got += r.value();
        Status st = reader.feed(std::span<const uint8_t>(buf.data(), r.value()));
        if (!st.ok()) co_return refused(st);
        for (;;) {
            auto f = reader.next();
            if (!f.ok()) co_return refused(f.status());
            if (!f->has_value()) break;
            if (auto * part = std::get_if<stream_part>(&**f)) {
                // Each part is checked (parse, MAC, continuity) and joined on the bridge pool as it arrives.
                Status joined = co_await http->offload([&] { return joiner.add(std::move(part->blob)); });
                if (!joined.ok()) co_return refused(joined);
            } else if (auto * e = std::get_if<stream_end>(&**f)) {
                end = *e;
            } else {
                co_return Status(status_code::dependency_failed,
                                 where + ": the prefill failed: " + std::get<stream_error>(**f).message);
            }
        }
    }
    if (Status st = reader.finish(); !st.ok()) {
        // A cut before the end frame is the prefill node's failure (gone mid-stream), not a bad state.
        if (!reader.ended()) co_return Status(status_code::dependency_failed, where + ": " + st.message());
        co_return refused(st);
    }
    if (!end) co_return Status(status_code::dependency_failed, where + ": the stream ended without its end frame");
    auto whole = co_await http->offload([&] { return joiner.finish(*end, cfg.engine.limits.key.get()); });
    if (!whole.ok()) co_return refused(whole.status());
    metrics.count_state_fetched(got, std::chrono::duration<double>(steady_clock::now() - t0).count());
    metrics.count_state_stream(reader.n_parts());
    co_return std::move(whole.value());
}

net::awaitable<void> node_impl::on_decode(http_exchange & ex) {
    Status st = check_role(cfg.role != node_role::prefill, pd_path_decode.data());
    if (!st.ok()) co_return (void) co_await ex.respond_error(st);
    std::vector<uint8_t> bytes;
    const std::string_view source = ex.request().header(pd_header_state_source);
    if (!source.empty()) {
        if (!ex.request().body.empty())
            co_return (void) co_await ex.respond_error(Status(
                status_code::invalid_argument,
                std::string(pd_header_state_source) + ": a decode names its state's place or carries it, not both"));
        auto fetched = co_await fetch_held(ex, source, ex.request().header(pd_header_state_id));
        if (!fetched.ok()) co_return (void) co_await ex.respond_error(fetched.status());
        bytes = std::move(fetched.value());
    } else {
        auto body = co_await unpack_body(std::move(ex.request().body), ex.request().header("Content-Encoding"));
        if (!body.ok()) co_return (void) co_await ex.respond_error(body.status());
        bytes = std::move(body.value());
    }
    auto blob = co_await blob_parse_edge(std::move(bytes));
    if (!blob.ok()) co_return (void) co_await ex.respond_error(blob.status());
    const blob_view & v = blob.value()->view();
    if (!v.request) {
        metrics.count_blob_reject(status_code::incompatible);
        co_return (void) co_await ex.respond_error(
            Status(status_code::incompatible,
                   "request: the blob embeds no request; /v1/decode takes blobs made by /v1/prefill"));
    }
    // The embedded request is complete (prefill wrote every field): no defaults of this node apply, only
    // its limits (a blob's grammar, prompt and choices meet this node's --grammar-max-*, prompt flags, --n-max).
    pd_request_limits limits;
    limits.grammar = cfg.defaults.sampling.grammar_bounds;
    limits.prompt = cfg.defaults.prompt;
    limits.n_max = cfg.defaults.n_max;
    auto oreq = pd_request_decode(*v.request, limits);
    if (!oreq.ok()) {
        metrics.count_blob_reject(oreq.status().code());
        co_return (void) co_await ex.respond_error(oreq.status());
    }
    // Off the event loop: an embedded text prompt (and logit_bias texts) are tokenized here.
    const uint32_t n_ctx = n_ctx_slot();
    generation_resume resume;
    if (v.generation) {
        // A generation that paused on another node (live migration): one choice, no logprobs, not the Messages
        // API (what a node pauses), answered with the id and created time it began with.
        if (oreq->n > 1 || oreq->n_probs >= 0 || oreq->endpoint == openai_endpoint::messages) {
            metrics.count_blob_reject(status_code::incompatible);
            co_return (void) co_await ex.respond_error(
                Status(status_code::incompatible, "generation: a paused generation resumes only with one choice, "
                                                  "no logprobs and not the Messages API"));
        }
        resume.id = std::string(ex.request().header(pd_header_resume_id));
        const std::string_view created = ex.request().header(pd_header_resume_created);
        if (!created.empty()) {
            auto [p, ec] = std::from_chars(created.data(), created.data() + created.size(), resume.created);
            if (ec != std::errc() || p != created.data() + created.size())
                co_return (void) co_await ex.respond_error(Status(
                    status_code::invalid_argument, std::string(pd_header_resume_created) + ": must be unix seconds"));
        }
    }
    auto gen = co_await http->offload([&] { return openai_to_gen(oreq.value(), *model, n_ctx); });
    if (!gen.ok()) co_return (void) co_await ex.respond_error(gen.status());
    co_await respond_generation(ex, task_decode{blob.value(), std::move(gen.value())}, oreq.value(), resume);
}

net::awaitable<void> node_impl::on_held_get(http_exchange & ex) {
    const auto it = ex.request().params.find("id");
    const std::string id = it == ex.request().params.end() ? "" : it->second;
    if (!pd_state_id_valid(id))
        co_return (void) co_await ex.respond_error(
            Status(status_code::not_found, "state " + id + ": not a state id (32 lowercase hex digits)"));
    if (auto s = held->get_stream(id, steady_clock::now()); s.ok())
        co_return co_await send_stream(ex, std::move(s.value()));
    auto b = held->get(id, steady_clock::now());
    if (!b.ok()) co_return (void) co_await ex.respond_error(b.status());
    if (seam && seam->on_blob_out) {  // the test node's faults apply to a fetched state as to a sent blob
        std::vector<uint8_t> copy(*b.value());
        co_return co_await send_blob(ex, std::move(copy));
    }
    const std::vector<uint8_t> & held_blob = *b.value();  // held by b while it is sent, even if the lease ends
    // --state-compress-level: a decode node that accepts packed states gets one (blob_pack.h), packed off the
    // event loop; the blob inside is the same bytes, checked again after unpacking.
    std::vector<uint8_t> packed;
    http_headers headers;
    auto p = co_await pack_for(ex, held_blob);
    if (!p.ok()) co_return (void) co_await ex.respond_error(p.status());
    if (p->has_value()) {
        packed = std::move(**p);
        headers.emplace_back("Content-Encoding", std::string(blob_pack_coding));
    }
    const std::span<const uint8_t> blob = packed.empty() ? std::span<const uint8_t>(held_blob) : packed;
    // (No co_await inside &&, || or ?: — GCC miscompiles it.)
    if (!co_await ex.begin(200, "application/octet-stream", std::move(headers), uint64_t(blob.size()))) co_return;
    size_t sent = 0;
    if (seam && seam->held_state_pause_ms > 0) {  // tests: a fetch that is mid-body for a while
        sent = blob.size() / 2;
        if (!co_await ex.write(blob.data(), sent)) co_return;
        net::steady_timer t(co_await net::this_coro::executor);
        t.expires_after(std::chrono::milliseconds(seam->held_state_pause_ms));
        error_code ec;
        co_await t.async_wait(net::redirect_error(net::use_awaitable, ec));
    }
    if (!co_await ex.write(blob.data() + sent, blob.size() - sent)) co_return;
    co_await ex.end();
    note_unfetched(id, false);  // (a paused generation's state: a draining node may now exit)
}

net::awaitable<void> node_impl::on_held_delete(http_exchange & ex) {
    const auto it = ex.request().params.find("id");
    const std::string id = it == ex.request().params.end() ? "" : it->second;
    note_unfetched(id, false);
    if (!pd_state_id_valid(id) || !held->release(id))
        co_return (void) co_await ex.respond_error(
            Status(status_code::not_found, "state " + id + ": not held here (released, expired, or never made)"));
    co_await ex.respond(json_response({{"state", id}, {"released", true}}));
}

net::awaitable<Result<std::vector<uint8_t>>> node_impl::fetch_held(http_exchange & ex, std::string_view source,
                                                                   std::string_view id) {
    if (!pd_state_id_valid(id))
        co_return Status(status_code::invalid_argument,
                         std::string(pd_header_state_id) + ": must be 32 lowercase hex digits");
    auto url = http_url_parse(source);
    if (!url.ok())
        co_return Status(status_code::invalid_argument,
                         std::string(pd_header_state_source) + ": " + url.status().message());
    const std::string where = "state " + std::string(id) + " at " + url->text;
    metrics.fetch_begun();
    struct fetch_guard {
        node_metrics & m;
        ~fetch_guard() { m.fetch_ended(); }
    } in_flight{metrics};
    auto lost = [&](const std::string & why) { return Status(status_code::dependency_failed, where + ": " + why); };
    const auto t0 = steady_clock::now();
    auto conn = co_await http_upstream::connect(url.value(), deadline_from_now());
    if (!conn.ok()) co_return lost(conn.status().message());
    http_upstream & up = *conn.value();
    // Every decode node unpacks packed states (blob_pack.h); the prefill node packs only with --state-compress-level.
    http_headers headers = {{std::string(http_header_request_id), ex.request().id},
                            {"Accept-Encoding", std::string(blob_pack_coding)}};
    // Nodes of one cluster share the node key: the router's --node-key is every node's --api-key.
    if (!cfg.api_key.empty()) headers.emplace_back("Authorization", "Bearer " + cfg.api_key);
    Status st = co_await up.send("GET", std::string(pd_path_held_state_prefix) + std::string(id), headers, "", "");
    if (!st.ok()) co_return lost(st.message());
    auto head = co_await up.read_head();
    if (!head.ok()) co_return lost(head.status().message());
    if (head->status != 200) {
        auto said = co_await up.read_all(1 << 16);
        co_return lost("answered " + std::to_string(head->status) + (said.ok() ? " " + said.value() : ""));
    }
    if (http_header_find(head->headers, "Content-Type") == state_stream_media_type)
        co_return co_await fetch_stream(up, where);
    if (!head->content_length) co_return lost("answered without a Content-Length");
    const std::string coding(http_header_find(head->headers, "Content-Encoding"));
    if (!coding.empty() && coding != blob_pack_coding && coding != "identity")
        co_return lost("answered in the content coding \"" + coding + "\", which this node does not read");
    const uint64_t n = *head->content_length;
    if (n > cfg.max_blob_bytes)
        co_return Status(status_code::too_large, where + ": " + std::to_string(n) + " bytes, over --max-blob-mb");
    std::vector<uint8_t> buf = buffer_pool::shared().take(size_t(n));
    buf.resize(size_t(n));
    size_t got = 0;
    while (got < n) {
        auto r = co_await up.read_some(buf.data() + got, size_t(n - got));
        if (!r.ok() || r.value() == 0) {
            buffer_pool::shared().give(std::move(buf));
            co_return lost(r.ok() ? "ended after " + std::to_string(got) + " of " + std::to_string(n) + " bytes"
                                  : r.status().message());
        }
        got += r.value();
    }
    metrics.count_state_fetched(n, std::chrono::duration<double>(steady_clock::now() - t0).count());
    auto blob = co_await unpack_body(std::move(buf), coding);
    if (!blob.ok()) co_return Status(blob.status().code(), where + ": " + blob.status().message());
    co_return std::move(blob.value());
}

net::awaitable<void> node_impl::sweep_held() {
    net::steady_timer t(co_await net::this_coro::executor);
    while (!stopping.load()) {
        t.expires_after(std::chrono::seconds(1));
        error_code ec;
        co_await t.async_wait(net::redirect_error(net::use_awaitable, ec));
        if (ec) co_return;
        held->expire(steady_clock::now());
        if (ready.load(std::memory_order_acquire)) {  // (kv and eng are set before ready) the KV events
            std::vector<kv_publisher::tokens_ptr> slots;
            for (const slot_info & s : eng->slots()) slots.push_back(s.tokens);
            // The host prompt cache's states count as held: a prompt routed here restores them in milliseconds.
            for (auto & p : eng->cached_prefixes()) slots.push_back(std::move(p));
            kv->observe(slots);
        }
    }
}

net::awaitable<void> node_impl::on_kv_events(http_exchange & ex) {
    // after: the last batch the reader applied (0: none); epoch: the stream it applied it from. A reader of
    // another epoch (this node restarted) or one that fell behind the log is told to resync from the snapshot.
    const std::string_view after_text = ex.request().query_value("after");
    uint64_t after = 0;
    if (!after_text.empty()) {
        auto [p, ec] = std::from_chars(after_text.data(), after_text.data() + after_text.size(), after);
        if (ec != std::errc() || p != after_text.data() + after_text.size())
            co_return (void) co_await ex.respond_error(
                Status(status_code::invalid_argument, "after: must be a batch number (0 or more)"));
    }
    const std::string_view epoch = ex.request().query_value("epoch");
    const kv_publisher_config & kc = kv->config();
    std::optional<std::vector<kv_event_batch>> batches;
    if (epoch.empty() || epoch == kc.epoch) batches = kv->batches_after(after);
    std::string body = "{\"node\":" + nlohmann::json(kc.node).dump() + ",\"epoch\":\"" + kc.epoch + "\",\"seed\":\"" +
                       kv_hash_hex(kc.seed) + "\",\"seq\":" + std::to_string(kv->seq()) +
                       ",\"resync\":" + (batches ? "false" : "true") + ",\"batches\":[";
    if (batches)
        for (size_t i = 0; i < batches->size(); ++i) body += (i ? "," : "") + kv_event_batch_encode((*batches)[i]);
    body += "]}";
    co_await ex.respond(http_response::json(std::move(body)));
}

net::awaitable<void> node_impl::on_kv_snapshot(http_exchange & ex) {
    co_await ex.respond(http_response::json(kv_snapshot_encode(kv->snapshot())));
}

}  // namespace baton
