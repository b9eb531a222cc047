// cli11_impl.cpp — the one translation unit that compiles CLI11's implementation. Every other source of
// the cli module sees only its declarations (CLI11_COMPILE, src/CMakeLists.txt), as the HTTP edge compiles
// Boost.Asio/Beast once (src/http/asio_impl.cpp): CLI11's inline functions cost ~5 s of -O2 code
// generation in each of the ten files that parse a command line.
#include <CLI/CLI.hpp>
#include <CLI/impl/App_inl.hpp>
#include <CLI/impl/Argv_inl.hpp>
#include <CLI/impl/Config_inl.hpp>
#include <CLI/impl/Encoding_inl.hpp>
#include <CLI/impl/ExtraValidators_inl.hpp>
#include <CLI/impl/Formatter_inl.hpp>
#include <CLI/impl/Option_inl.hpp>
#include <CLI/impl/Split_inl.hpp>
#include <CLI/impl/StringTools_inl.hpp>
#include <CLI/impl/Validators_inl.hpp>
