// tier_bench.cpp — figure 19: the Valkey tier's throughput against its ceiling, and what a state weighs in it by
// KV cache type (issue 25).
//
// 1. Throughput. One real valkey-server (tests/support/valkey_process.h) on loopback. Entries of random bytes
//    (4, 32 and 128 MiB; --quick: 1 and 4 MiB), each fetched with tier_store::get (manifest, then every part in
//    one pipeline, each part's XXH3-64 and the whole's XXH3-128 checked; the buffer given back to the shared
//    pool after each get, as a node's steady state reuses it) with parts of 4 MiB (the default) and 16 MiB,
//    against the ceiling: the same bytes as one string from the same server with a minimal RESP client over a
//    plain TCP socket (raw_resp below: the GET written by hand, the value read straight into a warm buffer; no
//    parts, no checksums, no reply objects). Stores likewise: tier_store::put against one raw SET written with
//    writev from the caller's bytes. Each repetition times raw and tier back to back (the order alternating), and
//    the ratio tier / raw is taken pair by pair; medians over 21 repetitions (--quick: 3; n in every RESULT
//    line). Every thread of the server is pinned to one core and this client to another (when there are two):
//    a node and its Valkey are different machines, and unpinned loopback runs swing by 2x with where the
//    scheduler puts the two ends (same core: the copy hits the cache). Headline: tier get / raw GET at the
//    largest entry with the default parts; target >= 0.7.
// 2. Entry size. Real state blobs of a 512x8 llama (bench_model; the other figures' model) from the engine's
//    prefill of a 1024- and a 4096-token prompt (--quick: a 256x2 llama, 128 and 512 tokens), with the K and V
//    caches f16, q8_0 and q4_0 (flash attention on for all three: a quantized V cache needs it). Per type: blob
//    bytes per token with and without the logits section (blob_walk's sections), and what the longer state
//    costs in Valkey when stored through tier_store::put (4 MiB parts): MEMORY USAGE summed over its keys (parts
//    and manifest; the allocator's rounding included), next to the same blob stored as one raw string.
// Prints a table and RESULT/FIGURE lines (bench_util.h). Usage: tier_bench [--quick]
#include <sched.h>
#include <sys/uio.h>

#include <random>
#include <span>

#include "../tests/support/valkey_process.h"
#include "baton/base/buffer_pool.h"
#include "baton/blob.h"
#include "baton/engine.h"
#include "baton/model.h"
#include "baton/tier/tier_store.h"
#include "bench_util.h"
#include "raw_tcp.h"

using namespace baton;
using namespace baton::bench;

namespace {

constexpr int k_fig = 19;
constexpr double k_ratio_target = 0.7;

// raw_resp: the ceiling. One plain TCP connection speaking just enough RESP for a SET and a GET of one big
// string: a SET written with one writev straight from the caller's bytes; a GET's value read straight into
// the caller's warm buffer. Thread-safety: one owner.
class raw_resp {
  public:
    explicit raw_resp(int port) : fd_(raw_connect_loopback(port)) {}
    ~raw_resp() { ::close(fd_); }
    raw_resp(const raw_resp &) = delete;
    raw_resp & operator=(const raw_resp &) = delete;

    // set: SET key value; true on +OK.
    bool set(const std::string & key, std::span<const uint8_t> v) {
        const std::string head = "*3\r\n$3\r\nSET\r\n$" + std::to_string(key.size()) + "\r\n" + key + "\r\n$" +
                                 std::to_string(v.size()) + "\r\n";
        iovec iov[3] = {{const_cast<char *>(head.data()), head.size()},
                        {const_cast<uint8_t *>(v.data()), v.size()},
                        {const_cast<char *>("\r\n"), 2}};
        if (!writev_all(iov, 3)) return false;
        std::string line;
        return read_line(line) && line == "+OK";
    }
    // get: GET key into out, which must hold the value and its "\r\n"; n: the value's length. false on an error,
    // a nil or a value that does not fit.
    bool get(const std::string & key, std::vector<uint8_t> & out, size_t & n) {
        const std::string cmd = "*2\r\n$3\r\nGET\r\n$" + std::to_string(key.size()) + "\r\n" + key + "\r\n";
        if (!raw_send_all(fd_, cmd.data(), cmd.size())) return false;
        std::string line;
        if (!read_line(line) || line.size() < 2 || line[0] != '$') return false;
        const long long len = std::strtoll(line.c_str() + 1, nullptr, 10);
        if (len < 0 || uint64_t(len) + 2 > out.size()) return false;
        n = size_t(len);
        const size_t have = std::min(pending_.size(), n + 2);
        std::memcpy(out.data(), pending_.data(), have);
        pending_.erase(0, have);
        return raw_recv_all(fd_, out.data() + have, n + 2 - have) && out[n] == '\r' && out[n + 1] == '\n';
    }

  private:
    bool writev_all(iovec * iov, int n) {
        int idx = 0;
        while (idx < n) {
            const ssize_t w = ::writev(fd_, iov + idx, n - idx);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) return false;
            size_t left = size_t(w);
            while (idx < n && left >= iov[idx].iov_len) left -= iov[idx++].iov_len;
            if (idx < n) {
                iov[idx].iov_base = static_cast<char *>(iov[idx].iov_base) + left;
                iov[idx].iov_len -= left;
            }
        }
        return true;
    }
    // read_line reads up to "\r\n" in small reads (a value's first bytes may come along: they stay in pending_).
    bool read_line(std::string & line) {
        size_t end;
        while ((end = pending_.find("\r\n")) == std::string::npos) {
            if (pending_.size() > 4096) return false;
            char buf[64];
            const ssize_t r = ::recv(fd_, buf, sizeof buf, 0);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) return false;
            pending_.append(buf, size_t(r));
        }
        line = pending_.substr(0, end);
        pending_.erase(0, end + 2);
        return true;
    }

    int fd_;
    std::string pending_;
};

[[noreturn]] void fail(const std::string & what) {
    std::fprintf(stderr, "tier_bench: %s\n", what.c_str());
    std::exit(1);
}

double mbps(size_t bytes, double ms) { return double(bytes) / 1e6 / (ms / 1000.0); }

stats one(double v) {
    stats s;
    s.median = s.min = s.max = v;
    s.n = 1;
    return s;
}

tier_entry_key key_of(uint64_t chain_hash, const std::string & layout = "bench") {
    return tier_entry_key{"00112233445566778899aabbccddeeff", layout, 1, chain_hash};
}

std::unique_ptr<tier_store> store_at(int port, uint64_t part_bytes) {
    tier_config cfg;
    cfg.valkey.port = uint16_t(port);
    cfg.valkey.command_timeout_ms = 30000;  // a wait for the socket, not a whole command; generous on a busy box
    cfg.part_bytes = part_bytes;
    auto s = tier_store::create(cfg);
    if (!s.ok()) fail(s.status().to_string());
    return std::move(s.value());
}

// flushall empties the server (between measurements; a failure shows in the next put or get).
void flushall(const baton::test::valkey_process & v) {
    static const std::vector<std::string> cmd = {"FLUSHALL"};
    (void)v.command(cmd);
}

// memory_usage: what the keys matching pattern hold in the server: the sum of MEMORY USAGE over them (key,
// value, object header and the allocator's rounding of each), bytes.
double memory_usage(const baton::test::valkey_process & v, const std::string & pattern) {
    const std::vector<std::string> keys_cmd = {"KEYS", pattern};
    const baton::test::valkey_reply keys = v.command(keys_cmd);
    if (keys.type != '*' || keys.text.empty()) fail("KEYS " + pattern + ": nothing found");
    double total = 0;
    size_t at = 0;
    for (int i = 0; i < 100000 && at <= keys.text.size(); ++i) {
        const size_t end = std::min(keys.text.find('\n', at), keys.text.size());
        const std::vector<std::string> usage_cmd = {"MEMORY", "USAGE", keys.text.substr(at, end - at)};
        const baton::test::valkey_reply u = v.command(usage_cmd);
        if (u.type != ':') fail("MEMORY USAGE: " + u.text);
        total += std::strtod(u.text.c_str(), nullptr);
        at = end + 1;
    }
    return total;
}

// measure_throughput: part 1 for one entry size and part size; prints and reports. Returns the get ratio's stats.
stats measure_throughput(const baton::test::valkey_process & v, std::span<const uint8_t> data, uint64_t part_bytes,
                         int reps, std::vector<uint8_t> & raw_buf) {
    const size_t size = data.size();
    const double mib = double(size) / 1048576.0, part_mib = double(part_bytes) / 1048576.0;
    auto store = store_at(v.port(), part_bytes);
    raw_resp raw(v.port());
    const std::string raw_key = "bench:raw";
    const tier_entry_key key = key_of(size ^ part_bytes);
    // Warm up both paths (connections, the pool's buffer, the server's allocations), untimed.
    if (!raw.set(raw_key, data)) fail("raw SET failed");
    if (Status st = store->put(key, data, 600000); !st.ok()) fail("tier put: " + st.to_string());
    size_t n = 0;
    if (!raw.get(raw_key, raw_buf, n) || n != size) fail("raw GET failed");
    {
        auto got = store->get(key);
        if (!got.ok() || !got.value() || got.value()->size() != size ||
            std::memcmp(got.value()->data(), data.data(), size) != 0)
            fail("tier get did not return the entry");
        buffer_pool::shared().give(std::move(*got.value()));
    }
    std::vector<double> raw_get, tier_get, get_ratio, raw_set, tier_put, put_ratio;
    for (int r = 0; r < reps; ++r) {
        double t_raw_get = 0, t_tier_get = 0, t_raw_set = 0, t_tier_put = 0;
        auto time_raw_get = [&] {
            const double t0 = now_ms();
            if (!raw.get(raw_key, raw_buf, n) || n != size) fail("raw GET failed");
            t_raw_get = now_ms() - t0;
        };
        auto time_tier_get = [&] {
            const double t0 = now_ms();
            auto got = store->get(key);
            t_tier_get = now_ms() - t0;
            if (!got.ok() || !got.value() || got.value()->size() != size) fail("tier get missed");
            buffer_pool::shared().give(std::move(*got.value()));
        };
        auto time_raw_set = [&] {
            const double t0 = now_ms();
            if (!raw.set(raw_key, data)) fail("raw SET failed");
            t_raw_set = now_ms() - t0;
        };
        auto time_tier_put = [&] {
            const double t0 = now_ms();
            if (Status st = store->put(key, data, 600000); !st.ok()) fail("tier put: " + st.to_string());
            t_tier_put = now_ms() - t0;
        };
        if (r % 2 == 0) {
            time_raw_get(), time_tier_get(), time_raw_set(), time_tier_put();
        } else {
            time_tier_get(), time_raw_get(), time_tier_put(), time_raw_set();
        }
        raw_get.push_back(mbps(size, t_raw_get));
        tier_get.push_back(mbps(size, t_tier_get));
        get_ratio.push_back(t_raw_get / t_tier_get);
        raw_set.push_back(mbps(size, t_raw_set));
        tier_put.push_back(mbps(size, t_tier_put));
        put_ratio.push_back(t_raw_set / t_tier_put);
    }
    const stats rg = summarize(raw_get), tg = summarize(tier_get), gr = summarize(get_ratio), rs = summarize(raw_set),
                tp = summarize(tier_put), pr = summarize(put_ratio);
    std::printf("%8.0f %6.0f %12.0f %12.0f %8.2f %12.0f %12.0f %8.2f\n", mib, part_mib, rg.median, tg.median, gr.median,
                rs.median, tp.median, pr.median);
    char tag[64];
    std::snprintf(tag, sizeof tag, "%.0fMiB/p%.0fMiB", mib, part_mib);
    const std::string parts = "parts of " + std::to_string(int(part_mib)) + " MiB";
    const bool dflt = part_bytes == tier_config{}.part_bytes;
    char target[32];
    std::snprintf(target, sizeof target, ">= %.1f", k_ratio_target);
    // The raw figures do not depend on the part size: plot them once (with the default parts' runs).
    if (dflt) {
        result_at("tier_raw_get/" + std::to_string(int(mib)) + "MiB", rg, "MB/s", "info", true,
                  {k_fig, "raw GET", mib});
        result_at("tier_raw_set/" + std::to_string(int(mib)) + "MiB", rs, "MB/s", "info", true,
                  {k_fig, "raw SET", mib});
    }
    result_at(std::string("tier_get/") + tag, tg, "MB/s", "info", true, {k_fig, "tier get, " + parts, mib});
    result_at(std::string("tier_put/") + tag, tp, "MB/s", "info", true, {k_fig, "tier put, " + parts, mib});
    // The target is the figure's headline case (128 MiB, the default parts); the others are reported as measured.
    const bool judged = dflt && size >= (size_t(128) << 20);
    result(std::string("tier_get_over_raw/") + tag, gr, "x", judged ? target : "info",
           !judged || gr.median >= k_ratio_target);
    result(std::string("tier_put_over_raw/") + tag, pr, "x", "info", true);
    flushall(v);
    return gr;
}

std::vector<token_id> prompt_of(size_t n, int32_t n_vocab) {
    std::mt19937 rng{uint32_t(n)};
    std::vector<token_id> p = {1};
    while (p.size() < n) p.push_back(token_id(5 + rng() % uint32_t(n_vocab - 5)));
    return p;
}

// prefill_blob: the state blob of a prefill of n tokens on a fresh engine with K and V caches of kv_type.
std::vector<uint8_t> prefill_blob(const std::shared_ptr<const loaded_model> & m, int32_t kv_type, size_t n,
                                  double & ms_prompt) {
    engine_config cfg;
    cfg.ctx.n_ctx = uint32_t(n + 256);
    cfg.ctx.flash_attn = true;
    cfg.ctx.type_k = cfg.ctx.type_v = kv_type;
    auto e = engine::create(m, cfg);
    if (!e.ok()) fail(e.status().to_string());
    gen_request req;
    req.prompt = prompt_of(n, int32_t(m->identity().n_vocab));
    req.n_predict = 0;
    auto h = e.value()->submit(task_prefill{req});
    if (!h.ok()) fail(h.status().to_string());
    engine_result r = engine_run_to_end(h.value(), std::chrono::minutes(10));
    if (!r.done.ok()) fail(r.done.status().to_string());
    ms_prompt = r.done->ms_prompt;
    return std::move(r.done->blob);
}

// section_bytes: the payload bytes of the blob's sections named name (0 when it has none).
uint64_t section_bytes(std::span<const uint8_t> blob, const std::string & name) {
    uint64_t n = 0;
    for (const blob_section_info & s : blob_walk(blob).sections)
        if (s.name == name) n += s.length;
    return n;
}

void measure_entry_sizes(const baton::test::valkey_process & v, bool quick) {
    const int n_embd = quick ? 256 : 512, n_layer = quick ? 2 : 8;
    const std::string path = bench_model("llama", n_embd, n_layer);
    const std::string shape = std::to_string(n_embd) + "x" + std::to_string(n_layer);
    model_load_params lp;
    auto loaded = loaded_model::load(path, lp);
    if (!loaded.ok()) fail(loaded.status().to_string());
    const std::shared_ptr<const loaded_model> m(std::move(loaded.value()));
    const size_t n_short = quick ? 128 : 1024, n_long = quick ? 512 : 4096;
    auto store = store_at(v.port(), tier_config{}.part_bytes);
    raw_resp raw(v.port());

    std::printf("\nllama %s, n_vocab %u: state blobs by KV cache type (flash attention on)\n", shape.c_str(),
                unsigned(m->identity().n_vocab));
    std::printf("%-6s %6s %12s %10s %14s %14s %10s %14s %14s\n", "KV", "tokens", "blob bytes", "logits", "B/token",
                "B/token -lgt", "state", "valkey (tier)", "valkey (raw)");
    constexpr int32_t k_f16 = 1, k_q8_0 = 8, k_q4_0 = 2;  // ggml_type
    for (const int32_t type : {k_f16, k_q8_0, k_q4_0}) {
        const std::string tname = identity_kv_type_name(type);
        for (const size_t n : {n_short, n_long}) {
            double ms_prompt = 0;
            const std::vector<uint8_t> blob = prefill_blob(m, type, n, ms_prompt);
            const uint64_t logits = section_bytes(blob, "logits"), state = section_bytes(blob, "state");
            const double per_token = double(blob.size()) / double(n);
            const double per_token_no_logits = double(blob.size() - logits) / double(n);
            std::string valkey_tier = "-", valkey_raw = "-";
            const std::string tag = tname + "/" + std::to_string(n);
            if (n == n_long) {
                // What the entry costs the server (parts, manifest, keys, allocator rounding), then the same bytes
                // as one string.
                flushall(v);
                if (Status st = store->put(key_of(n, "bench." + tname), blob, 600000); !st.ok())
                    fail("tier put: " + st.to_string());
                if (!raw.set("bench:raw:" + tname, blob)) fail("raw SET failed");
                const double in_tier = memory_usage(v, "baton:*"), in_raw = memory_usage(v, "bench:raw:*");
                flushall(v);
                valkey_tier = std::to_string(int64_t(in_tier));
                valkey_raw = std::to_string(int64_t(in_raw));
                result("tier_entry_valkey_bytes/" + tag, one(in_tier), "bytes", "info", true);
                result("tier_entry_valkey_over_blob/" + tag, one(in_tier / double(blob.size())), "x", "info", true);
                result("tier_raw_valkey_over_blob/" + tag, one(in_raw / double(blob.size())), "x", "info", true);
                result("tier_entry_blob_bytes/" + tag, one(double(blob.size())), "bytes", "info", true);
            }
            std::printf("%-6s %6zu %12zu %10llu %14.1f %14.1f %10llu %14s %14s   (prefill %.0f ms)\n", tname.c_str(), n,
                        blob.size(), (unsigned long long)logits, per_token, per_token_no_logits,
                        (unsigned long long)state, valkey_tier.c_str(), valkey_raw.c_str(), ms_prompt);
            result("tier_blob_bytes_per_token/" + tag, one(per_token), "bytes/token", "info", true);
            result("tier_blob_bytes_per_token_no_logits/" + tag, one(per_token_no_logits), "bytes/token", "info", true);
        }
    }
}

// pin_to_cpu pins thread tid (0: this thread) to one CPU; false when it fails.
bool pin_to_cpu(pid_t tid, int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(tid, sizeof set, &set) == 0;
}

// pin_process_to_cpu pins every thread of process pid (its main thread and valkey's background threads) to cpu.
bool pin_process_to_cpu(pid_t pid, int cpu) {
    std::error_code ec;
    bool ok = true, any = false;
    for (const auto & t : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
        ok = pin_to_cpu(pid_t(std::strtol(t.path().filename().c_str(), nullptr, 10)), cpu) && ok;
        any = true;
    }
    return any && ok && !ec;
}

}  // namespace

int main(int argc, char ** argv) try {
    const bool quick = quick_mode(argc, argv);
    const int reps = quick ? 3 : 21;
    const std::vector<size_t> sizes = quick ? std::vector<size_t>{size_t(1) << 20, size_t(4) << 20}
                                            : std::vector<size_t>{size_t(4) << 20, size_t(32) << 20, size_t(128) << 20};
    const std::vector<uint64_t> part_sizes = {uint64_t(4) << 20, uint64_t(16) << 20};
    auto v = baton::test::valkey_process::start();
    // The server on one core and this client on the other, as a node and its Valkey on separate machines would
    // be: the raw and the tier runs then always share the cores the same way.
    cpu_set_t all;
    CPU_ZERO(&all);
    sched_getaffinity(0, sizeof all, &all);
    std::vector<int> cpus;
    for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c)
        if (CPU_ISSET(c, &all)) cpus.push_back(c);
    const bool pinned = cpus.size() == 2 && pin_process_to_cpu(v->pid(), cpus[0]) && pin_to_cpu(0, cpus[1]);

    std::vector<uint8_t> data(sizes.back());
    std::mt19937_64 rng{25};
    for (size_t i = 0; i + 8 <= data.size(); i += 8) {
        const uint64_t x = rng();
        std::memcpy(data.data() + i, &x, 8);
    }
    std::vector<uint8_t> raw_buf(sizes.back() + 2, 1);  // pre-faulted, as the pool's buffer is after the warm-up

    std::printf("tier vs raw RESP on one valkey-server (loopback%s), %d repetitions each, medians (MB/s = 1e6 B/s)\n",
                pinned ? "; the server on one core, this client on another" : "; not pinned", reps);
    std::printf("%8s %6s %12s %12s %8s %12s %12s %8s\n", "MiB", "part", "raw GET", "tier get", "ratio", "raw SET",
                "tier put", "ratio");
    stats head;
    for (const size_t size : sizes)
        for (const uint64_t part : part_sizes) {
            const stats r = measure_throughput(*v, std::span<const uint8_t>(data.data(), size), part, reps, raw_buf);
            if (size == sizes.back() && part == tier_config{}.part_bytes) head = r;
        }
    if (pinned) sched_setaffinity(0, sizeof all, &all);  // the engine's threads may use every core again
    measure_entry_sizes(*v, quick);

    char target[64];
    std::snprintf(target, sizeof target, ">= %.1f of raw RESP GET", k_ratio_target);
    headline(k_fig, "tier_get_over_raw_" + std::to_string(sizes.back() >> 20) + "MiB", head, "x", target,
             quick || head.median >= k_ratio_target);
    return 0;
} catch (const std::exception & e) {
    std::fprintf(stderr, "tier_bench: %s\n", e.what());
    return 1;
}
