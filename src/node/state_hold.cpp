// state_hold.cpp — leases on the states a prefill node holds for direct transfer (state_hold.h).
#include "state_hold.h"

#include <random>

#include "baton/base/buffer_pool.h"
#include "baton/pd/pd_protocol.h"

namespace baton {

namespace {

// A held blob goes back to the buffer pool when its last reader lets go (the lease ended and no send reads it).
state_hold::blob_ref share_pooled(std::vector<uint8_t> blob) {
    auto * p = new std::vector<uint8_t>(std::move(blob));
    return state_hold::blob_ref(p, [](const std::vector<uint8_t> * v) {
        buffer_pool::shared().give(std::move(*const_cast<std::vector<uint8_t> *>(v)));
        delete v;
    });
}

}  // namespace

std::string state_hold::random_id() {
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    static const char * digits = "0123456789abcdef";
    std::string s(pd_state_id_chars, '0');
    for (int half = 0; half < 2; ++half) {
        uint64_t v = rng();
        for (int i = 0; i < 16; ++i) s[size_t(half * 16 + i)] = digits[(v >> (4 * i)) & 15];
    }
    return s;
}

size_t state_hold::expire_locked(clock::time_point now) {
    size_t n = 0;
    for (auto it = leases_.begin(); it != leases_.end();) {
        if (it->second.stream && !it->second.stream->closed()) it->second.expires = now + limits_.ttl;
        if (it->second.expires <= now) {
            if (it->second.stream) it->second.stream->abandon();
            stats_.held_bytes -= it->second.size();
            it = leases_.erase(it);
            ++n;
        } else {
            ++it;
        }
    }
    stats_.expired += n;
    stats_.held = leases_.size();
    return n;
}

Result<std::string> state_hold::put(std::vector<uint8_t> blob, clock::time_point now) {
    const uint64_t size = blob.size();
    lock_guard lk(mu_);
    expire_locked(now);
    if (size > limits_.max_bytes) {
        ++stats_.refused;
        return Status(status_code::too_large, "state of " + std::to_string(size) + " bytes: over --state-hold-mb (" +
                                                  std::to_string(limits_.max_bytes) + " bytes)");
    }
    if (leases_.size() >= limits_.max_states || stats_.held_bytes + size > limits_.max_bytes) {
        ++stats_.refused;
        return Status(status_code::unavailable, "this node holds " + std::to_string(leases_.size()) + " states (" +
                                                    std::to_string(stats_.held_bytes) +
                                                    " bytes) for decode nodes to fetch: no room for another");
    }
    std::string id = random_id();
    while (leases_.count(id)) id = random_id();
    leases_.emplace(id, lease{share_pooled(std::move(blob)), nullptr, now + limits_.ttl});
    stats_.held_bytes += size;
    stats_.held = leases_.size();
    ++stats_.put;
    return id;
}

Result<state_hold::blob_ref> state_hold::get(std::string_view id, clock::time_point now) {
    lock_guard lk(mu_);
    auto it = leases_.find(id);
    if (it == leases_.end() || it->second.expires <= now || !it->second.blob)
        return Status(status_code::not_found,
                      "state " + std::string(id) + ": not held here (released, expired, or never made)");
    ++stats_.fetched;
    stats_.fetched_bytes += it->second.blob->size();
    return it->second.blob;
}

Result<std::string> state_hold::put_stream(std::shared_ptr<held_stream> stream, clock::time_point now) {
    lock_guard lk(mu_);
    expire_locked(now);
    if (leases_.size() >= limits_.max_states) {
        ++stats_.refused;
        return Status(status_code::unavailable, "this node holds " + std::to_string(leases_.size()) +
                                                    " states for decode nodes to fetch: no room for another");
    }
    std::string id = random_id();
    while (leases_.count(id)) id = random_id();
    leases_.emplace(id, lease{nullptr, std::move(stream), now + limits_.ttl});
    stats_.held = leases_.size();
    ++stats_.put;
    return id;
}

Result<std::shared_ptr<held_stream>> state_hold::get_stream(std::string_view id, clock::time_point now) {
    lock_guard lk(mu_);
    auto it = leases_.find(id);
    if (it == leases_.end() || it->second.expires <= now || !it->second.stream)
        return Status(status_code::not_found,
                      "state " + std::string(id) + ": no stream held here (released, expired, or never made)");
    ++stats_.fetched;
    return it->second.stream;
}

void state_hold::count_served(uint64_t bytes) {
    lock_guard lk(mu_);
    stats_.fetched_bytes += bytes;
}

bool state_hold::release(std::string_view id) {
    lock_guard lk(mu_);
    auto it = leases_.find(id);
    if (it == leases_.end()) return false;
    stats_.held_bytes -= it->second.size();
    if (it->second.stream) it->second.stream->abandon();
    leases_.erase(it);
    stats_.held = leases_.size();
    ++stats_.released;
    return true;
}

size_t state_hold::expire(clock::time_point now) {
    lock_guard lk(mu_);
    return expire_locked(now);
}

state_hold_stats state_hold::stats() const {
    lock_guard lk(mu_);
    return stats_;
}

}  // namespace baton
