// cmd_serve.cpp — `baton serve`: run a node (see include/baton/node/node.h and docs/api.md).
//
// Signals: SIGTERM and SIGINT are blocked in every thread and taken by sigwait on the main thread, which
// then stops accepting, ends in-flight work (after --drain seconds) and exits 0.
#include <CLI/CLI.hpp>

#include <nlohmann/json.hpp>

#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "baton/cluster/node_record.h"
#include "baton/node/node.h"
#include "baton/openai/reasoning.h"
#include "baton/sampling.h"
#include "cli.h"
#include "cli_test_seam.h"

namespace baton {

std::function<void(node &)> cli_test_on_node;

namespace {

struct serve_options {
    node_config cfg;
    std::string role = "both";
    uint32_t n_slots = 1;
    double max_blob_mb = 1024;
    double state_hold_mb = 2048;
    double max_json_mb = 8;
    double max_prompt_mb = double(prompt_limits{}.max_prompt_bytes) / (1024 * 1024);  // --max-prompt-mb
    // --etcd and friends (docs/cluster.md): folded into cfg.cluster by serve_check.
    cli_etcd_flags etcd;
    node_cluster_config cluster;
    cli_device_flags device;  // -ngl, -dev, -fa, -ctk, ... folded into cfg.offload and cfg.engine.ctx
    // llama-server's chat flags, folded into cfg.chat by serve_check_chat.
    std::string chat_template, chat_template_file, chat_template_kwargs, reasoning_format = "auto", reasoning = "auto";
    std::string tags;
    cli_static_flags statics;  // --path, --webui: folded into cfg.static_dir by serve_check
    // --embedding, --pooling, --embd-normalize, --rerank: folded into cfg.embedding by serve_check.
    bool embedding = false;
    bool rerank = false;  // --rerank: --embedding with --pooling rank, as llama-server's
    std::string pooling;
    int32_t embd_normalize = 2;
    // --mmproj and its flags: folded into cfg.media by serve_check.
    std::string mmproj;
    bool mmproj_offload = true;
    uint32_t mmproj_max_images = media_config{}.max_images;
    double mmproj_max_image_mb = double(media_config{}.max_image_bytes) / (1 << 20);
    // --image-urls and its flags: folded into cfg.image_urls by serve_check.
    bool image_urls = false;
    double image_url_timeout_s = double(image_url_config{}.timeout.count()) / 1000;
    std::string image_url_ca;
    std::string
        state_secret_file;  // --state-secret-file (or BATON_STATE_SECRET_FILE): folded into cfg.engine.limits.key
    // --tier-* (docs/tier.md): folded into cfg.tier by serve_check_tier.
    std::string tier_valkey, tier_user, tier_password_file, tier_tls_ca, tier_tls_cert, tier_tls_key, tier_tls_name;
    uint32_t tier_ttl_s = 3600, tier_timeout_ms = 200;
    bool no_tier_deltas = false;
};

Status serve_check_tier(serve_options & o) {
    const bool any_other = !o.tier_user.empty() || !o.tier_password_file.empty() || !o.tier_tls_ca.empty() ||
                           !o.tier_tls_cert.empty() || !o.tier_tls_key.empty() || !o.tier_tls_name.empty() ||
                           o.no_tier_deltas;
    if (o.tier_valkey.empty()) {
        if (any_other) return {status_code::invalid_argument, "--tier-*: needs --tier-valkey HOST:PORT"};
        return {};
    }
    node_tier_config t;
    const size_t colon = o.tier_valkey.rfind(':');
    unsigned port = 0;
    if (colon == std::string::npos || colon == 0 || std::sscanf(o.tier_valkey.c_str() + colon + 1, "%u", &port) != 1 ||
        port == 0 || port > 65535 || std::to_string(port) != o.tier_valkey.substr(colon + 1))
        return {status_code::invalid_argument, "--tier-valkey: " + o.tier_valkey + " is not HOST:PORT"};
    t.valkey.host = o.tier_valkey.substr(0, colon);
    t.valkey.port = uint16_t(port);
    if (o.tier_timeout_ms < 1 || o.tier_timeout_ms > 60000)
        return {status_code::invalid_argument, "--tier-timeout-ms: must be in 1..60000"};
    t.valkey.connect_timeout_ms = t.valkey.command_timeout_ms = o.tier_timeout_ms;
    if (o.tier_ttl_s < 1 || o.tier_ttl_s > 30 * 86400)
        return {status_code::invalid_argument, "--tier-ttl: must be in 1..2592000 seconds"};
    t.ttl_s = o.tier_ttl_s;
    t.deltas = !o.no_tier_deltas;
    t.valkey.username = o.tier_user;
    if (!o.tier_password_file.empty()) {
        std::ifstream f(o.tier_password_file);
        if (!f || !std::getline(f, t.valkey.password) || t.valkey.password.empty())
            return {status_code::invalid_argument,
                    "--tier-password-file: cannot read a password from " + o.tier_password_file};
    }
    if (!o.tier_tls_ca.empty()) {
        t.valkey.tls = valkey_tls_config{o.tier_tls_ca, o.tier_tls_cert, o.tier_tls_key, o.tier_tls_name};
    } else if (!o.tier_tls_cert.empty() || !o.tier_tls_key.empty() || !o.tier_tls_name.empty()) {
        return {status_code::invalid_argument, "--tier-tls-*: TLS needs --tier-tls-ca"};
    }
    if (o.cfg.engine.cache_ram_mib == 0)
        return {status_code::invalid_argument, "--tier-valkey: needs the host prompt cache (--cache-ram is 0)"};
    o.cfg.tier = std::move(t);
    return {};
}

Status serve_check_chat(serve_options & o) {
    chat_format_config & c = o.cfg.chat;
    if (!o.chat_template.empty() && !o.chat_template_file.empty())
        return {status_code::invalid_argument, "--chat-template and --chat-template-file: give one of them"};
    if (!o.chat_template.empty()) {
        c.template_text = o.chat_template;
        c.template_origin = "--chat-template";
    } else if (!o.chat_template_file.empty()) {
        std::ifstream f(o.chat_template_file, std::ios::binary);
        if (!f) return {status_code::invalid_argument, "--chat-template-file: cannot read " + o.chat_template_file};
        std::ostringstream text;
        text << f.rdbuf();
        c.template_text = text.str();
        if (c.template_text.empty())
            return {status_code::invalid_argument, "--chat-template-file: " + o.chat_template_file + " is empty"};
        c.template_origin = "--chat-template-file " + o.chat_template_file;
    }
    if (!o.chat_template_kwargs.empty()) {
        c.kwargs = nlohmann::json::parse(o.chat_template_kwargs, nullptr, false);
        if (!c.kwargs.is_object())
            return {status_code::invalid_argument, "--chat-template-kwargs: must be a JSON object"};
    }
    if (o.reasoning != "auto") {  // --reasoning on|off: the templates' enable_thinking, unless the kwargs name it
        if (c.kwargs.is_null()) c.kwargs = nlohmann::json::object();
        if (!c.kwargs.contains("enable_thinking")) c.kwargs["enable_thinking"] = o.reasoning == "on";
    }
    for (size_t at = 0; !o.tags.empty() && at <= o.tags.size();) {
        const size_t comma = std::min(o.tags.find(',', at), o.tags.size());
        if (comma > at) o.cfg.tags.push_back(o.tags.substr(at, comma - at));
        at = comma + 1;
    }
    auto f = reasoning_format_parse(o.reasoning_format);
    if (!f.ok()) return {status_code::invalid_argument, "--reasoning-format: " + f.status().message()};
    c.reasoning = f.value();
    if (!o.cfg.slot_save_path.empty()) {
        struct stat st{};
        if (::stat(o.cfg.slot_save_path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
            return {status_code::invalid_argument, "--slot-save-path: " + o.cfg.slot_save_path + " is not a directory"};
    }
    if (o.cfg.alias.find(',') != std::string::npos)
        return {status_code::invalid_argument,
                "--alias: takes one name (llama-server's comma-separated list is not supported)"};
    if (Status st = sampling_check(o.cfg.defaults.sampling); !st.ok())
        return {status_code::invalid_argument, "sampling flags (--temp, --top-k, --top-p, --min-p, --repeat-penalty, "
                                               "--repeat-last-n, --presence-penalty, --frequency-penalty): " +
                                                   st.message()};
    if (o.cfg.defaults.max_tokens < -1)
        return {status_code::invalid_argument, "--n-predict: must be -1 (no limit) or >= 0"};
    return {};
}

Status serve_check_cluster(serve_options & o) {
    auto etcd = cli_etcd_config(o.etcd);
    if (!etcd.ok()) return etcd.status();
    if (!etcd.value()) {
        if (!o.cluster.advertise.empty()) return {status_code::invalid_argument, "--advertise: needs --etcd"};
        return {};
    }
    o.cluster.etcd = std::move(*etcd.value());
    if (o.cluster.advertise.empty())
        return {status_code::invalid_argument,
                "--advertise: required with --etcd (the URL routers reach this node at)"};
    if (auto u = http_url_parse(o.cluster.advertise); !u.ok())
        return {status_code::invalid_argument, "--advertise: " + u.status().message()};
    BATON_RETURN_IF_ERROR(cluster_name_check(o.cluster.cluster));
    if (!(o.cluster.lease_ttl_s >= 2 && o.cluster.lease_ttl_s <= 3600))
        return {status_code::invalid_argument, "--lease-ttl: must be in 2..3600 seconds"};
    if (!(o.cluster.load_interval_s >= 0.2 && o.cluster.load_interval_s <= 60))
        return {status_code::invalid_argument, "--load-interval: must be in 0.2..60 seconds"};
    o.cfg.cluster = o.cluster;
    return {};
}

Status serve_check(serve_options & o) {
    auto role = node_role_parse(o.role);
    if (!role.ok()) return role.status();
    o.cfg.role = role.value();
    if (o.n_slots < 1 || o.n_slots > 256) return {status_code::invalid_argument, "parallel: " + std::to_string(o.n_slots) + " is not in 1..256"};
    o.cfg.engine.ctx.n_seq_max = o.n_slots;
    o.cfg.static_dir = cli_static_dir(o.statics);
    if (o.rerank) {
        if (!o.pooling.empty() && o.pooling != "rank")
            return {status_code::invalid_argument,
                    "pooling: --rerank needs rank pooling, not " + o.pooling.substr(0, 32)};
        o.embedding = true;
        o.pooling = "rank";
    }
    if (o.embedding) {
        embedder_config e;
        if (!o.pooling.empty()) {
            auto p = pooling_kind_parse(o.pooling);
            if (!p.ok()) return p.status();
            e.pooling = p.value();
        }
        if (o.embd_normalize < -1 || o.embd_normalize > 64)
            return {status_code::invalid_argument,
                    "embd-normalize: " + std::to_string(o.embd_normalize) + " is not in -1..64"};
        e.normalize = o.embd_normalize;
        e.n_batch = o.cfg.engine.ctx.n_batch;
        o.cfg.embedding = e;
    } else if (!o.pooling.empty()) {
        return {status_code::invalid_argument, "pooling: needs --embedding"};
    }
    if (!o.mmproj.empty()) {
        media_config m;
        m.path = o.mmproj;
        m.offload = o.mmproj_offload;
        m.max_images = o.mmproj_max_images;
        if (!(o.mmproj_max_image_mb > 0) || o.mmproj_max_image_mb > 1024)
            return {status_code::invalid_argument, "--mmproj-max-image-mb: must be in (0, 1024]"};
        m.max_image_bytes = uint64_t(o.mmproj_max_image_mb * 1024 * 1024);
        o.cfg.media = m;
    }
    if (o.image_urls) {
        if (o.mmproj.empty()) return {status_code::invalid_argument, "--image-urls: needs --mmproj"};
        if (!(o.image_url_timeout_s > 0) || o.image_url_timeout_s > 600)
            return {status_code::invalid_argument, "--image-url-timeout: must be in (0, 600] seconds"};
        image_url_config u;
        u.timeout = std::chrono::milliseconds(int64_t(o.image_url_timeout_s * 1000));
        u.ca_file = o.image_url_ca;
        o.cfg.image_urls = u;
    } else if (!o.image_url_ca.empty()) {
        return {status_code::invalid_argument, "--image-url-ca: needs --image-urls"};
    }
    if (!(o.max_blob_mb > 0) || !(o.max_json_mb > 0)) return {status_code::invalid_argument, "max-blob-mb/max-json-mb: must be > 0"};
    o.cfg.max_blob_bytes = uint64_t(o.max_blob_mb * 1024 * 1024);
    if (!(o.state_hold_mb > 0) || o.state_hold_mb > 1 << 20)
        return {status_code::invalid_argument, "--state-hold-mb: must be in (0, 1048576]"};
    o.cfg.state_hold_bytes = uint64_t(o.state_hold_mb * 1024 * 1024);
    o.cfg.max_json_bytes = uint64_t(o.max_json_mb * 1024 * 1024);
    if (!(o.max_prompt_mb > 0) || o.max_prompt_mb > 1024)
        return {status_code::invalid_argument, "--max-prompt-mb: must be in (0, 1024]"};
    o.cfg.defaults.prompt.max_prompt_bytes = uint64_t(o.max_prompt_mb * 1024 * 1024);
    o.cfg.chat.max_prompt_bytes = o.cfg.defaults.prompt.max_prompt_bytes;
    if (o.cfg.port < 0 || o.cfg.port > 65535) return {status_code::invalid_argument, "port: " + std::to_string(o.cfg.port) + " is not in 0..65535"};
    if (o.cfg.timeout_s < 0 || o.cfg.drain_s < 0) return {status_code::invalid_argument, "timeout/drain: must be >= 0"};
    if (o.cfg.http_threads < 1 || o.cfg.http_threads > 256) return {status_code::invalid_argument, "http-threads: must be in 1..256"};
    BATON_RETURN_IF_ERROR(http_limits_check(o.cfg.limits));
    BATON_RETURN_IF_ERROR(serve_check_cluster(o));
    BATON_RETURN_IF_ERROR(serve_check_chat(o));
    BATON_RETURN_IF_ERROR(serve_check_tier(o));
    BATON_RETURN_IF_ERROR(cli_device_resolve(o.device, o.cfg.offload, o.cfg.engine.ctx));
    if (o.cfg.api_key.empty())
        if (const char * k = std::getenv("BATON_API_KEY"); k && *k) o.cfg.api_key = k;
    if (!o.state_secret_file.empty()) {
        auto key = blob_key::load_file(o.state_secret_file);
        if (!key.ok()) return {status_code::invalid_argument, key.status().message()};
        o.cfg.engine.limits.key = std::move(key.value());
    }
    context_config ctx = o.cfg.engine.ctx;
    if (ctx.n_ctx == 0) ctx.n_ctx = 1u << 24;  // -c 0: the model's training context, known once it is loaded
    return context_check(ctx);
}

int run_serve(serve_options & o) {
    Status st = serve_check(o);
    if (!st.ok()) return cli_fail(k_exit_usage, st.message());
    // Before any thread exists, so every thread inherits the mask and only sigtimedwait below sees them.
    const sigset_t sigs = cli_block_stop_signals();

    o.cfg.build_info = cli_version_string();
    node n(o.cfg);
    if (cli_test_on_node) cli_test_on_node(n);
    auto port = n.bind();
    if (!port.ok()) return cli_fail(k_exit_failure, port.status().message());
    n.start();  // /health answers 503 while the model loads
    st = n.load();
    if (!st.ok()) {
        n.shutdown();
        return cli_fail(k_exit_failure, st.message());
    }
    if (o.cfg.api_key.empty())  // issue 22: a keyless node says so
        log_warn("serve: no --api-key: every route is open to anyone who can reach {}:{}", o.cfg.host, port.value());
    std::printf("listening on http://%s:%d\n", o.cfg.host.c_str(), port.value());
    std::fflush(stdout);
    for (;;) {
        timespec tick = {0, 200 * 1000 * 1000};
        const int sig = sigtimedwait(&sigs, nullptr, &tick);
        if (sig == SIGTERM || sig == SIGINT || n.drain_requested()) break;
        if (!n.running()) {
            n.shutdown();
            return cli_fail(k_exit_failure, "the HTTP listener stopped unexpectedly");
        }
    }
    log_info("serve: shutting down");
    n.shutdown();
    return k_exit_ok;
}

}  // namespace

void cli_add_serve(CLI::App & app, cli_run_fn & run) {
    auto o = std::make_shared<serve_options>();
    node_config & c = o->cfg;
    CLI::App * sub = app.add_subcommand("serve", "Run an HTTP node: OpenAI API, prefill/decode and slot state endpoints (docs/api.md)");
    sub->allow_non_standard_option_names();  // llama-server's -np
    sub->add_option("--model", c.model_path, "GGUF model file")->required();
    sub->add_option("--host", c.host, "Address to bind")->capture_default_str();
    sub->add_option("--port", c.port, "Port to bind (0: any free port)")->capture_default_str();
    sub->add_option("--role", o->role, "both | prefill | decode: which PD endpoints this node serves")->capture_default_str();
    sub->add_option("-np,--parallel", o->n_slots, "Slots (concurrent sequences)")->capture_default_str();
    sub->add_option("--ctx-size", c.engine.ctx.n_ctx,
                    "Context size in tokens (shared by all slots when unified; 0: the model's training context)")
        ->capture_default_str();
    sub->add_option("--threads", c.engine.ctx.n_threads, "Compute threads")->capture_default_str();
    cli_add_device_flags(*sub, o->device, c.engine.ctx);
    sub->add_flag("--kv-unified,!--no-kv-unified", c.engine.ctx.kv_unified,
                  "One KV buffer for all slots (default; blobs restore into any slot count) or one per slot");
    sub->add_flag("--park-idle,!--no-park-idle", c.engine.park_idle,
                  "Unified KV: while any slot works, idle slots keep their state in host memory, not in the cache "
                  "every decode attends over (default on)");
    sub->add_option("-cram,--cache-ram", c.engine.cache_ram_mib,
                    "Host prompt cache, MiB: states leaving the slots are kept and restored when a prompt reuses "
                    "their prefix (0: off, -1: no limit)")
        ->capture_default_str();
    sub->add_option("--api-key", c.api_key, "Require \"Authorization: Bearer KEY\" on every endpoint but /health (or set BATON_API_KEY)");
    sub->add_option("--tier-valkey", o->tier_valkey,
                    "Shared prefix-cache tier: the Valkey server (HOST:PORT) this node writes the states it keeps to "
                    "and fetches prompt prefixes from (docs/tier.md; needs --cache-ram)");
    sub->add_option("--tier-user", o->tier_user, "Tier: the Valkey ACL user (default: the default user)");
    sub->add_option("--tier-password-file", o->tier_password_file,
                    "Tier: a file whose first line is the Valkey password (or set BATON_TIER_PASSWORD_FILE)")
        ->envname("BATON_TIER_PASSWORD_FILE");
    sub->add_option("--tier-tls-ca", o->tier_tls_ca, "Tier: TLS, verifying the server against this CA file (PEM)");
    sub->add_option("--tier-tls-cert", o->tier_tls_cert, "Tier: TLS client certificate (PEM)");
    sub->add_option("--tier-tls-key", o->tier_tls_key, "Tier: TLS client certificate's key (PEM)");
    sub->add_option("--tier-tls-server-name", o->tier_tls_name, "Tier: TLS server name (SNI; default: the host)");
    sub->add_option("--tier-ttl", o->tier_ttl_s, "Tier: seconds every entry this node writes lives")
        ->capture_default_str();
    sub->add_flag("--no-tier-deltas", o->no_tier_deltas,
                  "Tier: write every state whole (default: a conversation's next turn is stored as a delta over the "
                  "entry this node wrote for the turn before)");
    sub->add_option("--tier-timeout-ms", o->tier_timeout_ms,
                    "Tier: connect and per-wait timeout (a slow tier is a miss: the prompt is computed)")
        ->capture_default_str();
    sub->add_option("--state-secret-file", o->state_secret_file,
                    "File with the cluster's state secret (one per line, >= 16 bytes each; the first signs, all "
                    "verify): states this node sends carry an HMAC-SHA256, states it receives must (or set "
                    "BATON_STATE_SECRET_FILE)")
        ->envname("BATON_STATE_SECRET_FILE");
    sub->add_option("--max-blob-mb", o->max_blob_mb, "Body cap of /v1/decode and PUT /v1/slots/{id}/state, MiB")->capture_default_str();
    sub->add_option("--state-hold-mb", o->state_hold_mb,
                    "Direct transfer: MiB of states a prefill node holds for decode nodes to fetch (beyond: 503)")
        ->capture_default_str();
    sub->add_option("--state-compress-level", o->cfg.state_compress_level,
                    "PD: pack the states this prefill node sends (fetched or relayed) with zstd at this level "
                    "(1-19) over byte planes; 0 sends them as they are (pays only on slow links: "
                    "docs/benchmarks.md, figure 22)")
        ->capture_default_str()
        ->check(CLI::Range(0, 19));
    sub->add_option("--state-stream-tokens", o->cfg.state_stream_tokens,
                    "Direct transfer: stream the state this prefill node makes to the decode node in parts of this "
                    "many tokens (at least the prompt's 1/16) while the prompt computes; 0 sends it whole after the "
                    "prompt (docs/router.md, Streamed transfer)")
        ->capture_default_str();
    sub->add_option("--state-lease-ms", o->cfg.state_lease_ms,
                    "Direct transfer: how long a held state waits for its decode node before it is dropped")
        ->capture_default_str()
        ->check(CLI::Range(100u, 3600000u));
    sub->add_option("--max-json-mb", o->max_json_mb, "Body cap of the JSON endpoints, MiB")->capture_default_str();
    sub->add_option("--max-prompt-mb", o->max_prompt_mb,
                    "Largest prompt text, chat text (the messages together, and as rendered) or /tokenize content, "
                    "MiB; beyond: 413 before the template or tokenizer runs")
        ->capture_default_str();
    sub->add_option("--max-messages", c.defaults.prompt.max_messages,
                    "Most messages one chat request may hold; beyond: 413 before the template runs")
        ->capture_default_str()
        ->check(CLI::Range(1u, 1u << 24));
    sub->add_option("--timeout", c.timeout_s, "Per-request timeout in seconds (0: none); a late request is cancelled")->capture_default_str();
    sub->add_option("--queue-max", c.engine.queue_max,
                    "Requests that may wait for a slot; beyond this: 503 with Retry-After")
        ->capture_default_str();
    cli_add_http_flags(*sub, c.limits, c.http_threads, c.cors, o->statics);
    cli_add_etcd_flags(*sub, o->etcd, o->cluster.cluster, "Register this node in etcd");
    sub->add_option("--advertise", o->cluster.advertise,
                    "With --etcd: the URL routers reach this node at, http://HOST:PORT");
    sub->add_option("--lease-ttl", o->cluster.lease_ttl_s,
                    "With --etcd: TTL of the node's lease, seconds (kept alive every TTL/3)")
        ->capture_default_str();
    sub->add_option("--load-interval", o->cluster.load_interval_s,
                    "With --etcd: how often the node's load in etcd is refreshed, seconds")
        ->capture_default_str();
    sub->add_option("-a,--alias", c.alias,
                    "The model's name in /v1/models and responses (default: the file name; cluster records)");
    cli_add_sampling_flags(*sub, c.defaults.sampling);
    // Grammar structure limits (grammar_check.h): every grammar a request brings (GBNF, a schema's, tools')
    // is held to them before libllama's parser sees it; raising one is capped at a stack-safe bound.
    grammar_limits & gl = c.defaults.sampling.grammar_bounds;
    const grammar_limits & gcap = grammar_limits_cap;
    sub->add_option("--grammar-max-depth", gl.depth_max,
                    "Grammars: most groups \"( )\" nested inside each other; beyond: 400")
        ->capture_default_str()
        ->check(CLI::Range(1u, gcap.depth_max));
    sub->add_option("--grammar-max-chain", gl.chain_max,
                    "Grammars: most rules a position descends through before a character (rule A starting with B, "
                    "B with C, ...); beyond: 400")
        ->capture_default_str()
        ->check(CLI::Range(1u, gcap.chain_max));
    sub->add_option("--grammar-max-rules", gl.rules_max,
                    "Grammars: most rules, counting one per group and per repetition; beyond: 400")
        ->capture_default_str()
        ->check(CLI::Range(1u, gcap.rules_max));
    sub->add_option("--grammar-max-elements", gl.elements_max,
                    "Grammars: most elements once repetitions are expanded (\"x\"{100} is 100); beyond: 400")
        ->capture_default_str()
        ->check(CLI::Range(uint64_t(1), gcap.elements_max));
    sub->add_option("--grammar-max-fanout", gl.fanout_max,
                    "Grammars: most alternatives one position may start with; beyond: 400")
        ->capture_default_str()
        ->check(CLI::Range(1u, gcap.fanout_max));
    sub->add_option("--n-max", c.defaults.n_max,
                    "Largest \"n\" (choices per request) a request may ask for; each choice takes a slot")
        ->capture_default_str()
        ->check(CLI::Range(1, 64));
    sub->add_option("--n-predict,--predict", c.defaults.max_tokens,  // -n too (cli.cpp spells it out)
                    "Tokens to generate when a request does not say (-1: until the end or the context is full)")
        ->capture_default_str();
    sub->add_flag("--jinja,!--no-jinja", c.chat.jinja, "Render chat templates with the Jinja engine (default on)");
    sub->add_option(
        "--chat-template", o->chat_template,
        "Chat template: a Jinja source, or the name of one of libllama's built-in formats (default: the model's)");
    sub->add_option("--chat-template-file", o->chat_template_file, "File holding the chat template (Jinja)");
    sub->add_option("--chat-template-kwargs", o->chat_template_kwargs,
                    "JSON object of extra template variables, e.g. '{\"enable_thinking\":false}' (requests' own win)");
    sub->add_option(
           "-rea,--reasoning", o->reasoning,
           "on | off | auto: reasoning in chats (the templates' enable_thinking; auto: the template's default)")
        ->check(CLI::IsMember({"on", "off", "auto"}))
        ->capture_default_str();
    sub->add_flag(
        "--embedding,--embeddings", o->embedding,
        "Serve /embedding and /v1/embeddings (an embedding context beside the engine; inputs up to -b tokens)");
    sub->add_flag("--rerank,--reranking", o->rerank,
                  "Serve /rerank, /reranking, /v1/rerank and /v1/reranking: --embedding with --pooling rank (a model "
                  "with a ranking head; documents up to -b tokens with the query)");
    sub->add_option("--pooling", o->pooling,
                    "With --embedding: none | mean | cls | last | rank (default: the model's)");
    sub->add_option("--embd-normalize", o->embd_normalize,
                    "With --embedding: -1 none, 0 max-abs int16, 1 taxicab, 2 euclidean, >2 p-norm")
        ->capture_default_str();
    sub->add_option(
        "-mm,--mmproj", o->mmproj,
        "Multimodal projector (GGUF) of the model: chats take images (image_url parts with data: URLs, "
        "http(s) with --image-urls; LLaVA-style, Gemma 3 and Qwen2-VL-style projectors) or audio (input_audio parts; "
        "Whisper-based projectors), as the projector reads; docs/api.md \"Images\"");
    sub->add_flag("--mmproj-offload,!--no-mmproj-offload", o->mmproj_offload,
                  "Run the projector on the offload device when there is one (default on)");
    sub->add_option("--mmproj-max-images", o->mmproj_max_images, "Images one request may carry")
        ->capture_default_str()
        ->check(CLI::Range(1, 256));
    sub->add_option("--mmproj-max-image-mb", o->mmproj_max_image_mb, "Largest image file a request may carry (MiB)")
        ->capture_default_str();
    sub->add_flag("--image-urls", o->image_urls,
                  "With --mmproj: fetch the http(s) image URLs chats name (off: only inline data: images). The node "
                  "then fetches any address a client names, its own network included: for trusted clients");
    sub->add_option("--image-url-timeout", o->image_url_timeout_s,
                    "With --image-urls: seconds for all of one request's image fetches")
        ->capture_default_str();
    sub->add_option("--image-url-ca", o->image_url_ca,
                    "With --image-urls: CA file (PEM) that https image servers are verified against (default: the "
                    "system's trust store)");
    sub->add_option("--tags", o->tags, "Comma-separated model tags (informational: /v1/models meta.tags)");
    sub->add_option("--reasoning-format", o->reasoning_format,
                    "none | deepseek | deepseek-legacy | auto (= deepseek): where a reasoning model's thought goes")
        ->capture_default_str();
    sub->add_flag("--slots,!--no-slots", c.slots_endpoint, "Serve GET /slots (default on)");
    sub->add_option(
        "--slot-save-path", c.slot_save_path,
        "Directory for POST /slots/{id}?action=save|restore (state blobs); unset: those actions answer 501");
    sub->add_flag("--metrics", "Accepted for llama-server compatibility: /metrics is always served");
    sub->add_flag("--offline", "Accepted for llama-server compatibility: Baton never downloads anything");
    sub->add_flag("-v,--verbose", c.verbose, "Log one line per finished generation at info (without it: at debug)");
    sub->add_option("--drain", c.drain_s,
                    "On SIGTERM, let in-flight requests finish for up to this many seconds, then cancel")
        ->capture_default_str();
    sub->callback([&run, o] { run = [o] { return run_serve(*o); }; });
}

}  // namespace baton
