// valkey_client.cpp — valkey_client over hiredis's synchronous API (redisConnectWithOptions, redisCommandArgv,
// redisAppendCommandArgv + redisGetReply for pipelines) and hiredis_ssl for TLS. What each hiredis error and
// error reply becomes is decided in one place each: transport_status and reply_error_status.
#include "baton/tier/valkey_client.h"

#include <hiredis/hiredis.h>
#include <hiredis/hiredis_ssl.h>
#include <sys/time.h>

#include <cerrno>
#include <cstring>
#include <mutex>

namespace baton {
namespace {

struct reply_deleter {
    void operator()(redisReply * r) const { freeReplyObject(r); }
};
using reply_ptr = std::unique_ptr<redisReply, reply_deleter>;

struct context_deleter {
    void operator()(redisContext * c) const { redisFree(c); }
};
using context_ptr = std::unique_ptr<redisContext, context_deleter>;

struct ssl_context_deleter {
    void operator()(redisSSLContext * s) const { redisFreeSSLContext(s); }
};
using ssl_context_ptr = std::unique_ptr<redisSSLContext, ssl_context_deleter>;

timeval timeval_of_ms(uint32_t ms) {
    timeval tv{};
    tv.tv_sec = time_t(ms / 1000);
    tv.tv_usec = suseconds_t((ms % 1000) * 1000);
    return tv;
}

bool errno_is_timeout(int e) { return e == EAGAIN || e == EWOULDBLOCK || e == ETIMEDOUT || e == EINPROGRESS; }

// transport_status: what a failed hiredis call on context c means (errno_after: errno right after the call).
Status transport_status(const redisContext & c, int errno_after, std::string_view what) {
    const std::string detail = std::string(what) + ": " + c.errstr;
    switch (c.err) {
        case REDIS_ERR_TIMEOUT: return Status(status_code::deadline_exceeded, detail);
        case REDIS_ERR_IO:
            // hiredis reports a socket timeout (SO_RCVTIMEO/SO_SNDTIMEO: EAGAIN, or ETIMEDOUT from a connect's
            // poll) as an I/O error; errno or the message tells it apart from a reset or a refusal.
            if (errno_is_timeout(errno_after) || std::strstr(c.errstr, std::strerror(EAGAIN)) ||
                std::strstr(c.errstr, std::strerror(ETIMEDOUT)))
                return Status(status_code::deadline_exceeded, detail);
            return Status(status_code::unavailable, detail);
        case REDIS_ERR_EOF: return Status(status_code::unavailable, detail);
        case REDIS_ERR_PROTOCOL: return Status(status_code::upstream_error, detail);
        case REDIS_ERR_OOM: return Status(status_code::internal, detail + " (hiredis could not allocate)");
        default: return Status(status_code::unavailable, detail);
    }
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// reply_error_status: what an error reply (its text) means. The connection stays usable.
Status reply_error_status(std::string_view text, std::string_view what) {
    const std::string detail = std::string(what) + ": " + std::string(text);
    if (starts_with(text, "OOM")) return Status(status_code::resource_exhausted, detail);
    if (starts_with(text, "NOPERM") || starts_with(text, "WRONGPASS") || starts_with(text, "NOAUTH"))
        return Status(status_code::permission_denied, detail);
    if (starts_with(text, "LOADING") || starts_with(text, "READONLY") || starts_with(text, "MASTERDOWN") ||
        starts_with(text, "BUSY") || starts_with(text, "TRYAGAIN") || starts_with(text, "CLUSTERDOWN"))
        return Status(status_code::unavailable, detail);
    return Status(status_code::upstream_error, detail);
}
Status reply_error_status(const redisReply & r, std::string_view what) {
    return reply_error_status(std::string_view(r.str ? r.str : "", r.str ? r.len : 0), what);
}

Status unexpected_reply_type(int type, std::string_view what) {
    return Status(status_code::upstream_error, std::string(what) + ": unexpected reply type " + std::to_string(type));
}
Status unexpected_reply(const redisReply & r, std::string_view what) { return unexpected_reply_type(r.type, what); }

// GET replies without reply objects. While get_each reads its pipeline, the context's reader calls these instead
// of hiredis's own object builders (redisReplyObjectFunctions, hiredis's documented hook for custom replies): a
// value goes to the caller straight from the reader's buffer, where hiredis would first copy it into a freshly
// allocated reply object (a malloc and a copy of every byte; ~10% of a 128 MiB fetch, bench/tier_bench.cpp).
// What they return only marks a reply as done: static objects whose type hiredis may read (redisGetReply checks
// for push replies), never freed.
struct get_sink {
    const valkey_client::value_fn * on_value = nullptr;
    size_t index = 0;  // the reply being read
    Status st;         // on_value's failure, an error reply or an unexpected type: the first one
};

redisReply reply_of_type(int type) {
    redisReply r{};
    r.type = type;
    return r;
}
const redisReply k_done_string = reply_of_type(REDIS_REPLY_STRING), k_done_other = reply_of_type(REDIS_REPLY_NIL);

// done: what a builder returns (hiredis takes void *; it only reads the object).
void * done(const redisReply & r) { return const_cast<redisReply *>(&r); }

void get_sink_record(get_sink & s, Status st) {
    if (s.st.ok() && !st.ok()) s.st = std::move(st);
}
// get_sink_deliver calls on_value inside hiredis's C frames, so nothing may be thrown through them.
void get_sink_deliver(get_sink & s, const std::span<const uint8_t> * v) {
    if (!s.st.ok()) return;
    try {
        get_sink_record(s, (*s.on_value)(s.index, v));
    } catch (const std::exception & e) {
        get_sink_record(s, Status(status_code::internal, std::string("valkey GET: ") + e.what()));
    }
}
void * get_sink_string(const redisReadTask * t, char * str, size_t len) {
    auto & s = *static_cast<get_sink *>(t->privdata);
    if (t->parent) return done(k_done_other);  // inside an aggregate, which is itself unexpected
    if (t->type == REDIS_REPLY_STRING) {
        const std::span<const uint8_t> v(reinterpret_cast<const uint8_t *>(str), len);
        get_sink_deliver(s, &v);
        return done(k_done_string);
    }
    get_sink_record(s, t->type == REDIS_REPLY_ERROR ? reply_error_status(std::string_view(str, len), "valkey GET")
                                                    : unexpected_reply_type(t->type, "valkey GET"));
    return done(k_done_other);
}
void * get_sink_nil(const redisReadTask * t) {
    auto & s = *static_cast<get_sink *>(t->privdata);
    if (!t->parent) get_sink_deliver(s, nullptr);
    return done(k_done_other);
}
void * get_sink_unexpected(const redisReadTask * t) {
    if (!t->parent)
        get_sink_record(*static_cast<get_sink *>(t->privdata), unexpected_reply_type(t->type, "valkey GET"));
    return done(k_done_other);
}
void * get_sink_array(const redisReadTask * t, size_t) { return get_sink_unexpected(t); }
void * get_sink_integer(const redisReadTask * t, long long) { return get_sink_unexpected(t); }
void * get_sink_double(const redisReadTask * t, double, char *, size_t) { return get_sink_unexpected(t); }
void * get_sink_bool(const redisReadTask * t, int) { return get_sink_unexpected(t); }
void get_sink_free(void *) {}

redisReplyObjectFunctions k_get_sink_functions = {get_sink_string, get_sink_array, get_sink_integer, get_sink_double,
                                                  get_sink_nil,    get_sink_bool,  get_sink_free};

// An argv for redisCommandArgv: views of the arguments, which the caller keeps alive.
struct command_args {
    // hiredis takes `const char **` and only reads through it.
    const char ** data() const { return const_cast<const char **>(argv.data()); }
    std::vector<const char *> argv;
    std::vector<size_t> len;
    void add(std::string_view s) {
        argv.push_back(s.data());
        len.push_back(s.size());
    }
    void add(std::span<const uint8_t> b) {
        argv.push_back(reinterpret_cast<const char *>(b.data()));
        len.push_back(b.size());
    }
};

}  // namespace

struct valkey_client::impl {
    context_ptr c;
    ssl_context_ptr ssl;  // made once, on the first TLS connect; outlives every connection made with it

    void drop() { c.reset(); }

    Status connect(const valkey_config & cfg);
    // command runs one command; a transport failure drops the connection.
    Result<reply_ptr> command(const command_args & a, std::string_view what) {
        errno = 0;
        auto * r = static_cast<redisReply *>(redisCommandArgv(c.get(), int(a.argv.size()), a.data(), a.len.data()));
        const int e = errno;
        if (!r) {
            Status st = transport_status(*c, e, what);
            drop();
            return st;
        }
        return reply_ptr(r);
    }
    // append queues one command of a pipeline (only into hiredis's output buffer: no I/O).
    Status append(const command_args & a, std::string_view what) {
        if (redisAppendCommandArgv(c.get(), int(a.argv.size()), a.data(), a.len.data()) != REDIS_OK) {
            Status st = transport_status(*c, errno, what);
            drop();
            return st;
        }
        return {};
    }
    // next_reply reads the next reply of a pipeline (writing what is queued first).
    Result<reply_ptr> next_reply(std::string_view what) {
        void * r = nullptr;
        errno = 0;
        const int rc = redisGetReply(c.get(), &r);
        const int e = errno;
        if (rc != REDIS_OK || !r) {
            if (r) freeReplyObject(r);
            Status st = transport_status(*c, e, what);
            drop();
            return st;
        }
        return reply_ptr(static_cast<redisReply *>(r));
    }
};

Status valkey_client::impl::connect(const valkey_config & cfg) {
    if (c) return {};
    const std::string where = cfg.host + ":" + std::to_string(cfg.port);
    if (cfg.tls && !ssl) {
        static std::once_flag openssl_once;
        std::call_once(openssl_once, [] { redisInitOpenSSL(); });
        const valkey_tls_config & t = *cfg.tls;
        if (t.ca_file.empty()) return Status(status_code::invalid_argument, "valkey tls: ca_file is required");
        if (t.cert_file.empty() != t.key_file.empty())
            return Status(status_code::invalid_argument, "valkey tls: cert_file and key_file go together");
        redisSSLContextError err = REDIS_SSL_CTX_NONE;
        const std::string & sni = t.server_name.empty() ? cfg.host : t.server_name;
        redisSSLContext * s =
            redisCreateSSLContext(t.ca_file.c_str(), nullptr, t.cert_file.empty() ? nullptr : t.cert_file.c_str(),
                                  t.key_file.empty() ? nullptr : t.key_file.c_str(), sni.c_str(), &err);
        if (!s)
            return Status(status_code::invalid_argument,
                          std::string("valkey tls: cannot load the certificates: ") + redisSSLContextGetError(err));
        ssl.reset(s);
    }
    const timeval connect_tv = timeval_of_ms(cfg.connect_timeout_ms);
    const timeval command_tv = timeval_of_ms(cfg.command_timeout_ms);
    redisOptions o{};
    REDIS_OPTIONS_SET_TCP(&o, cfg.host.c_str(), int(cfg.port));
    o.connect_timeout = &connect_tv;
    o.command_timeout = &command_tv;
    errno = 0;
    context_ptr nc(redisConnectWithOptions(&o));
    const int e = errno;
    if (!nc) return Status(status_code::internal, "valkey connect " + where + ": hiredis could not allocate");
    if (nc->err) return transport_status(*nc, e, "valkey connect " + where);
    if (ssl && redisInitiateSSLWithContext(nc.get(), ssl.get()) != REDIS_OK)
        return transport_status(*nc, errno, "valkey tls handshake with " + where);
    c = std::move(nc);
    if (cfg.password.empty()) return {};
    command_args a;
    a.add("AUTH");
    if (!cfg.username.empty()) a.add(cfg.username);
    a.add(cfg.password);
    auto r = command(a, "valkey AUTH at " + where);
    if (!r.ok()) return r.status();
    if (r.value()->type == REDIS_REPLY_ERROR) {
        Status st = reply_error_status(*r.value(), "valkey AUTH at " + where);
        drop();
        // Any refused AUTH (WRONGPASS, or a password the server does not want) is the credentials' fault.
        return Status(status_code::permission_denied, st.message());
    }
    return {};
}

valkey_client::valkey_client(valkey_config config) : config_(std::move(config)), impl_(std::make_unique<impl>()) {}
valkey_client::~valkey_client() = default;

bool valkey_client::connected() const { return impl_->c != nullptr; }

Status valkey_client::ping() {
    BATON_RETURN_IF_ERROR(impl_->connect(config_));
    command_args a;
    a.add("PING");
    auto r = impl_->command(a, "valkey PING");
    if (!r.ok()) return r.status();
    const redisReply & rep = *r.value();
    if (rep.type == REDIS_REPLY_ERROR) return reply_error_status(rep, "valkey PING");
    if (rep.type != REDIS_REPLY_STATUS || std::string_view(rep.str, rep.len) != "PONG")
        return unexpected_reply(rep, "valkey PING");
    return {};
}

Result<std::optional<std::vector<uint8_t>>> valkey_client::get(std::string_view key) {
    std::optional<std::vector<uint8_t>> out;
    const std::string k(key);
    BATON_RETURN_IF_ERROR(
        get_each(std::span<const std::string>(&k, 1), [&](size_t, const std::span<const uint8_t> * v) {
            if (v) out.emplace(v->begin(), v->end());
            return Status();
        }));
    return out;
}

Status valkey_client::get_each(std::span<const std::string> keys, const value_fn & on_value) {
    BATON_RETURN_IF_ERROR(impl_->connect(config_));
    for (const std::string & k : keys) {
        command_args a;
        a.add("GET");
        a.add(k);
        BATON_RETURN_IF_ERROR(impl_->append(a, "valkey GET"));
    }
    // The reader hands values over without reply objects (get_sink) until every reply is read or the connection is
    // dropped; a dropped connection frees its reader, and whatever it held, through get_sink_free.
    get_sink sink;
    sink.on_value = &on_value;
    redisReader * reader = impl_->c->reader;
    redisReplyObjectFunctions * const own = reader->fn;
    void * const own_privdata = reader->privdata;
    reader->fn = &k_get_sink_functions;
    reader->privdata = &sink;  // (redisReaderSetPrivdata casts to int: unusable in C++)
    for (size_t i = 0; i < keys.size(); ++i) {
        sink.index = i;
        void * r = nullptr;
        errno = 0;
        const int rc = redisGetReply(impl_->c.get(), &r);
        const int e = errno;
        if (rc != REDIS_OK || !r) {
            Status st = transport_status(*impl_->c, e, "valkey GET");
            impl_->drop();
            return st;
        }
        if (!sink.st.ok()) {
            if (i + 1 < keys.size()) {
                impl_->drop();  // replies left unread: the connection is out of step
                return sink.st;
            }
            break;
        }
    }
    reader->fn = own;
    reader->privdata = own_privdata;
    return sink.st;
}

namespace {

// set_args: SET key value [NX] PX ttl (ttl_text kept alive by the caller).
command_args set_args(std::string_view key, std::span<const uint8_t> value, bool nx, const std::string & ttl_text) {
    command_args a;
    a.add("SET");
    a.add(key);
    a.add(value);
    if (nx) a.add("NX");
    a.add("PX");
    a.add(ttl_text);
    return a;
}

}  // namespace

Status valkey_client::set(std::string_view key, std::span<const uint8_t> value, uint64_t ttl_ms) {
    const std::string k(key);
    const std::span<const uint8_t> v[1] = {value};
    return set_each(std::span<const std::string>(&k, 1), v, ttl_ms);
}

Status valkey_client::set_each(std::span<const std::string> keys, std::span<const std::span<const uint8_t>> values,
                               uint64_t ttl_ms) {
    if (ttl_ms == 0) return Status(status_code::invalid_argument, "valkey SET: ttl_ms must be > 0");
    if (keys.size() != values.size())
        return Status(status_code::invalid_argument, "valkey SET: " + std::to_string(keys.size()) + " keys but " +
                                                         std::to_string(values.size()) + " values");
    BATON_RETURN_IF_ERROR(impl_->connect(config_));
    const std::string ttl_text = std::to_string(ttl_ms);
    for (size_t i = 0; i < keys.size(); ++i)
        BATON_RETURN_IF_ERROR(impl_->append(set_args(keys[i], values[i], false, ttl_text), "valkey SET"));
    Status first;
    for (size_t i = 0; i < keys.size(); ++i) {
        auto r = impl_->next_reply("valkey SET");
        if (!r.ok()) return r.status();
        const redisReply & rep = *r.value();
        if (!first.ok()) continue;
        if (rep.type == REDIS_REPLY_ERROR) first = reply_error_status(rep, "valkey SET");
        else if (rep.type != REDIS_REPLY_STATUS) first = unexpected_reply(rep, "valkey SET");
    }
    return first;
}

Result<bool> valkey_client::set_nx(std::string_view key, std::span<const uint8_t> value, uint64_t ttl_ms) {
    if (ttl_ms == 0) return Status(status_code::invalid_argument, "valkey SET NX: ttl_ms must be > 0");
    BATON_RETURN_IF_ERROR(impl_->connect(config_));
    const std::string ttl_text = std::to_string(ttl_ms);
    auto r = impl_->command(set_args(key, value, true, ttl_text), "valkey SET NX");
    if (!r.ok()) return r.status();
    const redisReply & rep = *r.value();
    if (rep.type == REDIS_REPLY_ERROR) return reply_error_status(rep, "valkey SET NX");
    if (rep.type == REDIS_REPLY_NIL) return false;
    if (rep.type == REDIS_REPLY_STATUS) return true;
    return unexpected_reply(rep, "valkey SET NX");
}

Result<uint64_t> valkey_client::del(std::span<const std::string> keys) {
    if (keys.empty()) return uint64_t(0);
    BATON_RETURN_IF_ERROR(impl_->connect(config_));
    command_args a;
    a.add("DEL");
    for (const std::string & k : keys) a.add(k);
    auto r = impl_->command(a, "valkey DEL");
    if (!r.ok()) return r.status();
    const redisReply & rep = *r.value();
    if (rep.type == REDIS_REPLY_ERROR) return reply_error_status(rep, "valkey DEL");
    if (rep.type != REDIS_REPLY_INTEGER || rep.integer < 0) return unexpected_reply(rep, "valkey DEL");
    return uint64_t(rep.integer);
}

}  // namespace baton
