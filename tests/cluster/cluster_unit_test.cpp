// cluster_unit_test.cpp — the cluster module's pieces: base64, node records (JSON round trip, one case per
// rejected field, groups) and the key layout. etcd_client against a real etcd is in
// tests/e2e/etcd_client_e2e_test.cpp.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "baton/base/base64.h"
#include "baton/cluster/etcd_client.h"
#include "baton/cluster/node_record.h"

namespace baton {
namespace {

TEST(ClusterBase64, RoundTripsEveryLengthAndRejectsMalformed) {
    std::string bytes;
    for (int n = 0; n < 40; ++n) {
        const std::string enc = base64_encode(bytes);
        EXPECT_EQ(enc.size() % 4, 0u);
        EXPECT_EQ(base64_decode(enc), bytes) << "length " << n;
        bytes += char(n * 37 + 11);
    }
    EXPECT_EQ(base64_encode("/baton/t"), "L2JhdG9uL3Q=");  // as etcd's gateway writes it
    for (const char * bad : {"abc", "a===", "ab=c", "ab!c", "=abc", "YQ==YQ=="})
        EXPECT_FALSE(base64_decode(bad).has_value()) << bad;
    // Regression (cluster_fuzz): non-canonical padding bits were accepted, so decode -> encode changed the text.
    EXPECT_FALSE(base64_decode("Yy==").has_value());
    EXPECT_FALSE(base64_decode("YWJ=").has_value());
    EXPECT_EQ(base64_decode("YWI="), "ab");
}

node_record sample_record() {
    node_record r;
    r.role = node_role::decode;
    r.url = "http://10.0.0.5:8080";
    r.model_id = "model.gguf";
    r.model_alias = "m1";
    for (size_t i = 0; i < 16; ++i) r.fingerprint[i] = uint8_t(i * 17);
    r.kv.n_ctx = 4096;
    r.kv.type_k = 8;  // q8_0
    r.kv.type_v = 1;
    r.kv.flash_attn = true;
    r.kv.kv_unified = true;
    r.kv.n_seq_max = 4;
    r.slots = 4;
    r.busy = 1;
    r.waiting = 2;
    r.draining = false;
    return r;
}

TEST(NodeRecord, JsonRoundTrips) {
    const node_record r = sample_record();
    const std::string j = node_record_json(r);
    auto back = node_record_parse(j);
    ASSERT_TRUE(back.ok()) << back.status().to_string() << "\n" << j;
    EXPECT_EQ(back.value(), r);
    EXPECT_NE(j.find("\"type_k\":\"q8_0\""), std::string::npos) << j;
    node_record v = r;
    v.vision = true;
    EXPECT_EQ(node_record_parse(node_record_json(v)).value(), v);
    v.audio = true;
    EXPECT_EQ(node_record_parse(node_record_json(v)).value(), v);
}

// "vision" and "audio" are optional: a record without them (a node of an earlier build) parses as a node without
// a projector; one that is not a boolean is refused by name.
TEST(NodeRecord, VisionAndAudioAreOptionalAndChecked) {
    for (const char * field : {"vision", "audio"}) {
        nlohmann::json j = nlohmann::json::parse(node_record_json(sample_record()));
        j.erase(field);
        auto back = node_record_parse(j.dump());
        ASSERT_TRUE(back.ok()) << back.status().to_string();
        EXPECT_FALSE(back->vision);
        EXPECT_FALSE(back->audio);
        j[field] = "yes";
        auto bad = node_record_parse(j.dump());
        ASSERT_FALSE(bad.ok()) << field;
        EXPECT_NE(bad.status().message().find(field), std::string::npos);
    }
}

TEST(NodeRecord, RejectsEachBadFieldByName) {
    const std::string good = node_record_json(sample_record());
    struct mutation {
        std::string from, to, field;
    };
    const std::vector<mutation> cases = {
        {"\"version\":1", "\"version\":2", "version"},
        {"\"role\":\"decode\"", "\"role\":\"router\"", "role"},
        {"\"url\":\"http://10.0.0.5:8080\"", "\"url\":5", "url"},
        {"\"fingerprint\":\"", "\"fingerprint\":\"zz", "model.fingerprint"},
        {"\"type_k\":\"q8_0\"", "\"type_k\":\"q9_9\"", "kv.type_k"},
        {"\"flash_attn\":true", "\"flash_attn\":1", "kv.flash_attn"},
        {"\"n_seq_max\":4", "\"n_seq_max\":-4", "kv.n_seq_max"},
        {"\"busy\":1", "\"busy\":\"1\"", "load.busy"},
        {"\"draining\":false", "\"draining\":null", "draining"},
    };
    for (const auto & c : cases) {
        std::string j = good;
        const size_t at = j.find(c.from);
        ASSERT_NE(at, std::string::npos) << c.from << " in " << j;
        j.replace(at, c.from.size(), c.to);
        auto r = node_record_parse(j);
        ASSERT_FALSE(r.ok()) << "accepted a bad " << c.field << ": " << j;
        EXPECT_EQ(r.status().code(), status_code::invalid_argument);
        EXPECT_NE(r.status().message().find(c.field), std::string::npos) << r.status().message();
    }
    for (const char * junk : {"", "[]", "{", "{\"version\":1}", "null"})
        EXPECT_FALSE(node_record_parse(junk).ok()) << junk;
}

TEST(NodeRecord, GroupIsWhatABlobMustMatch) {
    const node_record a = sample_record();
    node_record b = a;
    b.url = "http://other:1";
    b.busy = 3;
    b.kv.n_ctx = 8192;  // more cells: the same blobs restore there
    EXPECT_EQ(node_record_group(a), node_record_group(b));
    b.kv.n_seq_max = 8;  // unified: the slot count does not matter
    EXPECT_EQ(node_record_group(a), node_record_group(b));
    for (auto change : std::vector<std::function<void(node_record &)>>{
             [](node_record & r) { r.fingerprint[0] ^= 1; },
             [](node_record & r) { r.kv.type_k = 1; },
             [](node_record & r) { r.kv.type_v = 8; },
             [](node_record & r) { r.kv.flash_attn = false; },
             [](node_record & r) { r.kv.kv_unified = false; },
         }) {
        node_record c = a;
        change(c);
        EXPECT_NE(node_record_group(a), node_record_group(c));
    }
    node_record s1 = a, s2 = a;
    s1.kv.kv_unified = s2.kv.kv_unified = false;
    s2.kv.n_seq_max = 2;
    EXPECT_NE(node_record_group(s1), node_record_group(s2)) << "a split cache restores only with the same slot count";
    EXPECT_TRUE(node_record_serves(a, "m1"));
    EXPECT_TRUE(node_record_serves(a, "model.gguf"));
    EXPECT_FALSE(node_record_serves(a, "m2"));
    EXPECT_FALSE(node_record_serves(a, ""));
}

TEST(ClusterKeys, LayoutAndNameRules) {
    EXPECT_EQ(cluster_node_key("prod", node_role::decode, "10.0.0.5:8080"), "/baton/prod/nodes/decode/10.0.0.5:8080");
    EXPECT_EQ(cluster_prefix("prod"), "/baton/prod/nodes/");
    EXPECT_TRUE(cluster_name_check("prod-1.eu_west").ok());
    for (const char * bad : {"", "a/b", "with space", "ü"}) EXPECT_FALSE(cluster_name_check(bad).ok()) << bad;
    EXPECT_FALSE(cluster_name_check(std::string(65, 'a')).ok());
    EXPECT_EQ(etcd_prefix_end("/baton/"), "/baton0");
    EXPECT_EQ(etcd_prefix_end(std::string("a\xff", 2)), "b");
    EXPECT_FALSE(etcd_config_parse("", "", "").ok());
    EXPECT_FALSE(etcd_config_parse("http://a:1", "user", "").ok()) << "a user needs a password";
    auto c = etcd_config_parse("http://a:1,,http://b:2", "", "");
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->endpoints.size(), 2u);
}

}  // namespace
}  // namespace baton
