// kv_events_test.cpp — the KV-event batch and snapshot (kv_events.h, docs/kv-events.md): every shape round-
// trips exactly, the wire form is what the spec says, and the decoders refuse what the field table does not
// allow, one case per rule, with the documented status code and the field named.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "baton/pd/kv_events.h"

namespace baton {
namespace {

using json = nlohmann::json;

kv_event_batch kv_events_test_batch() {
    kv_event_batch b;
    b.node = "prefill-0:8080";
    b.epoch = "3f9a0c17e2b44d01";
    b.seed = 0x0123456789abcdefULL;
    b.seq = 7;
    b.events.push_back(kv_event_stored{std::nullopt, {1, 2, 0xffffffffffffffffULL}});
    b.events.push_back(kv_event_stored{0xffffffffffffffffULL, {0xa0b1c2d3e4f50617ULL}});
    b.events.push_back(kv_event_removed{{2}});
    b.events.push_back(kv_event_cleared{});
    b.events.push_back(kv_event_stored{std::nullopt, {}});
    b.events.push_back(kv_event_tier_stored{{0xa0b1c2d3e4f50617ULL, 5}, 3600000});
    return b;
}

kv_snapshot kv_events_test_snapshot() {
    kv_snapshot s;
    s.node = "decode-1";
    s.epoch = "e1";
    s.seed = 42;
    s.seq = 0;
    s.blocks = {0, 1, 0x8000000000000000ULL};
    s.tier = {{7, 1}, {0xffffffffffffffffULL, kv_events_tier_ttl_ms_max}};
    return s;
}

json batch_json() { return json::parse(kv_event_batch_encode(kv_events_test_batch())); }
json snapshot_json() { return json::parse(kv_snapshot_encode(kv_events_test_snapshot())); }

Status decode_batch(const json & j, const kv_event_limits & lim = {}) {
    return kv_event_batch_decode(j.dump(), lim).status();
}
Status decode_snapshot(const json & j, const kv_event_limits & lim = {}) {
    return kv_snapshot_decode(j.dump(), lim).status();
}

// expect_refused: the code, and the message names the field.
void expect_refused(const Status & st, status_code code, const std::string & field) {
    EXPECT_EQ(st.code(), code) << st.to_string();
    EXPECT_NE(st.message().find(field), std::string::npos) << st.to_string() << " does not name " << field;
}

TEST(KvEvents, BatchRoundTripsExactly) {
    const auto b = kv_events_test_batch();
    auto d = kv_event_batch_decode(kv_event_batch_encode(b));
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    EXPECT_EQ(d.value(), b);
    kv_event_batch empty = b;
    empty.events.clear();
    auto e = kv_event_batch_decode(kv_event_batch_encode(empty));
    ASSERT_TRUE(e.ok()) << e.status().to_string();
    EXPECT_EQ(e.value(), empty);
}

TEST(KvEvents, SnapshotRoundTripsExactly) {
    const auto s = kv_events_test_snapshot();
    auto d = kv_snapshot_decode(kv_snapshot_encode(s));
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    EXPECT_EQ(d.value(), s);
}

TEST(KvEvents, TheWireFormIsTheDocumentedOne) {
    const json j = batch_json();
    EXPECT_EQ(j["version"], 2);
    EXPECT_EQ(j["node"], "prefill-0:8080");
    EXPECT_EQ(j["seed"], "0123456789abcdef");
    EXPECT_EQ(j["seq"], 7);
    EXPECT_EQ(j["events"][0]["type"], "stored");
    EXPECT_TRUE(j["events"][0]["parent"].is_null());
    EXPECT_EQ(j["events"][0]["blocks"], json({"0000000000000001", "0000000000000002", "ffffffffffffffff"}));
    EXPECT_EQ(j["events"][1]["parent"], "ffffffffffffffff");
    EXPECT_EQ(j["events"][2], json({{"type", "removed"}, {"blocks", {"0000000000000002"}}}));
    EXPECT_EQ(j["events"][3], json({{"type", "cleared"}}));
    EXPECT_EQ(j["events"][5], json::parse(R"({"type":"tier_stored","blocks":["a0b1c2d3e4f50617","0000000000000005"],
                                              "ttl_ms":3600000})"));
    EXPECT_NE(kv_event_batch_encode(kv_events_test_batch())
                  .find(R"({"type":"tier_stored","blocks":["a0b1c2d3e4f50617","0000000000000005"],"ttl_ms":3600000})"),
              std::string::npos);  // in the documented field order
    EXPECT_EQ(snapshot_json()["tier"].dump(),
              R"([{"block":"0000000000000007","ttl_ms":1},{"block":"ffffffffffffffff","ttl_ms":2592000000}])");
    EXPECT_EQ(kv_hash_hex(0xa0b1c2d3e4f50617ULL), "a0b1c2d3e4f50617");
    // Hand-written text in the documented form decodes.
    auto d = kv_snapshot_decode(
        R"({"version":1,"node":"n","epoch":"e","seed":"00000000000000ff","seq":3,"blocks":["000000000000000a"]})");
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    EXPECT_EQ(d->seed, 0xffu);
    EXPECT_EQ(d->seq, 3u);
    EXPECT_EQ(d->blocks, std::vector<uint64_t>{10});
}

TEST(KvEvents, BadHexIsCorrupt) {
    for (const char * bad : {"0123456789ABCDEF", "0123456789abcde", "0123456789abcdef0", "0x23456789abcdef",
                             "0123456789abcdeg", " 123456789abcdef", ""}) {
        json j = batch_json();
        j["events"][0]["blocks"][1] = bad;
        expect_refused(decode_batch(j), status_code::corrupt, "events[0].blocks[1]");
        j = batch_json();
        j["seed"] = bad;
        expect_refused(decode_batch(j), status_code::corrupt, "seed");
        j = batch_json();
        j["events"][1]["parent"] = bad;
        expect_refused(decode_batch(j), status_code::corrupt, "events[1].parent");
        j = snapshot_json();
        j["blocks"][2] = bad;
        expect_refused(decode_snapshot(j), status_code::corrupt, "blocks[2]");
    }
}

TEST(KvEvents, WrongTypesAreCorrupt) {
    const std::pair<std::string, json> batch_cases[] = {
        {"node", 5},     {"epoch", nullptr},         {"seed", 42},     {"seq", "7"},     {"seq", 7.5}, {"seq", -1},
        {"events", "x"}, {"events", json::object()}, {"version", "1"}, {"version", 1.0},
    };
    for (const auto & [key, value] : batch_cases) {
        json j = batch_json();
        j[key] = value;
        expect_refused(decode_batch(j), status_code::corrupt, key);
    }
    json j = batch_json();
    j["events"][0]["blocks"] = "0000000000000001";
    expect_refused(decode_batch(j), status_code::corrupt, "events[0].blocks");
    j = batch_json();
    j["events"][0]["blocks"][0] = 1;
    expect_refused(decode_batch(j), status_code::corrupt, "events[0].blocks[0]");
    j = batch_json();
    j["events"][2] = json::array();
    expect_refused(decode_batch(j), status_code::corrupt, "events[2]");
    j = batch_json();
    j["events"][2]["type"] = 2;
    expect_refused(decode_batch(j), status_code::corrupt, "events[2].type");
    j = snapshot_json();
    j["blocks"] = json::object();
    expect_refused(decode_snapshot(j), status_code::corrupt, "blocks");
    expect_refused(kv_snapshot_decode("[1,2]").status(), status_code::corrupt, "the document");
}

TEST(KvEvents, MissingAndUnknownFieldsAreCorrupt) {
    for (const char * key : {"node", "epoch", "seed", "seq", "events", "version"}) {
        json j = batch_json();
        j.erase(key);
        expect_refused(decode_batch(j), status_code::corrupt, key);
    }
    json j = batch_json();
    j["extra"] = 1;
    expect_refused(decode_batch(j), status_code::corrupt, "extra");
    j = batch_json();
    j["events"][0].erase("parent");
    expect_refused(decode_batch(j), status_code::corrupt, "events[0].parent");
    j = batch_json();
    j["events"][3]["blocks"] = json::array();  // cleared carries no blocks
    expect_refused(decode_batch(j), status_code::corrupt, "events[3].blocks");
    j = snapshot_json();
    j["events"] = json::array();
    expect_refused(decode_snapshot(j), status_code::corrupt, "events");
}

TEST(KvEvents, UnknownEventTypeIsCorrupt) {
    json j = batch_json();
    j["events"][3]["type"] = "evicted";
    expect_refused(decode_batch(j), status_code::corrupt, "events[3].type");
}

TEST(KvEvents, OutOfRangeValuesAreCorrupt) {
    json j = batch_json();
    j["seq"] = 0;  // a batch counts from 1
    expect_refused(decode_batch(j), status_code::corrupt, "seq");
    j["seq"] = kv_events_seq_max + 1;
    expect_refused(decode_batch(j), status_code::corrupt, "seq");
    j["seq"] = kv_events_seq_max;
    EXPECT_TRUE(decode_batch(j).ok());
    json s = snapshot_json();
    s["seq"] = 0;  // a snapshot before any batch
    EXPECT_TRUE(decode_snapshot(s).ok());
    s["seq"] = kv_events_seq_max + 1;
    expect_refused(decode_snapshot(s), status_code::corrupt, "seq");
    for (const char * bad_id : {"", "has space", "tab\t", "caf\xc3\xa9", "nul\x01"}) {
        j = batch_json();
        j["node"] = bad_id;
        expect_refused(decode_batch(j), status_code::corrupt, "node");
        s = snapshot_json();
        s["epoch"] = bad_id;
        expect_refused(decode_snapshot(s), status_code::corrupt, "epoch");
    }
}

TEST(KvEvents, AnotherVersionIsUnsupported) {
    json j = batch_json();
    j["version"] = 3;
    j["something_new"] = true;  // a later version's fields are not judged by version 2's table
    expect_refused(decode_batch(j), status_code::unsupported, "version 3");
    json s = snapshot_json();
    s["version"] = 0;
    expect_refused(decode_snapshot(s), status_code::unsupported, "version 0");
}

TEST(KvEvents, OverEachLimitIsTooLarge) {
    kv_event_limits lim;
    lim.max_events = 5;  // the batch has 6
    expect_refused(decode_batch(batch_json(), lim), status_code::too_large, "events");
    lim.max_events = 6;
    EXPECT_TRUE(decode_batch(batch_json(), lim).ok());

    lim = {};
    lim.max_event_blocks = 2;  // event 0 has 3
    expect_refused(decode_batch(batch_json(), lim), status_code::too_large, "events[0].blocks");
    lim.max_event_blocks = 3;
    EXPECT_TRUE(decode_batch(batch_json(), lim).ok());
    json j = batch_json();
    j["events"][2]["blocks"] = {"0000000000000001", "0000000000000002", "0000000000000003", "0000000000000004"};
    expect_refused(decode_batch(j, lim), status_code::too_large, "events[2].blocks");

    lim = {};
    lim.max_snapshot_blocks = 2;  // the snapshot has 3
    expect_refused(decode_snapshot(snapshot_json(), lim), status_code::too_large, "blocks");
    lim.max_snapshot_blocks = 3;
    EXPECT_TRUE(decode_snapshot(snapshot_json(), lim).ok());

    lim = {};
    lim.max_id_bytes = 8;
    expect_refused(decode_batch(batch_json(), lim), status_code::too_large, "node");  // 14 bytes
    j = batch_json();
    j["node"] = "n";
    expect_refused(decode_batch(j, lim), status_code::too_large, "epoch");  // 16 bytes
    j["epoch"] = "12345678";
    EXPECT_TRUE(decode_batch(j, lim).ok());

    lim = {};
    const std::string text = kv_snapshot_encode(kv_events_test_snapshot());
    lim.max_text_bytes = text.size() - 1;
    expect_refused(kv_snapshot_decode(text, lim).status(), status_code::too_large, "bytes");
    lim.max_text_bytes = text.size();
    EXPECT_TRUE(kv_snapshot_decode(text, lim).ok());
}

TEST(KvEvents, TruncatedJsonIsCorruptAtEveryLength) {
    const std::string batch = kv_event_batch_encode(kv_events_test_batch());
    for (size_t n = 0; n < batch.size(); n++) {
        auto r = kv_event_batch_decode(std::string_view(batch).substr(0, n));
        ASSERT_FALSE(r.ok()) << n;
        EXPECT_EQ(r.status().code(), status_code::corrupt) << n << ": " << r.status().to_string();
    }
    const std::string snap = kv_snapshot_encode(kv_events_test_snapshot());
    for (size_t n = 0; n < snap.size(); n++) {
        auto r = kv_snapshot_decode(std::string_view(snap).substr(0, n));
        ASSERT_FALSE(r.ok()) << n;
        EXPECT_EQ(r.status().code(), status_code::corrupt) << n << ": " << r.status().to_string();
    }
    EXPECT_EQ(kv_event_batch_decode(batch + "x").status().code(), status_code::corrupt);
}

TEST(KvEvents, ABatchIsNotASnapshotNorTheReverse) {
    expect_refused(kv_snapshot_decode(kv_event_batch_encode(kv_events_test_batch())).status(), status_code::corrupt,
                   "blocks");
    expect_refused(kv_event_batch_decode(kv_snapshot_encode(kv_events_test_snapshot())).status(), status_code::corrupt,
                   "events");
}

// Version 1 (routers and nodes before the tier events): its documents still decode; what version 2 added is
// refused in them, named.
TEST(KvEvents, VersionOneDocumentsDecodeWithoutTheTierFields) {
    auto b = kv_event_batch_decode(
        R"({"version":1,"node":"n","epoch":"e","seed":"00000000000000ff","seq":1,"events":[{"type":"cleared"}]})");
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    EXPECT_EQ(b->version, 1u);
    auto s =
        kv_snapshot_decode(R"({"version":1,"node":"n","epoch":"e","seed":"00000000000000ff","seq":3,"blocks":[]})");
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_TRUE(s->tier.empty());
    EXPECT_EQ(kv_snapshot_encode(s.value()).find("tier"), std::string::npos);  // re-encoded as version 1
    json j = batch_json();
    j["version"] = 1;
    j["events"] = json::array({j["events"][5]});
    expect_refused(decode_batch(j), status_code::corrupt, "events[0].type");
    json v1 = snapshot_json();
    v1["version"] = 1;
    expect_refused(decode_snapshot(v1), status_code::corrupt, "tier");  // not a field of version 1
    json v2 = snapshot_json();
    v2.erase("tier");
    expect_refused(decode_snapshot(v2), status_code::corrupt, "tier");  // version 2 requires it
}

TEST(KvEvents, TierFieldsAreCheckedLikeEveryOther) {
    for (const json & ttl : {json(0), json(-1), json(kv_events_tier_ttl_ms_max + 1), json("1"), json(1.5)}) {
        json j = batch_json();
        j["events"][5]["ttl_ms"] = ttl;
        expect_refused(decode_batch(j), status_code::corrupt, "events[5].ttl_ms");
        json s = snapshot_json();
        s["tier"][1]["ttl_ms"] = ttl;
        expect_refused(decode_snapshot(s), status_code::corrupt, "tier[1].ttl_ms");
    }
    json j = batch_json();
    j["events"][5]["blocks"][1] = "5";
    expect_refused(decode_batch(j), status_code::corrupt, "events[5].blocks[1]");
    j = batch_json();
    j["events"][5].erase("ttl_ms");
    expect_refused(decode_batch(j), status_code::corrupt, "events[5].ttl_ms");
    json s = snapshot_json();
    s["tier"][0]["extra"] = 1;
    expect_refused(decode_snapshot(s), status_code::corrupt, "tier[0].extra");
    s = snapshot_json();
    s["tier"] = json::object();
    expect_refused(decode_snapshot(s), status_code::corrupt, "tier");
    kv_event_limits lim;
    lim.max_snapshot_blocks = 1;
    expect_refused(decode_snapshot(snapshot_json(), lim), status_code::too_large, "blocks");
    s = snapshot_json();
    s["blocks"] = json::array();
    expect_refused(decode_snapshot(s, lim), status_code::too_large, "tier");
}

}  // namespace
}  // namespace baton
