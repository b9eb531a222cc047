// server_generate.cpp — /v1/completions, /v1/chat/completions, /v1/prefill and /v1/decode.
//
// A generation request is admitted (or refused with 503), submitted, and its first event is awaited
// before any byte is written: a request that fails before its first token (a blob the restore routine
// rejects, a full context) gets a real HTTP error status even when it asked to stream. After that the
// handler's coroutine consumes the events as the engine notifies them and writes the response; if the
// client goes away or stops reading for --write-timeout, the write fails and the task is cancelled, so its
// slot frees at the next scheduler step. No thread waits for a stream.
#include <cstdio>
#include <memory>

#include "baton/blob.h"
#include "baton/http/sse.h"
#include "event_wait.h"
#include "openai_response.h"
#include "server_impl.h"

namespace baton {

namespace {

// Latency metrics of one generation.
struct latency_probe {
    server_metrics & m;
    steady_clock::time_point t_start, t_last;
    bool saw_token = false;

    void observe(const engine_event & ev) {
        if (!std::holds_alternative<event_token>(ev)) return;
        const auto now = steady_clock::now();
        const double s = std::chrono::duration<double>(now - (saw_token ? t_last : t_start)).count();
        if (saw_token) m.observe_itl(s);
        else m.observe_ttft(s);
        saw_token = true;
        t_last = now;
    }
};

}  // namespace

namespace {

// The reasoning split of a request's answer (none unless it is a rendered chat).
openai_reasoning reasoning_of(const openai_request & r) {
    if (const auto * c = std::get_if<openai_chat_rendered>(&r.input)) return c->reasoning;
    return {};
}

}  // namespace

net::awaitable<void> server_impl::respond_generation(http_exchange & ex, engine_task task, const openai_request & oreq) {
    latency_probe probe{metrics, steady_clock::now(), {}, false};
    const auto lim = wait_limits(deadline_from_now());
    auto ticket = admit();
    if (!ticket.ok()) co_return (void) co_await ex.respond_error(ticket.status());
    const gen_request * req = nullptr;
    if (const auto * g = std::get_if<task_generate>(&task)) req = &g->req;
    if (const auto * d = std::get_if<task_decode>(&task)) req = &d->req;
    const uint32_t n_prompt = req ? uint32_t(req->prompt.size()) : 0;
    openai_response_meta meta = openai_response_meta_make(
        oreq.endpoint, model_name, "fp_" + blob_fingerprint_hex(model->identity().fingerprint).substr(0, 12));
    meta.return_tokens = oreq.return_tokens;
    if (oreq.endpoint == openai_endpoint::completion) {
        // llama-server's "prompt": the prompt as the model saw it, special tokens written out ("<s>...").
        meta.generation_settings = openai_generation_settings(oreq, eng->layout().n_ctx);
        if (req) meta.prompt_text = text_detokenize(model->vocab(), req->prompt, true);
    }
    auto h = eng->submit(std::move(task));
    if (!h.ok()) co_return (void) co_await ex.respond_error(h.status());
    event_watch w(h.value(), ex.executor());

    const openai_reasoning rs = reasoning_of(oreq);
    reasoning_splitter split(rs.format, rs.tags, rs.starts_open);
    openai_result res;
    engine_event ev;
    Status st = co_await event_wait(w, ev, lim, &ex);
    if (!st.ok()) co_return (void) co_await ex.respond_error(st);
    probe.observe(ev);
    if (auto * e = std::get_if<event_error>(&ev)) co_return (void) co_await ex.respond_error(e->error);

    // step folds one event into res and returns the split of its text.
    auto step = [&](const engine_event & e) {
        if (const auto * t = std::get_if<event_token>(&e)) res.tokens.push_back(t->token);
        reasoning_delta d = split.feed(engine_event_text(e));
        if (const auto * done = std::get_if<event_done>(&e)) {
            reasoning_delta tail = split.finish();
            d.reasoning += tail.reasoning;
            d.content += tail.content;
            res.done = *done;
            res.done.blob.clear();
        }
        res.content += d.content;
        res.reasoning += d.reasoning;
        return d;
    };

    if (!oreq.stream) {
        for (;;) {
            if (auto * e = std::get_if<event_error>(&ev)) co_return (void) co_await ex.respond_error(e->error);
            step(ev);
            if (std::holds_alternative<event_done>(ev)) {
                log_generation(oreq, res);
                co_return (void) co_await ex.respond(http_response::json(openai_response_json(meta, res)));
            }
            st = co_await event_wait(w, ev, lim, &ex);
            if (!st.ok()) co_return (void) co_await ex.respond_error(st);
            probe.observe(ev);
        }
    }

    // Streamed: every write is under --write-timeout; a failed one cancels the task (the watch's handle).
    auto put = [&](const std::string & s) -> net::awaitable<bool> {
        if (co_await ex.write(s)) co_return true;
        w.handle().cancel();
        co_return false;
    };
    if (!co_await ex.begin(200, "text/event-stream", {{"Cache-Control", "no-cache"}}, std::nullopt)) co_return w.handle().cancel();
    // (co_await is kept out of && and ?: : GCC miscompiles short-circuit operands that suspend.)
    if (meta.endpoint == openai_endpoint::chat) {
        if (!co_await put(sse_event(openai_chunk_role_json(meta)))) co_return;
    }
    const bool done_marker = openai_stream_ends_with_done(meta);
    for (;;) {
        if (auto * e = std::get_if<event_error>(&ev)) {
            if (co_await put(sse_error_and_done(e->error))) co_await ex.end();
            co_return;
        }
        const size_t n_tokens_before = res.tokens.size();
        const reasoning_delta d = step(ev);  // the token's text, or the done event's tail
        const bool is_done = std::holds_alternative<event_done>(ev);
        const std::vector<token_id> new_tokens(res.tokens.begin() + std::ptrdiff_t(n_tokens_before), res.tokens.end());
        if (!d.content.empty() || !d.reasoning.empty() ||
            (meta.endpoint == openai_endpoint::completion && !new_tokens.empty())) {
            if (!co_await put(
                    sse_event(openai_chunk_delta_json(meta, d, new_tokens, uint32_t(res.tokens.size()), n_prompt))))
                co_return;
        }
        if (is_done) {
            log_generation(oreq, res);
            std::string tail = sse_event(openai_chunk_finish_json(meta, res));
            if (oreq.include_usage && meta.endpoint != openai_endpoint::completion)
                tail += sse_event(openai_chunk_usage_json(meta, res));
            if (done_marker) tail += sse_done();
            if (co_await put(tail)) co_await ex.end();
            co_return;
        }
        st = co_await event_wait(w, ev, lim, &ex);
        if (!st.ok()) {
            if (st.code() != status_code::cancelled) {
                if (co_await put(sse_error_and_done(st))) co_await ex.end();
            }
            co_return;
        }
        probe.observe(ev);
    }
}

void server_impl::log_generation(const openai_request & oreq, const openai_result & r) const {
    if (!cfg.verbose) return;
    const usage_counts & u = r.done.usage;
    std::fprintf(
        stderr,
        "baton: serve: %s: slot %d: %u prompt tokens (%u cached) in %.1f ms, %u generated in %.1f ms, finish %s\n",
        openai_endpoint_name(oreq.endpoint), r.done.slot, u.prompt_tokens, u.cached_tokens, r.done.ms_prompt,
        u.generated_tokens, r.done.ms_generate, finish_reason_name(r.done.finish));
}

net::awaitable<Result<openai_request>> server_impl::prepare(std::string_view body, openai_endpoint endpoint,
                                                            bool allow_endpoint_field) {
    auto oreq = openai_parse(body, endpoint, allow_endpoint_field, cfg.defaults);
    if (!oreq.ok()) co_return oreq.status();
    if (!std::holds_alternative<openai_chat>(oreq->input)) co_return oreq;
    co_return co_await http->offload([&] { return chat->render_request(std::move(oreq.value())); });
}

net::awaitable<void> server_impl::on_openai(http_exchange & ex, openai_endpoint endpoint) {
    auto oreq = co_await prepare(ex.request().body_text(), endpoint, false);
    if (!oreq.ok()) co_return (void) co_await ex.respond_error(oreq.status());
    auto gen = co_await http->offload([&] { return openai_to_gen(oreq.value(), model->vocab()); });
    if (!gen.ok()) co_return (void) co_await ex.respond_error(gen.status());
    co_await respond_generation(ex, task_generate{std::move(gen.value())}, oreq.value());
}

net::awaitable<void> server_impl::on_prefill(http_exchange & ex) {
    Status st = check_role(cfg.role != node_role::decode, "/v1/prefill");
    if (!st.ok()) co_return (void) co_await ex.respond_error(st);
    // The blob embeds the request as this node resolved it: its defaults filled in, a chat rendered and
    // tokenized, so the decode node needs neither the defaults nor the template.
    auto oreq = co_await prepare(ex.request().body_text(), openai_endpoint::completions, true);
    if (!oreq.ok()) co_return (void) co_await ex.respond_error(oreq.status());
    auto gen = co_await http->offload([&] { return openai_to_gen(oreq.value(), model->vocab()); });
    if (!gen.ok()) co_return (void) co_await ex.respond_error(gen.status());
    gen->request_json = openai_request_json(oreq.value());
    auto ticket = admit();
    if (!ticket.ok()) co_return (void) co_await ex.respond_error(ticket.status());
    auto done = co_await run_to_done(ex, task_prefill{std::move(gen.value())});
    if (!done.ok()) co_return (void) co_await ex.respond_error(done.status());
    co_await send_blob(ex, std::move(done->blob),
                       {{"X-Baton-Prompt-Tokens", std::to_string(done->usage.prompt_tokens)},
                        {"X-Baton-Cached-Tokens", std::to_string(done->usage.cached_tokens)}});
}

net::awaitable<void> server_impl::on_decode(http_exchange & ex) {
    Status st = check_role(cfg.role != node_role::prefill, "/v1/decode");
    if (!st.ok()) co_return (void) co_await ex.respond_error(st);
    auto blob = co_await blob_parse_edge(std::move(ex.request().body));
    if (!blob.ok()) co_return (void) co_await ex.respond_error(blob.status());
    const blob_view & v = blob.value()->view();
    if (!v.request) {
        metrics.count_blob_reject(status_code::incompatible);
        co_return (void) co_await ex.respond_error(
            Status(status_code::incompatible, "request: the blob embeds no request; /v1/decode takes blobs made by /v1/prefill"));
    }
    // The embedded request is complete (prefill wrote every field): no defaults of this node apply.
    auto oreq = openai_parse(*v.request, openai_endpoint::completions, true);
    if (oreq.ok() && std::holds_alternative<openai_chat>(oreq->input))
        oreq =
            Status(status_code::invalid_argument, "messages: a chat in a blob must come rendered (prompt token ids)");
    if (!oreq.ok()) {
        metrics.count_blob_reject(status_code::corrupt);
        co_return (void) co_await ex.respond_error(Status(status_code::corrupt, "request: the embedded request is invalid: " + oreq.status().message()));
    }
    auto gen = openai_to_gen(oreq.value(), model->vocab());
    if (!gen.ok()) co_return (void) co_await ex.respond_error(gen.status());
    co_await respond_generation(ex, task_decode{blob.value(), std::move(gen.value())}, oreq.value());
}

}  // namespace baton
