// server_slots.cpp — /health, /v1/models, /metrics, /v1/slots and the slot state endpoints.
//
// Slot state can hold another user's prompt, so the state endpoints follow the API key like everything
// else and the role's permissions: exporting (GET) is a prefill-side operation, importing (PUT) a
// decode-side one; erasing is allowed on every role.
#include <nlohmann/json.hpp>

#include <charconv>

#include "baton/model.h"
#include "http_errors.h"
#include "server_impl.h"

namespace baton {

using json = nlohmann::json;

namespace {

void send_json(httplib::Response & res, const json & j) {
    res.set_content(j.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

// slot_id_param parses the {id} path parameter; an id that is not a number names no slot (404).
Result<int32_t> slot_id_param(const httplib::Request & req) {
    auto it = req.path_params.find("id");
    const std::string s = it == req.path_params.end() ? "" : it->second;
    int32_t id = -1;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), id);
    if (s.empty() || ec != std::errc() || p != s.data() + s.size() || id < 0)
        return Status(status_code::not_found, "slot \"" + s + "\" does not exist");
    return id;
}

}  // namespace

void server_impl::on_health(const httplib::Request &, httplib::Response & res) {
    if (ready.load(std::memory_order_acquire) && !stopping.load()) return send_json(res, {{"status", "ok"}});
    res.status = 503;
    res.set_header("Retry-After", "1");
    send_json(res, {{"status", stopping.load() ? "stopping" : "loading"}});
}

void server_impl::on_models(const httplib::Request &, httplib::Response & res) {
    const model_identity & id = model->identity();
    const blob_context c = eng->context_info();
    json meta = {{"arch", id.arch},
                 {"fingerprint", model_fingerprint_hex(id.fingerprint)},
                 {"llama_version", id.llama_version},
                 {"n_vocab", id.n_vocab},
                 {"n_ctx", c.n_ctx},
                 {"n_slots", c.n_seq_max},
                 {"kv_unified", c.kv_unified},
                 {"role", node_role_name(cfg.role)}};
    json m = {{"id", model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "baton"}, {"meta", meta}};
    send_json(res, {{"object", "list"}, {"data", json::array({m})}});
}

void server_impl::on_metrics(const httplib::Request &, httplib::Response & res) {
    std::optional<engine_metrics> em;
    if (ready.load(std::memory_order_acquire)) em = eng->metrics();
    res.set_content(metrics.render(em, n_admitted.load()), "text/plain; version=0.0.4");
}

void server_impl::on_slots(const httplib::Request &, httplib::Response & res) {
    json arr = json::array();
    for (const slot_info & s : eng->slots())
        arr.push_back({{"id", s.id},
                       {"busy", s.busy},
                       {"n_tokens", s.n_tokens},
                       {"parked", s.parked},
                       {"n_checkpoints", s.n_checkpoints},
                       {"pos_min", s.pos_min},
                       {"pos_max", s.pos_max}});
    send_json(res, arr);
}

void server_impl::on_state_get(const httplib::Request & req, httplib::Response & res) {
    Status st = check_role(cfg.role != node_role::decode, "GET /v1/slots/{id}/state");
    if (!st.ok()) return http_send_error(res, st);
    auto id = slot_id_param(req);
    if (!id.ok()) return http_send_error(res, id.status());
    auto done = run_to_done(task_slot_save{id.value()}, req);
    if (!done.ok()) return http_send_error(res, done.status());
    send_blob(res, std::move(done->blob));
}

void server_impl::on_state_put(const httplib::Request & req, httplib::Response & res, std::vector<uint8_t> body) {
    Status st = check_role(cfg.role != node_role::prefill, "PUT /v1/slots/{id}/state");
    if (!st.ok()) return http_send_error(res, st);
    auto id = slot_id_param(req);
    if (!id.ok()) return http_send_error(res, id.status());
    auto blob = blob_parse_edge(std::move(body));
    if (!blob.ok()) return http_send_error(res, blob.status());
    auto done = run_to_done(task_slot_restore{id.value(), blob.value()}, req);
    if (!done.ok()) return http_send_error(res, done.status());
    send_json(res, {{"slot", id.value()}, {"n_tokens", done->usage.cached_tokens}, {"restored", true}});
}

void server_impl::on_state_delete(const httplib::Request & req, httplib::Response & res) {
    auto id = slot_id_param(req);
    if (!id.ok()) return http_send_error(res, id.status());
    auto done = run_to_done(task_slot_erase{id.value()}, req);
    if (!done.ok()) return http_send_error(res, done.status());
    send_json(res, {{"slot", id.value()}, {"erased", true}});
}

}  // namespace baton
