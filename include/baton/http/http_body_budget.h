// http_body_budget.h — the HTTP edge's budget of memory committed to incoming request bodies
// (--max-body-memory), shared by every connection of one http_server, node and router alike.
//
// Why: a request head announces its body's length before any byte of it arrives. The edge never
// allocates on the announcement (issue 22: 20 heads announcing 1 GB each took a keyless node from 86 MB to
// 4 GB); a body's buffer grows with the bytes that arrive, and every growth is first committed here. A
// commit that would pass the cap is refused (the request gets 503 + Retry-After and its connection
// closes) rather than waited for: a waiting body would keep its connection and socket buffers, and
// bodies waiting on one another's memory could wait forever. A request's share is an http_body_hold,
// released when the hold is destroyed (the request's end).
// Thread-safety: http_body_budget is safe from any thread (atomics); an http_body_hold has one owner.
#pragma once

#include <atomic>
#include <cstdint>

namespace baton {

class http_body_budget {
  public:
    explicit http_body_budget(uint64_t cap_bytes) : cap_(cap_bytes) {}
    http_body_budget(const http_body_budget &) = delete;
    http_body_budget & operator=(const http_body_budget &) = delete;

    // try_commit adds n bytes to the committed total unless that would pass the cap; on refusal it
    // changes nothing but the refusal counter and returns false.
    bool try_commit(uint64_t n);
    // release takes back n bytes. REQUIRES: n bytes were committed and not yet released.
    void release(uint64_t n);

    uint64_t cap() const { return cap_; }
    uint64_t committed() const { return committed_.load(std::memory_order_relaxed); }  // bytes
    uint64_t refusals() const { return refusals_.load(std::memory_order_relaxed); }    // refused commits

  private:
    const uint64_t cap_;  // bytes
    std::atomic<uint64_t> committed_{0}, refusals_{0};
};

// http_body_hold: one request's share of a budget; everything it committed is released when it is
// destroyed or reset. Movable, not copyable.
class http_body_hold {
  public:
    http_body_hold() = default;
    explicit http_body_hold(http_body_budget & b) : budget_(&b) {}
    http_body_hold(const http_body_hold &) = delete;
    http_body_hold & operator=(const http_body_hold &) = delete;
    http_body_hold(http_body_hold && o) noexcept : budget_(o.budget_), bytes_(o.bytes_) { o.bytes_ = 0; }
    http_body_hold & operator=(http_body_hold && o) noexcept;
    ~http_body_hold() { reset(); }

    // grow commits n more bytes to this hold; false when the budget refuses (the hold is unchanged).
    // A hold bound to no budget always grows.
    bool grow(uint64_t n);
    // reset releases everything this hold committed.
    void reset();
    uint64_t bytes() const { return bytes_; }

  private:
    http_body_budget * budget_ = nullptr;
    uint64_t bytes_ = 0;
};

}  // namespace baton
