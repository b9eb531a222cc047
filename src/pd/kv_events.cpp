// kv_events.cpp — the KV-event batch and snapshot: JSON encoders and their total decoders (see kv_events.h
// and docs/kv-events.md, which tables the fields in the order written here).
#include "baton/pd/kv_events.h"

#include <exception>
#include <initializer_list>
#include <type_traits>

#include <nlohmann/json.hpp>

namespace baton {

namespace {

using kv_ev_json = nlohmann::json;
using kv_ev_ordered_json = nlohmann::ordered_json;

// The field tables: every key an object holds, in the order the encoders write them (docs/kv-events.md).
constexpr std::initializer_list<const char *> k_kv_ev_batch_keys = {"version", "node", "epoch",
                                                                    "seed",    "seq",  "events"};
constexpr std::initializer_list<const char *> k_kv_ev_snapshot_keys_v1 = {"version", "node", "epoch",
                                                                          "seed",    "seq",  "blocks"};
constexpr std::initializer_list<const char *> k_kv_ev_snapshot_keys = {"version", "node",   "epoch", "seed",
                                                                       "seq",     "blocks", "tier"};
constexpr std::initializer_list<const char *> k_kv_ev_tier_entry_keys = {"block", "ttl_ms"};
constexpr std::initializer_list<const char *> k_kv_ev_tier_stored_keys = {"type", "blocks", "ttl_ms"};
constexpr std::initializer_list<const char *> k_kv_ev_stored_keys = {"type", "parent", "blocks"};
constexpr std::initializer_list<const char *> k_kv_ev_removed_keys = {"type", "blocks"};
constexpr std::initializer_list<const char *> k_kv_ev_cleared_keys = {"type"};

// ---- encoding ----

kv_ev_ordered_json kv_ev_hashes_json(const std::vector<uint64_t> & blocks) {
    kv_ev_ordered_json a = kv_ev_ordered_json::array();
    for (uint64_t h : blocks) a.push_back(kv_hash_hex(h));
    return a;
}

kv_ev_ordered_json kv_ev_event_json(const kv_event & e) {
    kv_ev_ordered_json j;
    std::visit(
        [&](const auto & ev) {
            using T = std::decay_t<decltype(ev)>;
            if constexpr (std::is_same_v<T, kv_event_stored>) {
                j["type"] = "stored";
                j["parent"] = ev.parent ? kv_ev_ordered_json(kv_hash_hex(*ev.parent)) : kv_ev_ordered_json(nullptr);
                j["blocks"] = kv_ev_hashes_json(ev.blocks);
            } else if constexpr (std::is_same_v<T, kv_event_removed>) {
                j["type"] = "removed";
                j["blocks"] = kv_ev_hashes_json(ev.blocks);
            } else if constexpr (std::is_same_v<T, kv_event_tier_stored>) {
                j["type"] = "tier_stored";
                j["blocks"] = kv_ev_hashes_json(ev.blocks);
                j["ttl_ms"] = ev.ttl_ms;
            } else {
                static_assert(std::is_same_v<T, kv_event_cleared>);
                j["type"] = "cleared";
            }
        },
        e);
    return j;
}

// ---- decoding ----

Status kv_ev_corrupt(const std::string & what, const std::string & field, const std::string & why) {
    return {status_code::corrupt, what + ": " + field + ": " + why};
}

// kv_ev_fields: o is an object holding exactly the keys of table (corrupt naming the first missing or unknown).
Status kv_ev_fields(const kv_ev_json & o, const std::string & what, const std::string & field,
                    std::initializer_list<const char *> table, uint32_t version) {
    if (!o.is_object()) return kv_ev_corrupt(what, field.empty() ? "the document" : field, "must be an object");
    const std::string prefix = field.empty() ? "" : field + ".";
    for (const char * k : table)
        if (!o.contains(k)) return kv_ev_corrupt(what, prefix + k, "is missing");
    if (o.size() != table.size())
        for (const auto & [k, v] : o.items()) {
            bool known = false;
            for (const char * t : table) known = known || k == t;
            if (!known)
                return kv_ev_corrupt(what, prefix + k.substr(0, 64),
                                     "is not a field of version " + std::to_string(version));
        }
    return {};
}

// kv_ev_version: the version field alone, checked before the rest (another version may have other fields).
Status kv_ev_version(const kv_ev_json & o, const std::string & what, uint32_t & out) {
    if (!o.is_object()) return kv_ev_corrupt(what, "the document", "must be an object");
    auto it = o.find("version");
    if (it == o.end()) return kv_ev_corrupt(what, "version", "is missing");
    if (!it->is_number_integer()) return kv_ev_corrupt(what, "version", "must be an integer");
    if (it->is_number_unsigned() && it->get<uint64_t>() >= kv_events_version_min &&
        it->get<uint64_t>() <= kv_events_version) {
        out = uint32_t(it->get<uint64_t>());
        return {};
    }
    const std::string v = it->dump();
    return {status_code::unsupported, what + ": version " + v + " is not supported (this build reads versions " +
                                          std::to_string(kv_events_version_min) + ".." +
                                          std::to_string(kv_events_version) + ")"};
}

// kv_ev_id: node or epoch: 1..max_id_bytes printable ASCII characters other than space (0x21..0x7e).
Status kv_ev_id(const kv_ev_json & o, const std::string & what, const char * key, size_t max_bytes, std::string & out) {
    const kv_ev_json & v = o.at(key);
    if (!v.is_string()) return kv_ev_corrupt(what, key, "must be a string");
    const auto & s = v.get_ref<const std::string &>();
    if (s.size() > max_bytes)
        return {status_code::too_large,
                what + ": " + key + ": " + std::to_string(s.size()) + " bytes > limit " + std::to_string(max_bytes)};
    if (s.empty()) return kv_ev_corrupt(what, key, "must not be empty");
    for (size_t i = 0; i < s.size(); i++) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c < 0x21 || c > 0x7e)
            return kv_ev_corrupt(what, key,
                                 "byte " + std::to_string(unsigned(c)) + " at " + std::to_string(i) +
                                     " is not printable ASCII (0x21..0x7e)");
    }
    out = s;
    return {};
}

// kv_ev_hex: a hash: exactly 16 lowercase hex digits.
Status kv_ev_hex(const kv_ev_json & v, const std::string & what, const std::string & field, uint64_t & out) {
    if (!v.is_string()) return kv_ev_corrupt(what, field, "must be a string of 16 lowercase hex digits");
    const auto & s = v.get_ref<const std::string &>();
    if (s.size() != 16)
        return kv_ev_corrupt(what, field, "has " + std::to_string(s.size()) + " characters, not 16 hex digits");
    uint64_t x = 0;
    for (char c : s) {
        unsigned d;
        if (c >= '0' && c <= '9') d = unsigned(c - '0');
        else if (c >= 'a' && c <= 'f') d = unsigned(c - 'a' + 10);
        else return kv_ev_corrupt(what, field, "\"" + s + "\" is not 16 lowercase hex digits");
        x = (x << 4) | d;
    }
    out = x;
    return {};
}

Status kv_ev_seq(const kv_ev_json & o, const std::string & what, uint64_t lo, uint64_t & out) {
    const kv_ev_json & v = o.at("seq");
    if (!v.is_number_integer()) return kv_ev_corrupt(what, "seq", "must be an integer");
    if (!v.is_number_unsigned() || v.get<uint64_t>() < lo || v.get<uint64_t>() > kv_events_seq_max)
        return kv_ev_corrupt(what, "seq",
                             v.dump() + " is not in " + std::to_string(lo) + ".." + std::to_string(kv_events_seq_max));
    out = v.get<uint64_t>();
    return {};
}

Status kv_ev_blocks(const kv_ev_json & v, const std::string & what, const std::string & field, size_t max_blocks,
                    std::vector<uint64_t> & out) {
    if (!v.is_array()) return kv_ev_corrupt(what, field, "must be an array of hashes");
    if (v.size() > max_blocks)
        return {status_code::too_large, what + ": " + field + ": " + std::to_string(v.size()) + " blocks > limit " +
                                            std::to_string(max_blocks)};
    out.resize(v.size());
    for (size_t i = 0; i < v.size(); i++)
        BATON_RETURN_IF_ERROR(kv_ev_hex(v[i], what, field + "[" + std::to_string(i) + "]", out[i]));
    return {};
}

Status kv_ev_ttl(const kv_ev_json & v, const std::string & what, const std::string & field, uint64_t & out) {
    if (!v.is_number_integer()) return kv_ev_corrupt(what, field, "must be an integer");
    if (!v.is_number_unsigned() || v.get<uint64_t>() < 1 || v.get<uint64_t>() > kv_events_tier_ttl_ms_max)
        return kv_ev_corrupt(what, field, v.dump() + " is not in 1.." + std::to_string(kv_events_tier_ttl_ms_max));
    out = v.get<uint64_t>();
    return {};
}

Status kv_ev_event(const kv_ev_json & j, const std::string & what, const std::string & field,
                   const kv_event_limits & limits, uint32_t version, kv_event & out) {
    if (!j.is_object()) return kv_ev_corrupt(what, field, "must be an object");
    auto t = j.find("type");
    if (t == j.end()) return kv_ev_corrupt(what, field + ".type", "is missing");
    if (!t->is_string()) return kv_ev_corrupt(what, field + ".type", "must be a string");
    const auto & type = t->get_ref<const std::string &>();
    if (type == "stored") {
        BATON_RETURN_IF_ERROR(kv_ev_fields(j, what, field, k_kv_ev_stored_keys, version));
        kv_event_stored e;
        const kv_ev_json & p = j.at("parent");
        if (!p.is_null()) {
            uint64_t h = 0;
            BATON_RETURN_IF_ERROR(kv_ev_hex(p, what, field + ".parent", h));
            e.parent = h;
        }
        BATON_RETURN_IF_ERROR(kv_ev_blocks(j.at("blocks"), what, field + ".blocks", limits.max_event_blocks, e.blocks));
        out = std::move(e);
    } else if (type == "removed") {
        BATON_RETURN_IF_ERROR(kv_ev_fields(j, what, field, k_kv_ev_removed_keys, version));
        kv_event_removed e;
        BATON_RETURN_IF_ERROR(kv_ev_blocks(j.at("blocks"), what, field + ".blocks", limits.max_event_blocks, e.blocks));
        out = std::move(e);
    } else if (type == "cleared") {
        BATON_RETURN_IF_ERROR(kv_ev_fields(j, what, field, k_kv_ev_cleared_keys, version));
        out = kv_event_cleared{};
    } else if (type == "tier_stored" && version >= 2) {
        BATON_RETURN_IF_ERROR(kv_ev_fields(j, what, field, k_kv_ev_tier_stored_keys, version));
        kv_event_tier_stored e;
        BATON_RETURN_IF_ERROR(kv_ev_blocks(j.at("blocks"), what, field + ".blocks", limits.max_event_blocks, e.blocks));
        BATON_RETURN_IF_ERROR(kv_ev_ttl(j.at("ttl_ms"), what, field + ".ttl_ms", e.ttl_ms));
        out = std::move(e);
    } else {
        return kv_ev_corrupt(
            what, field + ".type",
            "\"" + type.substr(0, 32) + "\" is not an event type of version " + std::to_string(version) +
                (version >= 2 ? " (stored, removed, cleared, tier_stored)" : " (stored, removed, cleared)"));
    }
    return {};
}

// kv_ev_parse: the JSON text, bounded before it is parsed; never throws.
Result<kv_ev_json> kv_ev_parse(std::string_view text, const std::string & what, const kv_event_limits & limits) {
    if (text.size() > limits.max_text_bytes)
        return Status(status_code::too_large, what + ": " + std::to_string(text.size()) + " bytes > limit " +
                                                  std::to_string(limits.max_text_bytes));
    kv_ev_json j = kv_ev_json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return kv_ev_corrupt(what, "the document", "is not valid JSON");
    return j;
}

Result<kv_event_batch> kv_ev_decode_batch(std::string_view text, const kv_event_limits & limits) {
    const std::string what = "kv event batch";
    auto parsed = kv_ev_parse(text, what, limits);
    if (!parsed.ok()) return parsed.status();
    const kv_ev_json & j = parsed.value();
    kv_event_batch b;
    BATON_RETURN_IF_ERROR(kv_ev_version(j, what, b.version));
    BATON_RETURN_IF_ERROR(kv_ev_fields(j, what, "", k_kv_ev_batch_keys, b.version));
    BATON_RETURN_IF_ERROR(kv_ev_id(j, what, "node", limits.max_id_bytes, b.node));
    BATON_RETURN_IF_ERROR(kv_ev_id(j, what, "epoch", limits.max_id_bytes, b.epoch));
    BATON_RETURN_IF_ERROR(kv_ev_hex(j.at("seed"), what, "seed", b.seed));
    BATON_RETURN_IF_ERROR(kv_ev_seq(j, what, 1, b.seq));
    const kv_ev_json & events = j.at("events");
    if (!events.is_array()) return kv_ev_corrupt(what, "events", "must be an array");
    if (events.size() > limits.max_events)
        return Status(status_code::too_large, what + ": events: " + std::to_string(events.size()) + " events > limit " +
                                                  std::to_string(limits.max_events));
    b.events.resize(events.size());
    for (size_t i = 0; i < events.size(); i++)
        BATON_RETURN_IF_ERROR(
            kv_ev_event(events[i], what, "events[" + std::to_string(i) + "]", limits, b.version, b.events[i]));
    return b;
}

Result<kv_snapshot> kv_ev_decode_snapshot(std::string_view text, const kv_event_limits & limits) {
    const std::string what = "kv snapshot";
    auto parsed = kv_ev_parse(text, what, limits);
    if (!parsed.ok()) return parsed.status();
    const kv_ev_json & j = parsed.value();
    kv_snapshot s;
    BATON_RETURN_IF_ERROR(kv_ev_version(j, what, s.version));
    BATON_RETURN_IF_ERROR(
        kv_ev_fields(j, what, "", s.version >= 2 ? k_kv_ev_snapshot_keys : k_kv_ev_snapshot_keys_v1, s.version));
    BATON_RETURN_IF_ERROR(kv_ev_id(j, what, "node", limits.max_id_bytes, s.node));
    BATON_RETURN_IF_ERROR(kv_ev_id(j, what, "epoch", limits.max_id_bytes, s.epoch));
    BATON_RETURN_IF_ERROR(kv_ev_hex(j.at("seed"), what, "seed", s.seed));
    BATON_RETURN_IF_ERROR(kv_ev_seq(j, what, 0, s.seq));
    BATON_RETURN_IF_ERROR(kv_ev_blocks(j.at("blocks"), what, "blocks", limits.max_snapshot_blocks, s.blocks));
    if (s.version >= 2) {
        const kv_ev_json & t = j.at("tier");
        if (!t.is_array()) return kv_ev_corrupt(what, "tier", "must be an array of tier entries");
        if (t.size() > limits.max_snapshot_blocks)
            return {status_code::too_large, what + ": tier: " + std::to_string(t.size()) + " entries > limit " +
                                                std::to_string(limits.max_snapshot_blocks)};
        s.tier.resize(t.size());
        for (size_t i = 0; i < t.size(); i++) {
            const std::string f = "tier[" + std::to_string(i) + "]";
            BATON_RETURN_IF_ERROR(kv_ev_fields(t[i], what, f, k_kv_ev_tier_entry_keys, s.version));
            BATON_RETURN_IF_ERROR(kv_ev_hex(t[i].at("block"), what, f + ".block", s.tier[i].block));
            BATON_RETURN_IF_ERROR(kv_ev_ttl(t[i].at("ttl_ms"), what, f + ".ttl_ms", s.tier[i].ttl_ms));
        }
    }
    return s;
}

}  // namespace

std::string kv_hash_hex(uint64_t h) {
    static constexpr char k_digits[] = "0123456789abcdef";
    std::string s(16, '0');
    for (int i = 15; i >= 0; i--, h >>= 4) s[size_t(i)] = k_digits[h & 0xf];
    return s;
}

std::string kv_event_batch_encode(const kv_event_batch & b) {
    kv_ev_ordered_json j;
    j["version"] = b.version;
    j["node"] = b.node;
    j["epoch"] = b.epoch;
    j["seed"] = kv_hash_hex(b.seed);
    j["seq"] = b.seq;
    kv_ev_ordered_json events = kv_ev_ordered_json::array();
    for (const auto & e : b.events) events.push_back(kv_ev_event_json(e));
    j["events"] = std::move(events);
    // Replace: node and epoch are the producer's own strings; invalid UTF-8 must not throw (the decoder
    // refuses anything but printable ASCII there anyway).
    return j.dump(-1, ' ', false, kv_ev_ordered_json::error_handler_t::replace);
}

std::string kv_snapshot_encode(const kv_snapshot & s) {
    kv_ev_ordered_json j;
    j["version"] = s.version;
    j["node"] = s.node;
    j["epoch"] = s.epoch;
    j["seed"] = kv_hash_hex(s.seed);
    j["seq"] = s.seq;
    j["blocks"] = kv_ev_hashes_json(s.blocks);
    if (s.version >= 2) {
        kv_ev_ordered_json t = kv_ev_ordered_json::array();
        for (const kv_tier_entry & e : s.tier) {
            kv_ev_ordered_json o;
            o["block"] = kv_hash_hex(e.block);
            o["ttl_ms"] = e.ttl_ms;
            t.push_back(std::move(o));
        }
        j["tier"] = std::move(t);
    }
    return j.dump(-1, ' ', false, kv_ev_ordered_json::error_handler_t::replace);
}

Result<kv_event_batch> kv_event_batch_decode(std::string_view text, const kv_event_limits & limits) {
    try {
        return kv_ev_decode_batch(text, limits);
    } catch (const std::exception & e) {  // nlohmann or allocation: never out of the decoder
        return Status(status_code::corrupt, std::string("kv event batch: ") + e.what());
    }
}

Result<kv_snapshot> kv_snapshot_decode(std::string_view text, const kv_event_limits & limits) {
    try {
        return kv_ev_decode_snapshot(text, limits);
    } catch (const std::exception & e) {
        return Status(status_code::corrupt, std::string("kv snapshot: ") + e.what());
    }
}

}  // namespace baton
