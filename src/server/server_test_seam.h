// server_test_seam.h — what the test node (tests/support/test_node_main.cpp) may do to a server.
//
// Private to the server module: no production target has src/server as an include directory, and
// server_test_access is defined in baton_server_test_seam, a library only test executables link. A
// production server's seam is null.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "baton/server/server.h"

namespace baton {

struct server_test_seam {
    // on_blob_out may change every blob the node is about to send (prefill responses, slot saves) and
    // returns how many of its bytes to send before dropping the connection (blob.size(): all of them; the
    // Content-Length always announces the whole blob). Called on the HTTP edge's threads.
    std::function<size_t(std::vector<uint8_t> & blob)> on_blob_out;
};

struct server_test_access {
    // install REQUIRES: before bind().
    static void install(server & s, std::shared_ptr<const server_test_seam> seam);
};

}  // namespace baton
