// server_generate.cpp — /v1/completions, /v1/chat/completions, /v1/prefill and /v1/decode.
//
// A generation request is admitted (or refused with 503), submitted, and its first event is awaited
// before any byte is written: a request that fails before its first token (a blob the restore routine
// rejects, a full context) gets a real HTTP error status even when it asked to stream. After that the
// events are consumed on the HTTP thread that writes the response; if the client stops reading or goes
// away, the write fails and the task is cancelled so its slot frees at the next scheduler step.
#include <memory>

#include "event_wait.h"
#include "http_errors.h"
#include "openai_response.h"
#include "server_impl.h"

namespace baton {

namespace {

// One generation response in progress; shared by the handler and the streaming content provider.
struct generation {
    server_impl * node = nullptr;
    request_ptr h;
    admission_ptr ticket;
    openai_response_meta meta;
    bool include_usage = false;
    steady_clock::time_point t_start, t_last, deadline;
    bool saw_token = false;
    bool finished = false;    // the terminal event was consumed
    engine_event first;       // read before the response was committed

    // observe records the latency metrics of a token event.
    void observe(const engine_event & ev) {
        if (ev.type != engine_event::kind::token) return;
        const auto now = steady_clock::now();
        const double s = std::chrono::duration<double>(now - (saw_token ? t_last : t_start)).count();
        if (saw_token) node->metrics.observe_itl(s);
        else node->metrics.observe_ttft(s);
        saw_token = true;
        t_last = now;
    }
};

// stream_wait is wait_event for a streaming response: the client is watched through the sink.
Status stream_wait(generation & g, engine_event & ev, httplib::DataSink & sink) {
    event_wait_limits lim;
    lim.deadline = g.deadline;
    lim.timeout_s = g.node->cfg.timeout_s;
    lim.client_gone = [&sink] { return !sink.is_writable(); };
    return event_wait(*g.h, ev, lim);
}

// stream_pump writes the whole stream; false when the client went away (the task is cancelled).
bool stream_pump(generation & g, httplib::DataSink & sink) {
    auto put = [&](const std::string & s) {
        if (sink.is_writable() && sink.write(s.data(), s.size())) return true;
        g.h->cancel();
        return false;
    };
    auto end_with_error = [&](const Status & st) {
        const bool ok = put(sse_event(http_error_json(st))) && put(sse_done());
        if (ok) sink.done();
        return ok;
    };
    if (g.meta.endpoint == openai_endpoint::chat && !put(sse_event(openai_chunk_role_json(g.meta)))) return false;
    engine_event ev = std::move(g.first);
    for (;;) {
        if (ev.type == engine_event::kind::error) {
            g.finished = true;
            return end_with_error(ev.error);
        }
        if (!ev.text.empty() && !put(sse_event(openai_chunk_text_json(g.meta, ev.text)))) return false;
        if (ev.type == engine_event::kind::done) {
            g.finished = true;
            if (!put(sse_event(openai_chunk_finish_json(g.meta, ev.finish)))) return false;
            if (g.include_usage && !put(sse_event(openai_chunk_usage_json(g.meta, ev.usage)))) return false;
            if (!put(sse_done())) return false;
            sink.done();
            return true;
        }
        Status st = stream_wait(g, ev, sink);
        if (!st.ok()) return st.code() == status_code::cancelled ? false : end_with_error(st);
        g.observe(ev);
    }
}

void respond_collected(generation & g, const httplib::Request & req, httplib::Response & res) {
    std::string text;
    engine_event ev = std::move(g.first);
    for (;;) {
        if (ev.type == engine_event::kind::error) return http_send_error(res, ev.error);
        text += ev.text;
        if (ev.type == engine_event::kind::done) {
            res.set_content(openai_response_json(g.meta, text, ev.finish, ev.usage), "application/json");
            return;
        }
        Status st = g.node->wait_event(g.h, ev, g.deadline, req);
        if (!st.ok()) return http_send_error(res, st);
        g.observe(ev);
    }
}

}  // namespace

void server_impl::respond_generation(const httplib::Request & req, httplib::Response & res, engine_task task,
                                     const openai_request & oreq) {
    auto g = std::make_shared<generation>();
    g->node = this;
    g->t_start = steady_clock::now();
    g->deadline = deadline_from_now();
    auto ticket = admit();
    if (!ticket.ok()) return http_send_error(res, ticket.status());
    g->ticket = std::move(ticket.value());
    auto h = eng->submit(std::move(task));
    if (!h.ok()) return http_send_error(res, h.status());
    g->h = h.value();
    g->meta = openai_response_meta_make(oreq.endpoint, oreq.model.empty() ? model_name : oreq.model);
    g->include_usage = oreq.include_usage;
    Status st = wait_event(g->h, g->first, g->deadline, req);
    if (!st.ok()) return http_send_error(res, st);
    g->observe(g->first);
    if (g->first.type == engine_event::kind::error) return http_send_error(res, g->first.error);
    if (!oreq.stream) return respond_collected(*g, req, res);
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream", [g](size_t, httplib::DataSink & sink) { return stream_pump(*g, sink); },
        [g](bool) {
            if (!g->finished) g->h->cancel();
            g->ticket.reset();
        });
}

void server_impl::on_openai(const httplib::Request & req, httplib::Response & res, std::string body, openai_endpoint endpoint) {
    auto oreq = openai_parse(body, endpoint);
    if (!oreq.ok()) return http_send_error(res, oreq.status());
    auto gen = openai_to_gen(oreq.value(), *model);
    if (!gen.ok()) return http_send_error(res, gen.status());
    respond_generation(req, res, task_generate{std::move(gen.value())}, oreq.value());
}

void server_impl::on_prefill(const httplib::Request & req, httplib::Response & res, std::string body) {
    Status st = check_role(cfg.role != node_role::decode, "/v1/prefill");
    if (!st.ok()) return http_send_error(res, st);
    auto oreq = openai_parse(body, openai_endpoint::completions, true);
    if (!oreq.ok()) return http_send_error(res, oreq.status());
    auto gen = openai_to_gen(oreq.value(), *model);
    if (!gen.ok()) return http_send_error(res, gen.status());
    gen->request_json = openai_request_json(oreq.value());
    auto ticket = admit();
    if (!ticket.ok()) return http_send_error(res, ticket.status());
    auto done = run_to_done(task_prefill{std::move(gen.value())}, req);
    if (!done.ok()) return http_send_error(res, done.status());
    res.set_header("X-Baton-Prompt-Tokens", std::to_string(done->usage.prompt_tokens));
    res.set_header("X-Baton-Cached-Tokens", std::to_string(done->usage.cached_tokens));
    send_blob(res, std::move(done->blob));
}

void server_impl::on_decode(const httplib::Request & req, httplib::Response & res, std::vector<uint8_t> body) {
    Status st = check_role(cfg.role != node_role::prefill, "/v1/decode");
    if (!st.ok()) return http_send_error(res, st);
    auto blob = blob_parse_edge(std::move(body));
    if (!blob.ok()) return http_send_error(res, blob.status());
    const blob_view & v = blob.value()->view();
    if (!v.has_request) {
        metrics.count_blob_reject(status_code::incompatible);
        return http_send_error(res, Status(status_code::incompatible,
                                           "request: the blob embeds no request; /v1/decode takes blobs made by /v1/prefill"));
    }
    auto oreq = openai_parse(v.request, openai_endpoint::completions, true);
    if (!oreq.ok()) {
        metrics.count_blob_reject(status_code::corrupt);
        return http_send_error(res, Status(status_code::corrupt, "request: the embedded request is invalid: " + oreq.status().message()));
    }
    auto gen = openai_to_gen(oreq.value(), *model);
    if (!gen.ok()) return http_send_error(res, gen.status());
    respond_generation(req, res, task_decode{blob.value(), std::move(gen.value())}, oreq.value());
}

}  // namespace baton
