// tier_link.cpp — a node's side of the shared prefix-cache tier (tier_link.h).
#include "tier_link.h"

#include <algorithm>
#include <span>
#include <tuple>

#include "baton/base/log.h"
#include "baton/blob.h"
#include "baton/pd/kv_blocks.h"

namespace baton {

namespace {
// The state blob's major format version: a reader parses every minor version of it (docs/blob-format.md).
constexpr uint32_t k_state_version = 1;
}  // namespace

Result<std::unique_ptr<tier_link>> tier_link::create(tier_link_config c) {
    if (c.block_tokens == 0) return Status(status_code::invalid_argument, "tier: block_tokens is 0");
    if (c.ttl_ms == 0) return Status(status_code::invalid_argument, "tier: a TTL of 0");
    auto s = tier_store::create(c.store);
    if (!s.ok()) return s.status();
    // The key's fields are checked by the store: a layout or fingerprint it refuses is refused here, not at the
    // first write.
    tier_entry_key probe{c.fingerprint, c.layout, k_state_version, 0};
    if (auto name = tier_entry_key_name(probe); !name.ok()) return name.status();
    std::unique_ptr<tier_link> t(new tier_link(std::move(c), std::move(s.value())));
    return t;
}

tier_link::tier_link(tier_link_config c, std::unique_ptr<tier_store> s) : cfg_(std::move(c)), store_(std::move(s)) {
    writer_ = std::thread([this] { write_loop(); });
}

tier_link::~tier_link() { stop(); }

void tier_link::stop() {
    {
        lock_guard lk(mu_);
        stopping_ = true;
        n_.dropped += queue_.size();
        queue_.clear();
    }
    cv_.notify_all();
    if (writer_.joinable()) writer_.join();
}

tier_entry_key tier_link::key_of(uint64_t chain_hash) const {
    return tier_entry_key{cfg_.fingerprint, cfg_.layout, k_state_version, chain_hash};
}

void tier_link::offer(const blob_ptr & b, size_t key_tokens) {
    if (!b || b->view().base_tokens > 0 || std::min(key_tokens, b->view().tokens.size()) < cfg_.block_tokens) return;
    lock_guard lk(mu_);
    ++n_.offered;
    if (stopping_ || queue_.size() >= cfg_.queue_max) {
        ++n_.dropped;
        return;
    }
    queue_.push_back({b, std::min(key_tokens, b->view().tokens.size())});
    cv_.notify_one();
}

void tier_link::write_loop() {
    for (;;) {
        blob_ptr b;
        size_t key_tokens = 0;
        {
            lock_guard lk(mu_);
            cv_.wait(mu_, [&]() BATON_REQUIRES(mu_) { return stopping_ || !queue_.empty(); });
            if (stopping_) return;
            std::tie(b, key_tokens) = std::move(queue_.front());
            queue_.pop_front();
        }
        const std::vector<int32_t> & tokens = b->view().tokens;
        const std::vector<uint64_t> h =
            kv_block_hashes(std::span<const int32_t>(tokens.data(), key_tokens), cfg_.block_seed, cfg_.block_tokens);
        if (h.empty()) continue;
        const auto now = std::chrono::steady_clock::now();
        const auto fresh = std::chrono::milliseconds(cfg_.ttl_ms / 2);
        size_t base_blocks = 0;
        uint32_t depth = 0;
        {
            lock_guard lk(mu_);
            const auto it = written_.find(h.back());
            if (it != written_.end() && now - it->second.at < fresh) {
                ++n_.skipped;
                continue;
            }
            // The longest shorter prefix this node wrote recently enough to outlive half the new entry's TTL.
            for (size_t k = h.size() - 1; cfg_.make_delta && k >= 1; --k) {
                const auto w = written_.find(h[k - 1]);
                if (w == written_.end() || now - w->second.at >= fresh) continue;
                if (w->second.depth + 1 < cfg_.delta_depth_max) {
                    base_blocks = k;
                    depth = w->second.depth + 1;
                }
                break;
            }
        }
        std::vector<uint8_t> delta;
        if (base_blocks > 0) {
            auto d = cfg_.make_delta(b->view(), uint32_t(base_blocks * cfg_.block_tokens));
            if (d.ok() && double(d.value().size()) < cfg_.delta_ratio_max * double(b->size()))
                delta = std::move(d.value());
            else depth = 0;
            if (!d.ok()) log_debug("tier: no delta over {} blocks: {}", base_blocks, d.status().message());
        }
        Status st;
        if (!delta.empty()) {
            st = store_->put(key_of(h.back()), std::span<const uint8_t>(delta), cfg_.ttl_ms);
        } else if (cfg_.key) {
            blob_buffer_sink sink;
            st = blob_write(blob_view_parts(b->view()), sink, cfg_.key.get());
            if (st.ok()) st = store_->put(key_of(h.back()), std::span<const uint8_t>(sink.bytes()), cfg_.ttl_ms);
        } else {
            st = store_->put(key_of(h.back()), std::span<const uint8_t>(b->bytes()), cfg_.ttl_ms);
        }
        if (st.ok() && cfg_.on_written) cfg_.on_written(h.back(), cfg_.ttl_ms);
        lock_guard lk(mu_);
        n_.last_ok = st.ok() || st.code() == status_code::resource_exhausted;  // full: the tier works, it evicts
        if (!st.ok()) n_.last_error = st.to_string();
        if (st.ok()) {
            ++n_.written;
            if (!delta.empty()) {
                ++n_.deltas_written;
                n_.delta_bytes_saved += b->size() - delta.size();
            }
            if (written_.size() > 65536) written_.clear();  // a bound, not a policy: it only saves rewrites
            written_[h.back()] = {now, delta.empty() ? 0 : depth};
        } else {
            ++n_.write_errors;
            log_debug("tier: a state of {} tokens was not stored: {}", tokens.size(), st.message());
        }
    }
}

std::optional<std::vector<blob_ptr>> tier_link::fetch(const std::vector<token_id> & prompt, size_t held,
                                                      const blob_parser & parse) {
    if (prompt.size() < 2) return std::nullopt;
    // Never the prompt's last token: its logits are computed, so a state must leave it out.
    const std::vector<uint64_t> h =
        kv_block_hashes(std::span<const int32_t>(prompt.data(), prompt.size() - 1), cfg_.block_seed, cfg_.block_tokens);
    const size_t held_blocks = held / cfg_.block_tokens;
    {
        lock_guard lk(mu_);
        ++n_.fetches;
    }
    // get: one entry, parsed; a tier error or an entry that does not parse ends the fetch (*stop).
    bool stop = false;
    auto get = [&](uint64_t hash) -> blob_ptr {
        auto got = store_->get(key_of(hash));
        {
            lock_guard lk(mu_);
            n_.last_ok = got.ok();
            if (!got.ok()) {
                ++n_.fetch_errors;
                n_.last_error = got.status().to_string();
                stop = true;
                return nullptr;
            }
        }
        if (!got.value()) return nullptr;
        auto b = parse(std::move(*got.value()));
        if (!b.ok()) {
            log_warn("tier: an entry did not parse as a state, computing the prompt: {}", b.status().message());
            stop = true;
            return nullptr;
        }
        return std::move(b.value());
    };
    uint32_t probes = 0;
    for (size_t k = h.size(); k > held_blocks && probes < cfg_.probe_max; --k, ++probes) {
        blob_ptr top = get(h[k - 1]);
        if (stop) return std::nullopt;
        if (!top) continue;
        std::vector<blob_ptr> chain{std::move(top)};
        // Down the chain of deltas to a whole state or a delta over what the node holds.
        uint32_t base = chain.back()->view().base_tokens;
        while (base > held && chain.size() < cfg_.delta_depth_max && base % cfg_.block_tokens == 0 &&
               base / cfg_.block_tokens <= h.size()) {
            blob_ptr link = get(h[base / cfg_.block_tokens - 1]);
            if (stop) return std::nullopt;
            if (!link) break;
            chain.push_back(std::move(link));
            base = chain.back()->view().base_tokens;
            lock_guard lk(mu_);
            ++n_.chain_links;
        }
        if (base > held) {
            lock_guard lk(mu_);
            ++n_.broken_chains;
            continue;
        }
        std::reverse(chain.begin(), chain.end());
        lock_guard lk(mu_);
        ++n_.fetch_hits;
        return chain;
    }
    return std::nullopt;
}

tier_link_counters tier_link::counters() const {
    lock_guard lk(mu_);
    tier_link_counters c = n_;
    c.store = store_->counters();
    return c;
}

}  // namespace baton
