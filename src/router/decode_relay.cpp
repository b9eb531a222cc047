// decode_relay.cpp — relaying to a decode node (a blob, or the client's own body), with node retry before
// the first byte: relay picks a node by affinity and sends (send_relayed streams the blob as it arrives),
// then passes the node's answer to the client whole or, for a stream, piece by piece (stream_to_client).
// What each answer means (relay it, the next node, a refused blob) is pd_decode_answer_decide's, and what a
// call that failed at the transport level does next is router_call_action's: this file executes them.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

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

net::awaitable<relay_result> router_impl::relay(http_exchange & ex, route_ctx & ctx, const std::string & path,
                                                std::string_view body, const std::string & ctype,
                                                std::shared_ptr<body_relay> stream_body, const http_headers & extra) {
    http_headers headers = node_headers(ctx.request_id);
    headers.insert(headers.end(), extra.begin(), extra.end());
    std::vector<size_t> tried;
    Status last(status_code::unavailable, "no healthy decode node");
    for (;;) {
        Status why;
        auto node = co_await acquire_node(ex, decode, decode_gate, ctx, tried, true, why);
        if (!node) co_return relay_result{relay_outcome::failed, pd_no_node_error(why, last, !tried.empty())};
        const size_t i = node->index();
        tried.push_back(i);
        const http_url url = decode.address(i);
        auto conn = co_await http_upstream::connect(url, ctx.deadline);
        call_guard guard;  // (after conn: destroyed before the upstream its cancellation closes)
        if (conn.ok()) guard = decode_calls.enter(i, ex.executor(), [u = conn.value().get()] { u->close(); });
        Status st = conn.status();
        const steady::time_point t_send = steady::now();
        if (conn.ok() && stream_body) st = co_await send_relayed(*conn.value(), *stream_body, ctx, headers);
        else if (conn.ok()) st = co_await conn.value()->send("POST", path, headers, ctype, body);
        if (stream_body && stream_body->failed()) {  // the blob never fully arrived: not this node's fault
            co_return relay_result{relay_outcome::blob_failed, stream_body->status()};
        }
        // A node that refuses early may close before reading the whole body: its answer is still read.
        Result<http_response_head> head(st);
        if (conn.ok()) head = co_await conn.value()->read_head();
        if (!head.ok()) {  // before the first byte: another node may serve it
            const call_fault fault = note_call_failure(decode, i, url.text, head.status(), guard);
            last = guard.failure(head.status());
            if (router_call_action({fault, false, ctx.req.stream}) == call_action::next_node) continue;
            co_return relay_result{relay_outcome::failed, last};
        }
        http_upstream & up = *conn.value();
        const int code = head->status;
        pd_decode_reply reply;
        reply.status = code;
        reply.draining = !http_header_find(head->headers, pd_header_draining).empty();
        reply.carries_blob = path == pd_path_decode;  // a forwarded request carries none: its 422 is an answer
        reply.stream = ctx.req.stream;
        const pd_node_decision d = pd_decode_answer_decide(reply);
        if (d.mark_draining) decode.mark_draining(i);  // it leaves the cluster: not selected again until it rejoins
        if (!d.outcome.empty()) metrics.node_outcome(url.text, d.outcome);
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
        if (d.action == pd_node_action::relay_stream) {
            std::optional<Status> early = co_await stream_to_client(ex, ctx, up, head.value(), i, url.text, guard);
            if (!early) {
                ctx.step("decode", url.text, t_send, steady::now());
                co_return relay_result{relay_outcome::done, {}};
            }
            last = *early;  // nothing reached the client: the policy said another node
            continue;
        }
        // relay_whole: the node's answer, whatever its status, read whole and relayed as it is.
        auto all = co_await up.read_all();
        node->release();
        if (!all.ok()) {  // nothing reached the client yet (the body is relayed whole)
            const call_fault fault = note_call_failure(decode, i, url.text, all.status(), guard);
            last = Status(status_code::upstream_error,
                          "decode node failed mid-response: " + guard.failure(all.status()).message());
            if (fault == call_fault::deadline) last = all.status();
            if (router_call_action({fault, false, false}) == call_action::next_node) continue;
            co_return relay_result{relay_outcome::failed, last};
        }
        if (code == 200) {
            metrics.ttft(seconds_between(ctx.t_arrival, steady::now()));
            ctx.trace.ttft_s = ctx.since_arrival(steady::now());  // (a whole answer: its first token is its end)
        }
        ctx.step("decode", url.text, t_send, steady::now());
        http_response res;
        res.status = code;
        res.content_type = head->content_type.empty() ? "application/json" : head->content_type;
        res.body = std::move(all.value());
        res.headers = {{std::string(pd_header_route), ctx.route}, {std::string(pd_header_decode_node), url.text}};
        co_await ex.respond(std::move(res));
        co_return relay_result{relay_outcome::done, {}};
    }
}

// stream_to_client relays the decode node's stream piece by piece: the next piece is read only after the
// last one was written to the client, so a slow client slows only its own stream (and a client that
// stops reading for --write-timeout is dropped, which closes the upstream and cancels the node's task).
// The client's response begins with the first piece, so a node that fails before it (ejected, cut off)
// leaves the client untouched and the request free to go to another node.
net::awaitable<std::optional<Status>> router_impl::stream_to_client(http_exchange & ex, route_ctx & ctx,
                                                                    http_upstream & up, const http_response_head & head,
                                                                    size_t node, const std::string & url,
                                                                    const call_guard & guard) {
    std::vector<char> buf(16384);
    bool begun = false;
    for (;;) {
        auto n = co_await up.read_some(buf.data(), buf.size());
        if (!n.ok()) {
            const call_fault fault = note_call_failure(decode, node, url, n.status(), guard);
            const Status st = guard.failure(n.status());
            const status_code code =
                fault == call_fault::deadline ? status_code::deadline_exceeded : status_code::upstream_error;
            const Status err(code, "decode node failed mid-stream: " + st.message());
            const call_action action = router_call_action({fault, begun, true});
            if (action == call_action::next_node) co_return err;
            if (action == call_action::respond_error) {
                co_await ex.respond_error(err);
            } else if (action == call_action::error_event) {  // after the first byte: an error event, then the end
                log_warn(log_request{ctx.request_id}, "route: stream from the decode node ended with an error: {}",
                         st.message());
                if (co_await ex.write(sse_error_and_done(err))) co_await ex.end();
            } else {
                ex.abort();
            }
            co_return std::nullopt;
        }
        if (!begun) {
            begun = true;
            if (!co_await ex.begin(200, head.content_type.empty() ? "text/event-stream" : head.content_type,
                                   {{std::string(pd_header_route), ctx.route},
                                    {std::string(pd_header_decode_node), url},
                                    {"Cache-Control", "no-cache"}},
                                   std::nullopt)) {
                up.close();
                co_return std::nullopt;
            }
            metrics.ttft(seconds_between(ctx.t_arrival, steady::now()));
            ctx.trace.ttft_s = ctx.since_arrival(steady::now());
        }
        if (n.value() == 0) {
            co_await ex.end();
            co_return std::nullopt;
        }
        if (!co_await ex.write(buf.data(), n.value())) {
            log_info(log_request{ctx.request_id},
                     "route: client went away mid-stream; cancelling the upstream request");
            up.close();
            co_return std::nullopt;
        }
    }
}

}  // namespace baton
