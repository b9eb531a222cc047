// body_relay.h — a response body passed on as a request body while it is still arriving.
//
// The router moves a state blob from a prefill node to a decode node without waiting for the whole blob:
// the prefill call's worker appends bytes as they arrive, and a decode call's worker sends them as soon
// as they are there, so the two transfers overlap. Every byte is kept (in a pooled buffer) until the
// relay is dropped, so the same body can be sent again to another decode node if the first one fails
// before answering.
// Thread-safety: one producer (append/finish) and any number of readers; every method is thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include "baton/status.h"

namespace baton {

class body_relay {
  public:
    // length: the total the producer announced (its Content-Length); more bytes than that fail the relay.
    explicit body_relay(uint64_t length);
    ~body_relay();  // the buffer goes back to buffer_pool::shared()

    uint64_t length() const { return length_; }

    // Producer side.
    void append(const char * data, size_t n);
    // finish ends the body: ok only if exactly length() bytes arrived, else the relay fails with st (or
    // with a short-body error).
    void finish(Status st);

    // read waits until bytes past offset are available, the body failed, or until `until`; with bytes it
    // calls out with up to max_bytes of them (out's result is returned as data or failed).
    enum class read_result : uint8_t { data, waiting, failed };
    read_result read(uint64_t offset, size_t max_bytes, std::chrono::steady_clock::time_point until,
                     const std::function<bool(const uint8_t *, size_t)> & out);
    // wait_end blocks until the producer finished; returns its status.
    Status wait_end(std::chrono::steady_clock::time_point deadline);
    // failed: the producer ended with an error (the body will never be complete).
    bool failed() const;
    // ended_at: when the producer finished (default-constructed before that).
    std::chrono::steady_clock::time_point ended_at() const;

  private:
    const uint64_t length_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::vector<uint8_t> bytes_;  // GUARDED_BY(mu_); capacity reserved up front, never reallocated
    bool ended_ = false;  // GUARDED_BY(mu_)
    std::chrono::steady_clock::time_point ended_at_;  // GUARDED_BY(mu_)
    Status status_;                           // GUARDED_BY(mu_)
};

}  // namespace baton
