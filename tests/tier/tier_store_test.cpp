// tier_store_test.cpp — tier_store against real valkey-servers: round trips in parts, and every way an entry
// can go missing or bad (TTL, a lost part, a damaged part, a lost or damaged manifest, FLUSHALL) as a miss;
// every way the server can fail (killed between manifest and parts, stopped, restarted, full, wrong password,
// an ACL user) as a typed error or a miss, within the timeout; the breaker in front of a dead server.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include "baton/tier/tier_store.h"
#include "support/valkey_process.h"
#include "tier_manifest.h"
#include "tier_test_seam.h"

namespace baton {
namespace {

using store_clock = std::chrono::steady_clock;
constexpr uint64_t MiB = uint64_t(1) << 20;

tier_entry_key key_of(uint64_t chain_hash) {
    return {"0123456789abcdef0123456789abcdef", "f16.f16.fa0.u1", 3, chain_hash};
}

std::vector<uint8_t> entry_of(size_t n, uint8_t seed) {
    std::vector<uint8_t> v(n);
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; ++i) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v[i] = uint8_t(x);
    }
    return v;
}

tier_config store_config_for(int port, uint32_t command_timeout_ms = 300) {
    tier_config c;
    c.valkey.port = uint16_t(port);
    c.valkey.connect_timeout_ms = 300;
    c.valkey.command_timeout_ms = command_timeout_ms;
    return c;
}

std::unique_ptr<tier_store> store_for(const tier_config & c) {
    auto s = tier_store::create(c);
    if (!s.ok()) throw std::runtime_error(s.status().to_string());
    return std::move(s.value());
}

// part_key: the key of an entry's part i, as put writes it.
std::string part_key(const tier_entry_key & k, std::span<const uint8_t> entry, uint64_t part_bytes, size_t i) {
    const tier_manifest m = tier_manifest_describe(entry, part_bytes);
    return tier_part_key_name(tier_entry_key_name(k).value(), i, m.parts.at(i).xxh3);
}

void expect_miss(tier_store & s, const tier_entry_key & k) {
    auto g = s.get(k);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    EXPECT_FALSE(g.value().has_value());
}

// One server for the cases that leave it running.
class TierStore : public ::testing::Test {
  protected:
    static void SetUpTestSuite() { server_ = test::valkey_process::start().release(); }
    static void TearDownTestSuite() {
        delete server_;
        server_ = nullptr;
    }
    void SetUp() override {
        ASSERT_EQ(server_->command({"FLUSHALL"}).type, '+');
        store_ = store_for(store_config_for(server_->port()));
    }
    static test::valkey_process * server_;
    std::unique_ptr<tier_store> store_;
};
test::valkey_process * TierStore::server_ = nullptr;

TEST_F(TierStore, TenMegabytesRoundTripInThreeParts) {
    const auto entry = entry_of(10 * MiB, 1);
    ASSERT_TRUE(store_->put(key_of(1), entry, 60000).ok());
    const auto dbsize = server_->command({"DBSIZE"});
    EXPECT_EQ(dbsize.text, "4") << "three parts of at most 4 MiB and the manifest";
    auto g = store_->get(key_of(1));
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    ASSERT_TRUE(g.value().has_value());
    EXPECT_TRUE(*g.value() == entry);
    const tier_counters c = store_->counters();
    EXPECT_EQ(c.hits, 1u);
    EXPECT_EQ(c.puts, 1u);
    EXPECT_EQ(c.bytes_written, 10 * MiB);
    EXPECT_EQ(c.bytes_read, 10 * MiB);
    EXPECT_EQ(c.misses + c.corrupt + c.errors, 0u);
}

TEST_F(TierStore, KeysNameTheEntryAndNothingElse) {
    const auto entry = entry_of(100, 2);
    ASSERT_TRUE(store_->put(key_of(0xabc), entry, 60000).ok());
    const auto keys = server_->command({"KEYS", "*"});
    const std::string manifest = "baton:v1:0123456789abcdef0123456789abcdef:f16.f16.fa0.u1:3:0000000000000abc";
    std::set<std::string> names;
    for (size_t at = 0; at <= keys.text.size();) {
        const size_t nl = std::min(keys.text.find('\n', at), keys.text.size());
        names.insert(keys.text.substr(at, nl - at));
        at = nl + 1;
    }
    EXPECT_EQ(names, (std::set<std::string>{manifest, part_key(key_of(0xabc), entry, 4 * MiB, 0)}));
    EXPECT_EQ(tier_entry_key_name(key_of(0xabc)).value(), manifest);
}

TEST_F(TierStore, MalformedEntryKeysAreRefusedUnsent) {
    tier_entry_key k = key_of(1);
    k.fingerprint = "ABC";  // uppercase
    EXPECT_EQ(store_->put(k, entry_of(1, 1), 1000).code(), status_code::invalid_argument);
    k = key_of(1);
    k.layout = "f16:*";  // ':' and '*' would let a caller name other keys
    EXPECT_EQ(store_->get(k).status().code(), status_code::invalid_argument);
    k.layout = "";
    EXPECT_EQ(store_->get(k).status().code(), status_code::invalid_argument);
    k = key_of(1);
    k.fingerprint = std::string(65, 'a');
    EXPECT_EQ(store_->get(k).status().code(), status_code::invalid_argument);
    EXPECT_EQ(store_->put(key_of(1), entry_of(1, 1), 0).code(), status_code::invalid_argument);
    EXPECT_EQ(server_->command({"DBSIZE"}).text, "0");
}

TEST_F(TierStore, AnEntryOverTheLimitIsTooLarge) {
    auto c = store_config_for(server_->port());
    c.entry_bytes_max = 1000;
    auto s = store_for(c);
    EXPECT_EQ(s->put(key_of(1), entry_of(1001, 1), 1000).code(), status_code::too_large);
}

TEST_F(TierStore, AnEmptyEntryRoundTrips) {
    ASSERT_TRUE(store_->put(key_of(5), {}, 60000).ok());
    auto g = store_->get(key_of(5));
    ASSERT_TRUE(g.ok());
    ASSERT_TRUE(g.value().has_value());
    EXPECT_TRUE(g.value()->empty());
}

TEST_F(TierStore, AnEntryThatWasNeverPutIsAMiss) {
    expect_miss(*store_, key_of(404));
    EXPECT_EQ(store_->counters().misses, 1u);
}

TEST_F(TierStore, TtlExpiryIsAMiss) {
    ASSERT_TRUE(store_->put(key_of(7), entry_of(1000, 7), 100).ok());
    const auto pttl = server_->command({"PTTL", tier_entry_key_name(key_of(7)).value()});
    ASSERT_EQ(pttl.type, ':');
    EXPECT_LE(std::stol(pttl.text), 100);
    const auto deadline = store_clock::now() + std::chrono::seconds(5);
    bool miss = false;
    while (!miss && store_clock::now() < deadline) {
        auto g = store_->get(key_of(7));
        ASSERT_TRUE(g.ok());
        miss = !g.value().has_value();
        if (!miss) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_TRUE(miss);
}

TEST_F(TierStore, PartsOutliveTheirManifest) {
    const auto entry = entry_of(1000, 8);
    ASSERT_TRUE(store_->put(key_of(8), entry, 5000).ok());
    const long manifest_ttl = std::stol(server_->command({"PTTL", tier_entry_key_name(key_of(8)).value()}).text);
    const long part_ttl = std::stol(server_->command({"PTTL", part_key(key_of(8), entry, 4 * MiB, 0)}).text);
    EXPECT_GT(part_ttl, manifest_ttl + 500);
}

TEST_F(TierStore, AMissingPartIsAMiss) {
    const auto entry = entry_of(10 * MiB, 9);
    ASSERT_TRUE(store_->put(key_of(9), entry, 60000).ok());
    ASSERT_EQ(server_->command({"DEL", part_key(key_of(9), entry, 4 * MiB, 1)}).text, "1");
    expect_miss(*store_, key_of(9));
    const tier_counters c = store_->counters();
    EXPECT_EQ(c.misses, 1u);
    EXPECT_EQ(c.corrupt, 0u);
    EXPECT_TRUE(store_->get(key_of(404)).ok()) << "the connection is still in step after the skipped replies";
}

TEST_F(TierStore, ADamagedPartIsACorruptMiss) {
    const auto entry = entry_of(10 * MiB, 10);
    ASSERT_TRUE(store_->put(key_of(10), entry, 60000).ok());
    ASSERT_EQ(server_->command({"SETRANGE", part_key(key_of(10), entry, 4 * MiB, 2), "100", "XYZ"}).type, ':');
    expect_miss(*store_, key_of(10));
    EXPECT_EQ(store_->counters().corrupt, 1u);
}

TEST_F(TierStore, ATruncatedPartIsACorruptMiss) {
    const auto entry = entry_of(5000, 11);
    ASSERT_TRUE(store_->put(key_of(11), entry, 60000).ok());
    ASSERT_EQ(server_->command({"SET", part_key(key_of(11), entry, 4 * MiB, 0), "short"}).type, '+');
    expect_miss(*store_, key_of(11));
    EXPECT_EQ(store_->counters().corrupt, 1u);
}

TEST_F(TierStore, ADeletedManifestIsAMiss) {
    ASSERT_TRUE(store_->put(key_of(12), entry_of(5000, 12), 60000).ok());
    ASSERT_EQ(server_->command({"DEL", tier_entry_key_name(key_of(12)).value()}).text, "1");
    expect_miss(*store_, key_of(12));
    EXPECT_EQ(store_->counters().misses, 1u);
}

TEST_F(TierStore, ADamagedManifestIsACorruptMiss) {
    ASSERT_TRUE(store_->put(key_of(13), entry_of(5000, 13), 60000).ok());
    ASSERT_EQ(server_->command({"SETRANGE", tier_entry_key_name(key_of(13)).value(), "20", "\x7f"}).type, ':');
    expect_miss(*store_, key_of(13));
    EXPECT_EQ(store_->counters().corrupt, 1u);
}

TEST_F(TierStore, PartsInTheWrongOrderAreRefusedByTheWholeChecksum) {
    // A manifest whose parts each check out but come in another order than the entry's: only the XXH3-128 of
    // the whole can tell.
    const auto entry = entry_of(2000, 14);
    const std::span<const uint8_t> a(entry.data(), 1000), b(entry.data() + 1000, 1000);
    tier_manifest m = tier_manifest_describe(entry, 1000);
    std::swap(m.parts[0], m.parts[1]);
    const std::string name = tier_entry_key_name(key_of(14)).value();
    const auto manifest = tier_manifest_write(m);
    const auto text = [](std::span<const uint8_t> v) { return std::string(v.begin(), v.end()); };
    ASSERT_EQ(server_->command({"SET", name, text(manifest)}).type, '+');
    ASSERT_EQ(server_->command({"SET", tier_part_key_name(name, 0, m.parts[0].xxh3), text(b)}).type, '+');
    ASSERT_EQ(server_->command({"SET", tier_part_key_name(name, 1, m.parts[1].xxh3), text(a)}).type, '+');
    expect_miss(*store_, key_of(14));
    EXPECT_EQ(store_->counters().corrupt, 1u);
}

TEST_F(TierStore, FlushallIsAMiss) {
    ASSERT_TRUE(store_->put(key_of(16), entry_of(5000, 16), 60000).ok());
    ASSERT_EQ(server_->command({"FLUSHALL"}).type, '+');
    expect_miss(*store_, key_of(16));
}

TEST_F(TierStore, ConcurrentPutsAndGetsFromManyThreads) {
    auto c = store_config_for(server_->port(), 2000);
    c.part_bytes = 4096;
    auto s = store_for(c);
    std::atomic<int> bad{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            for (int i = 0; i < 20; ++i) {
                const auto entry = entry_of(10000 + size_t(i), uint8_t(t * 20 + i));
                const auto k = key_of(uint64_t(t * 100 + i));
                if (!s->put(k, entry, 60000).ok()) ++bad;
                auto g = s->get(k);
                if (!g.ok() || !g.value() || *g.value() != entry) ++bad;
            }
        });
    for (auto & th : threads) th.join();
    EXPECT_EQ(bad.load(), 0);
    EXPECT_EQ(s->counters().hits, 80u);
}

// Servers of their own: the cases that kill, stop, restart or configure one.

TEST(TierStoreFailure, ServerKilledBetweenManifestAndPartsIsAnErrorWithinTheTimeout) {
    auto server = test::valkey_process::start();
    auto seam = std::make_shared<tier_test_seam>();
    seam->after_manifest = [&] { server->kill(); };
    auto s = tier_test_access::create(store_config_for(server->port()), seam);
    ASSERT_TRUE(s.ok());
    tier_store & store = *s.value();
    ASSERT_TRUE(store.put(key_of(1), entry_of(10 * MiB, 1), 60000).ok());
    const auto t0 = store_clock::now();
    auto g = store.get(key_of(1));
    EXPECT_LT(store_clock::now() - t0, std::chrono::seconds(2));
    ASSERT_FALSE(g.ok()) << "no data from a dead server";
    EXPECT_EQ(g.status().code(), status_code::unavailable) << g.status().to_string();
    EXPECT_EQ(store.counters().errors, 1u);
    EXPECT_EQ(store.counters().hits, 0u);
}

TEST(TierStoreFailure, AStoppedServerIsADeadlineThenWorksAfterSigcont) {
    auto server = test::valkey_process::start();
    auto store = store_for(store_config_for(server->port(), 300));
    const auto entry = entry_of(100000, 2);
    ASSERT_TRUE(store->put(key_of(2), entry, 60000).ok());
    server->pause();
    const auto t0 = store_clock::now();
    auto g = store->get(key_of(2));
    const auto waited = store_clock::now() - t0;
    server->resume();
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().code(), status_code::deadline_exceeded) << g.status().to_string();
    EXPECT_LT(waited, std::chrono::milliseconds(2000));
    EXPECT_EQ(store->counters().timeouts, 1u);
    auto again = store->get(key_of(2));
    ASSERT_TRUE(again.ok()) << again.status().to_string();
    ASSERT_TRUE(again.value().has_value());
    EXPECT_TRUE(*again.value() == entry);
}

TEST(TierStoreFailure, ARestartedServerIsUsedAgain) {
    auto server = test::valkey_process::start();
    auto store = store_for(store_config_for(server->port()));
    ASSERT_TRUE(store->put(key_of(3), entry_of(1000, 3), 60000).ok());
    server->kill();
    EXPECT_EQ(store->get(key_of(3)).status().code(), status_code::unavailable);
    server->restart();
    expect_miss(*store, key_of(3));  // no persistence: the entry is gone, the store works
    ASSERT_TRUE(store->put(key_of(3), entry_of(1000, 3), 60000).ok());
    auto g = store->get(key_of(3));
    ASSERT_TRUE(g.ok());
    EXPECT_TRUE(g.value().has_value());
}

TEST(TierStoreFailure, AFullServerRefusesThePutAndNeverWritesTheManifest) {
    auto server = test::valkey_process::start({"--maxmemory", "4mb", "--maxmemory-policy", "noeviction"});
    auto store = store_for(store_config_for(server->port(), 2000));
    Status st = store->put(key_of(4), entry_of(10 * MiB, 4), 60000);
    EXPECT_EQ(st.code(), status_code::resource_exhausted) << st.to_string();
    expect_miss(*store, key_of(4));
    EXPECT_EQ(server->command({"DBSIZE"}).text, "0") << "the parts written before the refusal are deleted";
    const tier_counters c = store->counters();
    EXPECT_EQ(c.puts, 0u);
    EXPECT_EQ(c.errors, 1u);
    EXPECT_EQ(c.breaker_opens, 0u) << "a full server is a working server";
}

TEST(TierStoreFailure, AWrongPasswordIsPermissionDenied) {
    auto server = test::valkey_process::start({"--requirepass", "sesame"});
    auto c = store_config_for(server->port());
    c.valkey.password = "wrong";
    auto store = store_for(c);
    EXPECT_EQ(store->get(key_of(1)).status().code(), status_code::permission_denied);
    EXPECT_EQ(store->put(key_of(1), entry_of(10, 1), 1000).code(), status_code::permission_denied);
}

TEST(TierStoreFailure, AnAclUserLimitedToBatonKeysWorks) {
    auto server = test::valkey_process::start({"--requirepass", "sesame"});
    ASSERT_EQ(server
                  ->command({"ACL", "SETUSER", "tier", "on", ">secret", "resetkeys", "~baton:*", "-@all", "+get",
                             "+set", "+del", "+ping"},
                            {"sesame"})
                  .type,
              '+');
    auto c = store_config_for(server->port());
    c.valkey.username = "tier";
    c.valkey.password = "secret";
    auto store = store_for(c);
    const auto entry = entry_of(10000, 6);
    ASSERT_TRUE(store->put(key_of(6), entry, 60000).ok());
    auto g = store->get(key_of(6));
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    ASSERT_TRUE(g.value().has_value());
    EXPECT_TRUE(*g.value() == entry);
    EXPECT_EQ(server->command({"GET", "other"}, {"tier", "secret"}).text.rfind("NOPERM", 0), 0u)
        << "the user really is limited to baton:* keys";
}

TEST(TierStoreFailure, TheBreakerOpensFailsFastAndLetsAProbeThroughAfterTheCooldown) {
    auto server = test::valkey_process::start();
    auto c = store_config_for(server->port());
    c.breaker_failures_to_open = 2;
    c.breaker_cooldown_ms = 300;
    auto store = store_for(c);
    server->kill();
    EXPECT_EQ(store->get(key_of(1)).status().code(), status_code::unavailable);
    const auto t_open = store_clock::now();  // before the failure that opens it
    EXPECT_EQ(store->get(key_of(1)).status().code(), status_code::unavailable);
    EXPECT_EQ(store->counters().breaker_opens, 1u);
    const auto t0 = store_clock::now();
    auto fast = store->get(key_of(1));
    EXPECT_LT(store_clock::now() - t0, std::chrono::milliseconds(50));
    EXPECT_EQ(fast.status().code(), status_code::unavailable);
    EXPECT_NE(fast.status().message().find("circuit breaker open"), std::string::npos) << fast.status().message();
    server->restart();
    // Within the cooldown every call still fails fast; after it, the probe reaches the restarted server.
    const auto deadline = store_clock::now() + std::chrono::seconds(5);
    bool served = false;
    while (!served && store_clock::now() < deadline) {
        served = store->get(key_of(1)).ok();
        if (!served) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_TRUE(served);
    EXPECT_GE(store_clock::now() - t_open, std::chrono::milliseconds(300));
    EXPECT_EQ(store->counters().breaker_opens, 1u);
}

}  // namespace
}  // namespace baton
