// body_relay.h — a response body passed on as a request body while it is still arriving.
//
// The router moves a state blob from a prefill node to a decode node without waiting for the whole blob:
// the prefill call's coroutine reads bytes straight into the relay as they arrive, and the decode call's
// coroutine sends them as soon as they are there, so the two transfers overlap. Every byte is kept (in a
// pooled buffer of the announced length, reserved up front) until the relay is dropped, so the same body
// can be sent again to another decode node if the first one fails before answering.
// Thread-safety: none needed — producer and reader are coroutines of one client request, on its strand.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "baton/base/status.h"
#include "baton/http/async_notify.h"

namespace baton {

class body_relay {
  public:
    // length: the total the producer announced (its Content-Length).
    explicit body_relay(uint64_t length);
    ~body_relay();  // the buffer goes back to buffer_pool::shared()
    body_relay(const body_relay &) = delete;
    body_relay & operator=(const body_relay &) = delete;

    uint64_t length() const { return length_; }

    // Producer side: tail() is where the next bytes go (room() of them); commit(n) makes them readable.
    uint8_t * tail() { return bytes_.data() + size_; }
    uint64_t room() const { return length_ - size_; }
    void commit(size_t n);
    // finish ends the body: ok only if exactly length() bytes arrived, else the relay fails with st (or
    // with a short-body error).
    void finish(Status st);

    // Reader side.
    uint64_t size() const { return size_; }        // bytes readable now
    const uint8_t * data() const { return bytes_.data(); }
    bool ended() const { return ended_; }
    bool failed() const { return ended_ && !status_.ok(); }
    const Status & status() const { return status_; }
    std::chrono::steady_clock::time_point ended_at() const { return ended_at_; }
    // set_reader: the notifier woken whenever bytes arrive or the body ends (one reader at a time).
    void set_reader(notify_ptr n) { reader_ = std::move(n); }

  private:
    void wake() {
        if (reader_) reader_->notify();
    }
    const uint64_t length_;
    std::vector<uint8_t> bytes_;  // size length_, filled up to size_
    uint64_t size_ = 0;
    bool ended_ = false;
    std::chrono::steady_clock::time_point ended_at_;
    Status status_;
    notify_ptr reader_;
};

}  // namespace baton
