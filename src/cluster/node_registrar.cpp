// node_registrar.cpp — see node_registrar.h.
#include "baton/cluster/node_registrar.h"

#include <algorithm>

#include "baton/base/log.h"

namespace baton {

using steady = std::chrono::steady_clock;

namespace {

steady::duration seconds(double s) {
    return std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(s));
}

}  // namespace

node_registrar::node_registrar(registrar_config cfg, std::function<node_record()> snapshot)
    : cfg_(std::move(cfg)), snapshot_(std::move(snapshot)), etcd_(std::make_unique<etcd_client>(cfg_.etcd)) {}

node_registrar::~node_registrar() {
    if (started_.load() && !stop_.load()) (void)deregister(std::chrono::seconds(2));
}

void node_registrar::start(net::any_io_executor ex) {
    ex_ = net::make_strand(ex);
    wake_ = async_notify::make(ex_);
    started_.store(true);
    done_ = net::co_spawn(ex_, loop(), net::use_future);
}

net::awaitable<bool> node_registrar::wait(steady::time_point until) {
    if (stop_.load()) co_return true;
    (void)co_await wake_->wait_until(until);
    co_return stop_.load();
}

net::awaitable<void> node_registrar::loop() {
    double backoff = 0.2;
    bool warned = false;  // one line per outage, not one per retry
    auto failed = [&](const Status & st, const char * what) {
        if (!warned)
            log_warn("serve: etcd {} failed ({}); the node keeps serving and retries with backoff", what,
                     st.to_string());
        warned = true;
        registered_.store(false);
    };
    while (!stop_.load()) {
        // 1. A lease and the record under it.
        auto lease = co_await etcd_->lease_grant(int64_t(cfg_.lease_ttl_s + 0.5));
        if (!lease.ok()) {
            failed(lease.status(), "lease grant");
            if (co_await wait(steady::now() + seconds(backoff))) break;
            backoff = std::min(backoff * 2, 5.0);
            continue;
        }
        lease_ = lease.value();
        if (stop_.load()) break;
        Status st = co_await etcd_->put(cfg_.key, node_record_json(snapshot_()), lease_);
        if (!st.ok()) {
            failed(st, "put");
            if (co_await wait(steady::now() + seconds(backoff))) break;
            backoff = std::min(backoff * 2, 5.0);
            continue;
        }
        registered_.store(true);
        warned = false;
        registrations_.fetch_add(1);
        log_info("serve: registered {} in etcd at {} (lease ttl {:.0f} s)", cfg_.key, etcd_->endpoint(),
                 cfg_.lease_ttl_s);
        backoff = 0.2;
        // 2. Keep it: the lease every TTL/3, the record every load interval.
        auto last_alive = steady::now();
        auto next_alive = last_alive + seconds(cfg_.lease_ttl_s / 3);
        auto next_record = steady::now() + seconds(cfg_.load_interval_s);
        bool lost = false;
        while (!lost) {
            if (co_await wait(std::min(next_alive, next_record))) co_return;  // deregister() takes over
            const auto now = steady::now();
            if (now >= next_alive) {
                auto ttl = co_await etcd_->lease_keepalive(lease_);
                if (ttl.ok() && ttl.value() > 0) {
                    if (warned) log_info("serve: etcd reachable again; lease kept");
                    warned = false;
                    last_alive = steady::now();
                    next_alive = last_alive + seconds(cfg_.lease_ttl_s / 3);
                } else if (ttl.ok() || ttl.status().code() == status_code::not_found) {
                    log_warn("serve: etcd lease expired; registering again");
                    lost = true;  // etcd forgot the lease (expired while we were away): register again
                } else {
                    failed(ttl.status(), "lease keepalive");
                    // Past the TTL the lease is gone for sure; until then keep trying the same one.
                    if (steady::now() - last_alive > seconds(cfg_.lease_ttl_s)) lost = true;
                    next_alive = steady::now() + seconds(std::min(backoff, cfg_.lease_ttl_s / 3));
                    backoff = std::min(backoff * 2, 5.0);
                }
            }
            if (!lost && steady::now() >= next_record) {
                if (stop_.load()) co_return;
                Status put = co_await etcd_->put(cfg_.key, node_record_json(snapshot_()), lease_);
                if (put.code() == status_code::not_found) lost = true;  // the lease is gone
                else if (!put.ok()) failed(put, "record update");
                else registered_.store(true);
                next_record = steady::now() + seconds(cfg_.load_interval_s);
            }
        }
        registered_.store(false);
    }
}

Status node_registrar::deregister(std::chrono::milliseconds timeout) {
    if (!started_.load()) return {};
    if (stop_.exchange(true)) return {};
    wake_->notify();
    const auto until = steady::now() + timeout;
    if (done_.valid() && done_.wait_until(until) != std::future_status::ready)
        return Status(status_code::deadline_exceeded, "etcd: the registration loop did not end in time");
    registered_.store(false);
    if (lease_ == 0) return {};
    // Delete the key first (the routers drop the node at once), then the lease.
    auto f = net::co_spawn(
        ex_,
        [this]() -> net::awaitable<Status> {
            Status st = co_await etcd_->remove(cfg_.key);
            Status rv = co_await etcd_->lease_revoke(lease_);
            co_return st.ok() ? rv : st;
        },
        net::use_future);
    if (f.wait_until(until) != std::future_status::ready)
        return Status(status_code::deadline_exceeded, "etcd: deregistering did not finish in time");
    Status st = f.get();
    if (st.ok()) log_info("serve: deregistered {} from etcd", cfg_.key);
    return st;
}

}  // namespace baton
