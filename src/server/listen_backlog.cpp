// listen_backlog.cpp — see listen_backlog.h.
#include "listen_backlog.h"

#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace baton {

Status http_raise_backlog(int port, int backlog) {
    rlimit rl{};
    const int max_fd = ::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 65536 ? int(rl.rlim_cur) : 65536;
    for (int fd = 0; fd < max_fd; ++fd) {
        int listening = 0;
        socklen_t len = sizeof listening;
        if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening) continue;
        sockaddr_storage addr{};
        socklen_t alen = sizeof addr;
        if (::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &alen) != 0) continue;
        int p = -1;
        if (addr.ss_family == AF_INET) p = ntohs(reinterpret_cast<sockaddr_in *>(&addr)->sin_port);
        if (addr.ss_family == AF_INET6) p = ntohs(reinterpret_cast<sockaddr_in6 *>(&addr)->sin6_port);
        if (p != port) continue;
        if (::listen(fd, backlog) != 0) return {status_code::io_error, std::string("listen backlog: ") + std::strerror(errno)};
        return {};
    }
    return {status_code::not_found, "listen backlog: no listening socket on port " + std::to_string(port)};
}

}  // namespace baton
