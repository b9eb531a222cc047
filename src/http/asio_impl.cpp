// asio_impl.cpp — the one translation unit that compiles Boost.Asio's and Boost.Beast's implementation
// (see net.h: separate compilation).
#include <boost/asio/impl/src.hpp>
#include <boost/asio/ssl/impl/src.hpp>
#include <boost/beast/src.hpp>
