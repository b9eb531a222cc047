// cli_test_seam.h — the one hook the test node (tests/support/test_node_main.cpp) sets in `baton serve`.
//
// Private to the cli module (no production target has src/cli as an include directory); apps/baton.cpp
// never sets it, so in production it is empty and run_serve skips it.
#pragma once

#include <functional>

namespace baton {

class node;

// cli_test_on_node, when set, is called with the node's server right after it is made, before bind().
extern std::function<void(node &)> cli_test_on_node;

}  // namespace baton
