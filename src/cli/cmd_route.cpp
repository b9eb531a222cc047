// cmd_route.cpp — `baton route`: the OpenAI front over prefill and decode node pools.
#include <CLI/CLI.hpp>

#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "baton/router/router.h"
#include "cli.h"

namespace baton {

namespace {

std::vector<std::string> split_urls(const std::string & s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, ','))
        if (!item.empty()) out.push_back(item);
    return out;
}

int run_route(const router_config & base, const std::string & prefill, const std::string & decode,
              const std::string & fallback, const std::string & transfer, const cli_etcd_flags & etcd) {
    router_config cfg = base;
    cfg.prefill_urls = split_urls(prefill);
    cfg.decode_urls = split_urls(decode);
    auto c = cli_etcd_config(etcd);
    if (!c.ok()) return cli_fail(k_exit_usage, c.status().message());
    cfg.etcd = c.value();
    if (fallback == "local") cfg.fallback = fallback_policy::local;
    else if (fallback == "fail") cfg.fallback = fallback_policy::fail;
    else return cli_fail(k_exit_usage, "--fallback: '" + fallback + "' is not local or fail");
    if (transfer == "direct") cfg.transfer = pd_transfer::direct;
    else if (transfer == "relay") cfg.transfer = pd_transfer::relay;
    else return cli_fail(k_exit_usage, "--pd-transfer: '" + transfer + "' is not direct or relay");
    sigset_t set = cli_block_stop_signals();
    auto r = router::create(cfg);
    if (!r.ok()) return cli_fail(r.status().code() == status_code::invalid_argument ? k_exit_usage : k_exit_failure, r.status().message());
    auto port = r.value()->start();
    if (!port.ok()) return cli_fail(k_exit_failure, port.status().message());
    if (cfg.api_key.empty())  // issue 22: a keyless router says so
        log_warn("route: no --api-key: every route is open to anyone who can reach {}:{}", cfg.host, port.value());
    std::printf("listening on http://%s:%d\n", cfg.host.c_str(), port.value());
    std::fflush(stdout);
    int sig = 0;
    sigwait(&set, &sig);
    log_info("route: signal {}, stopping", sig);
    r.value()->stop();
    return k_exit_ok;
}

}  // namespace

void cli_add_route(CLI::App & app, cli_run_fn & run) {
    auto cfg = std::make_shared<router_config>();
    auto prefill = std::make_shared<std::string>(), decode = std::make_shared<std::string>();
    auto fallback = std::make_shared<std::string>("local");
    auto transfer = std::make_shared<std::string>("direct");
    auto max_blob_mb = std::make_shared<double>(1024);
    auto max_prompt_mb = std::make_shared<double>(double(prompt_limits{}.max_prompt_bytes) / (1024 * 1024));
    CLI::App * sub = app.add_subcommand("route", "OpenAI front that drives prefill -> decode across node pools");
    sub->add_option("--prefill", *prefill, "Prefill node URLs, comma-separated (http://HOST:PORT,...)");
    sub->add_option("--decode", *decode, "Decode node URLs, comma-separated (required without --etcd)");
    auto etcd = std::make_shared<cli_etcd_flags>();
    cli_add_etcd_flags(*sub, *etcd, cfg->cluster, "Follow the nodes registered in etcd");
    sub->add_option("--host", cfg->host, "Address to bind")->capture_default_str();
    sub->add_option("--port", cfg->port, "Port (0 picks a free one)")->capture_default_str();
    sub->add_option("--api-key", cfg->api_key, "Key clients must send as Authorization: Bearer KEY");
    sub->add_option("--node-key", cfg->node_key, "Key sent to the nodes");
    sub->add_option("--pd-min-tokens", cfg->pd_min_tokens,
                    "Prompts with fewer tokens than this that the chosen decode node does not already hold skip the "
                    "prefill hop (with -m the router knows what each node holds from its KV events; without, the "
                    "whole prompt counts)")
        ->capture_default_str();
    sub->add_option("--pd-delta", cfg->pd_delta,
                    "When the decode node holds a prefix of the prompt (KV events, with -m), the prefill node ships "
                    "only the cells past it (true) or always the whole state (false)")
        ->capture_default_str();
    sub->add_option("--fallback", *fallback, "When prefill fails or a blob is rejected: local (prefill on the decode node) or fail")->capture_default_str();
    sub->add_option("--pd-transfer", *transfer,
                    "How states move: direct (the decode node fetches it from the prefill node; no KV bytes through "
                    "the router) or relay (through the router, for nodes that cannot reach each other)")
        ->capture_default_str();
    sub->add_option("--kv-index-blocks", cfg->kv_index_blocks,
                    "Block hashes the prefix index (the nodes' KV events) keeps per model; beyond: the least recently "
                    "used go")
        ->capture_default_str()
        ->check(CLI::Range(size_t(1), size_t(1) << 26));
    sub->add_option("--timeout", cfg->timeout_s, "Per-request deadline in seconds (every hop gets what is left)")->capture_default_str();
    sub->add_option("--health-interval", cfg->health_interval_s, "Seconds between node health checks")->capture_default_str();
    sub->add_option(
           "--health-timeout", cfg->health_timeout_s,
           "Seconds a node has to answer its health check; no answer ejects it and cancels its calls in flight")
        ->capture_default_str();
    sub->add_option("--load-cap", cfg->load_cap, "Decode affinity yields when its node has this many more requests than the least loaded")->capture_default_str();
    sub->add_option("--max-blob-mb", *max_blob_mb, "Largest blob relayed from a prefill node, MiB (larger: a prefill failure)")
        ->capture_default_str();
    sub->add_option("--max-prompt-mb", *max_prompt_mb,
                    "Largest prompt text or chat text (the messages together, and as rendered), MiB; beyond: 413 "
                    "before the template or tokenizer runs (as on a node)")
        ->capture_default_str();
    sub->add_option("--max-messages", cfg->prompt.max_messages,
                    "Most messages one chat request may hold; beyond: 413 before the template runs (as on a node)")
        ->capture_default_str()
        ->check(CLI::Range(1u, 1u << 24));
    sub->add_option("--queue-max", cfg->queue_max, "Requests that may wait at the router for node capacity; beyond: 503")->capture_default_str();
    sub->add_option("--node-queue", cfg->node_queue,
                    "Requests the router lets wait at a node beyond its slots, the rest wait at the router (-1: as many as the node has slots)")
        ->capture_default_str();
    auto statics = std::make_shared<cli_static_flags>();
    cli_add_http_flags(*sub, cfg->limits, cfg->http_threads, cfg->cors, *statics);
    sub->add_option("-m,--model", cfg->model_path, "GGUF file whose vocabulary counts prompt tokens exactly (else ~4 bytes per token)");
    sub->callback([&run, cfg, prefill, decode, fallback, transfer, max_blob_mb, max_prompt_mb, etcd, statics] {
        run = [cfg, prefill, decode, fallback, transfer, max_blob_mb, max_prompt_mb, etcd, statics] {
            cfg->static_dir = cli_static_dir(*statics);
            if (!(*max_blob_mb > 0) || *max_blob_mb > 1 << 20)
                return cli_fail(k_exit_usage, "--max-blob-mb: must be in (0, 1048576]");
            cfg->max_blob_bytes = uint64_t(*max_blob_mb * 1024 * 1024);
            if (!(*max_prompt_mb > 0) || *max_prompt_mb > 1024)
                return cli_fail(k_exit_usage, "--max-prompt-mb: must be in (0, 1024]");
            cfg->prompt.max_prompt_bytes = uint64_t(*max_prompt_mb * 1024 * 1024);
            return run_route(*cfg, *prefill, *decode, *fallback, *transfer, *etcd);
        };
    });
}

}  // namespace baton
