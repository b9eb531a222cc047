// free_port.h — a loopback TCP port free right now, for test servers that must be told their port (etcd,
// valkey-server). Self-contained (header-only, throws on failure as test setup does), so the process helpers
// that bench/ shares use it too. Thread-safety: a plain function.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

namespace baton::test {

// free_port binds an ephemeral loopback TCP port, closes it and returns its number. Another process may take
// it before the caller binds it: callers retry when their bind loses that race.
inline int free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw std::runtime_error("socket failed");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    if (::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len) != 0) {
        ::close(fd);
        throw std::runtime_error("bind to port 0 failed");
    }
    ::close(fd);
    return ntohs(a.sin_port);
}

}  // namespace baton::test
