// listen_backlog.h — raise the accept backlog of a listening socket that cpp-httplib created.
//
// Debian's cpp-httplib is a compiled library whose listen() backlog is fixed at 5. When dozens of clients
// connect at once (a router fanning requests out, a load test), the kernel's accept queue overflows and
// some connections are reset before the server ever sees them ("Failed to read connection" at the
// client; ListenOverflows in /proc/net/netstat). Calling listen() again on the bound socket updates its
// backlog on Linux. Thread-safety: call once, after bind and before serving.
#pragma once

#include "baton/status.h"

namespace baton {

// http_raise_backlog finds this process's listening TCP socket on `port` and sets its backlog.
Status http_raise_backlog(int port, int backlog = 1024);

}  // namespace baton
