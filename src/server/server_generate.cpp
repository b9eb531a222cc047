// server_generate.cpp — /v1/completions, /v1/chat/completions, /v1/prefill and /v1/decode.
//
// A generation request is admitted (or refused with 503), submitted, and its first event is awaited
// before any byte is written: a request that fails before its first token (a blob the restore routine
// rejects, a full context) gets a real HTTP error status even when it asked to stream. After that the
// handler's coroutine consumes the events as the engine notifies them and writes the response; if the
// client goes away or stops reading for --write-timeout, the write fails and the task is cancelled, so its
// slot frees at the next scheduler step. No thread waits for a stream.
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

net::awaitable<void> server_impl::respond_generation(http_exchange & ex, engine_task task, const openai_request & oreq) {
    latency_probe probe{metrics, steady_clock::now(), {}, false};
    const auto lim = wait_limits(deadline_from_now());
    auto ticket = admit();
    if (!ticket.ok()) co_return (void) co_await ex.respond_error(ticket.status());
    auto h = eng->submit(std::move(task));
    if (!h.ok()) co_return (void) co_await ex.respond_error(h.status());
    event_watch w(h.value(), ex.executor());
    const openai_response_meta meta =
        openai_response_meta_make(openai_request_endpoint(oreq), oreq.model.empty() ? model_name : oreq.model,
                                  "fp_" + blob_fingerprint_hex(model->identity().fingerprint).substr(0, 12));
    engine_event ev;
    Status st = co_await event_wait(w, ev, lim, &ex);
    if (!st.ok()) co_return (void) co_await ex.respond_error(st);
    probe.observe(ev);
    if (auto * e = std::get_if<event_error>(&ev)) co_return (void) co_await ex.respond_error(e->error);

    if (!oreq.stream) {
        std::string text;
        for (;;) {
            if (auto * e = std::get_if<event_error>(&ev)) co_return (void) co_await ex.respond_error(e->error);
            text += engine_event_text(ev);
            if (auto * d = std::get_if<event_done>(&ev))
                co_return (void) co_await ex.respond(http_response::json(openai_response_json(meta, text, d->finish, d->usage)));
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
    for (;;) {
        if (auto * e = std::get_if<event_error>(&ev)) {
            if (co_await put(sse_error_and_done(e->error))) co_await ex.end();
            co_return;
        }
        const std::string & piece = engine_event_text(ev);  // the token's text, or the done event's tail
        if (!piece.empty()) {
            if (!co_await put(sse_event(openai_chunk_text_json(meta, piece)))) co_return;
        }
        if (auto * d = std::get_if<event_done>(&ev)) {
            std::string tail = sse_event(openai_chunk_finish_json(meta, d->finish));
            if (oreq.include_usage) tail += sse_event(openai_chunk_usage_json(meta, d->usage));
            tail += sse_done();
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

net::awaitable<void> server_impl::on_openai(http_exchange & ex, openai_endpoint endpoint) {
    auto oreq = openai_parse(ex.request().body_text(), endpoint);
    if (!oreq.ok()) co_return (void) co_await ex.respond_error(oreq.status());
    auto gen = co_await http->offload([&] { return openai_to_gen(oreq.value(), *model); });
    if (!gen.ok()) co_return (void) co_await ex.respond_error(gen.status());
    co_await respond_generation(ex, task_generate{std::move(gen.value())}, oreq.value());
}

net::awaitable<void> server_impl::on_prefill(http_exchange & ex) {
    Status st = check_role(cfg.role != node_role::decode, "/v1/prefill");
    if (!st.ok()) co_return (void) co_await ex.respond_error(st);
    auto oreq = openai_parse(ex.request().body_text(), openai_endpoint::completions, true);
    if (!oreq.ok()) co_return (void) co_await ex.respond_error(oreq.status());
    auto gen = co_await http->offload([&] { return openai_to_gen(oreq.value(), *model); });
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
    auto oreq = openai_parse(*v.request, openai_endpoint::completions, true);
    if (!oreq.ok()) {
        metrics.count_blob_reject(status_code::corrupt);
        co_return (void) co_await ex.respond_error(Status(status_code::corrupt, "request: the embedded request is invalid: " + oreq.status().message()));
    }
    auto gen = openai_to_gen(oreq.value(), *model);
    if (!gen.ok()) co_return (void) co_await ex.respond_error(gen.status());
    co_await respond_generation(ex, task_decode{blob.value(), std::move(gen.value())}, oreq.value());
}

}  // namespace baton
