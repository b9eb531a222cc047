// server_slots.cpp — /health, /v1/models, /metrics, /props, /v1/slots and /slots, and the slot state
// endpoints (Baton's /v1/slots/{id}/state and llama-server's /slots/{id}?action=save|restore|erase, which
// keep the same blobs in files under --slot-save-path).
//
// Slot state can hold another user's prompt, so the state endpoints follow the API key like everything
// else and the role's permissions: exporting (GET) is a prefill-side operation, importing (PUT) a
// decode-side one; erasing is allowed on every role.
#include <nlohmann/json.hpp>

#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <fstream>

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

// slot_file_name checks a --slot-save-path file name: letters, digits, '.', '_', '-', not starting with
// '.', at most 200 bytes (no directories, so a request cannot name a file outside the directory).
Status slot_file_name(const std::string & name) {
    if (name.empty() || name.size() > 200)
        return Status(status_code::invalid_argument, "filename: must be 1..200 bytes");
    if (name[0] == '.') return Status(status_code::invalid_argument, "filename: must not start with '.'");
    for (unsigned char c : name)
        if (!(std::isalnum(c) || c == '.' || c == '_' || c == '-'))
            return Status(status_code::invalid_argument,
                          "filename: only letters, digits, '.', '_' and '-' are allowed");
    return {};
}

Status write_file_atomic(const std::string & path, const std::vector<uint8_t> & bytes) {
    const std::string tmp = path + ".tmp";
    {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        if (!f) return Status(status_code::io_error, "cannot create " + tmp);
        f.write(reinterpret_cast<const char *>(bytes.data()), std::streamsize(bytes.size()));
        f.flush();
        if (!f) return Status(status_code::io_error, "writing " + tmp + " failed");
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::remove(tmp.c_str());
        return Status(status_code::io_error, "cannot rename " + tmp + " to " + path);
    }
    return {};
}

Result<std::vector<uint8_t>> read_file_capped(const std::string & path, uint64_t cap) {
    std::ifstream f(path, std::ios::binary | std::ios::ate);
    if (!f) return Status(status_code::not_found, "slot file " + path + " does not exist");
    const std::streamoff n = f.tellg();
    if (n < 0) return Status(status_code::io_error, "cannot read " + path);
    if (uint64_t(n) > cap) return Status(status_code::too_large, path + ": over the blob limit (--max-blob-mb)");
    std::vector<uint8_t> out(static_cast<size_t>(n));
    f.seekg(0);
    f.read(reinterpret_cast<char *>(out.data()), n);
    if (!f) return Status(status_code::io_error, "reading " + path + " failed");
    return out;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

net::awaitable<void> server_impl::on_health(http_exchange & ex) {
    // state_auth: whether states this node accepts must be authenticated (--state-secret-file), so operators and
    // routers can see a cluster whose nodes disagree.
    if (ready.load(std::memory_order_acquire) && !stopping.load())
        co_return (void) co_await ex.respond(
            json_response({{"status", "ok"}, {"state_auth", cfg.engine.limits.key ? "hmac-sha256" : "none"}}));
    http_response r = json_response({{"status", stopping.load() ? "draining" : "loading"}}, 503);
    r.headers.emplace_back("Retry-After", "1");
    co_await ex.respond(std::move(r));
}

net::awaitable<void> server_impl::on_models(http_exchange & ex) {
    const model_identity & id = model->identity();
    const kv_layout c = eng->layout();
    json meta = {{"arch", id.arch},
                 {"fingerprint", identity_fingerprint_hex(id.fingerprint)},
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

namespace baton {

net::awaitable<void> server_impl::on_props(http_exchange & ex) {
    if (ex.request().method == "POST")
        co_return (void) co_await ex.respond_error(Status(
            status_code::not_implemented, "this server does not support changing global properties (POST /props)"));
    openai_request defaults;
    defaults.max_tokens = cfg.defaults.max_tokens;
    defaults.sampling = cfg.defaults.sampling;
    const kv_layout c = eng->layout();
    json props = {{"default_generation_settings",
                   {{"params", openai_generation_settings(defaults, c.n_ctx)}, {"n_ctx", c.n_ctx}}},
                  {"total_slots", c.n_seq_max},
                  {"model_alias", model_name},
                  {"model_path", cfg.model_path},
                  {"modalities", {{"vision", false}, {"video", false}, {"audio", false}}},
                  {"endpoint_slots", cfg.slots_endpoint},
                  {"endpoint_props", false},
                  {"endpoint_metrics", true},
                  {"chat_template", chat->source()},
                  {"bos_token", model->info().bos_text},
                  {"eos_token", model->info().eos_text},
                  {"build_info", cfg.build_info},
                  {"is_sleeping", false},
                  {"baton",
                   {{"role", node_role_name(cfg.role)},
                    {"jinja", chat->jinja()},
                    {"chat_template_origin", chat->origin()},
                    {"chat_usable", chat->usable().ok()},
                    {"reasoning_format", reasoning_format_name(cfg.chat.reasoning)},
                    {"slot_save_path", !cfg.slot_save_path.empty()}}}};
    co_await ex.respond(json_response(props));
}

net::awaitable<void> server_impl::on_llama_slots(http_exchange & ex) {
    if (!cfg.slots_endpoint)
        co_return (void) co_await ex.respond_error(Status(
            status_code::not_implemented, "this server does not support the slots endpoint: start it with --slots"));
    const kv_layout c = eng->layout();
    json arr = json::array();
    for (const slot_info & s : eng->slots())
        arr.push_back({{"id", s.id},
                       {"n_ctx", c.n_ctx},
                       {"speculative", false},
                       {"is_processing", s.busy},
                       {"n_tokens", s.n_tokens},
                       {"parked", s.parked},
                       {"n_checkpoints", s.n_checkpoints}});
    co_await ex.respond(json_response(arr));
}

net::awaitable<void> server_impl::on_slot_action(http_exchange & ex) {
    auto id = slot_id_param(ex.request());
    if (!id.ok()) co_return (void) co_await ex.respond_error(id.status());
    const std::string action(ex.request().query_value("action"));
    if (action != "save" && action != "restore" && action != "erase")
        co_return (void) co_await ex.respond_error(
            Status(status_code::invalid_argument, "action: must be save, restore or erase (?action=...)"));
    const auto t0 = std::chrono::steady_clock::now();
    if (action == "erase") {
        auto done = co_await run_to_done(ex, task_slot_erase{id.value()});
        if (!done.ok()) co_return (void) co_await ex.respond_error(done.status());
        co_return (void) co_await ex.respond(
            json_response({{"id_slot", id.value()}, {"n_erased", done->usage.cached_tokens}}));
    }
    if (cfg.slot_save_path.empty())
        co_return (void) co_await ex.respond_error(
            Status(status_code::not_implemented,
                   "this server does not support slots actions: start it with --slot-save-path"));
    const json body = json::parse(ex.request().body_text(), nullptr, false);
    const auto fn = body.is_object() ? body.find("filename") : body.end();
    if (!body.is_object() || fn == body.end() || !fn->is_string())
        co_return (void) co_await ex.respond_error(Status(status_code::invalid_argument, "filename: must be a string"));
    const std::string name = fn->get<std::string>();
    if (Status st = slot_file_name(name); !st.ok()) co_return (void) co_await ex.respond_error(st);
    const std::string path = cfg.slot_save_path + "/" + name;
    if (action == "save") {
        Status st = check_role(cfg.role != node_role::decode, "POST /slots/{id}?action=save");
        if (!st.ok()) co_return (void) co_await ex.respond_error(st);
        auto done = co_await run_to_done(ex, task_slot_save{id.value()});
        if (!done.ok()) co_return (void) co_await ex.respond_error(done.status());
        const size_t n_bytes = done->blob.size();
        st = co_await http->offload([&] { return write_file_atomic(path, done->blob); });
        if (!st.ok()) co_return (void) co_await ex.respond_error(st);
        co_return (void) co_await ex.respond(json_response({{"id_slot", id.value()},
                                                            {"filename", name},
                                                            {"n_saved", done->usage.cached_tokens},
                                                            {"n_written", n_bytes},
                                                            {"timings", {{"save_ms", ms_since(t0)}}}}));
    }
    Status st = check_role(cfg.role != node_role::prefill, "POST /slots/{id}?action=restore");
    if (!st.ok()) co_return (void) co_await ex.respond_error(st);
    const uint64_t cap = cfg.max_blob_bytes;
    auto bytes = co_await http->offload([&] { return read_file_capped(path, cap); });
    if (!bytes.ok()) co_return (void) co_await ex.respond_error(bytes.status());
    const size_t n_read = bytes->size();
    // The file is as untrusted as a PUT body: the same total verification and the one restore routine.
    auto blob = co_await blob_parse_edge(std::move(bytes.value()));
    if (!blob.ok()) co_return (void) co_await ex.respond_error(blob.status());
    auto done = co_await run_to_done(ex, task_slot_restore{id.value(), blob.value()});
    if (!done.ok()) co_return (void) co_await ex.respond_error(done.status());
    co_await ex.respond(json_response({{"id_slot", id.value()},
                                       {"filename", name},
                                       {"n_restored", done->usage.cached_tokens},
                                       {"n_read", n_read},
                                       {"timings", {{"restore_ms", ms_since(t0)}}}}));
}

}  // namespace baton
