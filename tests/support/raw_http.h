// raw_http.h — a byte-level HTTP/1.1 client for end-to-end tests of the HTTP edge (tests/e2e/edge_e2e_test.cpp).
//
// httplib (node_process::client) always sends well-formed requests one at a time and hides what the
// server did with the connection. These helpers send exactly the bytes a test gives them — pipelined,
// malformed, oversized, trickled — over a plain POSIX TCP socket, and report exactly what came back: each
// response of a sequence (Content-Length, chunked or close-delimited bodies; no body for HEAD, 1xx, 204,
// 304), EOF and resets. Every operation takes a timeout and waits with poll(2) against a deadline; nothing
// blocks without one. Thread-safety: a raw_conn has one owner; the free functions are pure.
#pragma once

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace baton::test {

using raw_clock = std::chrono::steady_clock;

// raw_deadline is now + s seconds.
inline raw_clock::time_point raw_deadline(double s) {
    return raw_clock::now() + std::chrono::duration_cast<raw_clock::duration>(std::chrono::duration<double>(s));
}

// raw_seconds_since: seconds elapsed since t.
inline double raw_seconds_since(raw_clock::time_point t) { return std::chrono::duration<double>(raw_clock::now() - t).count(); }

// raw_ms_until: milliseconds from now until d for poll(2), rounded up, clamped to [0, INT_MAX].
inline int raw_ms_until(raw_clock::time_point d) {
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(d - raw_clock::now()).count();
    if (us <= 0) return 0;
    const long long ms = (us + 999) / 1000;
    return ms > INT_MAX ? INT_MAX : int(ms);
}

inline bool raw_iequal(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
    return true;
}

inline std::string_view raw_trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

struct raw_response {
    std::string version;                                      // "HTTP/1.1"
    int status = 0;
    std::string reason;
    std::vector<std::pair<std::string, std::string>> headers;  // in arrival order, names as sent
    std::string body;                                         // de-chunked
    bool chunked = false;                                     // the body came with Transfer-Encoding: chunked

    bool has_header(std::string_view name) const {
        for (const auto & h : headers)
            if (raw_iequal(h.first, name)) return true;
        return false;
    }
    // header: the first value of name (case-insensitive), "" if absent.
    std::string header(std::string_view name) const {
        for (const auto & h : headers)
            if (raw_iequal(h.first, name)) return h.second;
        return {};
    }
    // header_has_token: some value of the comma-separated header name holds token (case-insensitive), as
    // in "Connection: keep-alive, close".
    bool header_has_token(std::string_view name, std::string_view token) const {
        for (const auto & h : headers) {
            if (!raw_iequal(h.first, name)) continue;
            std::string_view v = h.second;
            while (!v.empty()) {
                const size_t comma = v.find(',');
                if (raw_iequal(raw_trim(v.substr(0, comma)), token)) return true;
                if (comma == std::string_view::npos) break;
                v.remove_prefix(comma + 1);
            }
        }
        return false;
    }
};

enum class raw_parse { raw_parse_complete, raw_parse_incomplete, raw_parse_error };

// raw_parse_chunked decodes a chunked body starting at buf[pos]. Returns complete with *end one past the
// last trailer line, incomplete when more bytes are needed, error (with err) on a malformed framing.
inline raw_parse raw_parse_chunked(std::string_view buf, size_t pos, std::string & body, size_t & end, std::string & err) {
    body.clear();
    while (true) {
        const size_t eol = buf.find("\r\n", pos);
        if (eol == std::string_view::npos) return raw_parse::raw_parse_incomplete;
        std::string_view line = buf.substr(pos, eol - pos);
        line = line.substr(0, line.find(';'));  // chunk extensions are ignored
        line = raw_trim(line);
        if (line.empty() || line.size() > 15) {
            err = "chunk size line '" + std::string(line) + "' at +" + std::to_string(pos);
            return raw_parse::raw_parse_error;
        }
        size_t n = 0;
        for (char c : line) {
            if (!std::isxdigit(static_cast<unsigned char>(c))) {
                err = "chunk size '" + std::string(line) + "' is not hex at +" + std::to_string(pos);
                return raw_parse::raw_parse_error;
            }
            n = n * 16 + size_t(std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : std::tolower(static_cast<unsigned char>(c)) - 'a' + 10);
        }
        pos = eol + 2;
        if (n == 0) {  // trailers, then an empty line
            while (true) {
                const size_t t = buf.find("\r\n", pos);
                if (t == std::string_view::npos) return raw_parse::raw_parse_incomplete;
                const bool empty = t == pos;
                pos = t + 2;
                if (empty) {
                    end = pos;
                    return raw_parse::raw_parse_complete;
                }
            }
        }
        if (buf.size() - pos < n + 2) return raw_parse::raw_parse_incomplete;
        if (buf.substr(pos + n, 2) != "\r\n") {
            err = "chunk of " + std::to_string(n) + " bytes at +" + std::to_string(pos) + " is not followed by CRLF";
            return raw_parse::raw_parse_error;
        }
        body.append(buf.substr(pos, n));
        pos += n + 2;
    }
}

// raw_parse_response parses the response at the start of buf. head: it answers a HEAD request (no body
// whatever the headers say). at_eof: no more bytes will come, which completes a close-delimited body.
// On complete, out holds the response and consumed its length in buf.
inline raw_parse raw_parse_response(std::string_view buf, bool head, bool at_eof, raw_response & out, size_t & consumed,
                                    std::string & err) {
    out = raw_response{};
    const size_t hdr_end = buf.find("\r\n\r\n");
    if (hdr_end == std::string_view::npos) {
        if (at_eof && !buf.empty()) {
            err = "connection closed inside a response header (" + std::to_string(buf.size()) + " bytes)";
            return raw_parse::raw_parse_error;
        }
        return raw_parse::raw_parse_incomplete;
    }
    std::string_view head_block = buf.substr(0, hdr_end + 2);
    size_t eol = head_block.find("\r\n");
    const std::string_view status_line = head_block.substr(0, eol);
    // "HTTP/1.1 200 OK"
    const size_t sp1 = status_line.find(' ');
    if (status_line.rfind("HTTP/1.", 0) != 0 || sp1 == std::string_view::npos || status_line.size() < sp1 + 4) {
        err = "bad status line '" + std::string(status_line.substr(0, 80)) + "'";
        return raw_parse::raw_parse_error;
    }
    out.version = std::string(status_line.substr(0, sp1));
    const std::string_view code = status_line.substr(sp1 + 1, 3);
    for (char c : code)
        if (!std::isdigit(static_cast<unsigned char>(c))) {
            err = "bad status code in '" + std::string(status_line.substr(0, 80)) + "'";
            return raw_parse::raw_parse_error;
        }
    out.status = (code[0] - '0') * 100 + (code[1] - '0') * 10 + (code[2] - '0');
    out.reason = std::string(raw_trim(status_line.substr(std::min(status_line.size(), sp1 + 4))));
    size_t pos = eol + 2;
    while (pos < head_block.size()) {
        eol = head_block.find("\r\n", pos);
        const std::string_view line = head_block.substr(pos, eol - pos);
        const size_t colon = line.find(':');
        if (colon == std::string_view::npos || colon == 0) {
            err = "bad header line '" + std::string(line.substr(0, 80)) + "'";
            return raw_parse::raw_parse_error;
        }
        out.headers.emplace_back(std::string(line.substr(0, colon)), std::string(raw_trim(line.substr(colon + 1))));
        pos = eol + 2;
    }
    const size_t body_start = hdr_end + 4;
    if (head || out.status / 100 == 1 || out.status == 204 || out.status == 304) {
        consumed = body_start;
        return raw_parse::raw_parse_complete;
    }
    if (out.header_has_token("Transfer-Encoding", "chunked")) {
        out.chunked = true;
        size_t end = 0;
        const raw_parse r = raw_parse_chunked(buf, body_start, out.body, end, err);
        if (r == raw_parse::raw_parse_complete) consumed = end;
        if (r == raw_parse::raw_parse_incomplete && at_eof) {
            err = "connection closed inside a chunked body";
            return raw_parse::raw_parse_error;
        }
        return r;
    }
    if (out.has_header("Content-Length")) {
        const std::string v = out.header("Content-Length");
        if (v.empty() || v.size() > 15 || v.find_first_not_of("0123456789") != std::string::npos) {
            err = "bad Content-Length '" + v + "'";
            return raw_parse::raw_parse_error;
        }
        const size_t n = size_t(std::stoull(v));
        if (buf.size() - body_start < n) {
            if (at_eof) {
                err = "connection closed after " + std::to_string(buf.size() - body_start) + " of " + v + " body bytes";
                return raw_parse::raw_parse_error;
            }
            return raw_parse::raw_parse_incomplete;
        }
        out.body = std::string(buf.substr(body_start, n));
        consumed = body_start + n;
        return raw_parse::raw_parse_complete;
    }
    if (!at_eof) return raw_parse::raw_parse_incomplete;  // close-delimited
    out.body = std::string(buf.substr(body_start));
    consumed = buf.size();
    return raw_parse::raw_parse_complete;
}

// raw_request renders a request: the request line, Host, the extra header lines (each "Name: value"),
// Content-Length when there is a body (or the method is POST/PUT), then the body.
inline std::string raw_request(const std::string & method, const std::string & target, const std::vector<std::string> & headers = {},
                               const std::string & body = "") {
    std::string r = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    for (const auto & h : headers) r += h + "\r\n";
    if (!body.empty() || method == "POST" || method == "PUT") r += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    r += "\r\n";
    return r + body;
}

enum class raw_io { raw_io_data, raw_io_eof, raw_io_timeout, raw_io_reset, raw_io_error };

// raw_conn: one non-blocking TCP connection and the bytes received on it that no response consumed yet.
class raw_conn {
  public:
    raw_conn() = default;
    ~raw_conn() { close(); }
    raw_conn(const raw_conn &) = delete;
    raw_conn & operator=(const raw_conn &) = delete;
    raw_conn(raw_conn && o) noexcept { *this = std::move(o); }
    raw_conn & operator=(raw_conn && o) noexcept {
        if (this != &o) {
            close();
            fd_ = std::exchange(o.fd_, -1);
            buf_ = std::move(o.buf_);
            err_ = std::move(o.err_);
            eof_ = o.eof_;
            reset_ = o.reset_;
        }
        return *this;
    }

    // connect opens a connection to host:port (numeric IPv4/IPv6 or a name) within timeout_s.
    // rcvbuf_bytes > 0 sets SO_RCVBUF before connecting, so the window the server sees stays that small.
    // Returns false with error() on failure.
    bool connect(const std::string & host, int port, double timeout_s, int rcvbuf_bytes = 0) {
        close();
        const auto deadline = raw_deadline(timeout_s);
        addrinfo hints{};
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        addrinfo * res = nullptr;
        const int gai = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
        if (gai != 0) return fail("getaddrinfo " + host + ": " + gai_strerror(gai));
        const addrinfo ai = *res;
        sockaddr_storage addr{};
        std::memcpy(&addr, res->ai_addr, res->ai_addrlen);
        ::freeaddrinfo(res);
        fd_ = ::socket(ai.ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd_ < 0) return fail(std::string("socket: ") + std::strerror(errno));
        if (rcvbuf_bytes > 0 && ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf_bytes, sizeof rcvbuf_bytes) != 0)
            return fail(std::string("SO_RCVBUF: ") + std::strerror(errno));
        const int one = 1;
        ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (::connect(fd_, reinterpret_cast<const sockaddr *>(&addr), ai.ai_addrlen) != 0) {
            if (errno != EINPROGRESS) return fail(std::string("connect: ") + std::strerror(errno));
            pollfd p{fd_, POLLOUT, 0};
            int rc;
            while ((rc = ::poll(&p, 1, raw_ms_until(deadline))) < 0 && errno == EINTR) {
            }
            if (rc == 0) return fail("connect: timed out after " + std::to_string(timeout_s) + " s");
            int soerr = 0;
            socklen_t len = sizeof soerr;
            ::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &soerr, &len);
            if (rc < 0 || soerr != 0) return fail(std::string("connect: ") + std::strerror(rc < 0 ? errno : soerr));
        }
        return true;
    }

    int fd() const { return fd_; }
    bool is_open() const { return fd_ >= 0; }
    const std::string & error() const { return err_; }
    // buffer: bytes received and not yet consumed by read_response.
    std::string & buffer() { return buf_; }
    bool eof_seen() const { return eof_; }
    bool reset_seen() const { return reset_; }
    // peer_closed: the server closed (EOF) or reset the connection.
    bool peer_closed() const { return eof_ || reset_; }

    // send_all writes all of data within timeout_s; false (with error()) on timeout, reset or close.
    bool send_all(std::string_view data, double timeout_s) {
        const auto deadline = raw_deadline(timeout_s);
        while (!data.empty()) {
            const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
            if (n > 0) {
                data.remove_prefix(size_t(n));
                continue;
            }
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                pollfd p{fd_, POLLOUT, 0};
                const int rc = ::poll(&p, 1, raw_ms_until(deadline));
                if (rc == 0) {
                    err_ = "send: timed out with " + std::to_string(data.size()) + " bytes unsent";
                    return false;
                }
                continue;
            }
            if (errno == EPIPE || errno == ECONNRESET) reset_ = true;
            err_ = std::string("send: ") + std::strerror(errno);
            return false;
        }
        return true;
    }

    // read_some waits up to timeout_s for bytes and appends what is there to buffer().
    raw_io read_some(double timeout_s) {
        if (fd_ < 0) return raw_io::raw_io_error;
        if (peer_closed()) return eof_ ? raw_io::raw_io_eof : raw_io::raw_io_reset;
        const auto deadline = raw_deadline(timeout_s);
        char tmp[65536];
        while (true) {
            const ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
            if (n > 0) {
                buf_.append(tmp, size_t(n));
                return raw_io::raw_io_data;
            }
            if (n == 0) {
                eof_ = true;
                return raw_io::raw_io_eof;
            }
            if (errno == EINTR) continue;
            if (errno == ECONNRESET) {
                reset_ = true;
                err_ = "recv: connection reset";
                return raw_io::raw_io_reset;
            }
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                err_ = std::string("recv: ") + std::strerror(errno);
                return raw_io::raw_io_error;
            }
            pollfd p{fd_, POLLIN, 0};
            const int rc = ::poll(&p, 1, raw_ms_until(deadline));
            if (rc == 0) return raw_io::raw_io_timeout;
            if (rc < 0 && errno != EINTR) {
                err_ = std::string("poll: ") + std::strerror(errno);
                return raw_io::raw_io_error;
            }
        }
    }

    // read_response returns the next response within timeout_s and removes it from buffer(); nullopt (with
    // error()) on timeout, a malformed response, or a close before a whole response. head: it answers HEAD.
    std::optional<raw_response> read_response(double timeout_s, bool head = false) {
        const auto deadline = raw_deadline(timeout_s);
        while (true) {
            raw_response r;
            size_t used = 0;
            std::string perr;
            const raw_parse p = raw_parse_response(buf_, head, peer_closed(), r, used, perr);
            if (p == raw_parse::raw_parse_complete) {
                buf_.erase(0, used);
                return r;
            }
            if (p == raw_parse::raw_parse_error) {
                err_ = "response: " + perr;
                return std::nullopt;
            }
            if (peer_closed()) {
                err_ = buf_.empty() ? (reset_ ? "connection reset before a response" : "EOF before a response")
                                    : "connection closed inside a response";
                return std::nullopt;
            }
            const raw_io io = read_some(std::chrono::duration<double>(deadline - raw_clock::now()).count());
            if (io == raw_io::raw_io_timeout) {
                err_ = "no complete response within " + std::to_string(timeout_s) + " s (" + std::to_string(buf_.size()) + " bytes buffered)";
                return std::nullopt;
            }
            if (io == raw_io::raw_io_error) return std::nullopt;
        }
    }

    // read_until reads until buffer() holds needle; false on timeout or close.
    bool read_until(std::string_view needle, double timeout_s) {
        const auto deadline = raw_deadline(timeout_s);
        while (buf_.find(needle) == std::string::npos) {
            const raw_io io = read_some(std::chrono::duration<double>(deadline - raw_clock::now()).count());
            if (io != raw_io::raw_io_data) return false;
        }
        return true;
    }

    // wait_closed reads (keeping the bytes in buffer()) until the server closes or resets the connection;
    // true if it did within timeout_s.
    bool wait_closed(double timeout_s) {
        const auto deadline = raw_deadline(timeout_s);
        while (!peer_closed()) {
            const raw_io io = read_some(std::chrono::duration<double>(deadline - raw_clock::now()).count());
            if (io == raw_io::raw_io_timeout || io == raw_io::raw_io_error) return false;
        }
        return true;
    }

    void close() {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
        buf_.clear();
        eof_ = reset_ = false;
    }

  private:
    bool fail(std::string msg) {
        err_ = std::move(msg);
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
        return false;
    }

    int fd_ = -1;
    std::string buf_;
    std::string err_;
    bool eof_ = false;
    bool reset_ = false;
};

// raw_exchange sends request on a fresh connection and reads one response, all within timeout_s.
// nullopt (with *err) on any failure.
inline std::optional<raw_response> raw_exchange(const std::string & host, int port, const std::string & request, double timeout_s,
                                                std::string * err = nullptr, bool head = false) {
    const auto deadline = raw_deadline(timeout_s);
    auto left = [&] { return std::max(0.0, std::chrono::duration<double>(deadline - raw_clock::now()).count()); };
    raw_conn c;
    std::optional<raw_response> r;
    if (c.connect(host, port, left()) && c.send_all(request, left())) r = c.read_response(left(), head);
    if (!r && err) *err = c.error();
    return r;
}

}  // namespace baton::test
