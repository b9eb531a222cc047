// log_test_seam.h — what tests may do to the logger that production code cannot: see the lines it writes.
//
// Private to base (only base's sources and tests/base see src/base), and defined in baton_base_test_seam, a
// library only test executables link.
#pragma once

#include <functional>
#include <string_view>

namespace baton {

// log_set_sink_for_test sends every line from now on to `line` (one call per line, without its '\n')
// instead of stderr; an empty function restores stderr. `line` is called under the sink's mutex, one line
// at a time, from the thread that logged it. Test-only.
void log_set_sink_for_test(std::function<void(std::string_view line)> line);

}  // namespace baton
