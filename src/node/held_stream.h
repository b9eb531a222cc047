// held_stream.h — a held state that is still being made (streamed transfer, docs/router.md): the frames of a
// state stream (state_stream.h) in the order the prefill task hands them on, kept until the lease ends so that
// every fetch — a second decode node after the first failed — reads them all from the first, and follows the
// rest as they come.
// Thread-safety: every member is safe from any thread (one mutex). The scheduler thread appends (through the
// prefill task's part callback) and wakes the watchers; fetches on the event loop read.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "baton/base/thread_annotations.h"
#include "baton/http/async_notify.h"

namespace baton {

class held_stream {
  public:
    using frame = std::shared_ptr<const std::vector<uint8_t>>;

    // append adds a frame (the head, a part's frame head, a part's blob, the end or an error frame) and wakes
    // every watcher. Nothing is added after close.
    void append(std::vector<uint8_t> bytes);
    // close: the stream is whole (its end or error frame was appended).
    void close();
    // abandon: the lease ended before the stream did (released or expired): closes it and, when it was still open,
    // calls the abandon hook (the prefill node cancels the prompt nobody will fetch).
    void abandon();
    void set_on_abandon(std::function<void()> fn);
    bool closed() const;
    // frames_from appends frames i.. to out and returns whether the stream was closed when they were taken (then
    // out holds all of it).
    bool frames_from(size_t i, std::vector<frame> & out) const;
    // watch: n is notified on every append and on close until it is unwatched (or destroyed).
    void watch(const notify_ptr & n);
    void unwatch(const notify_ptr & n);
    uint64_t bytes() const;

  private:
    void wake() BATON_REQUIRES(mu_);
    mutable mutex mu_;
    std::vector<frame> frames_ BATON_GUARDED_BY(mu_);
    std::vector<std::weak_ptr<async_notify>> watchers_ BATON_GUARDED_BY(mu_);
    uint64_t bytes_ BATON_GUARDED_BY(mu_) = 0;
    bool closed_ BATON_GUARDED_BY(mu_) = false;
    std::function<void()> on_abandon_ BATON_GUARDED_BY(mu_);
};

}  // namespace baton
