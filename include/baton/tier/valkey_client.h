// valkey_client.h — one synchronous connection to a Valkey (or Redis) server, over hiredis.
//
// The few commands a cache needs, binary-safe in keys and values: PING, GET (one key, or several pipelined),
// SET with a PX TTL, SET NX PX, DEL. Every failure is a Status, never an exception or an abort:
//   unavailable        cannot connect, the connection broke (reset, EOF), or the server is loading/read-only
//   deadline_exceeded  connecting took longer than connect_timeout_ms, or one wait for the server's bytes
//                      (a read or a write) took longer than command_timeout_ms
//   permission_denied  AUTH refused (WRONGPASS) or the user may not run this command on this key (NOPERM)
//   resource_exhausted the server is out of memory (OOM, maxmemory reached under noeviction)
//   invalid_argument   a TLS file that cannot be loaded, a TTL of 0
//   upstream_error     any other error reply, or a reply of an unexpected type
// TLS is hiredis_ssl's (Debian's libhiredis-dev packages it): the server's certificate chain is verified
// against ca_file (hiredis does not compare the certificate's name with the host; server_name is sent as SNI).
// The connection is made lazily by the first command and dropped after any transport error (timeout, reset,
// EOF, protocol error); the next command connects again, so a restarted server is used again without the
// caller doing anything. An error reply (OOM, NOPERM) keeps the connection. AUTH runs on every (re)connect.
//
// command_timeout_ms bounds each wait for the socket (SO_RCVTIMEO/SO_SNDTIMEO), not a whole command: a reply
// that keeps arriving is read to its end. A stopped server (SIGSTOP) or a dropped link gives
// deadline_exceeded after one timeout.
//
// Thread-safety: none. One object is one connection with one owner; callers that share one across threads
// must lock around it (tier_store keeps a pool of them behind a mutex).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "baton/base/status.h"

namespace baton {

struct valkey_tls_config {
    std::string ca_file;      // PEM file of the CA(s) that signed the server's certificate; required
    std::string cert_file;    // PEM client certificate, for servers that ask for one (tls-auth-clients); optional
    std::string key_file;     // its private key; required with cert_file
    std::string server_name;  // SNI and the name the certificate must carry; empty: host
};

struct valkey_config {
    std::string host = "127.0.0.1";
    uint16_t port = 6379;
    uint32_t connect_timeout_ms = 500;
    uint32_t command_timeout_ms = 1000;  // per wait for the socket (see above)
    std::string username;                // ACL user; empty: AUTH with the password alone (the default user)
    std::string password;                // empty: no AUTH
    std::optional<valkey_tls_config> tls;
};

class valkey_client {
  public:
    explicit valkey_client(valkey_config config);
    ~valkey_client();
    valkey_client(const valkey_client &) = delete;
    valkey_client & operator=(const valkey_client &) = delete;

    const valkey_config & config() const { return config_; }
    // connected: a connection is open now (false before the first command and after a transport error).
    bool connected() const;

    // ping: PING answered PONG (connects first if needed).
    Status ping();
    // get: the value of key; nullopt when the key does not exist.
    Result<std::optional<std::vector<uint8_t>>> get(std::string_view key);
    // get_each sends GET for every key in one pipeline and calls on_value(i, value) for each reply in order
    // (value: nullptr when key i does not exist; the bytes are valid only during the call: they are hiredis's
    // read buffer, no reply object is made). A non-ok Status from on_value stops the reads and is returned (the
    // connection is dropped: replies were left unread); an exception from on_value becomes internal.
    using value_fn = std::function<Status(size_t index, const std::span<const uint8_t> * value)>;
    Status get_each(std::span<const std::string> keys, const value_fn & on_value);
    // set: SET key value PX ttl_ms. REQUIRES: ttl_ms > 0 (invalid_argument otherwise).
    Status set(std::string_view key, std::span<const uint8_t> value, uint64_t ttl_ms);
    // set_each: set for every (keys[i], values[i]) in one pipeline; the first error is returned, after every
    // reply is read. REQUIRES: keys.size() == values.size().
    Status set_each(std::span<const std::string> keys, std::span<const std::span<const uint8_t>> values,
                    uint64_t ttl_ms);
    // set_nx: SET key value NX PX ttl_ms; true when it was set, false when the key already existed.
    Result<bool> set_nx(std::string_view key, std::span<const uint8_t> value, uint64_t ttl_ms);
    // del: DEL keys...; the number of keys that existed.
    Result<uint64_t> del(std::span<const std::string> keys);

  private:
    struct impl;
    valkey_config config_;
    std::unique_ptr<impl> impl_;
};

}  // namespace baton
