// valkey_client_test.cpp — valkey_client against real valkey-servers (tests/support/valkey_process.h):
// binary-safe commands, TTLs, and what each failure of the server becomes (refused, stopped, restarted,
// full, wrong password, ACL, TLS).
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <poll.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "baton/tier/valkey_client.h"
#include "support/valkey_process.h"

namespace baton {
namespace {

using client_clock = std::chrono::steady_clock;

std::vector<uint8_t> client_bytes_of(std::string_view s) { return {s.begin(), s.end()}; }

valkey_config client_config_for(int port, uint32_t command_timeout_ms = 300) {
    valkey_config c;
    c.port = uint16_t(port);
    c.connect_timeout_ms = 300;
    c.command_timeout_ms = command_timeout_ms;
    return c;
}

class ValkeyClient : public ::testing::Test {
  protected:
    static void SetUpTestSuite() { server_ = test::valkey_process::start().release(); }
    static void TearDownTestSuite() {
        delete server_;
        server_ = nullptr;
    }
    static test::valkey_process * server_;
};
test::valkey_process * ValkeyClient::server_ = nullptr;

TEST_F(ValkeyClient, PingConnectsLazily) {
    valkey_client c(client_config_for(server_->port()));
    EXPECT_FALSE(c.connected());
    ASSERT_TRUE(c.ping().ok());
    EXPECT_TRUE(c.connected());
}

TEST_F(ValkeyClient, KeysAndValuesAreBinarySafe) {
    valkey_client c(client_config_for(server_->port()));
    const std::string key("bin\0key\r\n", 9);
    std::vector<uint8_t> value(1 << 20);
    for (size_t i = 0; i < value.size(); ++i) value[i] = uint8_t(i * 7 + (i >> 9));
    value[0] = 0;
    value[1] = '\r';
    value[2] = '\n';
    ASSERT_TRUE(c.set(key, value, 60000).ok());
    auto got = c.get(key);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    ASSERT_TRUE(got.value().has_value());
    EXPECT_EQ(*got.value(), value);
    auto missing = c.get("no such key");
    ASSERT_TRUE(missing.ok());
    EXPECT_FALSE(missing.value().has_value());
}

TEST_F(ValkeyClient, GetEachPipelinesAndReportsMissingKeys) {
    valkey_client c(client_config_for(server_->port()));
    const std::vector<std::string> keys = {"ge:a", "ge:missing", "ge:b"};
    const std::vector<uint8_t> a = client_bytes_of("A"), b = client_bytes_of("BB");
    const std::span<const uint8_t> values[2] = {a, b};
    const std::string set_keys[2] = {"ge:a", "ge:b"};
    ASSERT_TRUE(c.set_each(set_keys, values, 60000).ok());
    std::vector<std::string> seen;
    ASSERT_TRUE(c.get_each(keys, [&](size_t, const std::span<const uint8_t> * v) {
                     seen.push_back(v ? std::string(v->begin(), v->end()) : "<nil>");
                     return Status();
                 }).ok());
    EXPECT_EQ(seen, (std::vector<std::string>{"A", "<nil>", "BB"}));
}

TEST_F(ValkeyClient, AStopInGetEachDropsTheConnectionAndTheNextCommandWorks) {
    valkey_client c(client_config_for(server_->port()));
    const std::vector<std::string> keys = {"ge:a", "ge:b", "ge:c"};
    ASSERT_TRUE(c.set("ge:a", client_bytes_of("x"), 60000).ok());
    Status st = c.get_each(
        keys, [](size_t, const std::span<const uint8_t> *) { return Status(status_code::cancelled, "enough"); });
    EXPECT_EQ(st.code(), status_code::cancelled);
    EXPECT_FALSE(c.connected()) << "replies were left unread: the connection must not be reused";
    EXPECT_TRUE(c.ping().ok());
}

// get_each reads values without reply objects (its own builders in hiredis's reader); every other command must
// get hiredis's replies again afterwards, whether the pipeline ended in a value, an error reply or a throw.
TEST_F(ValkeyClient, GetEachErrorReplyIsUpstreamErrorAndLaterCommandsWork) {
    valkey_client c(client_config_for(server_->port()));
    ASSERT_EQ(server_->command({"RPUSH", "ge:list", "x"}).type, ':');
    ASSERT_TRUE(c.set("ge:a", client_bytes_of("A"), 60000).ok());
    const std::vector<std::string> last = {"ge:a", "ge:list"};
    std::vector<std::string> seen;
    Status st = c.get_each(last, [&](size_t, const std::span<const uint8_t> * v) {
        seen.push_back(v ? std::string(v->begin(), v->end()) : "<nil>");
        return Status();
    });
    EXPECT_EQ(st.code(), status_code::upstream_error);
    EXPECT_NE(st.message().find("WRONGTYPE"), std::string::npos) << st.to_string();
    EXPECT_EQ(seen, std::vector<std::string>{"A"});
    EXPECT_TRUE(c.connected()) << "every reply was read: the connection stays";
    EXPECT_TRUE(c.ping().ok());
    EXPECT_TRUE(c.set("ge:b", client_bytes_of("B"), 60000).ok());
    auto got = c.get("ge:b");
    ASSERT_TRUE(got.ok() && got.value()) << got.status().to_string();
    EXPECT_EQ(*got.value(), client_bytes_of("B"));

    const std::vector<std::string> first = {"ge:list", "ge:a"};
    st = c.get_each(first, [](size_t, const std::span<const uint8_t> *) { return Status(); });
    EXPECT_EQ(st.code(), status_code::upstream_error);
    EXPECT_FALSE(c.connected()) << "a reply was left unread";
    auto del = c.del(std::vector<std::string>{"ge:list"});
    ASSERT_TRUE(del.ok()) << del.status().to_string();
    EXPECT_EQ(del.value(), 1u);
}

TEST_F(ValkeyClient, AThrowInGetEachIsInternalAndLaterCommandsWork) {
    valkey_client c(client_config_for(server_->port()));
    ASSERT_TRUE(c.set("ge:a", client_bytes_of("A"), 60000).ok());
    const std::vector<std::string> keys = {"ge:a"};
    Status st = c.get_each(
        keys, [](size_t, const std::span<const uint8_t> *) -> Status { throw std::runtime_error("no room"); });
    EXPECT_EQ(st.code(), status_code::internal);
    EXPECT_NE(st.message().find("no room"), std::string::npos) << st.to_string();
    auto got = c.get("ge:a");
    ASSERT_TRUE(got.ok() && got.value()) << got.status().to_string();
    EXPECT_EQ(*got.value(), client_bytes_of("A"));
}

TEST_F(ValkeyClient, SetNxSetsOnlyOnce) {
    valkey_client c(client_config_for(server_->port()));
    auto first = c.set_nx("nx:key", client_bytes_of("one"), 60000);
    ASSERT_TRUE(first.ok());
    EXPECT_TRUE(first.value());
    auto second = c.set_nx("nx:key", client_bytes_of("two"), 60000);
    ASSERT_TRUE(second.ok());
    EXPECT_FALSE(second.value());
    EXPECT_EQ(*c.get("nx:key").value(), client_bytes_of("one"));
}

TEST_F(ValkeyClient, TtlExpires) {
    valkey_client c(client_config_for(server_->port()));
    ASSERT_TRUE(c.set("ttl:key", client_bytes_of("v"), 50).ok());
    const auto pttl = server_->command({"PTTL", "ttl:key"});
    ASSERT_EQ(pttl.type, ':');
    EXPECT_LE(std::stol(pttl.text), 50);
    const auto deadline = client_clock::now() + std::chrono::seconds(5);
    bool gone = false;
    while (!gone && client_clock::now() < deadline) {
        auto g = c.get("ttl:key");
        ASSERT_TRUE(g.ok());
        gone = !g.value().has_value();
        if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_TRUE(gone);
}

TEST_F(ValkeyClient, ZeroTtlIsRefusedUnsent) {
    valkey_client c(client_config_for(server_->port()));
    EXPECT_EQ(c.set("k", client_bytes_of("v"), 0).code(), status_code::invalid_argument);
    EXPECT_EQ(c.set_nx("k", client_bytes_of("v"), 0).status().code(), status_code::invalid_argument);
}

TEST_F(ValkeyClient, DelCountsTheKeysThatExisted) {
    valkey_client c(client_config_for(server_->port()));
    ASSERT_TRUE(c.set("del:a", client_bytes_of("1"), 60000).ok());
    ASSERT_TRUE(c.set("del:b", client_bytes_of("2"), 60000).ok());
    const std::vector<std::string> keys = {"del:a", "del:b", "del:c"};
    auto n = c.del(keys);
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(n.value(), 2u);
}

TEST(ValkeyClientFailure, NothingListeningIsUnavailable) {
    const int port = test::free_port();
    valkey_client c(client_config_for(port));
    Status st = c.ping();
    EXPECT_EQ(st.code(), status_code::unavailable) << st.to_string();
    EXPECT_FALSE(c.connected());
}

TEST(ValkeyClientFailure, AConnectThatHangsIsADeadlineWithinTheConnectTimeout) {
    // A listening socket that never accepts, its accept queue filled: Linux drops further SYNs, so a connect
    // neither succeeds nor fails until the client gives up.
    const int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(lfd, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    ASSERT_EQ(::bind(lfd, reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
    ASSERT_EQ(::listen(lfd, 0), 0);
    ASSERT_EQ(::getsockname(lfd, reinterpret_cast<sockaddr *>(&a), &len), 0);
    std::vector<int> fillers;
    for (int i = 0; i < 4; ++i) {
        const int f = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        (void)::connect(f, reinterpret_cast<sockaddr *>(&a), sizeof a);
        fillers.push_back(f);
    }
    for (int f : fillers) {  // wait (bounded) for the handshakes the queue takes; the others' SYNs are dropped
        pollfd p{f, POLLOUT, 0};
        (void)::poll(&p, 1, 100);
    }
    auto cfg = client_config_for(ntohs(a.sin_port));
    cfg.connect_timeout_ms = 200;
    valkey_client c(cfg);
    const auto t0 = client_clock::now();
    Status st = c.ping();
    const auto waited = client_clock::now() - t0;
    for (int f : fillers) ::close(f);
    ::close(lfd);
    EXPECT_EQ(st.code(), status_code::deadline_exceeded) << st.to_string();
    EXPECT_GE(waited, std::chrono::milliseconds(150));
    EXPECT_LT(waited, std::chrono::milliseconds(1500));
}

TEST(ValkeyClientFailure, AStoppedServerIsADeadlineWithinTheTimeoutAndWorksAgainAfter) {
    auto server = test::valkey_process::start();
    valkey_client c(client_config_for(server->port(), 300));
    ASSERT_TRUE(c.ping().ok());
    server->pause();
    const auto t0 = client_clock::now();
    Status st = c.ping();
    const auto waited = client_clock::now() - t0;
    server->resume();
    EXPECT_EQ(st.code(), status_code::deadline_exceeded) << st.to_string();
    EXPECT_GE(waited, std::chrono::milliseconds(250));
    EXPECT_LT(waited, std::chrono::milliseconds(2000));
    EXPECT_FALSE(c.connected()) << "a timed-out connection is out of step and must be dropped";
    EXPECT_TRUE(c.ping().ok()) << "reconnects after SIGCONT";
}

TEST(ValkeyClientFailure, ARestartedServerIsUsedAgain) {
    auto server = test::valkey_process::start();
    valkey_client c(client_config_for(server->port()));
    ASSERT_TRUE(c.set("k", client_bytes_of("v"), 60000).ok());
    server->kill();
    Status down = c.ping();
    EXPECT_EQ(down.code(), status_code::unavailable) << down.to_string();
    server->restart();
    EXPECT_TRUE(c.ping().ok());
    auto g = c.get("k");
    ASSERT_TRUE(g.ok());
    EXPECT_FALSE(g.value().has_value()) << "no persistence: the restarted server is empty";
}

TEST(ValkeyClientFailure, AFullServerIsResourceExhaustedAndKeepsTheConnection) {
    auto server = test::valkey_process::start({"--maxmemory", "4mb", "--maxmemory-policy", "noeviction"});
    valkey_client c(client_config_for(server->port()));
    const std::vector<uint8_t> big(1 << 20, 'x');
    Status st;
    int written = 0;
    for (; written < 16 && st.ok(); ++written) st = c.set("big" + std::to_string(written), big, 60000);
    EXPECT_EQ(st.code(), status_code::resource_exhausted) << st.to_string() << " after " << written << " MiB";
    EXPECT_TRUE(c.connected()) << "an error reply leaves the connection usable";
    EXPECT_TRUE(c.ping().ok());
}

TEST(ValkeyClientFailure, PasswordsAndAclUsers) {
    auto server = test::valkey_process::start({"--requirepass", "sesame"});
    {
        valkey_client none(client_config_for(server->port()));
        EXPECT_EQ(none.ping().code(), status_code::permission_denied) << "NOAUTH";
    }
    {
        auto cfg = client_config_for(server->port());
        cfg.password = "wrong";
        valkey_client wrong(cfg);
        Status st = wrong.ping();
        EXPECT_EQ(st.code(), status_code::permission_denied) << st.to_string();
        EXPECT_FALSE(wrong.connected());
    }
    {
        auto cfg = client_config_for(server->port());
        cfg.password = "sesame";
        valkey_client right(cfg);
        EXPECT_TRUE(right.ping().ok());
    }
    ASSERT_EQ(server->command({"ACL", "SETUSER", "tier", "on", ">secret", "~baton:*", "+@all"}, {"sesame"}).type, '+');
    auto cfg = client_config_for(server->port());
    cfg.username = "tier";
    cfg.password = "secret";
    valkey_client user(cfg);
    EXPECT_TRUE(user.set("baton:x", client_bytes_of("v"), 60000).ok());
    Status st = user.set("other:x", client_bytes_of("v"), 60000);
    EXPECT_EQ(st.code(), status_code::permission_denied) << st.to_string();
    EXPECT_TRUE(user.ping().ok()) << "NOPERM leaves the connection usable";
}

// A self-signed certificate for localhost/127.0.0.1 (also its own CA), made with OpenSSL's library: the root
// has no openssl CLI.
struct test_cert {
    std::string cert_path, key_path;
};
bool make_self_signed(const std::string & dir, test_cert & out) {
    EVP_PKEY * key = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256");
    X509 * x = X509_new();
    bool ok = key && x;
    if (ok) {
        X509_set_version(x, 2);
        ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
        X509_gmtime_adj(X509_getm_notBefore(x), -60);
        X509_gmtime_adj(X509_getm_notAfter(x), 3600);
        X509_set_pubkey(x, key);
        X509_NAME * name = X509_get_subject_name(x);
        X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char *>("localhost"), -1,
                                   -1, 0);
        X509_set_issuer_name(x, name);
        X509V3_CTX ctx;
        X509V3_set_ctx_nodb(&ctx);
        X509V3_set_ctx(&ctx, x, x, nullptr, nullptr, 0);
        for (auto [nid, value] : {std::pair{NID_basic_constraints, "critical,CA:TRUE"},
                                  std::pair{NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1"}}) {
            X509_EXTENSION * ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
            ok = ok && ext && X509_add_ext(x, ext, -1) == 1;
            X509_EXTENSION_free(ext);
        }
        ok = ok && X509_sign(x, key, EVP_sha256()) > 0;
    }
    out.cert_path = dir + "/cert.pem";
    out.key_path = dir + "/key.pem";
    if (ok) {
        FILE * f = std::fopen(out.cert_path.c_str(), "w");
        ok = f && PEM_write_X509(f, x) == 1;
        if (f) std::fclose(f);
        f = std::fopen(out.key_path.c_str(), "w");
        ok = ok && f && PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr) == 1;
        if (f) std::fclose(f);
    }
    X509_free(x);
    EVP_PKEY_free(key);
    return ok;
}

TEST(ValkeyClientTls, RoundTripOverTls) {
    // The certificate lives in a directory of its own: valkey_process::start makes its directory itself.
    char tmpl[] = "/tmp/baton-valkey-tls-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    const std::string dir = tmpl;
    test_cert cert;
    ASSERT_TRUE(make_self_signed(dir, cert));
    const int tls_port = test::free_port();
    auto server = test::valkey_process::start({"--tls-port", std::to_string(tls_port), "--tls-cert-file",
                                               cert.cert_path, "--tls-key-file", cert.key_path, "--tls-ca-cert-file",
                                               cert.cert_path, "--tls-auth-clients", "no"});
    auto cfg = client_config_for(tls_port, 2000);
    cfg.connect_timeout_ms = 2000;
    cfg.tls = valkey_tls_config{cert.cert_path, "", "", "localhost"};
    valkey_client c(cfg);
    Status st = c.set("tls:k", client_bytes_of("over tls"), 60000);
    ASSERT_TRUE(st.ok()) << st.to_string();
    auto g = c.get("tls:k");
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    EXPECT_EQ(*g.value(), client_bytes_of("over tls"));

    // A client that does not trust the server's certificate fails the handshake: no plaintext fallback.
    test_cert other;
    const std::string other_dir = dir + "/other";
    std::filesystem::create_directory(other_dir);
    ASSERT_TRUE(make_self_signed(other_dir, other));
    auto bad_cfg = cfg;
    bad_cfg.tls->ca_file = other.cert_path;
    valkey_client bad(bad_cfg);
    Status refused = bad.ping();
    EXPECT_FALSE(refused.ok());
    EXPECT_FALSE(bad.connected());

    auto missing_cfg = cfg;
    missing_cfg.tls->ca_file = dir + "/no-such-ca.pem";
    valkey_client missing(missing_cfg);
    EXPECT_EQ(missing.ping().code(), status_code::invalid_argument);
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
}

}  // namespace
}  // namespace baton
