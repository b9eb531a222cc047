// cluster_watch.h — a router's view of the cluster: every node record under the cluster's prefix, kept
// current from etcd.
//
// The loop lists the prefix, then watches it from the listed revision in rounds of at most round_s (each
// round resumes at the last revision seen, so no change is missed; a compacted start revision makes it list
// again). Every change calls on_change with the whole membership. When etcd cannot be reached the last
// membership stays (on_change is not called), connected() turns false, and the loop retries with backoff
// (0.2 s doubling to 5 s), listing again when it reconnects. A record that does not parse is left out and
// counted (bad_records).
// Thread-safety: start/stop and the counters from any thread; on_change runs on the loop's executor.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <string>

#include "baton/cluster/etcd_client.h"
#include "baton/cluster/node_record.h"
#include "baton/http/async_notify.h"
#include "baton/http/net.h"

namespace baton {

// key -> record, for every valid record under the prefix.
using cluster_members = std::map<std::string, node_record>;

class cluster_watch {
  public:
    using on_change_fn = std::function<void(const cluster_members &)>;

    cluster_watch(etcd_config etcd, std::string prefix, on_change_fn on_change, double round_s = 10);
    ~cluster_watch();  // stop()

    void start(net::any_io_executor ex);
    // stop ends the loop (bounded: an etcd call in flight ends within its timeout). Idempotent.
    void stop();

    bool connected() const { return connected_.load(); }
    bool listed() const { return listed_.load(); }        // the first listing arrived
    uint64_t resyncs() const { return resyncs_.load(); }  // listings after the first (reconnects, compaction)
    uint64_t bad_records() const { return bad_records_.load(); }

  private:
    net::awaitable<void> loop();
    void apply(const etcd_kv & kv, bool deleted);

    etcd_config etcd_cfg_;
    std::string prefix_;
    on_change_fn on_change_;
    double round_s_;
    std::unique_ptr<etcd_client> etcd_;
    cluster_members members_;  // the loop's
    net::any_io_executor ex_;
    notify_ptr wake_;
    std::future<void> done_;
    std::atomic<bool> stop_{false};
    std::atomic<bool> connected_{false};
    std::atomic<bool> listed_{false};
    std::atomic<uint64_t> resyncs_{0};
    std::atomic<uint64_t> bad_records_{0};
};

}  // namespace baton
