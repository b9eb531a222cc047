// cluster_watch.cpp — see cluster_watch.h.
#include "baton/cluster/cluster_watch.h"

#include <algorithm>

#include "baton/base/log.h"

namespace baton {

using steady = std::chrono::steady_clock;

cluster_watch::cluster_watch(etcd_config etcd, std::string prefix, on_change_fn on_change, double round_s)
    : etcd_cfg_(std::move(etcd)), prefix_(std::move(prefix)), on_change_(std::move(on_change)), round_s_(round_s),
      etcd_(std::make_unique<etcd_client>(etcd_cfg_)) {}

cluster_watch::~cluster_watch() { stop(); }

void cluster_watch::start(net::any_io_executor ex) {
    ex_ = net::make_strand(ex);
    wake_ = async_notify::make(ex_);
    done_ = net::co_spawn(ex_, loop(), net::use_future);
}

void cluster_watch::stop() {
    if (stop_.exchange(true)) return;
    if (wake_) wake_->notify();
    if (done_.valid()) net::post(ex_, [this] { etcd_->cancel_watch(); });  // a watch round ends at once
    // A watch round ends at its deadline at the latest; a unary call within etcd_config::timeout_s.
    if (done_.valid()) done_.wait_for(std::chrono::milliseconds(int64_t(round_s_ * 1000) + 5000));
}

void cluster_watch::apply(const etcd_kv & kv, bool deleted) {
    if (deleted) {
        members_.erase(kv.key);
        return;
    }
    auto r = node_record_parse(kv.value);
    if (!r.ok()) {
        bad_records_.fetch_add(1);
        log_warn("route: ignoring {}: {}", kv.key, r.status().message());
        members_.erase(kv.key);
        return;
    }
    members_[kv.key] = std::move(r.value());
}

net::awaitable<void> cluster_watch::loop() {
    double backoff = 0.2;
    bool first = true;
    while (!stop_.load()) {
        auto listing = co_await etcd_->range_prefix(prefix_);
        if (!listing.ok()) {
            if (connected_.exchange(false) || first)
                log_warn("route: etcd unreachable ({}); keeping the last membership, retrying",
                         listing.status().to_string());
            if (co_await wake_->wait_until(steady::now() + std::chrono::milliseconds(int64_t(backoff * 1000)))) break;
            backoff = std::min(backoff * 2, 5.0);
            continue;
        }
        if (!first) resyncs_.fetch_add(1);
        if (!connected_.exchange(true))
            log_info("route: etcd at {}: {} node records under {}", etcd_->endpoint(), listing->kvs.size(), prefix_);
        first = false;
        backoff = 0.2;
        members_.clear();
        for (const auto & kv : listing->kvs) apply(kv, false);
        on_change_(members_);
        listed_.store(true);
        int64_t next = listing->revision + 1;
        while (!stop_.load()) {
            const auto until = steady::now() + std::chrono::milliseconds(int64_t(round_s_ * 1000));
            auto end = co_await etcd_->watch_prefix(prefix_, next, until,
                                                    [this](const std::vector<etcd_event> & events, int64_t) {
                                                        for (const auto & e : events) apply(e.kv, e.deleted);
                                                        on_change_(members_);
                                                    });
            if (!end.ok()) {
                connected_.store(false);
                if (stop_.load()) break;
                log_warn("route: etcd watch failed ({}); keeping the last membership, reconnecting",
                         end.status().to_string());
                break;
            }
            if (end->compacted) break;  // list again
            next = std::max(next, end->next_revision);
        }
        if (!stop_.load() && !connected_.load()) {
            if (co_await wake_->wait_until(steady::now() + std::chrono::milliseconds(int64_t(backoff * 1000)))) break;
            backoff = std::min(backoff * 2, 5.0);
        }
    }
}

}  // namespace baton
