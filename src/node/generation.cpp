// generation.cpp — /v1/completions, /v1/chat/completions and llama-server's /completion, and the answer of
// every generation (respond_generation, which /v1/decode in pd_handlers.cpp shares).
//
// A generation request is admitted (or refused with 503), submitted, and its first event is awaited
// before any byte is written: a request that fails before its first token (a blob the restore routine
// rejects, a full context) gets a real HTTP error status even when it asked to stream. After that the
// handler's coroutine consumes the events as the engine notifies them and writes the response; if the
// client goes away or stops reading for --write-timeout, the write fails and the task is cancelled, so its
// slot frees at the next scheduler step. No thread waits for a stream.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>

#include "baton/base/log.h"
#include "baton/blob.h"
#include "baton/http/sse.h"
#include "baton/openai/anthropic_response.h"
#include "baton/openai/infill.h"
#include "baton/openai/openai_response.h"
#include "baton/pd/pd_protocol.h"
#include "baton/pd/pd_request.h"
#include "event_wait.h"
#include "image_fetch.h"
#include "node_impl.h"
#include "node_test_seam.h"

namespace baton {

namespace {

// Latency metrics of one generation (its first choice's tokens).
struct latency_probe {
    node_metrics & m;
    steady_clock::time_point t_start, t_last;
    bool saw_token = false;
    steady_clock::time_point t_first{};
    uint32_t tokens = 0;

    void observe(const engine_event & ev) {
        if (!std::holds_alternative<event_token>(ev)) return;
        const auto now = steady_clock::now();
        const double s = std::chrono::duration<double>(now - (saw_token ? t_last : t_start)).count();
        if (saw_token) m.observe_itl(s);
        else m.observe_ttft(s);
        if (!saw_token) t_first = now;
        saw_token = true;
        t_last = now;
        ++tokens;
    }
};

// view_trace: however a generation ends, its timeline (prompt, then generation) goes to the live view.
struct view_trace {
    live_log & log;
    const latency_probe & probe;
    const http_exchange & ex;
    live_request r;

    ~view_trace() {
        auto secs = [&](steady_clock::time_point t) {
            return std::chrono::duration<double>(t - probe.t_start).count();
        };
        r.id = ex.request().id;
        r.path = ex.request().path;
        r.status = ex.status();
        r.total_s = secs(steady_clock::now());
        r.generated_tokens = probe.tokens;
        if (probe.saw_token) {
            r.ttft_s = secs(probe.t_first);
            r.steps.push_back(live_step{"prompt", "", 0, r.ttft_s, 0});
            r.steps.push_back(live_step{"generate", "", r.ttft_s, secs(probe.t_last), 0});
            if (probe.tokens > 1) r.tpot_s = (secs(probe.t_last) - r.ttft_s) / double(probe.tokens - 1);
        }
        log.record(std::move(r));
    }
};

// choice_events: the one place a generation waits for its choices' events. next() stores in ev the next
// event of a choice whose `skip` entry is false and returns that choice's index. It fails with the wait's
// status (deadline, client gone: event_wait_any has cancelled every task) or with an engine error event's
// (every task is cancelled here), so a failure leaves no task running. Token events of choice 0 feed the
// latency probe.
class choice_events {
  public:
    choice_events(event_group & g, event_wait_limits lim, http_exchange & ex, latency_probe & probe)
        : g_(g), lim_(std::move(lim)), ex_(ex), probe_(probe) {}

    net::awaitable<Result<size_t>> next(const std::vector<bool> & skip, engine_event & ev) {
        size_t which = 0;
        Status st = co_await event_wait_any(g_, skip, which, ev, lim_, &ex_);
        if (!st.ok()) {
            client_left_ = st.code() == status_code::cancelled;
            co_return st;
        }
        if (auto * e = std::get_if<event_error>(&ev)) {
            g_.cancel_all();
            co_return std::move(e->error);
        }
        const auto * t = std::get_if<event_token>(&ev);
        if (which == 0 && !(t && t->replayed)) probe_.observe(ev);  // (replayed: generated elsewhere, earlier)
        if (on_event) on_event(which, ev);
        co_return which;
    }

    std::function<void(size_t, const engine_event &)> on_event;  // every event, before the caller sees it

    // client_left: the last failure was the client going away (nothing more can be written to it).
    bool client_left() const { return client_left_; }

  private:
    event_group & g_;
    const event_wait_limits lim_;
    http_exchange & ex_;
    latency_probe & probe_;
    bool client_left_ = false;
};

}  // namespace

namespace {

// The reasoning split of a request's answer (none unless it is a rendered chat).
openai_reasoning reasoning_of(const openai_request & r) {
    if (const auto * c = std::get_if<openai_chat_rendered>(&r.input)) return c->reasoning;
    return {};
}

// The prefilled start of the answer (a chat that ended with an assistant message), "" otherwise.
std::string prefill_of(const openai_request & r) {
    if (const auto * c = std::get_if<openai_chat_rendered>(&r.input)) return c->prefill;
    return {};
}

// The tool-call format the answer is parsed in (none unless a rendered chat with tools).
std::optional<tool_call_format> tools_of(const openai_request & r) {
    if (const auto * c = std::get_if<openai_chat_rendered>(&r.input)) return c->tools;
    return std::nullopt;
}

// tool_call_id: "call_" and 24 random letters and digits, as OpenAI's ids look (unique per call, not
// derived from the output: a client matches tool results to calls by id across a conversation).
// Anthropic's (the messages endpoint) look like "toolu_" and 24 of them.
std::string tool_call_id(openai_endpoint endpoint) {
    static constexpr char k_chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    thread_local std::mt19937_64 rng{std::random_device{}()};
    std::string id = endpoint == openai_endpoint::messages ? "toolu_" : "call_";
    for (int i = 0; i < 24; ++i) id += k_chars[rng() % (sizeof(k_chars) - 1)];
    return id;
}

// choice_tasks: the n tasks of a request's choices; choice i samples with seed + i (a random seed stays
// random for every choice).
std::vector<engine_task> choice_tasks(engine_task task, int32_t n) {
    std::vector<engine_task> out;
    for (int32_t i = 0; i < std::max(n, 1); ++i) {
        engine_task t = task;
        auto bump_seed = [&](gen_request & r) {
            if (r.sampling.seed == 0xFFFFFFFFu || i == 0) return;
            r.sampling.seed += uint32_t(i);
            if (r.sampling.seed == 0xFFFFFFFFu) r.sampling.seed = 0;  // not "random"
        };
        if (auto * g = std::get_if<task_generate>(&t)) bump_seed(g->req);
        if (auto * d = std::get_if<task_decode>(&t)) bump_seed(d->req);
        out.push_back(std::move(t));
    }
    return out;
}

// One choice's output as it is produced: the reasoning split, then the tool-call parse of the content.
struct choice_state {
    reasoning_splitter split;
    std::optional<tool_call_stream> tools;
    openai_result res;
    std::vector<openai_logprob> unsent;  // streamed: probabilities of tokens whose text is not out yet
    // The answer's prefilled start: read by the reasoning split before the first event's text, and part of a
    // whole answer's content; a stream does not send it (the client has it), as llama-server's does not.
    std::string prefill;
    bool emit_prefill = true;
    bool finished = false;
    openai_endpoint endpoint;  // (the tool call ids' form)

    choice_state(uint32_t index, const openai_reasoning & rs, std::optional<tool_call_format> tf, std::string pre,
                 bool stream, openai_endpoint ep)
        : split(rs.format, rs.tags, rs.starts_open), prefill(std::move(pre)), emit_prefill(!stream), endpoint(ep) {
        res.index = index;
        if (tf) tools.emplace(*tf);
    }

    // step folds one event into res and returns what it adds to the output.
    openai_delta step(const engine_event & e, const loaded_model & vocab) {
        openai_delta d;
        d.index = res.index;
        if (std::holds_alternative<event_progress>(e)) return d;  // (streamed on its own: emit below)
        if (const auto * t = std::get_if<event_token>(&e)) {
            res.tokens.push_back(t->token);
            d.tokens.push_back(t->token);
            if (t->probs) {
                res.logprobs.push_back(openai_logprob_make(vocab, t->token, *t->probs));
                d.logprobs.push_back(res.logprobs.back());
            }
        }
        reasoning_delta rd;
        if (!prefill.empty()) {
            reasoning_delta pre = split.feed(prefill);
            prefill.clear();
            if (emit_prefill) rd = std::move(pre);
        }
        reasoning_delta more = split.feed(engine_event_text(e));
        rd.reasoning += more.reasoning;
        rd.content += more.content;
        const auto * done = std::get_if<event_done>(&e);
        if (done) {
            reasoning_delta tail = split.finish();
            rd.reasoning += tail.reasoning;
            rd.content += tail.content;
            res.done = *done;
            res.done.blob.clear();
            finished = true;
        }
        res.reasoning += rd.reasoning;
        if (tools) {
            tool_stream_piece piece = tools->push(rd.content);
            if (done) {
                tool_stream_piece last = tools->finish();
                piece.content += last.content;
                for (auto & c : last.calls) piece.calls.push_back(std::move(c));
            }
            rd.content = std::move(piece.content);
            for (tool_call_delta & c : piece.calls) {
                if (!c.name.empty()) {
                    if (c.id.empty()) c.id = tool_call_id(endpoint);
                    c.index = res.tool_calls.size();
                    res.tool_calls.push_back({c.id, c.name, c.arguments});
                } else if (!res.tool_calls.empty()) {
                    c.index = res.tool_calls.size() - 1;  // fragments continue the latest call
                    res.tool_calls.back().arguments += c.arguments;
                } else {
                    continue;
                }
                d.tool_calls.push_back(std::move(c));
            }
        }
        res.content += rd.content;
        d.text = std::move(rd);
        return d;
    }
};

}  // namespace

// migrated_of: the state of a generation that paused to move (live migration), or null.
event_done * migrated_of(engine_event & ev) {
    auto * d = std::get_if<event_done>(&ev);
    return d && d->finish == finish_reason::migrated ? d : nullptr;
}

net::awaitable<void> node_impl::hand_off(http_exchange & ex, std::vector<uint8_t> blob,
                                         const openai_response_meta & meta, bool stream, std::string pending) {
    const uint64_t bytes = blob.size();
    auto id = held->put(std::move(blob), steady_clock::now());
    if (!id.ok()) {
        const Status st(id.status().code(), "live migration: the paused generation's state could not be held here: " +
                                                id.status().message());
        log_warn(log_request{ex.request().id}, "serve: {}", st.message());
        if (!stream || !ex.begun()) co_return (void) co_await ex.respond_error(st);
        if (co_await ex.write(pending + sse_error_and_done(st))) co_await ex.end();
        co_return;
    }
    note_unfetched(id.value(), true);
    const nlohmann::json j = {{"state", id.value()}, {"bytes", bytes}, {"id", meta.id}, {"created", meta.created}};
    log_info(log_request{ex.request().id}, "serve: generation paused to move; its state is held as {} ({} bytes)",
             id.value(), bytes);
    if (!stream) {
        http_response r = json_response(j);
        r.headers = {{std::string(pd_header_migrated), id.value()}};
        co_return (void) co_await ex.respond(std::move(r));
    }
    if (!ex.begun()) {
        if (!co_await ex.begin(200, "text/event-stream", {{"Cache-Control", "no-cache"}}, std::nullopt)) co_return;
    }
    if (co_await ex.write(pending + sse_named_event(std::string(pd_sse_migrated), j.dump()))) co_await ex.end();
}

net::awaitable<void> node_impl::respond_generation(http_exchange & ex, std::vector<engine_task> tasks,
                                                   const openai_request & oreq, const generation_resume & resume) {
    latency_probe probe{metrics, steady_clock::now(), {}, false};
    view_trace trace{live, probe, ex, {}};
    trace.r.unix_ms = live_log::now_unix_ms();
    trace.r.stream = oreq.stream;
    trace.r.route = std::holds_alternative<task_decode>(tasks.at(0)) ? "decode" : "local";
    const auto lim = wait_limits(deadline_from_now());
    const size_t n_per = size_t(std::max(oreq.n, 1)), n_jobs = tasks.size(), n = n_jobs * n_per;
    std::vector<admission_ptr> tickets;
    for (size_t i = 0; i < n; ++i) {
        auto ticket = admit();
        if (!ticket.ok()) co_return (void) co_await ex.respond_error(ticket.status());
        tickets.push_back(std::move(ticket.value()));
    }
    // Per prompt: its token count (chunks' tokens_evaluated) and, for /completion, its text as the model saw it.
    std::vector<uint32_t> n_prompt(n_jobs, 0);
    std::vector<std::string> prompt_text(n_jobs);
    for (size_t p = 0; p < n_jobs; ++p) {
        const gen_request * req = nullptr;
        if (const auto * g = std::get_if<task_generate>(&tasks[p])) req = &g->req;
        if (const auto * d = std::get_if<task_decode>(&tasks[p])) req = &d->req;
        n_prompt[p] = req ? uint32_t(req->prompt.size()) : 0;
        trace.r.prompt_tokens += n_prompt[p];
        // llama-server's "prompt": the prompt as the model saw it, special tokens written out ("<s>...").
        if (req && oreq.endpoint == openai_endpoint::completion)
            prompt_text[p] = text_detokenize(*model, req->prompt, true);
    }
    openai_response_meta meta = openai_response_meta_make(
        oreq.endpoint, model_name, "fp_" + identity_fingerprint_hex(model->identity().fingerprint).substr(0, 12));
    if (!resume.id.empty()) {  // a generation that moved here answers as it began (live migration)
        meta.id = resume.id;
        meta.created = resume.created;
    }
    meta.return_tokens = oreq.return_tokens;
    meta.logprobs = oreq.n_probs >= 0;
    meta.choices_per_prompt = uint32_t(n_per);
    if (oreq.endpoint == openai_endpoint::completion) {
        meta.generation_settings = openai_generation_settings(oreq, n_ctx_slot(), eog);
        meta.prompt_text = prompt_text[0];
    }
    // /completion's objects name their own prompt (several prompts: each result's).
    auto meta_of = [&](size_t choice) {
        openai_response_meta m = meta;
        m.prompt_text = prompt_text[choice / n_per];
        return m;
    };
    for (auto & t : tasks)
        if (const auto * g = std::get_if<task_generate>(&t)) co_await tier_warm(g->req.prompt);
    // n > 1 on a node that serves the whole request: the prompt is processed once, into a blob that is
    // restored into n slots — the path a PD decode node takes, so the choices start from the same state as
    // a PD answer's (same logprobs) and the prompt is not computed n times.
    std::vector<std::optional<event_done>> prefilled(n_jobs);
    for (size_t p = 0; p < n_jobs; ++p) {
        auto * g = std::get_if<task_generate>(&tasks[p]);
        if (!g || n_per < 2) continue;
        gen_request one = std::move(g->req);
        gen_request prompt_only = one;
        prompt_only.return_progress = false;  // (the choices' restores report it)
        auto done = co_await run_to_done(ex, task_prefill{std::move(prompt_only)});
        if (!done.ok()) co_return (void) co_await ex.respond_error(done.status());
        auto blob = co_await blob_parse_edge(std::move(done->blob));
        if (!blob.ok()) co_return (void) co_await ex.respond_error(blob.status());
        done->blob.clear();
        prefilled[p] = std::move(done.value());
        tasks[p] = task_decode{blob.value(), std::move(one)};
    }
    // Live migration: a generation the router can move (it splices the answer) that this node can resume
    // elsewhere — one choice, no logprobs (the tokens' probabilities stay where they were computed), not the
    // Messages API (its stream's opening cannot be sent twice), a model and context that resume exactly
    // (engine::resumes_exactly) — carries its request into the state it pauses
    // with, and is entered in the registry /admin/migrate and drain ask.
    // (resumed: it had generated tokens before it moved, so its answer began where it was — the role chunk too)
    const bool resumed =
        tasks.size() == 1 && std::holds_alternative<task_decode>(tasks[0]) &&
        std::get<task_decode>(tasks[0]).blob->view().generation.value_or(blob_generation{}).n_generated > 0;
    bool migratable = ex.request().header(pd_header_migratable) == "1" && n == 1 && oreq.n_probs < 0 &&
                      meta.endpoint != openai_endpoint::messages && eng->resumes_exactly();
    if (migratable) {
        if (auto * d = std::get_if<task_decode>(&tasks[0])) {
            migratable = d->blob->view().request.has_value();
            if (migratable) d->req.request_json = *d->blob->view().request;
        } else if (auto * g = std::get_if<task_generate>(&tasks[0])) {
            auto embedded = pd_request_encode(oreq);
            migratable = embedded.ok();
            if (migratable) g->req.request_json = std::move(embedded.value());
        } else {
            migratable = false;
        }
    }
    std::vector<request_ptr> handles;
    for (engine_task & task : tasks)
        for (engine_task & t : choice_tasks(std::move(task), oreq.n)) {
            auto h = eng->submit(std::move(t));
            if (!h.ok()) {
                for (auto & started : handles) started->cancel();
                co_return (void) co_await ex.respond_error(h.status());
            }
            handles.push_back(std::move(h.value()));
        }
    migration_registry::entry in_registry;
    if (migratable) in_registry = migrations.enter(handles[0]);
    const request_ptr first_handle = handles[0];
    event_group g(std::move(handles), ex.executor());
    choice_events events(g, lim, ex, probe);
    if (migratable && seam && seam->migrate_after_tokens > 0) {
        // tests: every movable generation moves after this many tokens generated here
        events.on_event = [h = first_handle, n_after = seam->migrate_after_tokens,
                           seen = 0u](size_t, const engine_event & ev) mutable {
            const auto * t = std::get_if<event_token>(&ev);
            if (t && !t->replayed && ++seen == n_after) h->migrate();
        };
    }

    const openai_reasoning rs = reasoning_of(oreq);
    const auto tf = tools_of(oreq);
    std::vector<choice_state> choices;
    const std::string pre = prefill_of(oreq);
    for (size_t i = 0; i < n; ++i) choices.emplace_back(uint32_t(i), rs, tf, pre, oreq.stream, oreq.endpoint);
    auto results = [&] {
        std::vector<openai_result> out;
        for (size_t i = 0; i < choices.size(); ++i) {
            out.push_back(choices[i].res);
            // The prompt was processed by the prefill above, not by the choices' restores.
            if (const auto & pre = prefilled[i / n_per]) {
                out.back().done.usage.cached_tokens = pre->usage.cached_tokens;
                if (i % n_per == 0) out.back().done.ms_prompt += pre->ms_prompt;
            }
        }
        return out;
    };
    const loaded_model & vocab = *model;

    // Every choice's first event before any byte is written: a request that fails before its first token
    // gets a real HTTP status even when it asked to stream.
    std::vector<engine_event> first(n);
    std::vector<bool> have_first(n, false);
    for (size_t got = 0; got < n; ++got) {
        engine_event ev;
        auto which = co_await events.next(have_first, ev);
        if (!which.ok()) co_return (void) co_await ex.respond_error(which.status());
        if (auto * moved = migrated_of(ev))  // paused before its first token (one choice: nothing else runs)
            co_return co_await hand_off(ex, std::move(moved->blob), meta, oreq.stream, "");
        first[*which] = std::move(ev);
        have_first[*which] = true;
    }
    std::vector<bool> finished(n, false);

    if (!oreq.stream) {
        for (size_t i = 0; i < n; ++i) {
            choices[i].step(first[i], vocab);
            finished[i] = choices[i].finished;
        }
        while (std::find(finished.begin(), finished.end(), false) != finished.end()) {
            engine_event ev;
            auto which = co_await events.next(finished, ev);
            if (!which.ok()) co_return (void) co_await ex.respond_error(which.status());
            if (auto * moved = migrated_of(ev))  // the node it moves to answers the whole of it
                co_return co_await hand_off(ex, std::move(moved->blob), meta, false, "");
            choices[*which].step(ev, vocab);
            finished[*which] = choices[*which].finished;
        }
        for (const auto & c : choices) log_generation(ex.request().id, oreq, c.res);
        if (meta.endpoint == openai_endpoint::messages)  // (one choice: the Messages API has no "n")
            co_return (void) co_await ex.respond(http_response::json(anthropic_message_json(meta, results().at(0))));
        if (meta.endpoint == openai_endpoint::completion && n_jobs > 1) {
            // Several prompts on /completion: an array of the results' objects, as llama-server answers.
            const auto rs = results();
            std::string out = "[";
            for (size_t i = 0; i < rs.size(); ++i) out += (i ? "," : "") + openai_response_json(meta_of(i), {rs[i]});
            co_return (void) co_await ex.respond(http_response::json(out + "]"));
        }
        co_return (void) co_await ex.respond(http_response::json(openai_response_json(meta, results())));
    }

    // Streamed: every write is under --write-timeout; a failed one cancels every choice's task.
    auto put = [&](const std::string & s) -> net::awaitable<bool> {
        if (co_await ex.write(s)) co_return true;
        g.cancel_all();
        co_return false;
    };
    if (!co_await ex.begin(200, "text/event-stream", {{"Cache-Control", "no-cache"}}, std::nullopt))
        co_return g.cancel_all();
    // (co_await is kept out of && and ?: : GCC miscompiles short-circuit operands that suspend.)
    // A chat choice's first chunk is its role; prompt-progress chunks (return_progress) come before it, as
    // llama-server sends them.
    // (a resumed generation's role went out where it began)
    std::vector<bool> role_sent(n, meta.endpoint != openai_endpoint::chat || resumed);
    // The messages endpoint: Anthropic's typed events instead of chunks (one choice).
    std::optional<anthropic_stream> anthropic;
    auto frame = [](const std::vector<anthropic_event> & events) {
        std::string out;
        for (const anthropic_event & e : events) out += sse_named_event(e.name, e.data);
        return out;
    };
    if (meta.endpoint == openai_endpoint::messages) {
        anthropic.emplace(meta);
        if (!co_await put(frame(anthropic->start(n_prompt[0])))) co_return;
    }
    const bool done_marker = openai_stream_ends_with_done(meta);
    // emit renders what one event of choice i adds (a delta chunk, and the finish chunk when it ends).
    auto emit = [&](size_t i, const engine_event & ev) {
        if (const auto * p = std::get_if<event_progress>(&ev))  // the prompt's (one per choice: the first's)
            return i == 0 && !anthropic ? sse_event(openai_chunk_progress_json(meta, *p)) : std::string();
        choice_state & c = choices[i];
        std::string out;
        if (const auto * t = std::get_if<event_token>(&ev); t && t->replayed) {
            c.step(ev, vocab);  // sent where it was generated: only the answer so far is rebuilt
            return out;
        }
        if (!role_sent[i]) {
            out += sse_event(openai_chunk_role_json(meta, uint32_t(i)));
            role_sent[i] = true;
        }
        openai_delta d = c.step(ev, vocab);
        if (anthropic) {
            out += frame(anthropic->push(d));
            if (c.finished) {
                log_generation(ex.request().id, oreq, c.res);
                out += frame(anthropic->finish(c.res));
            }
            return out;
        }
        std::vector<openai_logprob> lps = std::move(c.unsent);
        c.unsent.clear();
        for (auto & p : d.logprobs) lps.push_back(std::move(p));
        d.logprobs.clear();
        const bool has_text = !d.text.content.empty() || !d.text.reasoning.empty() || !d.tool_calls.empty();
        if (has_text || (meta.endpoint == openai_endpoint::completion && !d.tokens.empty())) {
            d.logprobs = std::move(lps);
            lps.clear();
            out += sse_event(openai_chunk_delta_json(meta, d, uint32_t(c.res.tokens.size()), n_prompt[i / n_per]));
        }
        if (c.finished) {
            log_generation(ex.request().id, oreq, c.res);
            out += sse_event(n_jobs > 1 ? openai_chunk_finish_json(meta_of(i), c.res, lps)
                                        : openai_chunk_finish_json(meta, c.res, lps));
        } else {
            c.unsent = std::move(lps);
        }
        return out;
    };
    std::string pending;
    for (size_t i = 0; i < n; ++i) {
        pending += emit(i, first[i]);
        finished[i] = choices[i].finished;
    }
    for (;;) {
        const bool all_done = std::find(finished.begin(), finished.end(), false) == finished.end();
        if (all_done) {
            if (oreq.include_usage && meta.endpoint != openai_endpoint::completion && !anthropic)
                pending += sse_event(openai_chunk_usage_json(meta, results()));
            if (done_marker) pending += sse_done();
            if (co_await put(pending)) co_await ex.end();
            co_return;
        }
        if (!pending.empty()) {
            if (!co_await put(pending)) co_return;
            pending.clear();
        }
        engine_event ev;
        auto which = co_await events.next(finished, ev);
        if (which.ok()) {
            if (auto * moved = migrated_of(ev))
                co_return co_await hand_off(ex, std::move(moved->blob), meta, true, std::move(pending));
        }
        if (!which.ok()) {
            // After the first byte an error is an SSE event; a client that left gets nothing more.
            if (!events.client_left()) {
                const std::string last =
                    anthropic ? sse_named_error(which.status()) : sse_error_and_done(which.status());
                if (co_await put(last)) co_await ex.end();
            }
            co_return;
        }
        pending += emit(*which, ev);
        finished[*which] = choices[*which].finished;
    }
}

void node_impl::log_generation(std::string_view request_id, const openai_request & oreq,
                               const openai_result & r) const {
    const log_level level = cfg.verbose ? log_level::info : log_level::debug;
    if (!log_enabled(level)) return;
    const usage_counts & u = r.done.usage;
    const char * endpoint = openai_endpoint_name(oreq.endpoint);
    const char * finish = finish_reason_name(r.done.finish);
    log_write(level, request_id,
              "serve: {}: slot {}: {} prompt tokens ({} cached) in {:.1f} ms, {} generated in {:.1f} ms, finish {}",
              fmt::make_format_args(endpoint, r.done.slot, u.prompt_tokens, u.cached_tokens, r.done.ms_prompt,
                                    u.generated_tokens, r.done.ms_generate, finish));
}

net::awaitable<Result<openai_request>> node_impl::prepare(std::string_view body, openai_endpoint endpoint) {
    auto oreq = openai_parse(body, endpoint, cfg.defaults);
    if (!oreq.ok()) co_return oreq.status();
    const uint32_t n_ctx = n_ctx_slot();
    if (const auto * in = std::get_if<openai_infill>(&oreq->input)) {
        // /infill: its prompt is built here (the layout takes the vocabulary's FIM tokens), and the request
        // goes on as the /completion of those tokens — so a blob embeds it as one, and a decode node needs
        // nothing of /infill.
        auto toks = co_await http->offload(
            [&] { return infill_tokens(*in, *model, cfg.engine.ctx.n_batch, cfg.defaults.max_tokens, n_ctx); });
        if (!toks.ok()) co_return toks.status();
        oreq->input = openai_prompt_tokens{std::move(toks.value())};
        oreq->endpoint = openai_endpoint::completion;
        co_return oreq;
    }
    if (const auto * m = std::get_if<openai_prompt_mixed>(&oreq->input)) {
        // Texts and ids in one prompt: tokenized here, so the request goes on (and is embedded) as token ids.
        auto toks = co_await http->offload([&] { return openai_mixed_tokens(*m, *model); });
        if (!toks.ok()) co_return toks.status();
        oreq->input = openai_prompt_tokens{std::move(toks.value())};
        co_return oreq;
    }
    if (const auto * pm = std::get_if<openai_prompt_media>(&oreq->input)) {
        // llama-server's multimodal prompt: encoded here, so it goes on (and is embedded) as tokens.
        if (!media)
            co_return Status(
                status_code::invalid_argument,
                std::string("prompt: ") +
                    (std::any_of(pm->images.begin(), pm->images.end(), media_looks_like_audio) ? "audio" : "image") +
                    " input is not supported by this server (start it with --mmproj, the model's "
                    "multimodal projector)");
        auto mp = co_await http->offload([&] { return media->encode(pm->text, pm->images, true, true, n_ctx); });
        if (!mp.ok()) co_return mp.status();
        oreq->input = openai_prompt_tokens{std::move(mp->tokens), std::move(mp->spans)};
        co_return oreq;
    }
    if (!std::holds_alternative<openai_chat>(oreq->input)) co_return oreq;
    if (Status st = co_await fetch_image_urls(oreq.value()); !st.ok()) co_return st;
    co_return co_await http->offload(
        [&] { return chat->render_request(std::move(oreq.value()), *model, n_ctx, media.get()); });
}

net::awaitable<Status> node_impl::fetch_image_urls(openai_request & r) {
    auto * chat_in = std::get_if<openai_chat>(&r.input);
    if (!chat_in || chat_in->image_urls.empty() || !media || !cfg.image_urls) co_return Status();
    if (Status too_many = media_count_check(chat_in->images.size(), media->config()); !too_many.ok())
        co_return too_many;  // (before any fetch: a request over the limit fetches nothing)
    co_return co_await image_fetch_all(*chat_in, *cfg.image_urls, cfg.media->max_image_bytes, image_tls);
}

net::awaitable<void> node_impl::on_openai(http_exchange & ex, openai_endpoint endpoint) {
    auto several = openai_prompts_split(ex.request().body_text(), endpoint);
    if (!several.ok()) co_return (void) co_await ex.respond_error(several.status());
    if (!several->empty()) {
        // Several prompts: each prepared as its own request (any refusal names the prompt), answered together.
        std::vector<engine_task> tasks;
        std::optional<openai_request> first;
        auto of_prompt = [](size_t p, const Status & st) {
            return Status(st.code(), "prompt[" + std::to_string(p) + "]: " + st.message(), st.detail());
        };
        for (size_t p = 0; p < several->size(); ++p) {
            auto one = co_await prepare((*several)[p], endpoint);
            if (!one.ok()) co_return (void) co_await ex.respond_error(of_prompt(p, one.status()));
            const uint32_t n_ctx = n_ctx_slot();
            auto gen = co_await http->offload([&] { return openai_to_gen(*one, *model, n_ctx); });
            if (!gen.ok()) co_return (void) co_await ex.respond_error(of_prompt(p, gen.status()));
            tasks.push_back(task_generate{std::move(gen.value())});
            if (!first) first = std::move(one.value());
        }
        co_return co_await respond_generation(ex, std::move(tasks), *first);
    }
    auto oreq = co_await prepare(ex.request().body_text(), endpoint);
    if (!oreq.ok()) co_return (void) co_await ex.respond_error(oreq.status());
    const uint32_t n_ctx = n_ctx_slot();
    auto gen = co_await http->offload([&] { return openai_to_gen(oreq.value(), *model, n_ctx); });
    if (!gen.ok()) co_return (void) co_await ex.respond_error(gen.status());
    co_await respond_generation(ex, task_generate{std::move(gen.value())}, oreq.value());
}

}  // namespace baton
