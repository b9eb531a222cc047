// raw_tcp.h — loopback TCP baselines for the transfer benchmarks: what the kernel alone does with the same
// bytes, so an HTTP transfer can be reported as a fraction of it, and a minimal HTTP/1.1 client that shows
// whether an HTTP client library is the bottleneck.
//
// raw_tcp_pair: a connected client/server socket pair on 127.0.0.1 (ephemeral port) with a peer thread on
// the server side. A transfer is one request: the client sends an 8-byte header (direction, length), then
//   up:   the client sends n bytes, the peer reads them into its warm buffer and answers one byte;
//   down: the peer sends n bytes from its warm buffer, the client reads them into its warm buffer.
// Both buffers are allocated and touched before the first transfer, so no page is faulted in a timed one.
// TCP_NODELAY on both ends, so the one-byte answer is never held back by Nagle.
//
// raw_http_client: one keep-alive HTTP/1.1 connection written with plain send()/recv(). POST sends the
// headers and the body with one writev; GET reads the body into a caller-owned (warm) buffer. It parses
// only what the benchmarks need: the status line, Content-Length (no chunked encoding) and
// "Connection: close", after which the next request opens a new connection (as a keep-alive client must
// when the server ends the connection, e.g. at cpp-httplib's keep-alive request limit).
// Thread-safety: one thread per object.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace baton::bench {

// raw_send_all / raw_recv_all: loop until every byte moved; false on error or EOF.
inline bool raw_send_all(int fd, const void * data, size_t n) {
    const char * p = static_cast<const char *>(data);
    while (n > 0) {
        const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= size_t(w);
    }
    return true;
}

inline bool raw_recv_all(int fd, void * data, size_t n) {
    char * p = static_cast<char *>(data);
    while (n > 0) {
        const ssize_t r = ::recv(fd, p, n, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        p += r;
        n -= size_t(r);
    }
    return true;
}

// raw_send_head_body sends head then n bytes of body with writev (one syscall when the socket takes it all);
// false on error.
inline bool raw_send_head_body(int fd, const std::string & head, const void * body, size_t n) {
    iovec iov[2] = {{const_cast<char *>(head.data()), head.size()}, {const_cast<void *>(body), n}};
    size_t idx = 0;
    while (idx < 2) {
        const ssize_t w = ::writev(fd, iov + idx, int(2 - idx));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        size_t left = size_t(w);
        while (idx < 2 && left >= iov[idx].iov_len) left -= iov[idx++].iov_len;
        if (idx < 2) {
            iov[idx].iov_base = static_cast<char *>(iov[idx].iov_base) + left;
            iov[idx].iov_len -= left;
        }
    }
    return true;
}

inline void raw_set_nodelay(int fd) {
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// raw_connect_loopback: a connected TCP socket to 127.0.0.1:port with TCP_NODELAY; throws on failure.
inline int raw_connect_loopback(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw std::runtime_error("socket: " + std::string(std::strerror(errno)));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0) {
        const std::string e = std::strerror(errno);
        ::close(fd);
        throw std::runtime_error("connect 127.0.0.1:" + std::to_string(port) + ": " + e);
    }
    raw_set_nodelay(fd);
    return fd;
}

class raw_tcp_pair {
  public:
    // max_bytes: the largest transfer; both sides' buffers are that big and pre-faulted.
    explicit raw_tcp_pair(size_t max_bytes) : peer_buf_(max_bytes, 1), client_buf_(max_bytes, 1) {
        const int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (lfd < 0) throw std::runtime_error("socket: " + std::string(std::strerror(errno)));
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        if (::bind(lfd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 || ::listen(lfd, 1) != 0 ||
            ::getsockname(lfd, reinterpret_cast<sockaddr *>(&a), &len) != 0) {
            ::close(lfd);
            throw std::runtime_error("bind/listen on 127.0.0.1: " + std::string(std::strerror(errno)));
        }
        try {
            client_ = raw_connect_loopback(ntohs(a.sin_port));
        } catch (...) {
            ::close(lfd);
            throw;
        }
        peer_ = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
        ::close(lfd);
        if (peer_ < 0) {
            ::close(client_);
            throw std::runtime_error("accept: " + std::string(std::strerror(errno)));
        }
        raw_set_nodelay(peer_);
        th_ = std::thread([this] { serve(); });
    }
    ~raw_tcp_pair() {
        ::shutdown(client_, SHUT_RDWR);  // the peer's next recv sees EOF and its loop ends
        th_.join();
        ::close(client_);
        ::close(peer_);
    }
    raw_tcp_pair(const raw_tcp_pair &) = delete;
    raw_tcp_pair & operator=(const raw_tcp_pair &) = delete;

    // up sends n bytes (n <= max_bytes) to the peer and waits for its one-byte answer.
    bool up(size_t n) {
        if (n > client_buf_.size()) return false;
        uint64_t head[2] = {k_up, n};
        char ack = 0;
        return raw_send_all(client_, head, sizeof head) && raw_send_all(client_, client_buf_.data(), n) &&
               raw_recv_all(client_, &ack, 1) && ack == 'k';
    }
    // down asks the peer for n bytes (n <= max_bytes) and reads them.
    bool down(size_t n) {
        if (n > client_buf_.size()) return false;
        uint64_t head[2] = {k_down, n};
        return raw_send_all(client_, head, sizeof head) && raw_recv_all(client_, client_buf_.data(), n);
    }

  private:
    static constexpr uint64_t k_up = 1, k_down = 2;

    void serve() {
        for (;;) {
            uint64_t head[2];
            if (!raw_recv_all(peer_, head, sizeof head) || head[1] > peer_buf_.size()) return;
            if (head[0] == k_up) {
                const char ack = 'k';
                if (!raw_recv_all(peer_, peer_buf_.data(), head[1]) || !raw_send_all(peer_, &ack, 1)) return;
            } else if (!raw_send_all(peer_, peer_buf_.data(), head[1])) {
                return;
            }
        }
    }

    std::vector<char> peer_buf_, client_buf_;
    int client_ = -1, peer_ = -1;
    std::thread th_;
};

class raw_http_client {
  public:
    explicit raw_http_client(int port) : fd_(raw_connect_loopback(port)), port_(port) {}
    ~raw_http_client() {
        if (fd_ >= 0) ::close(fd_);
    }
    raw_http_client(const raw_http_client &) = delete;
    raw_http_client & operator=(const raw_http_client &) = delete;

    // post sends body to path (one writev: headers + body) and reads the response into response_body.
    // Returns the HTTP status, or -1 on a transport or framing error.
    int post(const std::string & path, const void * body, size_t n, std::string & response_body) {
        if (!reconnect_if_closed()) return -1;
        const std::string head = "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port_) +
                                 "\r\nContent-Type: application/octet-stream\r\nContent-Length: " + std::to_string(n) + "\r\n\r\n";
        if (!raw_send_head_body(fd_, head, body, n)) return -1;
        size_t len = 0;
        const int status = read_head(len);
        if (status < 0) return -1;
        response_body.resize(len);
        return read_body(response_body.data(), len) ? status : -1;
    }

    // get reads the response body of GET path into out (which must hold it); n_out: its length.
    int get(const std::string & path, std::vector<char> & out, size_t & n_out) {
        if (!reconnect_if_closed()) return -1;
        const std::string head = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port_) + "\r\n\r\n";
        if (!raw_send_all(fd_, head.data(), head.size())) return -1;
        const int status = read_head(n_out);
        if (status < 0 || n_out > out.size()) return -1;
        return read_body(out.data(), n_out) ? status : -1;
    }

  private:
    bool reconnect_if_closed() {
        if (!closed_) return true;
        ::close(fd_);
        pending_.clear();
        try {
            fd_ = raw_connect_loopback(port_);
        } catch (const std::exception &) {
            fd_ = -1;
            return false;
        }
        closed_ = false;
        return true;
    }

    // read_head reads up to the blank line; bytes after it stay in pending_. Returns the status or -1.
    int read_head(size_t & content_length) {
        size_t end;
        while ((end = pending_.find("\r\n\r\n")) == std::string::npos) {
            if (pending_.size() > 65536) return -1;
            char buf[4096];
            const ssize_t r = ::recv(fd_, buf, sizeof buf, 0);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) return -1;
            pending_.append(buf, size_t(r));
        }
        std::string head = pending_.substr(0, end + 2);
        pending_.erase(0, end + 4);
        if (head.compare(0, 9, "HTTP/1.1 ") != 0 || head.size() < 12) return -1;
        const int status = std::atoi(head.c_str() + 9);
        for (char & c : head) c = char(std::tolower(static_cast<unsigned char>(c)));
        const size_t cl = head.find("\r\ncontent-length:");
        if (cl == std::string::npos) return -1;
        content_length = size_t(std::strtoull(head.c_str() + cl + 17, nullptr, 10));
        closed_ = head.find("\r\nconnection: close") != std::string::npos;
        return status;
    }

    bool read_body(char * out, size_t n) {
        const size_t have = std::min(n, pending_.size());
        std::memcpy(out, pending_.data(), have);
        pending_.erase(0, have);
        return raw_recv_all(fd_, out + have, n - have);
    }

    int fd_;
    int port_;
    bool closed_ = false;  // the last response said "Connection: close"
    std::string pending_;
};

}  // namespace baton::bench
