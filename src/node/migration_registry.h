// migration_registry.h — the generations a node may pause and hand on (live migration, docs/cluster.md).
//
// A generation the router can move (it sent X-Baton-Migratable and the request is one the node can resume
// elsewhere: one choice, no logprobs, not the Messages API) is entered here while it runs; POST /admin/migrate
// and drain ask some or all of them to migrate (request_handle::migrate): each pauses before its next token and
// its handler hands its state to the router. A generation that ends first simply ends.
// Thread-safety: every member may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "baton/base/thread_annotations.h"
#include "baton/engine.h"

namespace baton {

class migration_registry {
  public:
    // entry: a generation's place in the registry, left when it is destroyed.
    class entry {
      public:
        entry() = default;
        entry(migration_registry * r, uint64_t key) : r_(r), key_(key) {}
        entry(entry && o) noexcept : r_(o.r_), key_(o.key_) { o.r_ = nullptr; }
        entry & operator=(entry && o) noexcept;
        entry(const entry &) = delete;
        entry & operator=(const entry &) = delete;
        ~entry();

      private:
        migration_registry * r_ = nullptr;
        uint64_t key_ = 0;
    };

    entry enter(const request_ptr & h);
    // migrate asks up to n generations (0: every one), oldest first, to migrate; returns how many were asked
    // (a generation already asked is not counted again).
    size_t migrate(size_t n);
    size_t size() const;

  private:
    void leave(uint64_t key);
    mutable mutex mu_;
    uint64_t next_ BATON_GUARDED_BY(mu_) = 1;
    std::map<uint64_t, std::weak_ptr<request_handle>> running_ BATON_GUARDED_BY(mu_);
};

}  // namespace baton
