// prefill_hop.cpp — the prefill hop: every healthy prefill node once, least loaded first, until one answers
// with a blob, or (--pd-transfer direct) with the id of the state it holds for the decode node to fetch
// (take_held; release_held ends that lease once the request no longer needs it). The blob is read into a body_relay by a producer coroutine (pump_blob) while the decode hop
// already sends it on; prefill_done waits for its last byte and frees the prefill node. What a node's answer
// means (take the blob, the next node, the client's fault) is pd_prefill_answer_decide's (pd_fallback_policy.h).
#include <algorithm>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "baton/blob_pack.h"
#include "baton/pd/pd_protocol.h"
#include "pd_fallback_policy.h"
#include "router_impl.h"

namespace baton {

net::awaitable<void> router_impl::pump_blob(std::shared_ptr<http_upstream> call, std::shared_ptr<body_relay> blob,
                                            node_hold node, call_guard guard) {
    Status st;
    while (blob->room() > 0) {
        auto n = co_await call->read_some(blob->tail(), size_t(std::min<uint64_t>(blob->room(), 4u << 20)));
        if (!n.ok()) {
            st = n.status();
            break;
        }
        if (n.value() == 0) break;
        blob->commit(n.value());
    }
    blob->finish(st.ok() ? st : guard.failure(st));
    if (blob->failed())
        note_call_failure(prefill, node.index(), call->url().text, st.ok() ? blob->status() : st, guard);
}

// On success the blob keeps arriving (the producer holds the node until it is in); prefill_done ends the hop.
net::awaitable<Result<prefill_stream>> router_impl::prefill_hop(http_exchange & ex, route_ctx & ctx) {
    // The client's body as the client wrote it (the order of a schema's properties and of the tools' keys is
    // the client's, and the grammar and the template follow it), its endpoint in a header of the protocol.
    const std::string_view body = ex.request().body_text();
    http_headers headers = node_headers(ctx.request_id);
    headers.emplace_back(std::string(pd_header_endpoint), openai_endpoint_name(ctx.req.endpoint));
    const bool direct = cfg.transfer == pd_transfer::direct;
    if (direct) {
        headers.emplace_back(std::string(pd_header_state_hold), "1");
        // A prefill node with --state-stream-tokens streams the state while the prompt computes (not a delta:
        // a delta is small and leaves whole).
        if (ctx.delta_base == 0) headers.emplace_back(std::string(pd_header_state_stream), "1");
    }
    // Relay: a prefill node with --state-compress-level may pack the blob; the router passes it on packed and the
    // decode node unpacks it (blob_pack.h). (Direct: the decode node asks for it when it fetches.)
    else
        headers.emplace_back("Accept-Encoding", std::string(blob_pack_coding));
    if (ctx.delta_base > 0) headers.emplace_back(std::string(pd_header_delta_base), std::to_string(ctx.delta_base));
    std::vector<size_t> tried;
    Status last(status_code::upstream_error, "no healthy prefill node");
    for (;;) {
        Status why;
        auto node = co_await acquire_node(ex, prefill, prefill_gate, ctx, tried, false, why);
        if (!node) co_return pd_no_node_error(why, last, !tried.empty());
        const size_t i = node->index();
        tried.push_back(i);
        const http_url url = prefill.address(i);
        auto conn = co_await http_upstream::connect(url, ctx.deadline);
        std::shared_ptr<http_upstream> call;
        call_guard guard;  // an ejection closes the call's socket: the pending send, read or blob read fails at once
        if (conn.ok()) {
            call = std::move(conn.value());
            guard = prefill_calls.enter(i, ex.executor(), [w = std::weak_ptr<http_upstream>(call)] {
                if (auto c = w.lock()) c->close();
            });
        }
        // (No co_await inside ?: — GCC miscompiles it.)
        Status st = conn.status();
        const steady::time_point t_send = steady::now();
        if (st.ok()) st = co_await call->send("POST", pd_path_prefill, headers, "application/json", body);
        Result<http_response_head> head(st);
        if (st.ok()) head = co_await call->read_head();
        if (!head.ok()) {
            const call_fault fault = note_call_failure(prefill, i, url.text, head.status(), guard);
            last = guard.failure(head.status());
            // (Never begun: the decode hop answers the client.) Next node, or the deadline's error as is.
            if (router_call_action({fault, false, ctx.req.stream}) == call_action::next_node) continue;
            co_return last;
        }
        // A refused answer's body is read (a 400's error quotes it); a blob is left to pump_blob.
        std::string said;
        if (head->status != 200) {
            auto err = co_await call->read_all(1 << 20);
            if (err.ok()) said = std::move(err.value());
        }
        pd_prefill_reply reply;
        reply.status = head->status;
        reply.draining = !http_header_find(head->headers, pd_header_draining).empty();
        reply.node = url.text;
        reply.content_length = head->content_length;
        reply.max_blob_bytes = cfg.max_blob_bytes;
        reply.said = said;
        const pd_node_decision d = pd_prefill_answer_decide(reply);
        if (d.mark_draining) prefill.mark_draining(i);  // it leaves the cluster: not selected again until it rejoins
        if (!d.outcome.empty()) metrics.node_outcome(url.text, d.outcome);
        if (d.action == pd_node_action::answer_client) co_return d.error;
        if (d.action != pd_node_action::take_blob) {
            last = d.error;
            continue;
        }
        prefill_stream p;
        p.node = i;
        p.t_send = t_send;
        p.t_headers = steady::now();
        ctx.step("prefill", url.text, t_send, p.t_headers);
        if (direct) {  // a small answer naming the held state; the node is free again at once
            auto held = co_await take_held(*call, url);
            if (!held.ok()) {
                note_call_failure(prefill, i, url.text, held.status(), guard);
                last = guard.failure(held.status());
                continue;
            }
            p.held = std::move(held.value());
            metrics.node_outcome(url.text, "ok");
            co_return p;
        }
        try {
            p.blob = std::make_shared<body_relay>(*head->content_length);
        } catch (const std::bad_alloc &) {
            metrics.node_outcome(url.text, "blob_too_large");
            last = Status(status_code::upstream_error,
                          url.text + ": no memory for a blob of " + std::to_string(*head->content_length) + " bytes");
            continue;
        }
        p.packed = http_header_find(head->headers, "Content-Encoding") == blob_pack_coding;
        p.call = call;
        net::co_spawn(ex.executor(), pump_blob(call, p.blob, std::move(*node), std::move(guard)), net::detached);
        co_return p;
    }
}

net::awaitable<Result<held_state>> router_impl::take_held(http_upstream & call, const http_url & url) {
    auto body = co_await call.read_all(4096);
    if (!body.ok()) co_return body.status();
    const auto j = nlohmann::json::parse(body.value(), nullptr, false);
    held_state s;
    s.origin = url;
    if (j.is_object() && j.contains("state") && j["state"].is_string() && j.contains("bytes") &&
        j["bytes"].is_number_unsigned()) {
        s.id = j["state"].get<std::string>();
        s.bytes = j["bytes"].get<uint64_t>();
    } else if (j.is_object() && j.contains("state") && j["state"].is_string() && j.contains("stream") &&
               j["stream"].is_boolean() && j["stream"].get<bool>()) {
        s.id = j["state"].get<std::string>();
        s.stream = true;
    }
    if (!pd_state_id_valid(s.id))
        co_return Status(status_code::upstream_error,
                         url.text + std::string(pd_path_prefill) +
                             " answered a held prefill without a state id: " + body.value().substr(0, 200));
    co_return s;
}

void router_impl::release_held(const held_state & s, const std::string & request_id) {
    auto run = [](router_impl * self, held_state s, http_headers headers) -> net::awaitable<void> {
        const auto deadline = steady::now() + std::chrono::seconds(5);
        auto conn = co_await http_upstream::connect(s.origin, deadline);
        bool released = false;
        if (conn.ok()) {
            const std::string target = std::string(pd_path_held_state_prefix) + s.id;
            Status st = co_await conn.value()->send("DELETE", target, headers, "", "");
            if (st.ok()) {
                auto head = co_await conn.value()->read_head();
                released = head.ok() && head->status == 200;
            }
        }
        // Not released: the prefill node is gone (its states with it) or the lease already ended; either way
        // the lease's TTL bounds what it holds.
        self->metrics.state_release(released);
    };
    net::co_spawn(http->context(), run(this, s, node_headers(request_id)), net::detached);
}

// prefill_done waits for the blob's last byte (normally already in), records the hop and frees the node.
net::awaitable<void> router_impl::prefill_done(route_ctx & ctx, prefill_stream & p) {
    auto n = async_notify::make(co_await net::this_coro::executor);
    p.blob->set_reader(n);
    // (co_await is kept out of && and ?: : GCC miscompiles short-circuit operands that suspend.)
    while (!p.blob->ended()) {
        if (!co_await n->wait_until(ctx.deadline)) break;
    }
    p.blob->set_reader(nullptr);
    if (p.blob->ended() && p.blob->status().ok()) {
        metrics.node_outcome(prefill.url(p.node), "ok");
        metrics.blob(p.blob->length(), seconds_between(p.t_headers, p.blob->ended_at()));
        ctx.step("transfer", prefill.url(p.node), p.t_headers, p.blob->ended_at(), p.blob->length());
    }
    // (A failed transfer is counted by its pump.) Ends a transfer still running: the deadline passed, and
    // the pump, its read cut off, counts a timeout.
    p.call->close();
}

}  // namespace baton
