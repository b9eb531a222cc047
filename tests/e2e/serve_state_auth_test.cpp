// serve_state_auth_test.cpp — states over HTTP that a node must not trust: a crafted state resealed behind
// fresh checksums (refused before libllama, the slot stays usable), and authenticated states between nodes
// sharing a --state-secret-file (a node refuses what it cannot authenticate, naming why).
#include <xxhash.h>

#include <cstring>
#include <fstream>

#include "baton/blob.h"
#include "serve_test_util.h"

namespace baton::test {
namespace {

std::vector<uint8_t> bytes_of(const std::string & s) { return std::vector<uint8_t>(s.begin(), s.end()); }
std::string text_of(const std::vector<uint8_t> & b) { return std::string(b.begin(), b.end()); }

// rewrite parses a blob, lets f edit a copy of its state bytes, and writes it again (fresh checksums, no MAC
// unless key).
template <typename F>
std::string rewrite(const std::string & blob, F f, const blob_key * key = nullptr) {
    const auto in = bytes_of(blob);
    auto v = blob_parse(in);
    if (!v.ok()) throw std::runtime_error(v.status().to_string());
    std::vector<uint8_t> state(v->state.begin(), v->state.end());
    f(state);
    blob_parts p = blob_view_parts(v.value());
    p.state = state;
    blob_buffer_sink sink;
    Status st = blob_write(p, sink, key);
    if (!st.ok()) throw std::runtime_error(st.to_string());
    return text_of(sink.bytes());
}

// A unified llama state: an 8-byte header, n_stream, cell_count, then 12-byte cells (i32 pos first).
void set_cell_pos(std::vector<uint8_t> & s, size_t cell, int32_t pos) {
    for (int i = 0; i < 4; ++i) s[16 + 12 * cell + size_t(i)] = uint8_t(uint32_t(pos) >> (8 * i));
}

http_reply put_state(const node_process & n, int slot, const std::string & blob) {
    auto c = n.client(60);
    return to_reply(c->Put("/v1/slots/" + std::to_string(slot) + "/state", blob, "application/octet-stream"));
}

// The finding: a randomly mutated state section, resealed, got 422 "slot 2: memory holds positions
// -1..1048582", and afterwards every valid blob for that slot got 422 until restart; DELETE did not help.
TEST(ServeStateRegression, CraftedStateIsRefusedAndTheSlotStaysUsable) {
    auto n = node_process::start(serve_args("llama", {"-np", "3"}));
    const json body = {{"prompt", "A question about slots and what they hold"}, {"max_tokens", 8}, {"temperature", 0}};
    const http_reply single = post(*n, "/v1/completions", body.dump());
    ASSERT_EQ(single.status, 200) << single.body;
    json pbody = body;
    const http_reply blob = post(*n, "/v1/prefill", pbody.dump());
    ASSERT_EQ(blob.status, 200) << blob.body;

    for (int32_t pos : {-1, 1048582}) {
        SCOPED_TRACE(pos);
        const std::string crafted = rewrite(blob.body, [&](std::vector<uint8_t> & s) { set_cell_pos(s, 0, pos); });
        const http_reply put = put_state(*n, 2, crafted);
        EXPECT_EQ(put.status, 422) << put.body;
        EXPECT_NE(put.body.find("position " + std::to_string(pos) + " outside"), std::string::npos) << put.body;
        const http_reply dec = post(*n, "/v1/decode", crafted, "application/octet-stream");
        EXPECT_EQ(dec.status, 422) << dec.body;
        // The slot takes a valid state afterwards, and a valid blob decodes to the single node's answer.
        const http_reply ok = put_state(*n, 2, blob.body);
        ASSERT_EQ(ok.status, 200) << ok.body;
        const json slots = json::parse(get(*n, "/v1/slots").body);
        EXPECT_EQ(slots[2]["pos_max"].get<int>() + 1, slots[2]["n_tokens"].get<int>()) << slots.dump();
        EXPECT_EQ(to_reply(n->client(60)->Delete("/v1/slots/2/state")).status, 200);
        const http_reply pd = post(*n, "/v1/decode", blob.body, "application/octet-stream");
        ASSERT_EQ(pd.status, 200) << pd.body;
        EXPECT_EQ(normalized(pd.j()), normalized(single.j()));
    }
}

std::string write_secret(const std::string & name, const std::string & lines) {
    const std::string path = temp_dir() + "/" + name;
    std::ofstream(path, std::ios::binary) << lines;
    return path;
}

TEST(ServeStateAuth, NodesSharingASecretMoveStatesAndRefuseAnyOther) {
    const std::string a = "state secret A, at least sixteen bytes";
    const std::string b = "state secret B, at least sixteen bytes";
    const std::string file_a = write_secret("secret-a", a + "\n");
    const std::string file_b = write_secret("secret-b", b + "\n");
    auto pre = node_process::start(serve_args("llama", {"-np", "1", "--state-secret-file", file_a}));
    auto dec = node_process::start(serve_args("llama", {"-np", "1", "--state-secret-file", file_a}));
    auto other = node_process::start(serve_args("llama", {"-np", "1", "--state-secret-file", file_b}));
    EXPECT_EQ(get(*pre, "/health").j()["state_auth"], "hmac-sha256");
    EXPECT_NE(pre->stderr_text().find("states are authenticated (HMAC-SHA256"), std::string::npos);

    const json body = {{"prompt", "Authenticated states between nodes"}, {"max_tokens", 8}, {"temperature", 0}};
    const http_reply single = post(*pre, "/v1/completions", body.dump());
    ASSERT_EQ(single.status, 200);
    json pbody = body;
    const http_reply blob = post(*pre, "/v1/prefill", pbody.dump());
    ASSERT_EQ(blob.status, 200) << blob.body;
    auto key_a = blob_key::make({a});
    ASSERT_TRUE(key_a.ok());
    blob_limits with_a;
    with_a.key = key_a.value();
    ASSERT_TRUE(blob_parse(bytes_of(blob.body), with_a).ok()) << "the prefill node signs what it sends";

    const http_reply pd = post(*dec, "/v1/decode", blob.body, "application/octet-stream");
    ASSERT_EQ(pd.status, 200) << pd.body;
    EXPECT_EQ(normalized(pd.j()), normalized(single.j()));

    const http_reply foreign = post(*other, "/v1/decode", blob.body, "application/octet-stream");
    EXPECT_EQ(foreign.status, 401) << foreign.body;
    EXPECT_NE(foreign.body.find("made with state secret " + blob_key_id_hex(key_a.value()->signing_id())),
              std::string::npos)
        << foreign.body;

    const std::string unsigned_blob = rewrite(blob.body, [](std::vector<uint8_t> &) {});
    const http_reply bare = post(*dec, "/v1/decode", unsigned_blob, "application/octet-stream");
    EXPECT_EQ(bare.status, 401) << bare.body;
    EXPECT_NE(bare.body.find("carries no mac section"), std::string::npos) << bare.body;

    // Crafted after signing, with every checksum made right again: the MAC still refuses it, before the
    // state is parsed (so even a state the validator would accept, a KV byte flipped, is refused).
    std::string crafted = blob.body;
    for (const auto & s : blob_walk(bytes_of(crafted)).sections) {
        if (s.name != "state") continue;
        crafted[size_t(s.payload_offset + s.length - 1)] ^= 0x10;
        const uint64_t h = XXH3_64bits(crafted.data() + s.offset, size_t(16 + s.length));
        std::memcpy(crafted.data() + s.payload_offset + s.length, &h, 8);  // little-endian hosts
    }
    ASSERT_TRUE(blob_parse(bytes_of(crafted)).ok()) << "checksums resealed";
    const http_reply forged = post(*dec, "/v1/decode", crafted, "application/octet-stream");
    EXPECT_EQ(forged.status, 401) << forged.body;
    EXPECT_NE(forged.body.find("does not match"), std::string::npos) << forged.body;
    EXPECT_EQ(put_state(*dec, 0, crafted).status, 401);

    // Slot states it serves are signed too.
    const http_reply saved = get(*dec, "/v1/slots/0/state");
    ASSERT_EQ(saved.status, 200);
    EXPECT_TRUE(blob_parse(bytes_of(saved.body), with_a).ok());
}

TEST(ServeStateAuth, AKeylessNodeSaysSoAndABadSecretFileIsAUsageError) {
    auto n = node_process::start(serve_args("llama", {"-np", "1"}));
    EXPECT_EQ(get(*n, "/health").j()["state_auth"], "none");
    EXPECT_NE(n->stderr_text().find("states are not authenticated"), std::string::npos) << n->stderr_text();
    const std::string short_file = write_secret("short", "tooshort\n");
    std::vector<std::string> argv = serve_args("llama", {"--state-secret-file", short_file});
    argv.insert(argv.begin(), baton_bin());
    const proc_result r = run_process(argv, 60);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("at least 16"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace baton::test
