// ascii_space.h — the whitespace test the model-output scanners share (reasoning.cpp, tool_calls.cpp): the six
// ASCII space characters, as C's isspace in the C locale, without its locale dependence.
#pragma once

namespace baton {

inline bool is_ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

}  // namespace baton
