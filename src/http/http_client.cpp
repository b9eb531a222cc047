// http_client.cpp — see http_client.h.
#include "baton/http/http_client.h"

#include <charconv>

namespace baton {

namespace http = beast::http;

Result<http_url> http_url_parse(std::string_view url, bool allow_https) {
    auto bad = [&] {
        return Status(status_code::invalid_argument, "URL '" + std::string(url) + "' must look like http://HOST:PORT" +
                                                         (allow_https ? " or https://HOST:PORT" : ""));
    };
    const bool tls = allow_https && url.substr(0, 8) == "https://";
    const std::string_view scheme = tls ? "https://" : "http://";
    if (url.substr(0, scheme.size()) != scheme) return bad();
    std::string_view rest = url.substr(scheme.size());
    if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
    const size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos || colon == 0 || rest.find('/') != std::string_view::npos) return bad();
    http_url u;
    u.host = std::string(rest.substr(0, colon));
    const std::string_view p = rest.substr(colon + 1);
    unsigned port = 0;
    auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), port);
    if (p.empty() || ec != std::errc() || end != p.data() + p.size() || port == 0 || port > 65535) return bad();
    u.port = uint16_t(port);
    u.tls = tls;
    u.text = std::string(scheme) + u.host + ":" + std::to_string(port);
    return u;
}

Result<tls_context_ptr> tls_client_context(const tls_client_files & f) {
    auto ctx = std::make_shared<net::ssl::context>(net::ssl::context::tls_client);
    error_code ec;
    ctx->set_verify_mode(net::ssl::verify_peer, ec);
    if (f.ca_file.empty()) ctx->set_default_verify_paths(ec);
    else ctx->load_verify_file(f.ca_file, ec);
    if (ec) return Status(status_code::invalid_argument, "CA file '" + f.ca_file + "': " + ec.message());
    if (f.cert_file.empty() != f.key_file.empty())
        return Status(status_code::invalid_argument, "a client certificate and its key go together");
    if (!f.cert_file.empty()) {
        ctx->use_certificate_chain_file(f.cert_file, ec);
        if (ec) return Status(status_code::invalid_argument, "certificate file '" + f.cert_file + "': " + ec.message());
        ctx->use_private_key_file(f.key_file, net::ssl::context::pem, ec);
        if (ec) return Status(status_code::invalid_argument, "key file '" + f.key_file + "': " + ec.message());
    }
    return ctx;
}

http_upstream::http_upstream(http_url url, net::any_io_executor ex, std::chrono::steady_clock::time_point deadline)
    : url_(std::move(url)), stream_(std::move(ex)), buf_(1 << 20), deadline_(deadline) {
    buf_.reserve(16384);  // reads of at least this much (Beast reads what the buffer has room for)
}

http_upstream::~http_upstream() { close(); }

void http_upstream::close() {
    error_code ec;  // (a TLS session is dropped with its socket: no close_notify round trip)
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
}

Status http_upstream::transport_error(const error_code & ec, const char * what) const {
    if (ec == beast::error::timeout || std::chrono::steady_clock::now() >= deadline_)
        return {status_code::deadline_exceeded, url_.text + ": " + what + ": the request deadline passed"};
    return {status_code::upstream_error, url_.text + ": " + what + ": " + ec.message()};
}

net::awaitable<Result<std::unique_ptr<http_upstream>>>
http_upstream::connect(const http_url & url, std::chrono::steady_clock::time_point deadline, tls_context_ptr tls) {
    if (url.tls && !tls)
        co_return Status(status_code::invalid_argument, url.text + ": https needs a TLS configuration");
    auto ex = co_await net::this_coro::executor;
    std::unique_ptr<http_upstream> u(new http_upstream(url, ex, deadline));
    error_code ec;
    tcp::resolver resolver(ex);
    auto eps = co_await resolver.async_resolve(url.host, std::to_string(url.port), net::redirect_error(net::use_awaitable, ec));
    if (ec) co_return Status(status_code::upstream_error, url.text + ": cannot resolve " + url.host + ": " + ec.message());
    // Connecting gets at most 5 s of the deadline: a node that does not answer SYNs is tried no longer.
    u->stream_.expires_at(std::min(deadline, std::chrono::steady_clock::now() + std::chrono::seconds(5)));
    co_await u->stream_.async_connect(eps, net::redirect_error(net::use_awaitable, ec));
    if (ec) co_return u->transport_error(ec, "connect");
    u->stream_.socket().set_option(tcp::no_delay(true), ec);
    if (url.tls) {
        u->tls_ = std::make_unique<net::ssl::stream<beast::tcp_stream &>>(u->stream_, *tls);
        // SNI, and the certificate must name the host (DNS name or IP address).
        if (!SSL_set_tlsext_host_name(u->tls_->native_handle(), url.host.c_str()))
            co_return Status(status_code::invalid_argument, url.text + ": cannot set the TLS server name");
        u->tls_->set_verify_callback(net::ssl::host_name_verification(url.host), ec);
        co_await u->tls_->async_handshake(net::ssl::stream_base::client, net::redirect_error(net::use_awaitable, ec));
        if (ec) co_return u->transport_error(ec, "TLS handshake");
    }
    co_return std::move(u);
}

net::awaitable<Status> http_upstream::send_head(std::string_view method, std::string_view target, const http_headers & headers,
                                                std::string_view content_type, uint64_t body_length) {
    http::request<http::empty_body> req{http::string_to_verb(method), target, 11};
    const bool v6 = url_.host.find(':') != std::string::npos;  // an IPv6 address goes in brackets
    req.set(http::field::host, (v6 ? "[" + url_.host + "]" : url_.host) + ":" + std::to_string(url_.port));
    for (const auto & [k, v] : headers) req.insert(k, v);
    if (body_length > 0 || method != "GET") {
        req.set(http::field::content_type, content_type);
        req.content_length(body_length);
    }
    req.keep_alive(false);
    http::request_serializer<http::empty_body> sr(req);
    stream_.expires_at(deadline_);
    error_code ec;
    if (tls_) co_await http::async_write_header(*tls_, sr, net::redirect_error(net::use_awaitable, ec));
    else co_await http::async_write_header(stream_, sr, net::redirect_error(net::use_awaitable, ec));
    if (ec) co_return transport_error(ec, "sending the request");
    co_return Status();
}

net::awaitable<Status> http_upstream::send_body(const void * data, size_t n) {
    stream_.expires_at(deadline_);
    error_code ec;
    if (tls_)
        co_await net::async_write(*tls_, net::const_buffer(data, n), large_transfer,
                                  net::redirect_error(net::use_awaitable, ec));
    else
        co_await net::async_write(stream_, net::const_buffer(data, n), large_transfer,
                                  net::redirect_error(net::use_awaitable, ec));
    if (ec) co_return transport_error(ec, "sending the body");
    co_return Status();
}

net::awaitable<Status> http_upstream::send(std::string_view method, std::string_view target, const http_headers & headers,
                                           std::string_view content_type, std::string_view body) {
    Status st = co_await send_head(method, target, headers, content_type, body.size());
    if (st.ok() && !body.empty()) st = co_await send_body(body.data(), body.size());
    co_return st;
}

net::awaitable<Result<http_response_head>> http_upstream::read_head() {
    parser_ = std::make_unique<http::response_parser<http::buffer_body>>();
    parser_->header_limit(64 * 1024);
    parser_->body_limit(boost::none);
    stream_.expires_at(deadline_);
    error_code ec;
    if (tls_) co_await http::async_read_header(*tls_, buf_, *parser_, net::redirect_error(net::use_awaitable, ec));
    else co_await http::async_read_header(stream_, buf_, *parser_, net::redirect_error(net::use_awaitable, ec));
    if (ec) co_return transport_error(ec, "reading the response");
    const auto & m = parser_->get();
    http_response_head h;
    h.status = int(m.result_int());
    h.content_type = std::string(m[http::field::content_type]);
    if (auto cl = parser_->content_length()) h.content_length = *cl;
    if (h.content_length && !parser_->chunked()) direct_left_ = *h.content_length;
    for (const auto & f : m) h.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    co_return h;
}

net::awaitable<Result<size_t>> http_upstream::read_some(void * dst, size_t cap) {
    if (!parser_) co_return Status(status_code::internal, "read_some before read_head");
    if (direct_left_) {
        uint64_t & left = *direct_left_;
        if (left == 0 || cap == 0) co_return size_t(0);
        const size_t want = size_t(std::min<uint64_t>(cap, left));
        if (buf_.size() > 0) {  // body bytes that came with the headers
            const size_t n = std::min(want, buf_.size());
            net::buffer_copy(net::buffer(dst, n), buf_.data());
            buf_.consume(n);
            left -= n;
            co_return n;
        }
        stream_.expires_at(deadline_);
        error_code ec;
        size_t n = 0;
        if (tls_)
            n = co_await tls_->async_read_some(net::buffer(dst, want), net::redirect_error(net::use_awaitable, ec));
        else n = co_await stream_.async_read_some(net::buffer(dst, want), net::redirect_error(net::use_awaitable, ec));
        if (ec) co_return transport_error(ec, "the body was cut off");
        left -= n;
        co_return n;
    }
    while (!parser_->is_done()) {
        parser_->get().body().data = dst;
        parser_->get().body().size = cap;
        stream_.expires_at(deadline_);
        error_code ec;
        if (tls_) co_await http::async_read_some(*tls_, buf_, *parser_, net::redirect_error(net::use_awaitable, ec));
        else co_await http::async_read_some(stream_, buf_, *parser_, net::redirect_error(net::use_awaitable, ec));
        if (ec && ec != http::error::need_buffer) co_return transport_error(ec, "the body was cut off");
        const size_t n = cap - parser_->get().body().size;
        if (n > 0) co_return n;
    }
    co_return size_t(0);
}

net::awaitable<Result<std::string>> http_upstream::read_all(size_t cap) {
    std::string out;
    char chunk[16384];
    for (;;) {
        auto n = co_await read_some(chunk, sizeof chunk);
        if (!n.ok()) co_return n.status();
        if (n.value() == 0) co_return out;
        if (out.size() + n.value() > cap) co_return Status(status_code::too_large, url_.text + ": response over " + std::to_string(cap) + " bytes");
        out.append(chunk, n.value());
    }
}

}  // namespace baton
