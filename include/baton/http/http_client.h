// http_client.h — the router's side of a request to a node: one HTTP/1.1 exchange over its own
// connection, on the calling coroutine's strand (no thread per call).
//
// Every operation runs under the call's deadline (the request's whole deadline, not a per-read one, so a
// stream whose chunks keep coming still ends on time). The body is read piece by piece as it arrives, so
// the caller relays it with back-pressure: it reads the next piece only after it has passed the last one
// on. A transport failure before the response's headers is upstream_error (or deadline_exceeded); after
// them, read_some reports a body that was cut off.
// Thread-safety: one coroutine uses an http_upstream at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "baton/base/status.h"
#include "baton/http/http_message.h"
#include "baton/http/net.h"

namespace baton {

struct http_url {
    std::string host;
    uint16_t port = 80;
    std::string text;  // "http://host:port" (or "https://...") as configured
    bool tls = false;  // https: connect() needs a TLS context
};

// http_url_parse accepts "http://HOST:PORT" and, with allow_https, "https://HOST:PORT" (an optional trailing
// '/'); invalid_argument otherwise.
Result<http_url> http_url_parse(std::string_view url, bool allow_https = false);

// TLS for a client (etcd over https): the CA that signs the server's certificate and, for client-certificate
// authentication, this client's certificate and key (PEM files).
struct tls_client_files {
    std::string ca_file;    // empty: the system's trust store
    std::string cert_file;  // empty: no client certificate
    std::string key_file;
};
using tls_context_ptr = std::shared_ptr<net::ssl::context>;
// tls_client_context loads the files; invalid_argument naming the file that could not be used.
Result<tls_context_ptr> tls_client_context(const tls_client_files & files);

struct http_response_head {
    int status = 0;
    std::string content_type;
    std::optional<uint64_t> content_length;  // absent: chunked or until close
    http_headers headers;
};

class http_upstream {
  public:
    // connect opens a connection to url on the calling coroutine's executor; an https url is wrapped in TLS
    // with tls (the server's certificate verified against the host name; invalid_argument without tls).
    static net::awaitable<Result<std::unique_ptr<http_upstream>>>
    connect(const http_url & url, std::chrono::steady_clock::time_point deadline, tls_context_ptr tls = nullptr);
    ~http_upstream();

    // send writes a whole request (Content-Length from body; no body when body is empty and method is GET).
    net::awaitable<Status> send(std::string_view method, std::string_view target, const http_headers & headers,
                                std::string_view content_type, std::string_view body);
    // send_head writes the request line and headers of a request whose body of exactly body_length bytes
    // follows through send_body.
    net::awaitable<Status> send_head(std::string_view method, std::string_view target, const http_headers & headers,
                                     std::string_view content_type, uint64_t body_length);
    net::awaitable<Status> send_body(const void * data, size_t n);

    net::awaitable<Result<http_response_head>> read_head();
    // read_some stores the next body bytes (at most cap) at dst and returns how many; 0 at the clean end
    // of the body. REQUIRES: read_head succeeded.
    net::awaitable<Result<size_t>> read_some(void * dst, size_t cap);
    // read_all collects the rest of the body, at most cap bytes (too_large beyond).
    net::awaitable<Result<std::string>> read_all(size_t cap = size_t(64) << 20);

    void close();
    const http_url & url() const { return url_; }

  private:
    http_upstream(http_url url, net::any_io_executor ex, std::chrono::steady_clock::time_point deadline);
    Status transport_error(const error_code & ec, const char * what) const;

    http_url url_;
    beast::tcp_stream stream_;
    std::unique_ptr<net::ssl::stream<beast::tcp_stream &>> tls_;  // over stream_, for https
    beast::flat_buffer buf_;
    std::chrono::steady_clock::time_point deadline_;
    std::unique_ptr<beast::http::response_parser<beast::http::buffer_body>> parser_;
    // A body with a Content-Length is read straight from the socket into the caller's buffer (no parser
    // copy, reads as large as the caller's buffer); chunked bodies go through the parser.
    std::optional<uint64_t> direct_left_;
};

}  // namespace baton
