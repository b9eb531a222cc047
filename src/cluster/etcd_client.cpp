// etcd_client.cpp — etcd's v3 JSON gateway: lease, kv and watch calls (see etcd_client.h).
#include "baton/cluster/etcd_client.h"

#include <nlohmann/json.hpp>

#include <charconv>

#include "baton/base/base64.h"

namespace baton {

using json = nlohmann::json;
using steady = std::chrono::steady_clock;

namespace {

// etcd renders 64-bit integers as strings; accept numbers too.
int64_t json_int(const json & j, const char * key) {
    auto it = j.find(key);
    if (it == j.end()) return 0;
    if (it->is_number_integer()) return it->get<int64_t>();
    if (it->is_string()) {
        const std::string s = it->get<std::string>();
        int64_t v = 0;
        auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec == std::errc() && p == s.data() + s.size()) return v;
    }
    return 0;
}

std::string json_str(const json & j, const char * key) {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// An etcd error body: {"code": <gRPC code>, "message": "..."} (unary) or {"error": {...}} (streams).
Status etcd_error(const json & e, const std::string & where) {
    const int64_t code = json_int(e, "code") ? json_int(e, "code") : json_int(e, "grpc_code");
    const std::string msg = where + ": etcd: " + json_str(e, "message");
    switch (code) {
        case 5: return Status(status_code::not_found, msg);         // NOT_FOUND: e.g. the lease is gone
        case 16: return Status(status_code::unauthenticated, msg);  // UNAUTHENTICATED
        case 7: return Status(status_code::unauthenticated, msg);   // PERMISSION_DENIED
        case 3: return Status(status_code::invalid_argument, msg);  // INVALID_ARGUMENT
        case 14: return Status(status_code::unavailable, msg);      // UNAVAILABLE
        default: return Status(status_code::upstream_error, msg);
    }
}

bool token_expired(const Status & st) {
    return st.code() == status_code::unauthenticated && st.message().find("token") != std::string::npos;
}

etcd_kv kv_of(const json & j) {
    etcd_kv kv;
    kv.key = base64_decode(json_str(j, "key")).value_or(std::string());
    kv.value = base64_decode(json_str(j, "value")).value_or(std::string());
    kv.mod_revision = json_int(j, "mod_revision");
    kv.lease = json_int(j, "lease");
    return kv;
}

}  // namespace

Result<etcd_config> etcd_config_parse(std::string_view urls, std::string user, std::string password,
                                      const tls_client_files & tls) {
    etcd_config c;
    c.user = std::move(user);
    c.password = std::move(password);
    size_t start = 0;
    while (start <= urls.size()) {
        const size_t comma = urls.find(',', start);
        const std::string_view one =
            urls.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
        if (!one.empty()) {
            auto u = http_url_parse(one, true);
            if (!u.ok()) return Status(status_code::invalid_argument, "--etcd: " + u.status().message());
            c.endpoints.push_back(u.value());
        }
        if (comma == std::string_view::npos) break;
        start = comma + 1;
    }
    if (c.endpoints.empty()) return Status(status_code::invalid_argument, "--etcd: no endpoint URL given");
    if (c.user.empty() != c.password.empty())
        return Status(status_code::invalid_argument, "--etcd-user and --etcd-password go together");
    const bool https = c.endpoints.front().tls;
    for (const auto & e : c.endpoints)
        if (e.tls != https)
            return Status(status_code::invalid_argument, "--etcd: mixes http:// and https:// endpoints");
    const bool files = !tls.ca_file.empty() || !tls.cert_file.empty() || !tls.key_file.empty();
    if (files && !https)
        return Status(status_code::invalid_argument,
                      "--etcd-cacert/--etcd-cert/--etcd-key: need https:// etcd endpoints");
    if (https) {
        auto ctx = tls_client_context(tls);
        if (!ctx.ok()) return Status(status_code::invalid_argument, "--etcd TLS: " + ctx.status().message());
        c.tls = ctx.value();
    }
    return c;
}

std::string etcd_prefix_end(std::string_view prefix) {
    std::string end(prefix);
    while (!end.empty()) {
        if (uint8_t(end.back()) < 0xff) {
            end.back() = char(uint8_t(end.back()) + 1);
            return end;
        }
        end.pop_back();
    }
    return std::string(1, '\0');  // every key
}

etcd_client::etcd_client(etcd_config cfg) : cfg_(std::move(cfg)) {}

void etcd_client::cancel_watch() {
    watch_cancelled_ = true;
    if (watching_) watching_->close();
}

net::awaitable<Result<std::string>> etcd_client::call_once(const http_url & url, std::string_view path,
                                                           const std::string & body) {
    const auto deadline = steady::now() + std::chrono::milliseconds(int64_t(cfg_.timeout_s * 1000));
    auto conn = co_await http_upstream::connect(url, deadline, cfg_.tls);
    if (!conn.ok()) co_return conn.status();
    http_headers headers;
    if (!token_.empty()) headers.emplace_back("Authorization", token_);
    Status st = co_await conn.value()->send("POST", path, headers, "application/json", body);
    if (!st.ok()) co_return st;
    auto head = co_await conn.value()->read_head();
    if (!head.ok()) co_return head.status();
    auto all = co_await conn.value()->read_all(size_t(16) << 20);
    if (!all.ok()) co_return all.status();
    if (head->status == 200) co_return std::move(all.value());
    const json e = json::parse(all.value(), nullptr, false);
    if (e.is_object()) co_return etcd_error(e, url.text + std::string(path));
    co_return Status(status_code::upstream_error,
                     url.text + std::string(path) + ": etcd answered HTTP " + std::to_string(head->status));
}

net::awaitable<Status> etcd_client::authenticate(const http_url & url) {
    token_.clear();
    const std::string body = json{{"name", cfg_.user}, {"password", cfg_.password}}.dump();
    auto r = co_await call_once(url, "/v3/auth/authenticate", body);
    if (!r.ok() && r.status().message().find(": etcd: ") != std::string::npos)  // etcd refused the credentials
        co_return Status(status_code::unauthenticated, r.status().message() + " (--etcd-user/--etcd-password)");
    if (!r.ok()) co_return r.status();
    const json j = json::parse(r.value(), nullptr, false);
    token_ = j.is_object() ? json_str(j, "token") : std::string();
    if (token_.empty()) co_return Status(status_code::unauthenticated, url.text + ": etcd gave no auth token");
    co_return Status();
}

net::awaitable<Result<std::string>> etcd_client::call(std::string_view path, const std::string & body) {
    Status last(status_code::unavailable, "etcd: no endpoint");
    for (size_t k = 0; k < cfg_.endpoints.size(); ++k) {
        const size_t e = (current_ + k) % cfg_.endpoints.size();
        const http_url & url = cfg_.endpoints[e];
        if (!cfg_.user.empty() && token_.empty()) {
            Status st = co_await authenticate(url);
            if (!st.ok()) {
                last = st;
                if (st.code() == status_code::unauthenticated) co_return st;  // wrong credentials: no use trying on
                continue;
            }
        }
        auto r = co_await call_once(url, path, body);
        if (!r.ok() && !cfg_.user.empty() && token_expired(r.status())) {
            if (Status st = co_await authenticate(url); st.ok()) r = co_await call_once(url, path, body);
        }
        if (r.ok()) {
            current_ = e;
            co_return r;
        }
        last = r.status();
        // An answer from etcd (a refusal) is final; only a transport failure moves on to the next endpoint.
        if (last.code() != status_code::upstream_error && last.code() != status_code::deadline_exceeded &&
            last.code() != status_code::unavailable && last.code() != status_code::io_error)
            co_return last;
    }
    co_return last;
}

net::awaitable<Result<int64_t>> etcd_client::lease_grant(int64_t ttl_s) {
    auto r = co_await call("/v3/lease/grant", json{{"TTL", std::to_string(ttl_s)}}.dump());
    if (!r.ok()) co_return r.status();
    const json j = json::parse(r.value(), nullptr, false);
    if (!j.is_object() || json_int(j, "ID") == 0)
        co_return Status(status_code::upstream_error, "etcd lease/grant: no lease id in " + r.value().substr(0, 200));
    co_return json_int(j, "ID");
}

net::awaitable<Result<int64_t>> etcd_client::lease_keepalive(int64_t id) {
    // A streaming call: one request, the first answer line, then the connection is dropped.
    auto r = co_await call("/v3/lease/keepalive", json{{"ID", std::to_string(id)}}.dump());
    if (!r.ok()) co_return r.status();
    const std::string first = r.value().substr(0, r.value().find('\n'));
    const json j = json::parse(first, nullptr, false);
    if (!j.is_object())
        co_return Status(status_code::upstream_error, "etcd lease/keepalive: not JSON: " + first.substr(0, 200));
    if (j.contains("error")) co_return etcd_error(j["error"], "etcd lease/keepalive");
    const json & res = j.contains("result") ? j["result"] : j;
    co_return json_int(res, "TTL");  // absent (0): the lease expired
}

net::awaitable<Status> etcd_client::lease_revoke(int64_t id) {
    auto r = co_await call("/v3/lease/revoke", json{{"ID", std::to_string(id)}}.dump());
    if (!r.ok() && r.status().code() == status_code::not_found) co_return Status();
    co_return r.status();
}

net::awaitable<Status> etcd_client::put(std::string_view key, std::string_view value, int64_t lease) {
    json j = {{"key", base64_encode(key)}, {"value", base64_encode(value)}};
    if (lease != 0) j["lease"] = std::to_string(lease);
    auto r = co_await call("/v3/kv/put", j.dump());
    co_return r.status();
}

net::awaitable<Status> etcd_client::remove(std::string_view key) {
    auto r = co_await call("/v3/kv/deleterange", json{{"key", base64_encode(key)}}.dump());
    co_return r.status();
}

net::awaitable<Result<etcd_range_result>> etcd_client::range_prefix(std::string_view prefix) {
    const json req = {{"key", base64_encode(prefix)}, {"range_end", base64_encode(etcd_prefix_end(prefix))}};
    auto r = co_await call("/v3/kv/range", req.dump());
    if (!r.ok()) co_return r.status();
    const json j = json::parse(r.value(), nullptr, false);
    if (!j.is_object() || !j.contains("header"))
        co_return Status(status_code::upstream_error, "etcd kv/range: unexpected answer " + r.value().substr(0, 200));
    etcd_range_result out;
    out.revision = json_int(j["header"], "revision");
    if (auto it = j.find("kvs"); it != j.end() && it->is_array())
        for (const auto & kv : *it) out.kvs.push_back(kv_of(kv));
    co_return out;
}

net::awaitable<Result<etcd_watch_end>>
etcd_client::watch_prefix(std::string_view prefix, int64_t start_revision, steady::time_point until,
                          const std::function<void(const std::vector<etcd_event> &, int64_t)> & on_events) {
    const json req = {{"create_request",
                       {{"key", base64_encode(prefix)},
                        {"range_end", base64_encode(etcd_prefix_end(prefix))},
                        {"start_revision", std::to_string(start_revision)}}}};
    const std::string body = req.dump();
    const http_url & url = cfg_.endpoints[current_];
    if (!cfg_.user.empty() && token_.empty()) {
        if (Status st = co_await authenticate(url); !st.ok()) co_return st;
    }
    // The connection's deadline is the round's end; every other failure is reported.
    auto conn = co_await http_upstream::connect(url, until, cfg_.tls);
    if (!conn.ok()) {
        current_ = (current_ + 1) % cfg_.endpoints.size();  // the next round tries the next endpoint
        co_return conn.status();
    }
    http_headers headers;
    if (!token_.empty()) headers.emplace_back("Authorization", token_);
    Status st = co_await conn.value()->send("POST", "/v3/watch", headers, "application/json", body);
    if (!st.ok()) co_return st;
    auto head = co_await conn.value()->read_head();
    if (!head.ok()) co_return head.status();
    if (head->status != 200) {
        auto all = co_await conn.value()->read_all(1 << 20);
        const json e = json::parse(all.ok() ? all.value() : std::string(), nullptr, false);
        if (e.is_object()) {
            Status err = etcd_error(e, "etcd watch");
            if (token_expired(err)) token_.clear();
            co_return err;
        }
        co_return Status(status_code::upstream_error, "etcd watch: HTTP " + std::to_string(head->status));
    }
    etcd_watch_end end;
    end.next_revision = start_revision;
    watching_ = conn.value().get();
    watch_cancelled_ = false;
    struct unwatch {
        http_upstream *& w;
        ~unwatch() { w = nullptr; }
    } unwatch_on_exit{watching_};
    std::string pending;
    std::vector<char> buf(64 * 1024);
    for (;;) {
        auto n = co_await conn.value()->read_some(buf.data(), buf.size());
        if (watch_cancelled_) co_return Status(status_code::cancelled, "etcd watch: cancelled");
        if (!n.ok()) {
            if (n.status().code() == status_code::deadline_exceeded) co_return end;  // the round is over
            co_return n.status();
        }
        if (n.value() == 0) co_return Status(status_code::upstream_error, "etcd watch: the stream ended");
        pending.append(buf.data(), n.value());
        if (pending.size() > (size_t(64) << 20))
            co_return Status(status_code::upstream_error, "etcd watch: a line over 64 MiB");
        size_t nl;
        while ((nl = pending.find('\n')) != std::string::npos) {
            const std::string line = pending.substr(0, nl);
            pending.erase(0, nl + 1);
            if (line.find_first_not_of(" \r\t") == std::string::npos) continue;
            const json j = json::parse(line, nullptr, false);
            if (!j.is_object())
                co_return Status(status_code::upstream_error, "etcd watch: not JSON: " + line.substr(0, 200));
            if (j.contains("error")) co_return etcd_error(j["error"], "etcd watch");
            const json & r = j.contains("result") ? j["result"] : j;
            if (json_int(r, "compact_revision") > 0) {
                end.compacted = true;
                co_return end;
            }
            if (r.value("canceled", false))
                co_return Status(status_code::upstream_error, "etcd watch: cancelled: " + json_str(r, "cancel_reason"));
            const int64_t rev = r.contains("header") ? json_int(r["header"], "revision") : 0;
            std::vector<etcd_event> events;
            if (auto it = r.find("events"); it != r.end() && it->is_array()) {
                for (const auto & e : *it) {
                    etcd_event ev;
                    ev.deleted = json_str(e, "type") == "DELETE";
                    if (e.contains("kv")) ev.kv = kv_of(e["kv"]);
                    end.next_revision = std::max(end.next_revision, ev.kv.mod_revision + 1);
                    events.push_back(std::move(ev));
                }
            }
            if (!events.empty()) on_events(events, rev);
        }
    }
}

}  // namespace baton
