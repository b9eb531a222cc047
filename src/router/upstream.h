// upstream.h — one HTTP request from the router to a node, streamed.
//
// upstream_call runs the request on a worker thread and hands the caller the response in order: first the
// status line and headers (or a transport error before any byte — the router may then retry another node),
// then body chunks, then the end (clean, or an error after the first byte — the router must then end the
// client's response with an explicit error). Every call has a deadline; cancel() aborts the socket.
// Thread-safety: one consumer thread calls wait_headers/next_chunk; cancel() is safe from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "baton/status.h"
#include "body_relay.h"

namespace httplib {
class Client;
struct Request;
}

namespace baton {

struct upstream_request {
    std::string base_url;       // "http://127.0.0.1:8081"
    std::string path;           // "/v1/decode"
    std::string body;
    std::string content_type;   // "application/json" | "application/octet-stream"
    std::string bearer;         // node key, "" for none
    std::chrono::steady_clock::time_point deadline;
    // body_from: send this body (still arriving from another call) instead of `body`.
    std::shared_ptr<body_relay> body_from;
    // relay_response: a 200 response with a Content-Length of at most relay_max_bytes is delivered through
    // relay(), not next_chunk(); a 200 without one, or with a larger one, is aborted at its headers
    // (relay() stays null), so nothing unbounded is ever buffered.
    bool relay_response = false;
    uint64_t relay_max_bytes = 0;
};

class upstream_call {
  public:
    static std::unique_ptr<upstream_call> start(upstream_request req);
    ~upstream_call();  // cancels and joins the worker

    // wait_headers returns the HTTP status once headers arrived; a non-ok Status (upstream_error or
    // deadline_exceeded) means the request failed before the first byte.
    Result<int> wait_headers();
    const std::string & content_type() const { return content_type_; }
    // next_chunk returns false at the end of the body; then end_status() tells whether it ended cleanly.
    bool next_chunk(std::string & out);
    Status end_status();
    // read_all collects the rest of the body (for non-streaming relays and error bodies).
    Result<std::string> read_all();
    // relay: after wait_headers, the body of a relayed response (see upstream_request), else null. The
    // call must outlive the reading of it (its worker is the producer).
    std::shared_ptr<body_relay> relay() const { return relay_; }
    void cancel();

  private:
    upstream_call() = default;
    void run(upstream_request req);
    void send_relayed_body(httplib::Request & req, std::shared_ptr<body_relay> from);

    std::mutex mu_;
    std::condition_variable cv_;
    bool headers_ = false, ended_ = false;  // GUARDED_BY(mu_)
    std::atomic<bool> cancelled_{false};
    int status_ = 0;
    std::string content_type_;
    std::shared_ptr<body_relay> relay_;  // set once, before headers_ is published
    std::deque<std::string> chunks_;  // GUARDED_BY(mu_)
    Status error_;                    // GUARDED_BY(mu_)
    std::chrono::steady_clock::time_point deadline_;
    std::shared_ptr<httplib::Client> client_;
    std::thread worker_;
};

}  // namespace baton
