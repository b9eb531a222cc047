// pd_flow.cpp — on_generation, one client request's flow: parsed once at the edge (model, affinity, token
// count), then the PD route (the prefill hop, the decode relay of its blob) or the direct route (the
// client's body to a decode node), and the fallback when the PD route fails.
#include <string>
#include <string_view>

#include "baton/pd/pd_protocol.h"
#include "request_affinity.h"
#include "router_impl.h"

namespace baton {

net::awaitable<void> router_impl::on_generation(http_exchange & ex, openai_endpoint ep) {
    route_ctx ctx;
    ctx.t_arrival = steady::now();
    ctx.deadline = ctx.t_arrival + std::chrono::milliseconds(int64_t(cfg.timeout_s * 1000));
    ctx.path = ep == openai_endpoint::chat         ? "/v1/chat/completions"
               : ep == openai_endpoint::completion ? "/completion"
                                                   : "/v1/completions";
    const std::string_view body = ex.request().body_text();
    // Parsed for routing (model, affinity, token count); the nodes apply their own limits (n: --n-max).
    openai_defaults route_defaults;
    route_defaults.n_max = 64;
    route_defaults.prompt = cfg.prompt;
    // Grammars: the router refuses only what no node may take (the flags' caps, still far inside libllama's
    // stack); each node enforces its own --grammar-max-*.
    route_defaults.sampling.grammar_bounds = grammar_limits_cap;
    auto parsed = openai_parse(body, ep, false, route_defaults);
    if (!parsed.ok()) co_return (void) co_await ex.respond_error(parsed.status());
    ctx.req = std::move(parsed.value());
    ctx.affinity = request_affinity_key(ctx.req);
    auto filter = model_filter(ctx.req.model);
    if (!filter.ok()) co_return (void) co_await ex.respond_error(filter.status());
    ctx.filter = filter.value();

    // Counting tokens may run the tokenizer and chat template: on the bridge pool, not the event loop.
    uint32_t n_tokens = 0;
    const bool have_prefill = prefill.n_members() > 0;
    if (have_prefill) n_tokens = co_await http->offload([&] { return count_tokens(ctx.req); });
    const bool pd = have_prefill && n_tokens >= cfg.pd_min_tokens;
    metrics.mode(pd ? "pd" : "direct");
    std::string reason;
    if (pd) {
        ctx.route = "pd";
        auto blob = co_await prefill_hop(ex, ctx);
        if (blob.ok()) {
            // The decode hop starts while the blob is still arriving: the two transfers overlap. The blob goes
            // only to a node of the prefill node's group (one that can restore it).
            const node_filter model_only = ctx.filter;
            ctx.filter.group = prefill.group(blob->node);
            relay_result r =
                co_await relay(ex, ctx, std::string(pd_path_decode), "", "application/octet-stream", blob->blob);
            ctx.filter = model_only;
            co_await prefill_done(ctx, blob.value());
            if (r.outcome == relay_outcome::done) co_return;
            if (r.outcome == relay_outcome::failed) co_return (void) co_await ex.respond_error(r.error);
            reason = r.outcome == relay_outcome::blob_failed ? "prefill_failed" : "blob_rejected";
            if (r.outcome == relay_outcome::blob_failed) blob = r.error;
        } else {
            reason = "prefill_failed";
            // The client's fault, the client gone, the deadline passed, or the router full: answered as is.
            // Only a failed or missing prefill node falls back.
            const status_code c = blob.status().code();
            if (c == status_code::invalid_argument || c == status_code::cancelled ||
                c == status_code::deadline_exceeded || ctx.router_full)
                co_return (void) co_await ex.respond_error(blob.status());
        }
        metrics.fallback(reason);
        if (cfg.fallback == fallback_policy::fail)
            co_return (void) co_await ex.respond_error(
                Status(status_code::upstream_error,
                       reason == "prefill_failed" ? "prefill failed and --fallback is fail: " + blob.status().message()
                                                  : "the decode node rejected the blob and --fallback is fail"));
        ctx.route = "fallback:" + reason;
    }
    relay_result r = co_await relay(ex, ctx, ctx.path, body, "application/json", nullptr);
    if (r.outcome != relay_outcome::done && !ex.begun())
        co_await ex.respond_error(r.outcome == relay_outcome::failed
                                      ? r.error
                                      : Status(status_code::upstream_error, "the decode node rejected the request"));
}

}  // namespace baton
