// node_forward.cpp — the calls a router passes to one decode node (tokenize, detokenize, apply-template,
// props, embeddings, rerank, and /v1/models without etcd): to the least-loaded decode node of the model the call
// names, relayed whole; /props gets the router's pools added.
#include <nlohmann/json.hpp>

#include <chrono>
#include <string>
#include <string_view>

#include "router_impl.h"

namespace baton {

namespace {
constexpr size_t node_answer_bytes_max = size_t(512) << 20;  // an embeddings answer the router relays
}  // namespace

net::awaitable<void> router_impl::forward_to_node(http_exchange & ex, const char * method, const std::string & path,
                                                  std::string_view body) {
    // The model the call is about: the body's "model" or ?model= (in a cluster of several models); else any.
    std::string model;
    if (const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
        j.is_object() && j.contains("model") && j["model"].is_string())
        model = j["model"].get<std::string>();
    if (const std::string_view q = ex.request().query_value("model"); !q.empty()) model = std::string(q);
    auto filter = model_filter(model);
    if (!filter.ok()) co_return (void) co_await ex.respond_error(filter.status());
    auto node = decode.pick_least_loaded({}, filter.value());
    if (!node) co_return (void) co_await ex.respond_error(Status(status_code::unavailable, "no healthy decode node"));
    const http_url url = decode.address(node->index);
    // Embeddings grow with their inputs (2048 x 4096 floats are ~170 MB of JSON), and both they and rerank
    // are work that grows with the inputs: the request's own deadline and a larger answer; other calls are small.
    const bool embeddings = path.find("embedding") != std::string::npos || path.find("rerank") != std::string::npos;
    const auto deadline = steady::now() + (embeddings ? std::chrono::milliseconds(int64_t(cfg.timeout_s * 1000))
                                                      : std::chrono::milliseconds(10000));
    const size_t answer_max = embeddings ? node_answer_bytes_max : size_t(16) << 20;
    auto conn = co_await http_upstream::connect(url, deadline);
    call_guard guard;  // (after conn: destroyed before the upstream its cancellation closes)
    if (conn.ok()) guard = decode_calls.enter(node->index, ex.executor(), [u = conn.value().get()] { u->close(); });
    Status st = conn.status();
    if (st.ok())
        st = co_await conn.value()->send(method, path, node_headers(ex.request().id),
                                         body.empty() ? "" : "application/json", body);
    Result<http_response_head> head(st);
    if (st.ok()) head = co_await conn.value()->read_head();
    Result<std::string> answer(head.status());
    if (head.ok()) answer = co_await conn.value()->read_all(answer_max);
    if (!answer.ok())
        co_return (void) co_await ex.respond_error(
            Status(status_code::upstream_error, url.text + path + ": " + guard.failure(answer.status()).message()));
    if (path == "/props" && head->status == 200) {
        // The router's view: a decode node's properties (model, template, defaults), and the router's pools.
        nlohmann::json j = nlohmann::json::parse(answer.value(), nullptr, false);
        if (j.is_object()) {
            j["router"] = {{"prefill_nodes", prefill.n_members()},
                           {"decode_nodes", decode.n_members()},
                           {"healthy_decode_nodes", decode.n_healthy()},
                           {"answered_by", url.text}};
            answer = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        }
    }
    co_await ex.respond(http_response::json(std::move(answer.value()), head->status));
}

}  // namespace baton
