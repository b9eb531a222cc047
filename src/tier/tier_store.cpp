// tier_store.cpp — put and get of tier entries: keys from entry keys, parts then manifest, every byte checked
// on the way back, the breaker in front of the network and the counters. The pool lends one valkey_client per
// call; only taking and giving back (and the breaker) run under the mutex, never a network call.
#include "baton/tier/tier_store.h"

#include <chrono>
#include <cinttypes>
#include <cstdio>

#include "baton/base/buffer_pool.h"
#include "tier_format.h"
#include "tier_manifest.h"
#include "tier_store_state.h"
#include "tier_test_seam.h"

namespace baton {
namespace {

namespace tf = tier_format;

// k_part_ttl_extra_ms: parts outlive their manifest by this much (they are written before it).
constexpr uint64_t k_part_ttl_extra_ms = 1000;

bool is_lower_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }
bool is_layout_char(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' || c == '_' ||
           c == '=' || c == ',' || c == '+' || c == '-';
}

// is_breaker_failure: the codes that say Valkey is unreachable or broken (tier_breaker.h).
bool is_breaker_failure(status_code c) {
    return c == status_code::unavailable || c == status_code::deadline_exceeded || c == status_code::upstream_error ||
           c == status_code::permission_denied || c == status_code::internal;
}

std::chrono::steady_clock::time_point now() { return std::chrono::steady_clock::now(); }

}  // namespace

Result<std::string> tier_entry_key_name(const tier_entry_key & key) {
    const std::string & fp = key.fingerprint;
    if (fp.empty() || fp.size() > tf::k_fingerprint_chars_max)
        return invalid_input("tier key: fingerprint length " + std::to_string(fp.size()) + " outside [1, " +
                             std::to_string(tf::k_fingerprint_chars_max) + "]");
    for (size_t i = 0; i < fp.size(); ++i)
        if (!is_lower_hex(fp[i]))
            return invalid_input("tier key: fingerprint character " + std::to_string(i) +
                                 " is not a lowercase hex digit");
    const std::string & l = key.layout;
    if (l.empty() || l.size() > tf::k_layout_chars_max)
        return invalid_input("tier key: layout length " + std::to_string(l.size()) + " outside [1, " +
                             std::to_string(tf::k_layout_chars_max) + "]");
    for (size_t i = 0; i < l.size(); ++i)
        if (!is_layout_char(l[i]))
            return invalid_input("tier key: layout character " + std::to_string(i) +
                                 " is not one of [A-Za-z0-9._=,+-]");
    char hash[17];
    std::snprintf(hash, sizeof hash, "%016" PRIx64, key.chain_hash);
    return std::string(tf::k_key_prefix) + fp + ":" + l + ":" + std::to_string(key.state_version) + ":" + hash;
}

Result<std::unique_ptr<tier_store::state>> tier_store_state_make(tier_config config) {
    if (config.part_bytes == 0 || config.part_bytes > tf::k_part_bytes_max)
        return invalid_input("tier config: part_bytes " + std::to_string(config.part_bytes) + " outside [1, " +
                             std::to_string(tf::k_part_bytes_max) + "]");
    if (config.breaker_failures_to_open == 0)
        return invalid_input("tier config: breaker_failures_to_open must be >= 1");
    if (config.valkey.host.empty()) return invalid_input("tier config: valkey host is empty");
    if (config.valkey.port == 0) return invalid_input("tier config: valkey port is 0");
    return std::make_unique<tier_store::state>(std::move(config));
}

Result<std::unique_ptr<tier_store>> tier_store::create(tier_config config) {
    auto s = tier_store_state_make(std::move(config));
    if (!s.ok()) return s.status();
    return std::unique_ptr<tier_store>(new tier_store(std::move(s.value())));
}

tier_store::tier_store(std::unique_ptr<state> s) : s_(std::move(s)) {}
tier_store::~tier_store() = default;

namespace {

// A call's connection and its place in front of the breaker: begin asks the breaker and takes a connection;
// end records the outcome, counts it and gives the connection back.
class tier_call {
  public:
    explicit tier_call(tier_store::state & s) : s_(s) {}
    ~tier_call() {
        if (client_) give_back();
    }

    // begin: unavailable when the breaker is open (nothing sent).
    Status begin() {
        lock_guard lock(s_.mu);
        if (!s_.breaker.allow(now())) {
            ++s_.errors;
            return Status(status_code::unavailable, "tier: circuit breaker open (Valkey failed " +
                                                        std::to_string(s_.config.breaker_failures_to_open) +
                                                        " times in a row); no call made");
        }
        if (!s_.idle.empty()) {
            client_ = std::move(s_.idle.back());
            s_.idle.pop_back();
        }
        allowed_ = true;
        return {};
    }
    valkey_client & client() {
        if (!client_) client_ = std::make_unique<valkey_client>(s_.config.valkey);
        return *client_;
    }
    // end records the outcome of the call with the breaker and the counters, and returns st.
    Status end(Status st) {
        if (!st.ok()) {
            ++s_.errors;
            if (st.code() == status_code::deadline_exceeded) ++s_.timeouts;
        }
        lock_guard lock(s_.mu);
        if (allowed_) {
            allowed_ = false;
            if (!st.ok() && is_breaker_failure(st.code())) {
                if (s_.breaker.record_failure(now())) ++s_.breaker_opens;
            } else {
                s_.breaker.record_success();
            }
        }
        return st;
    }

  private:
    void give_back() {
        if (allowed_) (void)end(Status(status_code::internal, "tier: call ended without an outcome"));
        lock_guard lock(s_.mu);
        if (s_.idle.size() < s_.config.connections_idle_max) s_.idle.push_back(std::move(client_));
    }

    tier_store::state & s_;
    std::unique_ptr<valkey_client> client_;
    bool allowed_ = false;
};

}  // namespace

Status tier_store::put(const tier_entry_key & key, std::span<const uint8_t> bytes, uint64_t ttl_ms) {
    state & s = *s_;
    auto name = tier_entry_key_name(key);
    if (!name.ok()) return name.status();
    if (ttl_ms == 0) return invalid_input("tier put: ttl_ms must be > 0");
    if (bytes.size() > s.config.entry_bytes_max)
        return Status(status_code::too_large, "tier put: entry of " + std::to_string(bytes.size()) +
                                                  " bytes > entry_bytes_max " +
                                                  std::to_string(s.config.entry_bytes_max));
    const tier_manifest m = tier_manifest_describe(bytes, s.config.part_bytes);
    if (m.parts.size() > tf::k_parts_max)
        return Status(status_code::too_large, "tier put: " + std::to_string(m.parts.size()) + " parts > " +
                                                  std::to_string(tf::k_parts_max) + " (raise part_bytes)");
    std::vector<std::string> part_keys;
    std::vector<std::span<const uint8_t>> part_bytes;
    size_t off = 0;
    for (size_t i = 0; i < m.parts.size(); ++i) {
        part_keys.push_back(tier_part_key_name(name.value(), i, m.parts[i].xxh3));
        part_bytes.push_back(bytes.subspan(off, size_t(m.parts[i].size)));
        off += size_t(m.parts[i].size);
    }
    const std::vector<uint8_t> manifest = tier_manifest_write(m);

    tier_call call(s);
    BATON_RETURN_IF_ERROR(call.begin());
    valkey_client & c = call.client();
    Status st = c.set_each(part_keys, part_bytes, ttl_ms + k_part_ttl_extra_ms);
    if (st.ok()) st = c.set(name.value(), manifest, ttl_ms);
    if (!st.ok()) {
        // No manifest names the parts written: delete them now rather than let them hold memory until their
        // TTL (best effort: DEL runs even under noeviction; a broken connection leaves them to the TTL).
        if (st.code() == status_code::resource_exhausted) (void)c.del(part_keys);
        return call.end(std::move(st));
    }
    ++s.puts;
    s.bytes_written += bytes.size();
    return call.end(Status());
}

Result<std::optional<std::vector<uint8_t>>> tier_store::get(const tier_entry_key & key) {
    state & s = *s_;
    auto name = tier_entry_key_name(key);
    if (!name.ok()) return name.status();

    tier_call call(s);
    BATON_RETURN_IF_ERROR(call.begin());
    valkey_client & c = call.client();
    auto raw = c.get(name.value());
    if (!raw.ok()) return call.end(raw.status());
    if (!raw.value()) {
        ++s.misses;
        BATON_RETURN_IF_ERROR(call.end(Status()));
        return std::optional<std::vector<uint8_t>>();
    }
    auto m = tier_manifest_parse(*raw.value(), s.config.entry_bytes_max);
    if (!m.ok()) {
        ++s.corrupt;
        BATON_RETURN_IF_ERROR(call.end(Status()));
        return std::optional<std::vector<uint8_t>>();
    }
    if (s.seam && s.seam->after_manifest) s.seam->after_manifest();

    std::vector<std::string> part_keys;
    for (size_t i = 0; i < m->parts.size(); ++i)
        part_keys.push_back(tier_part_key_name(name.value(), i, m->parts[i].xxh3));
    std::vector<uint8_t> out = buffer_pool::shared().take(size_t(m->total_bytes));
    tier_entry_hash hash;  // each part's XXH3-64 and the whole's XXH3-128, in the pass that copies it out
    bool missing = false, damaged = false;
    // Every reply is read (the connection stays in step); after the first missing or damaged part the rest are
    // only skipped.
    Status st = c.get_each(part_keys, [&](size_t i, const std::span<const uint8_t> * v) {
        if (missing || damaged) return Status();
        if (!v) {
            missing = true;
            return Status();
        }
        if (v->size() != m->parts[i].size || hash.add_part(*v, &out) != m->parts[i].xxh3) damaged = true;
        return Status();
    });
    if (!st.ok()) {
        buffer_pool::shared().give(std::move(out));
        return call.end(std::move(st));
    }
    if (!missing && !damaged) damaged = hash.entry_digest() != m->entry_xxh3;
    BATON_RETURN_IF_ERROR(call.end(Status()));
    if (missing || damaged) {
        ++(missing ? s.misses : s.corrupt);
        buffer_pool::shared().give(std::move(out));
        return std::optional<std::vector<uint8_t>>();
    }
    ++s.hits;
    s.bytes_read += out.size();
    return std::optional<std::vector<uint8_t>>(std::move(out));
}

tier_counters tier_store::counters() const {
    const state & s = *s_;
    tier_counters c;
    c.hits = s.hits.load();
    c.misses = s.misses.load();
    c.corrupt = s.corrupt.load();
    c.errors = s.errors.load();
    c.timeouts = s.timeouts.load();
    c.breaker_opens = s.breaker_opens.load();
    c.bytes_read = s.bytes_read.load();
    c.bytes_written = s.bytes_written.load();
    c.puts = s.puts.load();
    return c;
}

}  // namespace baton
