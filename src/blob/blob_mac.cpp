// blob_mac.cpp — blob_key (the cluster's state secrets) and HMAC-SHA256 through OpenSSL's EVP_MAC.
#include "blob_mac.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace baton {

namespace {

constexpr std::string_view k_key_id_label = "baton state key id";

Result<blob_key::key_id> key_id_of(std::string_view secret) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_MD_CTX * c = EVP_MD_CTX_new();
    const bool ok = c && EVP_DigestInit_ex(c, EVP_sha256(), nullptr) == 1 &&
                    EVP_DigestUpdate(c, k_key_id_label.data(), k_key_id_label.size()) == 1 &&
                    EVP_DigestUpdate(c, secret.data(), secret.size()) == 1 && EVP_DigestFinal_ex(c, md, &n) == 1;
    EVP_MD_CTX_free(c);
    if (!ok || n < 8) return Status(status_code::internal, "state secret: SHA-256 failed in OpenSSL");
    blob_key::key_id id{};
    for (size_t i = 0; i < id.size(); ++i) id[i] = md[i];
    return id;
}

}  // namespace

// ---- blob_mac_stream ----

struct blob_mac_stream::impl {
    EVP_MAC * mac = nullptr;
    EVP_MAC_CTX * ctx = nullptr;
    ~impl() {
        EVP_MAC_CTX_free(ctx);
        EVP_MAC_free(mac);
    }
};

Result<std::unique_ptr<blob_mac_stream>> blob_mac_stream::open(std::string_view secret) {
    std::unique_ptr<blob_mac_stream> s(new blob_mac_stream());
    s->impl_ = std::make_unique<impl>();
    s->impl_->mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
    if (s->impl_->mac) s->impl_->ctx = EVP_MAC_CTX_new(s->impl_->mac);
    char digest_name[] = "SHA256";
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("digest", digest_name, 0), OSSL_PARAM_construct_end()};
    if (!s->impl_->ctx ||
        EVP_MAC_init(s->impl_->ctx, reinterpret_cast<const unsigned char *>(secret.data()), secret.size(), params) != 1)
        return Status(status_code::internal, "state secret: OpenSSL cannot start an HMAC-SHA256");
    return s;
}

blob_mac_stream::~blob_mac_stream() = default;

void blob_mac_stream::update(const void * data, size_t n) {
    if (n) EVP_MAC_update(impl_->ctx, static_cast<const unsigned char *>(data), n);
}

blob_mac_stream::digest blob_mac_stream::final() {
    digest d{};
    size_t n = 0;
    if (EVP_MAC_final(impl_->ctx, d.data(), &n, d.size()) != 1 || n != d.size()) d.fill(0);
    return d;
}

Result<blob_mac_stream::digest> blob_mac_compute(std::string_view secret, std::span<const uint8_t> bytes) {
    auto s = blob_mac_stream::open(secret);
    if (!s.ok()) return s.status();
    s.value()->update(bytes.data(), bytes.size());
    return s.value()->final();
}

bool blob_mac_equal(const blob_mac_stream::digest & a, std::span<const uint8_t> b) {
    return b.size() == a.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

// ---- blob_key ----

Result<std::shared_ptr<const blob_key>> blob_key::make(std::vector<std::string> secrets) {
    if (secrets.empty()) return Status(status_code::invalid_argument, "state secret: no secret given");
    if (secrets.size() > n_secrets_max)
        return Status(status_code::invalid_argument, "state secret: " + std::to_string(secrets.size()) +
                                                         " secrets, at most " + std::to_string(n_secrets_max));
    std::shared_ptr<blob_key> k(new blob_key());
    for (size_t i = 0; i < secrets.size(); ++i) {
        if (secrets[i].size() < secret_bytes_min)
            return Status(status_code::invalid_argument, "state secret #" + std::to_string(i + 1) + ": " +
                                                             std::to_string(secrets[i].size()) + " bytes, at least " +
                                                             std::to_string(secret_bytes_min) +
                                                             " are needed (e.g. `openssl rand -hex 32`)");
        auto id = key_id_of(secrets[i]);
        if (!id.ok()) return id.status();
        if (k->find(id.value()) >= 0)
            return Status(status_code::invalid_argument, "state secret #" + std::to_string(i + 1) + ": given twice");
        k->ids_.push_back(id.value());
        k->secrets_.push_back(std::move(secrets[i]));
        OPENSSL_cleanse(secrets[i].data(), secrets[i].size());
    }
    return std::shared_ptr<const blob_key>(std::move(k));
}

Result<std::shared_ptr<const blob_key>> blob_key::load_file(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return Status(status_code::io_error, "--state-secret-file: cannot read " + path);
    std::stringstream ss;
    ss << f.rdbuf();
    std::string all = ss.str();
    if (all.size() > 64 * 1024)
        return Status(status_code::invalid_argument, "--state-secret-file: " + path + " is larger than 64 KiB");
    std::vector<std::string> secrets;
    size_t i = 0;
    while (i < all.size()) {
        size_t j = all.find('\n', i);
        if (j == std::string::npos) j = all.size();
        std::string line = all.substr(i, j - i);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (!line.empty()) secrets.push_back(std::move(line));
        i = j + 1;
    }
    OPENSSL_cleanse(all.data(), all.size());
    auto k = make(std::move(secrets));
    if (!k.ok()) return Status(k.status().code(), "--state-secret-file " + path + ": " + k.status().message());
    return k;
}

blob_key::~blob_key() {
    for (auto & s : secrets_) OPENSSL_cleanse(s.data(), s.size());
}

int blob_key::find(const key_id & id) const {
    for (size_t i = 0; i < ids_.size(); ++i)
        if (ids_[i] == id) return int(i);
    return -1;
}

std::string blob_key_id_hex(const blob_key::key_id & id) { return hex_encode(id); }

}  // namespace baton
