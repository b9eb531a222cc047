// etcd_client_e2e_test.cpp — etcd_client's calls against a real etcd (lease lifecycle, watch of puts and
// deletes, compaction, an unreachable endpoint failing over, user/password authentication, TLS with client
// certificates).
#include <gtest/gtest.h>
#include <httplib.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <future>
#include <thread>

#include "baton/cluster/etcd_client.h"
#include "baton/cluster/node_record.h"
#include "support/etcd_process.h"
#include "support/test_support.h"

namespace baton {
namespace {
// Runs one coroutine of etcd calls on an io_context and returns its result.
template <typename F>
auto run_etcd(F f) {
    net::io_context ioc;
    auto fut = net::co_spawn(ioc, f(), net::use_future);
    ioc.run();
    return fut.get();
}

class EtcdClient : public ::testing::Test {
  protected:
    void SetUp() override { etcd_ = test::etcd_process::start(); }
    etcd_config cfg() const {
        auto c = etcd_config_parse(etcd_->url(), "", "");
        return c.value();
    }
    std::unique_ptr<test::etcd_process> etcd_;
};

TEST_F(EtcdClient, LeaseLifecyclePutRangeKeepaliveRevoke) {
    etcd_client c(cfg());
    const std::string ok = run_etcd([&]() -> net::awaitable<std::string> {
        auto lease = co_await c.lease_grant(30);
        if (!lease.ok()) co_return "grant: " + lease.status().to_string();
        if (Status st = co_await c.put("/t/a", "one", lease.value()); !st.ok()) co_return "put: " + st.to_string();
        if (Status st = co_await c.put("/t/b", "two", 0); !st.ok()) co_return "put: " + st.to_string();
        if (Status st = co_await c.put("/u/c", "elsewhere", 0); !st.ok()) co_return "put: " + st.to_string();
        auto r = co_await c.range_prefix("/t/");
        if (!r.ok()) co_return "range: " + r.status().to_string();
        if (r->kvs.size() != 2 || r->kvs[0].key != "/t/a" || r->kvs[0].value != "one" ||
            r->kvs[0].lease != lease.value())
            co_return "range: unexpected listing";
        auto ttl = co_await c.lease_keepalive(lease.value());
        if (!ttl.ok() || ttl.value() <= 0 || ttl.value() > 30) co_return "keepalive: bad ttl";
        if (Status st = co_await c.lease_revoke(lease.value()); !st.ok()) co_return "revoke: " + st.to_string();
        r = co_await c.range_prefix("/t/");
        if (!r.ok() || r->kvs.size() != 1 || r->kvs[0].key != "/t/b")
            co_return "the revoked lease's key is still there";
        ttl = co_await c.lease_keepalive(lease.value());
        if (!ttl.ok() || ttl.value() != 0) co_return "keepalive of a revoked lease must say 0";
        if (Status st = co_await c.lease_revoke(lease.value()); !st.ok()) co_return "a second revoke must be ok";
        Status st = co_await c.put("/t/z", "x", lease.value());
        if (st.code() != status_code::not_found) co_return "put with a revoked lease: " + st.to_string();
        if (Status rm = co_await c.remove("/t/b"); !rm.ok()) co_return "remove: " + rm.to_string();
        r = co_await c.range_prefix("/t/");
        if (!r.ok() || !r->kvs.empty()) co_return "remove left the key";
        co_return "";
    });
    EXPECT_EQ(ok, "");
}

TEST_F(EtcdClient, WatchSeesPutsAndDeletesInOrderFromARevision) {
    etcd_client writer(cfg()), watcher(cfg());
    int64_t rev = 0;
    const std::string listed = run_etcd([&]() -> net::awaitable<std::string> {
        auto r = co_await writer.range_prefix("/w/");
        if (!r.ok()) co_return r.status().to_string();
        rev = r->revision;
        co_return "";
    });
    ASSERT_EQ(listed, "");
    // Changes made after the listing, before the watch starts: the watch from rev+1 must see them all.
    const std::string wrote = run_etcd([&]() -> net::awaitable<std::string> {
        if (Status st = co_await writer.put("/w/a", "1", 0); !st.ok()) co_return st.to_string();
        if (Status st = co_await writer.put("/w/b", "2", 0); !st.ok()) co_return st.to_string();
        if (Status st = co_await writer.remove("/w/a"); !st.ok()) co_return st.to_string();
        if (Status st = co_await writer.put("/other", "x", 0); !st.ok()) co_return st.to_string();
        co_return "";
    });
    ASSERT_EQ(wrote, "");
    std::vector<std::string> seen;
    Result<etcd_watch_end> end(Status(status_code::internal, "not run"));
    run_etcd([&]() -> net::awaitable<bool> {
        end = co_await watcher.watch_prefix("/w/", rev + 1,
                                            std::chrono::steady_clock::now() + std::chrono::milliseconds(800),
                                            [&](const std::vector<etcd_event> & evs, int64_t) {
                                                for (const auto & e : evs)
                                                    seen.push_back((e.deleted ? "-" : "+") + e.kv.key);
                                            });
        co_return true;
    });
    ASSERT_TRUE(end.ok()) << end.status().to_string();
    EXPECT_FALSE(end->compacted);
    EXPECT_EQ(seen, (std::vector<std::string>{"+/w/a", "+/w/b", "-/w/a"}));
    EXPECT_EQ(end->next_revision, rev + 4) << "resume after the last change under the prefix";
}

TEST_F(EtcdClient, WatchFromACompactedRevisionSaysSo) {
    etcd_client c(cfg());
    const std::string ok = run_etcd([&]() -> net::awaitable<std::string> {
        for (int i = 0; i < 3; ++i)
            if (Status st = co_await c.put("/k", std::to_string(i), 0); !st.ok()) co_return st.to_string();
        co_return "";
    });
    ASSERT_EQ(ok, "");
    httplib::Client http("127.0.0.1", etcd_->client_port());
    http.set_read_timeout(5, 0);
    auto compacted = http.Post("/v3/kv/compaction", R"({"revision":"3"})", "application/json");
    ASSERT_TRUE(compacted && compacted->status == 200) << (compacted ? compacted->body : "no answer");
    Result<etcd_watch_end> end(Status(status_code::internal, "not run"));
    run_etcd([&]() -> net::awaitable<bool> {
        end = co_await c.watch_prefix("/k", 1, std::chrono::steady_clock::now() + std::chrono::seconds(2),
                                      [](const std::vector<etcd_event> &, int64_t) {});
        co_return true;
    });
    ASSERT_TRUE(end.ok()) << end.status().to_string();
    EXPECT_TRUE(end->compacted);
}

TEST_F(EtcdClient, UnreachableEndpointFailsOverToTheNext) {
    auto c2 = etcd_config_parse("http://127.0.0.1:" + std::to_string(test::free_port()) + "," + etcd_->url(), "", "");
    ASSERT_TRUE(c2.ok());
    etcd_client c(c2.value());
    Result<int64_t> lease(Status(status_code::internal, "not run"));
    run_etcd([&]() -> net::awaitable<bool> {
        lease = co_await c.lease_grant(5);
        co_return true;
    });
    ASSERT_TRUE(lease.ok()) << lease.status().to_string();
    EXPECT_EQ(c.endpoint(), etcd_->url());
    etcd_->stop();
    run_etcd([&]() -> net::awaitable<bool> {
        lease = co_await c.lease_grant(5);
        co_return true;
    });
    EXPECT_FALSE(lease.ok());
}

TEST_F(EtcdClient, AuthenticatesWithUserAndPassword) {
    httplib::Client http("127.0.0.1", etcd_->client_port());
    http.set_read_timeout(5, 0);
    auto post = [&](const char * path, const char * body) {
        auto r = http.Post(path, body, "application/json");
        return r ? r->status : -1;
    };
    post("/v3/auth/role/add", R"({"name":"root"})");  // may exist already
    ASSERT_EQ(post("/v3/auth/user/add", R"({"name":"root","password":"pw"})"), 200);
    ASSERT_EQ(post("/v3/auth/user/grant", R"({"user":"root","role":"root"})"), 200);
    ASSERT_EQ(post("/v3/auth/enable", "{}"), 200);
    auto with = [&](const std::string & user, const std::string & password) {
        etcd_config c = cfg();
        c.user = user;
        c.password = password;
        etcd_client client(c);
        Status st(status_code::internal, "not run");
        run_etcd([&]() -> net::awaitable<bool> {
            st = co_await client.put("/auth/k", "v", 0);
            if (st.ok()) {
                auto r = co_await client.range_prefix("/auth/");
                st = r.ok() && r->kvs.size() == 1 ? Status() : Status(status_code::internal, "range after put failed");
            }
            co_return true;
        });
        return st;
    };
    EXPECT_TRUE(with("root", "pw").ok()) << with("root", "pw").to_string();
    const Status wrong = with("root", "nope");
    EXPECT_EQ(wrong.code(), status_code::unauthenticated) << wrong.to_string();
    EXPECT_FALSE(with("", "").ok()) << "with auth enabled, a client without credentials is refused";
}

// ---- etcd over TLS with client certificates ----

// A throwaway PKI made with OpenSSL's API: a CA, etcd's server certificate (for IP 127.0.0.1) and a client
// certificate, written as PEM files into dir.
struct test_pki {
    std::string dir, ca, server_cert, server_key, client_cert, client_key;
};

EVP_PKEY * pki_key() { return EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"); }

X509 * pki_cert(EVP_PKEY * key, const char * cn, X509 * issuer, EVP_PKEY * issuer_key, const char * ext_san, bool ca) {
    X509 * x = X509_new();
    X509_set_version(x, 2);
    static long serial = 1;
    ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
    X509_gmtime_adj(X509_getm_notBefore(x), -3600);
    X509_gmtime_adj(X509_getm_notAfter(x), 86400);
    X509_set_pubkey(x, key);
    X509_NAME * name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char *>(cn), -1, -1, 0);
    X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : name);
    X509V3_CTX ctx;
    X509V3_set_ctx(&ctx, issuer ? issuer : x, x, nullptr, nullptr, 0);
    auto add = [&](int nid, const char * value) {
        X509_EXTENSION * e = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
        X509_add_ext(x, e, -1);
        X509_EXTENSION_free(e);
    };
    add(NID_basic_constraints, ca ? "critical,CA:TRUE" : "CA:FALSE");
    if (ca) add(NID_key_usage, "critical,keyCertSign,cRLSign");
    else add(NID_ext_key_usage, "serverAuth,clientAuth");
    if (ext_san) add(NID_subject_alt_name, ext_san);
    X509_sign(x, issuer_key ? issuer_key : key, EVP_sha256());
    return x;
}

void pki_write(const std::string & path, X509 * cert, EVP_PKEY * key) {
    FILE * f = std::fopen(path.c_str(), "w");
    if (cert) PEM_write_X509(f, cert);
    if (key) PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
    std::fclose(f);
}

test_pki make_pki(const std::string & tag) {
    test_pki p;
    p.dir = test::temp_dir() + "/pki-" + tag;
    ::mkdir(p.dir.c_str(), 0700);
    EVP_PKEY * ca_key = pki_key();
    X509 * ca = pki_cert(ca_key, ("baton test CA " + tag).c_str(), nullptr, nullptr, nullptr, true);
    EVP_PKEY * skey = pki_key();
    X509 * server = pki_cert(skey, "etcd", ca, ca_key, "IP:127.0.0.1,DNS:localhost", false);
    EVP_PKEY * ckey = pki_key();
    X509 * client = pki_cert(ckey, "baton", ca, ca_key, nullptr, false);
    p.ca = p.dir + "/ca.pem";
    p.server_cert = p.dir + "/server.pem";
    p.server_key = p.dir + "/server.key";
    p.client_cert = p.dir + "/client.pem";
    p.client_key = p.dir + "/client.key";
    pki_write(p.ca, ca, nullptr);
    pki_write(p.server_cert, server, nullptr);
    pki_write(p.server_key, nullptr, skey);
    pki_write(p.client_cert, client, nullptr);
    pki_write(p.client_key, nullptr, ckey);
    for (X509 * x : {ca, server, client}) X509_free(x);
    for (EVP_PKEY * k : {ca_key, skey, ckey}) EVP_PKEY_free(k);
    return p;
}

// An etcd that serves clients over TLS only and requires a client certificate signed by the CA.
class tls_etcd {
  public:
    explicit tls_etcd(const test_pki & pki) {
        port_ = test::free_port();
        const int peer = test::free_port();
        const std::string data = pki.dir + "/data", url = "https://127.0.0.1:" + std::to_string(port_),
                          peer_url = "http://127.0.0.1:" + std::to_string(peer);
        std::vector<std::string> args = {"etcd",
                                         "--name",
                                         "default",
                                         "--data-dir",
                                         data,
                                         "--listen-client-urls",
                                         url,
                                         "--advertise-client-urls",
                                         url,
                                         "--listen-peer-urls",
                                         peer_url,
                                         "--initial-advertise-peer-urls",
                                         peer_url,
                                         "--initial-cluster",
                                         "default=" + peer_url,
                                         "--cert-file",
                                         pki.server_cert,
                                         "--key-file",
                                         pki.server_key,
                                         "--client-cert-auth",
                                         "--trusted-ca-file",
                                         pki.ca,
                                         "--log-level",
                                         "error"};
        pid_ = ::fork();
        if (pid_ == 0) {
            std::vector<char *> argv;
            for (auto & a : args) argv.push_back(a.data());
            argv.push_back(nullptr);
            ::freopen("/dev/null", "w", stderr);
            ::execvp("etcd", argv.data());
            ::_exit(127);
        }
    }
    ~tls_etcd() {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
    }
    std::string url() const { return "https://127.0.0.1:" + std::to_string(port_); }

  private:
    pid_t pid_ = -1;
    int port_ = 0;
};

// put_and_list: a put and a range through c, or the first error.
Status put_and_list(const etcd_config & cfg) {
    etcd_client c(cfg);
    Status st(status_code::internal, "not run");
    run_etcd([&]() -> net::awaitable<bool> {
        st = co_await c.put("/tls/k", "v", 0);
        if (st.ok()) {
            auto r = co_await c.range_prefix("/tls/");
            st = r.ok() ? Status() : r.status();
        }
        co_return true;
    });
    return st;
}

TEST(EtcdTls, ClientCertificateAuthenticatesAndTheServerIsVerified) {
    const test_pki pki = make_pki("a");
    tls_etcd etcd(pki);
    auto good = etcd_config_parse(etcd.url(), "", "", tls_client_files{pki.ca, pki.client_cert, pki.client_key});
    ASSERT_TRUE(good.ok()) << good.status().to_string();
    // etcd needs a moment to come up: poll (bounded) until a call over TLS goes through.
    Status st;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    do {
        st = put_and_list(good.value());
        if (st.ok()) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    } while (std::chrono::steady_clock::now() < until);
    ASSERT_TRUE(st.ok()) << "etcd over TLS with a client certificate: " << st.to_string();

    auto no_cert = etcd_config_parse(etcd.url(), "", "", tls_client_files{pki.ca, "", ""});
    ASSERT_TRUE(no_cert.ok());
    EXPECT_FALSE(put_and_list(no_cert.value()).ok()) << "etcd requires a client certificate";

    const test_pki other = make_pki("b");  // a CA that did not sign etcd's certificate
    auto wrong_ca = etcd_config_parse(etcd.url(), "", "", tls_client_files{other.ca, pki.client_cert, pki.client_key});
    ASSERT_TRUE(wrong_ca.ok());
    const Status bad = put_and_list(wrong_ca.value());
    EXPECT_FALSE(bad.ok()) << "a server certificate from an unknown CA must be refused";
    EXPECT_NE(bad.message().find("TLS handshake"), std::string::npos) << bad.to_string();
}

TEST(EtcdTls, ConfigRulesAreTypedErrors) {
    EXPECT_FALSE(etcd_config_parse("http://a:1,https://b:2", "", "").ok()) << "mixed schemes";
    EXPECT_FALSE(etcd_config_parse("http://a:1", "", "", tls_client_files{"/nonexistent/ca.pem", "", ""}).ok())
        << "TLS files with http endpoints";
    auto missing = etcd_config_parse("https://a:1", "", "", tls_client_files{"/nonexistent/ca.pem", "", ""});
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.status().message().find("/nonexistent/ca.pem"), std::string::npos)
        << missing.status().to_string();
    const test_pki pki = make_pki("c");
    EXPECT_FALSE(etcd_config_parse("https://a:1", "", "", tls_client_files{pki.ca, pki.client_cert, ""}).ok())
        << "a certificate without its key";
    EXPECT_TRUE(
        etcd_config_parse("https://a:1", "", "", tls_client_files{pki.ca, pki.client_cert, pki.client_key}).ok());
    EXPECT_FALSE(http_url_parse("https://a:1").ok()) << "node URLs stay plain http";
}

}  // namespace
}  // namespace baton
