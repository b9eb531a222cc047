// server_slots.cpp — /health, /v1/models, /metrics, /v1/slots and the slot state endpoints.
//
// Slot state can hold another user's prompt, so the state endpoints follow the API key like everything
// else and the role's permissions: exporting (GET) is a prefill-side operation, importing (PUT) a
// decode-side one; erasing is allowed on every role.
#include <nlohmann/json.hpp>

#include <charconv>

#include "baton/model.h"
#include "server_impl.h"

namespace baton {

using json = nlohmann::json;

namespace {

http_response json_response(const json & j, int status = 200) {
    return http_response::json(j.dump(-1, ' ', false, json::error_handler_t::replace), status);
}

// slot_id_param parses the {id} path parameter; an id that is not a number names no slot (404).
Result<int32_t> slot_id_param(const http_request & req) {
    auto it = req.params.find("id");
    const std::string s = it == req.params.end() ? "" : it->second;
    int32_t id = -1;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), id);
    if (s.empty() || ec != std::errc() || p != s.data() + s.size() || id < 0)
        return Status(status_code::not_found, "slot \"" + s + "\" does not exist");
    return id;
}

}  // namespace

net::awaitable<void> server_impl::on_health(http_exchange & ex) {
    if (ready.load(std::memory_order_acquire) && !stopping.load()) co_return (void) co_await ex.respond(json_response({{"status", "ok"}}));
    http_response r = json_response({{"status", stopping.load() ? "draining" : "loading"}}, 503);
    r.headers.emplace_back("Retry-After", "1");
    co_await ex.respond(std::move(r));
}

net::awaitable<void> server_impl::on_models(http_exchange & ex) {
    const model_identity & id = model->identity();
    const kv_layout c = eng->layout();
    json meta = {{"arch", id.arch},
                 {"fingerprint", blob_fingerprint_hex(id.fingerprint)},
                 {"llama_version", id.llama_version},
                 {"n_vocab", id.n_vocab},
                 {"n_ctx", c.n_ctx},
                 {"n_slots", c.n_seq_max},
                 {"kv_unified", c.kv_unified},
                 {"role", node_role_name(cfg.role)}};
    json m = {{"id", model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "baton"}, {"meta", meta}};
    co_await ex.respond(json_response({{"object", "list"}, {"data", json::array({m})}}));
}

net::awaitable<void> server_impl::on_metrics(http_exchange & ex) {
    std::optional<engine_metrics> em;
    if (ready.load(std::memory_order_acquire)) em = eng->metrics();
    http_response r;
    r.content_type = "text/plain; version=0.0.4";
    http->render_metrics(r.body);
    r.body += metrics.render(em, n_admitted.load());
    co_await ex.respond(std::move(r));
}

net::awaitable<void> server_impl::on_slots(http_exchange & ex) {
    json arr = json::array();
    for (const slot_info & s : eng->slots())
        arr.push_back({{"id", s.id},
                       {"busy", s.busy},
                       {"n_tokens", s.n_tokens},
                       {"parked", s.parked},
                       {"n_checkpoints", s.n_checkpoints},
                       {"pos_min", s.pos_min},
                       {"pos_max", s.pos_max}});
    co_await ex.respond(json_response(arr));
}

net::awaitable<void> server_impl::on_state_get(http_exchange & ex) {
    Status st = check_role(cfg.role != node_role::decode, "GET /v1/slots/{id}/state");
    if (!st.ok()) co_return (void) co_await ex.respond_error(st);
    auto id = slot_id_param(ex.request());
    if (!id.ok()) co_return (void) co_await ex.respond_error(id.status());
    auto done = co_await run_to_done(ex, task_slot_save{id.value()});
    if (!done.ok()) co_return (void) co_await ex.respond_error(done.status());
    co_await send_blob(ex, std::move(done->blob));
}

net::awaitable<void> server_impl::on_state_put(http_exchange & ex) {
    Status st = check_role(cfg.role != node_role::prefill, "PUT /v1/slots/{id}/state");
    if (!st.ok()) co_return (void) co_await ex.respond_error(st);
    auto id = slot_id_param(ex.request());
    if (!id.ok()) co_return (void) co_await ex.respond_error(id.status());
    auto blob = co_await blob_parse_edge(std::move(ex.request().body));
    if (!blob.ok()) co_return (void) co_await ex.respond_error(blob.status());
    auto done = co_await run_to_done(ex, task_slot_restore{id.value(), blob.value()});
    if (!done.ok()) co_return (void) co_await ex.respond_error(done.status());
    co_await ex.respond(json_response({{"slot", id.value()}, {"n_tokens", done->usage.cached_tokens}, {"restored", true}}));
}

net::awaitable<void> server_impl::on_state_delete(http_exchange & ex) {
    auto id = slot_id_param(ex.request());
    if (!id.ok()) co_return (void) co_await ex.respond_error(id.status());
    auto done = co_await run_to_done(ex, task_slot_erase{id.value()});
    if (!done.ok()) co_return (void) co_await ex.respond_error(done.status());
    co_await ex.respond(json_response({{"slot", id.value()}, {"erased", true}}));
}

}  // namespace baton
