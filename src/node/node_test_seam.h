// node_test_seam.h — what the test node (tests/support/test_node_main.cpp) may do to a node.
//
// Private to the node module: no production target has src/node as an include directory, and
// node_test_access is defined in baton_node_test_seam, a library only test executables link. A
// production node's seam is null.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "baton/node/node.h"

namespace baton {

struct node_test_seam {
    // on_blob_out may change every blob the node is about to send (prefill responses, slot saves) and
    // returns how many of its bytes to send before dropping the connection (blob.size(): all of them; the
    // Content-Length always announces the whole blob). Called on the HTTP edge's threads.
    std::function<size_t(std::vector<uint8_t> & blob)> on_blob_out;
    // held_state_pause_ms: GET /v1/states/{id} sends half of the state, waits this long, then the rest (a
    // decode node is then mid-fetch for that long). 0: no pause.
    uint32_t held_state_pause_ms = 0;
    // stream_cut_after_frames: the k-th held stream served (streamed transfer; k = 0, 1, ...) is cut after
    // stream_cut_after_frames + k frames (the head is one, each part two: its frame head and its blob, the end
    // frame one): the connection drops there. -1: every stream is served whole.
    int stream_cut_after_frames = -1;
    mutable std::atomic<int> streams_served{0};
    // migrate_after_tokens: every generation the router can move (live migration) is asked to move once it has
    // generated this many tokens on this node. 0: never.
    uint32_t migrate_after_tokens = 0;
};

struct node_test_access {
    // install REQUIRES: before bind().
    static void install(node & s, std::shared_ptr<const node_test_seam> seam);
};

}  // namespace baton
