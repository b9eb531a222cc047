// slot_state.cpp — a slot's state in and out: Baton's /v1/slots/{id}/state (GET a blob, PUT a blob, DELETE)
// and llama-server's /slots/{id}?action=save|restore|erase, which keep the same blobs in files under
// --slot-save-path. A blob from a body or a file goes through the same total verification (blob_parse_edge)
// and the engine's one restore routine.
//
// Slot state can hold another user's prompt, so these endpoints follow the API key like everything else,
// are closed to browser pages (same_origin_only) and follow the role: exporting (GET, save) is a
// prefill-side operation, importing (PUT, restore) a decode-side one; erasing is allowed on every role.
#include <nlohmann/json.hpp>

#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <fstream>

#include "node_impl.h"

namespace baton {

using json = nlohmann::json;

namespace {

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

net::awaitable<void> node_impl::on_state_get(http_exchange & ex) {
    Status st = check_role(cfg.role != node_role::decode, "GET /v1/slots/{id}/state");
    if (!st.ok()) co_return (void) co_await ex.respond_error(st);
    auto id = slot_id_param(ex.request());
    if (!id.ok()) co_return (void) co_await ex.respond_error(id.status());
    auto done = co_await run_to_done(ex, task_slot_save{id.value()});
    if (!done.ok()) co_return (void) co_await ex.respond_error(done.status());
    co_await send_blob(ex, std::move(done->blob));
}

net::awaitable<void> node_impl::on_state_put(http_exchange & ex) {
    Status st = check_role(cfg.role != node_role::prefill, "PUT /v1/slots/{id}/state");
    if (!st.ok()) co_return (void) co_await ex.respond_error(st);
    auto id = slot_id_param(ex.request());
    if (!id.ok()) co_return (void) co_await ex.respond_error(id.status());
    auto blob = co_await blob_parse_edge(std::move(ex.request().body));
    if (!blob.ok()) co_return (void) co_await ex.respond_error(blob.status());
    auto done = co_await run_to_done(ex, task_slot_restore{id.value(), blob.value()});
    if (!done.ok()) co_return (void) co_await ex.respond_error(done.status());
    co_await ex.respond(
        json_response({{"slot", id.value()}, {"n_tokens", done->usage.cached_tokens}, {"restored", true}}));
}

net::awaitable<void> node_impl::on_state_delete(http_exchange & ex) {
    auto id = slot_id_param(ex.request());
    if (!id.ok()) co_return (void) co_await ex.respond_error(id.status());
    auto done = co_await run_to_done(ex, task_slot_erase{id.value()});
    if (!done.ok()) co_return (void) co_await ex.respond_error(done.status());
    co_await ex.respond(json_response({{"slot", id.value()}, {"erased", true}}));
}

net::awaitable<void> node_impl::on_slot_action(http_exchange & ex) {
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
