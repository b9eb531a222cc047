// node_registrar.h — a node's registration in etcd: a lease kept alive, a record kept current.
//
// start() runs one loop on the given executor: grant a lease (--lease-ttl), put the node's record under
// its key with that lease, keep the lease alive every TTL/3 and rewrite the record every load interval
// (the load figure changes). When etcd is unreachable the node keeps serving and the loop retries with
// backoff (0.2 s doubling to 5 s); when the lease is found expired (etcd forgot it, or the node was paused
// past its TTL) it registers again with a new lease. deregister() ends the loop and removes the key and the
// lease, so a draining node leaves the routers' pools before it refuses work.
// Thread-safety: start/deregister/registered/registrations from any thread; the loop and the snapshot
// callback run on the executor given to start().
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>

#include "baton/cluster/etcd_client.h"
#include "baton/cluster/node_record.h"
#include "baton/http/async_notify.h"
#include "baton/http/net.h"

namespace baton {

struct registrar_config {
    etcd_config etcd;
    std::string key;             // cluster_node_key(...)
    double lease_ttl_s = 10;     // 2..3600
    double load_interval_s = 2;  // how often the record is rewritten
};

class node_registrar {
  public:
    // snapshot returns the node's current record (called on the loop's executor; must not block).
    node_registrar(registrar_config cfg, std::function<node_record()> snapshot);
    ~node_registrar();  // deregister(2 s) if still running

    void start(net::any_io_executor ex);
    // deregister ends the loop, deletes the key and revokes the lease, each bounded by timeout (the key
    // also disappears by itself when the lease expires). REQUIRES: not called on the loop's executor.
    Status deregister(std::chrono::milliseconds timeout);

    bool registered() const { return registered_.load(); }            // the record is in etcd (last we know)
    uint64_t registrations() const { return registrations_.load(); }  // leases granted with a record put

  private:
    net::awaitable<void> loop();
    net::awaitable<bool> wait(std::chrono::steady_clock::time_point until);  // true when stopping

    registrar_config cfg_;
    std::function<node_record()> snapshot_;
    std::unique_ptr<etcd_client> etcd_;  // used on the loop's executor only
    net::any_io_executor ex_;
    notify_ptr wake_;
    std::future<void> done_;
    std::atomic<bool> stop_{false};
    std::atomic<bool> started_{false};
    std::atomic<bool> registered_{false};
    std::atomic<uint64_t> registrations_{0};
    int64_t lease_ = 0;  // the loop's; read by deregister only after the loop ended
};

}  // namespace baton
