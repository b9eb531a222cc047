// health.cpp — a node's health: the health checker (every member checked at once every --health-interval;
// a node with no answer within --health-timeout is ejected and its calls in flight cancelled; a healthy
// node's slot count sets its capacity), and note_call_failure, what a failed call says about its node.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>
#include <tuple>

#include "baton/base/log.h"
#include "baton/http/metrics_text.h"
#include "baton/pd/pd_protocol.h"
#include "router_impl.h"

namespace baton {

call_fault router_impl::note_call_failure(node_pool & pool, size_t i, const std::string & url, const Status & raw,
                                          const call_guard & g) {
    const call_fault fault = router_call_fault(raw, g.cancelled());
    if (fault == call_fault::transport) pool.mark_failure(i);  // (an ejected node is marked by its health check)
    metrics.node_outcome(url, fault == call_fault::ejected     ? "ejected"
                              : fault == call_fault::deadline  ? "timeout"
                              : fault == call_fault::transport ? "unreachable"
                                                               : "failed");
    return fault;
}

// A node that answers /health with an error (503 while it loads or drains) is skipped for new requests; one
// that gives no answer at all within --health-timeout (dead, or stalled: SIGSTOP, a hung host) is ejected
// and every call in flight to it is cancelled, so no request waits for its --timeout on a node known dead.
net::awaitable<void> router_impl::health_check(node_pool & pool, call_registry & calls, const http_url & url, size_t i,
                                               capacity_gate & gate) {
    const auto deadline = steady::now() + std::chrono::milliseconds(int64_t(cfg.health_timeout_s * 1000));
    Status no_answer;  // a transport failure: nothing answered
    int status = 0;
    auto conn = co_await http_upstream::connect(url, deadline);
    no_answer = conn.status();
    if (no_answer.ok()) no_answer = co_await conn.value()->send("GET", "/health", {}, "", "");
    if (no_answer.ok()) {
        auto head = co_await conn.value()->read_head();
        if (head.ok()) status = head->status;
        else no_answer = head.status();
    }
    const bool was = pool.healthy(i);
    if (!no_answer.ok()) {
        pool.mark_failure(i);
        const std::string why =
            no_answer.code() == status_code::deadline_exceeded
                ? "no answer to GET /health within " + metric_num(cfg.health_timeout_s) + " s (--health-timeout)"
                : no_answer.message();
        const size_t n = calls.cancel_node(
            i, Status(status_code::upstream_error, url.text + " was ejected by the router's health check: " + why));
        if (n > 0) log_warn("route: {} ejected ({}): cancelled {} call(s) in flight", url.text, why, n);
        co_return;
    }
    if (status != 200) {
        pool.mark_failure(i);
        co_return;
    }
    // The node's slot count decides how many requests it may hold (its slots plus --node-queue).
    auto mconn = co_await http_upstream::connect(url, deadline);
    Status sent = mconn.status();
    if (sent.ok()) sent = co_await mconn.value()->send("GET", "/v1/models", node_headers(), "", "");
    if (sent.ok()) {
        auto head = co_await mconn.value()->read_head();
        if (head.ok() && head->status == 200) {
            auto body = co_await mconn.value()->read_all(1 << 20);
            if (body.ok()) {
                const auto j = nlohmann::json::parse(body.value(), nullptr, false);
                if (j.is_object() && j.contains("data") && j["data"].is_array() && !j["data"].empty()) {
                    const auto & meta = j["data"][0].value("meta", nlohmann::json::object());
                    const uint32_t slots = meta.is_object() ? meta.value("n_slots", 0u) : 0u;
                    const uint32_t cap = slots + (cfg.node_queue < 0 ? slots : uint32_t(cfg.node_queue));
                    if (slots > 0 && pool.capacity(i) != cap) {
                        pool.set_capacity(i, cap);
                        gate.wake_all();
                    }
                }
            }
        }
    }
    pool.mark_healthy(i);
    if (!was) gate.wake_all();
    co_await kv_poll(url, steady::now() + std::chrono::milliseconds(int64_t(cfg.health_timeout_s * 1000)));
}

net::awaitable<void> router_impl::kv_poll(const http_url & url, steady::time_point deadline) {
    // A node without KV events (an older node, or one still loading) answers 404/503: nothing to apply.
    auto get = [&](std::string target) -> net::awaitable<Result<std::string>> {
        auto conn = co_await http_upstream::connect(url, deadline);
        if (!conn.ok()) co_return conn.status();
        Status st = co_await conn.value()->send("GET", target, node_headers(), "", "");
        if (!st.ok()) co_return st;
        auto head = co_await conn.value()->read_head();
        if (!head.ok()) co_return head.status();
        if (head->status != 200)
            co_return Status(status_code::upstream_error, target + " answered " + std::to_string(head->status));
        co_return co_await conn.value()->read_all(size_t(64) << 20);
    };
    auto events = co_await get(std::string(pd_path_kv_events) + "?" + kv.events_query(url.text));
    if (!events.ok()) co_return;
    auto resync = kv.apply_events(url.text, events.value());
    if (!resync.ok()) {
        log_debug("route: {}: {}", url.text, resync.status().message());
        co_return;
    }
    if (!resync.value()) co_return;
    auto snap = co_await get(std::string(pd_path_kv_snapshot));
    if (!snap.ok()) co_return;
    if (Status st = kv.apply_snapshot(url.text, snap.value()); !st.ok())
        log_debug("route: {}{}: {}", url.text, pd_path_kv_snapshot, st.message());
}

net::awaitable<void> router_impl::health_check_one(node_pool & pool, call_registry & calls, size_t i,
                                                   capacity_gate & gate, size_t & left, notify_ptr done) {
    co_await health_check(pool, calls, pool.address(i), i, gate);
    if (--left == 0) done->notify();
}

// Every member is checked at once: a stalled node costs the round one --health-timeout, and delays no
// other node's check. The checks run on the round's strand (left needs no lock); the round ends when all did.
net::awaitable<void> router_impl::health_round() {
    auto ex = co_await net::this_coro::executor;
    auto done = async_notify::make(ex);
    size_t left = 1;  // the round's own hold, dropped below once every check is spawned
    for (auto [pool, calls, gate] :
         {std::tuple{&prefill, &prefill_calls, &prefill_gate}, std::tuple{&decode, &decode_calls, &decode_gate}})
        for (size_t i = 0; i < pool->size(); ++i) {
            if (!pool->member(i)) continue;
            ++left;
            net::co_spawn(ex, health_check_one(*pool, *calls, i, *gate, left, done), net::detached);
        }
    if (--left == 0) co_return;
    while (left > 0) co_await done->wait_until(steady::time_point::max());
}

}  // namespace baton
