// decode_relay.cpp — relaying to a decode node (a blob, or the client's own body), with node retry before
// the first byte: relay picks a node by affinity and sends (send_relayed streams the blob as it arrives),
// then passes the node's answer to the client whole or, for a stream, piece by piece (stream_to_client).
// What each answer means (relay it, the next node, a refused blob) is pd_decode_answer_decide's, and what a
// call that failed at the transport level does next is router_call_action's: this file executes them.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "baton/base/log.h"
#include "baton/http/sse.h"
#include "baton/pd/pd_protocol.h"
#include "pd_fallback_policy.h"
#include "router_impl.h"

namespace baton {

// send_relayed sends the blob as the request body, each byte as soon as it has arrived.
net::awaitable<Status> router_impl::send_relayed(http_upstream & up, body_relay & blob, const route_ctx & ctx,
                                                 const http_headers & headers) {
    Status st = co_await up.send_head("POST", pd_path_decode, headers, "application/octet-stream", blob.length());
    if (!st.ok()) co_return st;
    auto n = async_notify::make(co_await net::this_coro::executor);
    blob.set_reader(n);
    uint64_t sent = 0;
    while (sent < blob.length()) {
        if (blob.size() > sent) {
            const uint64_t end = blob.size();
            st = co_await up.send_body(blob.data() + sent, size_t(end - sent));
            if (!st.ok()) break;
            sent = end;
            continue;
        }
        if (blob.failed()) break;
        if (!co_await n->wait_until(ctx.deadline)) {
            st = Status(status_code::deadline_exceeded, "request deadline passed while relaying the blob");
            break;
        }
    }
    blob.set_reader(nullptr);
    co_return st;
}

namespace {

// At most this many moves per request: a generation that keeps being paused (nodes draining one after another)
// finishes where it is after them.
constexpr int k_moves_max = 32;

// parse_moved reads what a node said when it paused a generation (pd_protocol.h: {"state", "bytes", "id",
// "created"}).
Result<moved_generation> parse_moved(std::string_view data, size_t node, const http_url & origin) {
    const auto j = nlohmann::json::parse(data, nullptr, false);
    const Status bad(status_code::upstream_error, "the decode node's live-migration answer is malformed");
    if (j.is_discarded() || !j.is_object() || !j.contains("state") || !j["state"].is_string() || !j.contains("id") ||
        !j["id"].is_string() || !j.contains("created") || !j["created"].is_number_integer())
        return bad;
    moved_generation m;
    m.node = node;
    m.origin = origin;
    m.state = j["state"].get<std::string>();
    m.id = j["id"].get<std::string>();
    m.created = j["created"].get<int64_t>();
    if (!pd_state_id_valid(m.state)) return bad;
    return m;
}

}  // namespace

net::awaitable<relay_result> router_impl::relay(http_exchange & ex, route_ctx & ctx, const std::string & path,
                                                std::string_view body, const std::string & ctype,
                                                std::shared_ptr<body_relay> stream_body, const http_headers & extra) {
    // Live migration (docs/cluster.md): a generation the router can move elsewhere — one choice, no logprobs, not
    // the Messages API, and another decode node to move it to — may be paused by its node (POST /admin/migrate,
    // drain); the node's answer then ends with where its state is, and the generation goes on on another node
    // of its group, the answer spliced: the same id, nothing lost or repeated.
    const bool may_move = ctx.req.n <= 1 && ctx.req.n_probs < 0 && ctx.req.endpoint != openai_endpoint::messages;
    std::optional<moved_generation> moving;  // set while the generation resumes on another node
    int n_moves = 0;
    std::vector<size_t> tried;
    Status last(status_code::unavailable, "no healthy decode node");
    // A move that found no node: the client gets an explicit error (the generation cannot start over: its
    // first tokens were sent), and the paused state is released.
    auto move_failed = [&](const Status & why) -> net::awaitable<relay_result> {
        metrics.migration(false);
        release_held(held_state{moving->origin, moving->state, 0, false}, ctx.request_id);
        const Status err(why.code() == status_code::ok ? status_code::unavailable : why.code(),
                         "live migration: no decode node resumed the generation: " + why.message());
        log_warn(log_request{ctx.request_id}, "route: {}", err.message());
        if (!ex.begun()) co_await ex.respond_error(err);
        else if (co_await ex.write(sse_error_and_done(err))) co_await ex.end();
        co_return relay_result{relay_outcome::done, {}};
    };
    for (;;) {
        http_headers headers = node_headers(ctx.request_id);
        const bool offer_move = may_move && n_moves < k_moves_max && decode.n_members() >= 2;
        if (offer_move) headers.emplace_back(std::string(pd_header_migratable), "1");
        if (moving) {
            headers.emplace_back(std::string(pd_header_state_source), moving->origin.text);
            headers.emplace_back(std::string(pd_header_state_id), moving->state);
            headers.emplace_back(std::string(pd_header_resume_id), moving->id);
            headers.emplace_back(std::string(pd_header_resume_created), std::to_string(moving->created));
        } else {
            headers.insert(headers.end(), extra.begin(), extra.end());
        }
        Status why;
        auto node = co_await acquire_node(ex, decode, decode_gate, ctx, tried, true, why);
        if (!node) {
            const Status err = pd_no_node_error(why, last, !tried.empty());
            if (moving) co_return co_await move_failed(err);
            co_return relay_result{relay_outcome::failed, err};
        }
        const size_t i = node->index();
        tried.push_back(i);
        const http_url url = decode.address(i);
        auto conn = co_await http_upstream::connect(url, ctx.deadline);
        call_guard guard;  // (after conn: destroyed before the upstream its cancellation closes)
        if (conn.ok()) guard = decode_calls.enter(i, ex.executor(), [u = conn.value().get()] { u->close(); });
        Status st = conn.status();
        const steady::time_point t_send = steady::now();
        if (conn.ok() && moving) st = co_await conn.value()->send("POST", std::string(pd_path_decode), headers, "", "");
        else if (conn.ok() && stream_body) st = co_await send_relayed(*conn.value(), *stream_body, ctx, headers);
        else if (conn.ok()) st = co_await conn.value()->send("POST", path, headers, ctype, body);
        if (!moving && stream_body && stream_body->failed()) {  // the blob never fully arrived: not this node's fault
            co_return relay_result{relay_outcome::blob_failed, stream_body->status()};
        }
        // A node that refuses early may close before reading the whole body: its answer is still read.
        Result<http_response_head> head(st);
        if (conn.ok()) head = co_await conn.value()->read_head();
        if (!head.ok()) {  // before the first byte: another node may serve it
            const call_fault fault = note_call_failure(decode, i, url.text, head.status(), guard);
            last = guard.failure(head.status());
            if (router_call_action({fault, false, ctx.req.stream}) == call_action::next_node) continue;
            if (moving) co_return co_await move_failed(last);
            co_return relay_result{relay_outcome::failed, last};
        }
        http_upstream & up = *conn.value();
        const int code = head->status;
        pd_decode_reply reply;
        reply.status = code;
        reply.draining = !http_header_find(head->headers, pd_header_draining).empty();
        reply.carries_blob =
            moving || path == pd_path_decode;  // a forwarded request carries none: its 422 is an answer
        reply.stream = ctx.req.stream;
        const pd_node_decision d = pd_decode_answer_decide(reply);
        if (d.mark_draining) decode.mark_draining(i);  // it leaves the cluster: not selected again until it rejoins
        if (!d.outcome.empty()) metrics.node_outcome(url.text, d.outcome);
        if (moving && (d.action == pd_node_action::blob_rejected || d.action == pd_node_action::state_lost)) {
            // The paused state is not this node's to resume (refused, or gone from where it was held): never a
            // fallback that would start the generation over.
            auto said = co_await up.read_all(1 << 16);
            last = Status(status_code::upstream_error,
                          url.text + " did not resume it: " + (said.ok() ? said.value() : said.status().message()));
            if (d.action == pd_node_action::blob_rejected) continue;  // another node may take it
            co_return co_await move_failed(last);
        }
        if (d.action == pd_node_action::blob_rejected) co_return relay_result{relay_outcome::blob_rejected, {}};
        if (d.action == pd_node_action::state_lost) {  // the held state is gone: no decode node can have it
            auto said = co_await up.read_all(1 << 16);
            co_return relay_result{relay_outcome::blob_failed,
                                   Status(status_code::upstream_error, url.text + " could not fetch the held state: " +
                                                                           (said.ok() ? said.value() : ""))};
        }
        if (d.action == pd_node_action::next_node) {  // draining or busy: another node
            last = d.error;
            continue;
        }
        std::optional<moved_generation> moved;
        if (d.action == pd_node_action::relay_stream) {
            stream_outcome out = co_await stream_to_client(ex, ctx, up, head.value(), i, url.text, guard, offer_move);
            if (out.early) {
                last = *out.early;  // nothing reached the client: the policy said another node
                continue;
            }
            ctx.step(moving ? "resume" : "decode", url.text, t_send, steady::now());
            moved = std::move(out.moved);
            if (!moved) {
                if (moving) {
                    metrics.migration(true);
                    release_held(held_state{moving->origin, moving->state, 0, false}, ctx.request_id);
                }
                co_return relay_result{relay_outcome::done, {}};
            }
        } else {
            // relay_whole: the node's answer, whatever its status, read whole and relayed as it is.
            auto all = co_await up.read_all();
            node->release();
            if (!all.ok()) {  // nothing reached the client yet (the body is relayed whole)
                const call_fault fault = note_call_failure(decode, i, url.text, all.status(), guard);
                last = Status(status_code::upstream_error,
                              "decode node failed mid-response: " + guard.failure(all.status()).message());
                if (fault == call_fault::deadline) last = all.status();
                if (router_call_action({fault, false, false}) == call_action::next_node) continue;
                if (moving) co_return co_await move_failed(last);
                co_return relay_result{relay_outcome::failed, last};
            }
            if (code == 200 && !http_header_find(head->headers, pd_header_migrated).empty()) {
                auto m = parse_moved(all.value(), i, url);
                if (!m.ok()) {
                    if (moving) co_return co_await move_failed(m.status());
                    co_return relay_result{relay_outcome::failed, m.status()};
                }
                moved = std::move(m.value());
                ctx.step(moving ? "resume" : "decode", url.text, t_send, steady::now());
            } else {
                if (code == 200) {
                    metrics.ttft(seconds_between(ctx.t_arrival, steady::now()));
                    ctx.trace.ttft_s =
                        ctx.since_arrival(steady::now());  // (a whole answer: its first token is its end)
                }
                ctx.step(moving ? "resume" : "decode", url.text, t_send, steady::now());
                http_response res;
                res.status = code;
                res.content_type = head->content_type.empty() ? "application/json" : head->content_type;
                res.body = std::move(all.value());
                res.headers = {{std::string(pd_header_route), ctx.route},
                               {std::string(pd_header_decode_node), url.text}};
                co_await ex.respond(std::move(res));
                if (moving) {
                    metrics.migration(code == 200);
                    release_held(held_state{moving->origin, moving->state, 0, false}, ctx.request_id);
                }
                co_return relay_result{relay_outcome::done, {}};
            }
        }
        // The generation paused on node i to move: it goes on on another node of i's group (the state is i's).
        if (moving) {  // (it moved again: the state before is no longer needed)
            metrics.migration(true);
            release_held(held_state{moving->origin, moving->state, 0, false}, ctx.request_id);
        }
        log_info(log_request{ctx.request_id}, "route: the generation moves off {} (state {})", url.text, moved->state);
        moving = std::move(moved);
        ++n_moves;
        ctx.filter.group = decode.group(i);
        tried = {i};
        last = Status(status_code::unavailable, "no other decode node to resume it on");
    }
}

// stream_to_client relays the decode node's stream piece by piece: the next piece is read only after the
// last one was written to the client, so a slow client slows only its own stream (and a client that
// stops reading for --write-timeout is dropped, which closes the upstream and cancels the node's task).
// The client's response begins with the first piece, so a node that fails before it (ejected, cut off)
// leaves the client untouched and the request free to go to another node. A resumed generation's stream
// continues the client's response, begun by the node it came from.
net::awaitable<stream_outcome> router_impl::stream_to_client(http_exchange & ex, route_ctx & ctx, http_upstream & up,
                                                             const http_response_head & head, size_t node,
                                                             const std::string & url, const call_guard & guard,
                                                             bool watch_moves) {
    std::vector<char> buf(16384);
    bool begun = false;
    std::string carry;  // watch_moves: bytes of an event not yet complete
    const std::string marker = "event: " + std::string(pd_sse_migrated) + "\n";
    auto begin_client = [&]() -> net::awaitable<bool> {
        if (ex.begun()) co_return true;
        if (!co_await ex.begin(200, head.content_type.empty() ? "text/event-stream" : head.content_type,
                               {{std::string(pd_header_route), ctx.route},
                                {std::string(pd_header_decode_node), url},
                                {"Cache-Control", "no-cache"}},
                               std::nullopt)) {
            up.close();
            co_return false;
        }
        metrics.ttft(seconds_between(ctx.t_arrival, steady::now()));
        ctx.trace.ttft_s = ctx.since_arrival(steady::now());
        co_return true;
    };
    for (;;) {
        auto n = co_await up.read_some(buf.data(), buf.size());
        if (!n.ok()) {
            const call_fault fault = note_call_failure(decode, node, url, n.status(), guard);
            const Status st = guard.failure(n.status());
            const status_code code =
                fault == call_fault::deadline ? status_code::deadline_exceeded : status_code::upstream_error;
            const Status err(code, "decode node failed mid-stream: " + st.message());
            const call_action action = router_call_action({fault, begun, true});
            if (action == call_action::next_node) co_return stream_outcome{err, std::nullopt};
            if (action == call_action::respond_error || (action == call_action::error_event && !ex.begun())) {
                co_await ex.respond_error(err);
            } else if (action == call_action::error_event) {  // after the first byte: an error event, then the end
                log_warn(log_request{ctx.request_id}, "route: stream from the decode node ended with an error: {}",
                         st.message());
                if (co_await ex.write(sse_error_and_done(err))) co_await ex.end();
            } else {
                ex.abort();
            }
            co_return stream_outcome{};
        }
        begun = true;  // (the node's first byte: from here a failure is the client's error event)
        std::string_view out(buf.data(), n.value());
        std::optional<moved_generation> moved;
        if (watch_moves) {
            carry.append(buf.data(), n.value());
            // Whole events only: the one that says the generation paused is the node's last.
            size_t complete = carry.rfind("\n\n");
            complete = complete == std::string::npos ? 0 : complete + 2;
            if (n.value() == 0) complete = carry.size();  // (the end: whatever is left goes out)
            std::string_view ready(carry.data(), complete);
            size_t at = ready.starts_with(marker) ? 0 : ready.find("\n\n" + marker);
            if (at != std::string_view::npos && at != 0) at += 2;
            if (at != std::string_view::npos) {
                const std::string_view ev = ready.substr(at + marker.size());
                const size_t data_at = ev.find("data: ");
                const size_t data_end = ev.find('\n', data_at == std::string_view::npos ? 0 : data_at);
                auto m = data_at == std::string_view::npos
                             ? Result<moved_generation>(Status(status_code::upstream_error, "no data"))
                             : parse_moved(ev.substr(data_at + 6, data_end - data_at - 6), node, decode.address(node));
                if (!m.ok()) {
                    up.close();
                    if (!co_await begin_client()) co_return stream_outcome{};
                    if (co_await ex.write(sse_error_and_done(m.status()))) co_await ex.end();
                    co_return stream_outcome{};
                }
                moved = std::move(m.value());
                ready = ready.substr(0, at);
            }
            out = ready;
            if (moved) {
                if (!out.empty()) {
                    if (!co_await begin_client()) co_return stream_outcome{};
                    if (!co_await ex.write(out.data(), out.size())) {
                        up.close();
                        co_return stream_outcome{};
                    }
                }
                up.close();
                co_return stream_outcome{std::nullopt, std::move(moved)};
            }
        }
        if (!out.empty() || n.value() == 0) {
            if (!co_await begin_client()) co_return stream_outcome{};
        }
        bool written = true;
        if (!out.empty()) written = co_await ex.write(out.data(), out.size());
        if (!written) {
            log_info(log_request{ctx.request_id},
                     "route: client went away mid-stream; cancelling the upstream request");
            up.close();
            co_return stream_outcome{};
        }
        if (watch_moves) carry.erase(0, out.size());
        if (n.value() == 0) {
            co_await ex.end();
            co_return stream_outcome{};
        }
    }
}

}  // namespace baton
