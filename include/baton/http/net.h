// net.h — the one place that includes Boost.Asio and Boost.Beast for Baton's HTTP module.
//
// Asio and Beast are compiled once (asio_impl.cpp, BOOST_ASIO_SEPARATE_COMPILATION and
// BOOST_BEAST_SEPARATE_COMPILATION are set on the baton_http target and everything that links it), which
// keeps the node's and router's translation units small. Every coroutine in Baton's HTTP code is an
// net::awaitable running on a connection's strand.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>

namespace baton {

namespace net = boost::asio;
namespace beast = boost::beast;
using tcp = boost::asio::ip::tcp;
using error_code = boost::system::error_code;

// large_transfer: an Asio completion condition for async_read/async_write of a whole buffer that lets each
// system call move as much as the kernel takes (Asio's default, transfer_all, caps each step at 64 KiB:
// a 16 MiB blob would cost 256 steps through the stream's timer instead of a few).
inline size_t large_transfer(const error_code & ec, size_t) { return ec ? 0 : size_t(64) << 20; }

}  // namespace baton
