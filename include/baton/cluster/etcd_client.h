// etcd_client.h — the few etcd v3 calls a cluster needs, through etcd's JSON gateway over HTTP.
//
// etcd serves its gRPC API as JSON too (`POST /v3/<service>/<method>`, keys and values base64, 64-bit
// numbers as strings; streaming calls answer newline-delimited JSON objects `{"result": ...}`). This client
// speaks that with the project's HTTP client (http_upstream): one connection per call, every call under a
// deadline (etcd_config::timeout_s, or the caller's for a watch round). Endpoints are tried in order,
// starting with the last one that answered. With a user, it authenticates (`/v3/auth/authenticate`) and
// sends the token; an expired token is renewed once per call.
//
// Thread-safety: the coroutines run on the caller's executor; one etcd_client is used by one strand at a
// time (the registrar's loop, or the router's watch loop).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "baton/base/status.h"
#include "baton/http/http_client.h"
#include "baton/http/net.h"

namespace baton {

struct etcd_config {
    std::vector<http_url> endpoints;  // non-empty; http:// or https://
    std::string user;                 // empty: no user/password authentication
    std::string password;
    tls_context_ptr tls;   // for https endpoints: the CA and, optionally, a client certificate
    double timeout_s = 3;  // each unary call (bytes in and out)
};

// etcd_config_parse: endpoints from "URL[,URL...]" (all http or all https), credentials, and the TLS files
// (--etcd-cacert, --etcd-cert, --etcd-key; only with https endpoints); invalid_argument naming the flag.
Result<etcd_config> etcd_config_parse(std::string_view urls, std::string user, std::string password,
                                      const tls_client_files & tls = {});

struct etcd_kv {
    std::string key;
    std::string value;
    int64_t mod_revision = 0;
    int64_t lease = 0;
};

struct etcd_range_result {
    int64_t revision = 0;  // the store's revision the listing is consistent with
    std::vector<etcd_kv> kvs;
};

struct etcd_event {
    bool deleted = false;  // DELETE (the key was deleted or its lease expired); else PUT
    etcd_kv kv;            // for DELETE only the key (and mod_revision) are set
};

struct etcd_watch_end {
    int64_t next_revision = 0;  // resume a later watch here: nothing before it is missed
    bool compacted = false;     // the start revision was compacted: list again, then watch from there
};

class etcd_client {
  public:
    explicit etcd_client(etcd_config cfg);

    // lease_grant returns the new lease's id.
    net::awaitable<Result<int64_t>> lease_grant(int64_t ttl_s);
    // lease_keepalive refreshes a lease; returns its TTL in seconds, 0 when etcd no longer knows it.
    net::awaitable<Result<int64_t>> lease_keepalive(int64_t id);
    // lease_revoke drops a lease and every key attached to it (ok when etcd no longer knows it).
    net::awaitable<Status> lease_revoke(int64_t id);
    // put writes key=value attached to lease (0: none). not_found when the lease is gone.
    net::awaitable<Status> put(std::string_view key, std::string_view value, int64_t lease);
    net::awaitable<Status> remove(std::string_view key);
    // range_prefix lists every key starting with prefix.
    net::awaitable<Result<etcd_range_result>> range_prefix(std::string_view prefix);
    // watch_prefix reports the changes under prefix from start_revision on, in order, until `until` (a
    // normal end), compaction, or an error. on_events gets each batch and the revision it brings the
    // store to.
    net::awaitable<Result<etcd_watch_end>>
    watch_prefix(std::string_view prefix, int64_t start_revision, std::chrono::steady_clock::time_point until,
                 const std::function<void(const std::vector<etcd_event> &, int64_t revision)> & on_events);

    // cancel_watch ends a watch_prefix in progress at once (it returns cancelled). REQUIRES: on the
    // executor the watch runs on.
    void cancel_watch();

    // The endpoint that answered last ("http://host:port").
    const std::string & endpoint() const { return cfg_.endpoints[current_].text; }

  private:
    // call POSTs a JSON body to path and returns the parsed JSON answer (etcd errors as Status).
    net::awaitable<Result<std::string>> call(std::string_view path, const std::string & body);
    net::awaitable<Result<std::string>> call_once(const http_url & url, std::string_view path,
                                                  const std::string & body);
    net::awaitable<Status> authenticate(const http_url & url);

    etcd_config cfg_;
    size_t current_ = 0;
    std::string token_;
    http_upstream * watching_ = nullptr;  // the watch in progress, if any
    bool watch_cancelled_ = false;
};

// etcd_prefix_end is the range_end that selects every key starting with prefix.
std::string etcd_prefix_end(std::string_view prefix);

}  // namespace baton
