// pd_flow.cpp — on_generation, one client request's flow: parsed once at the edge (model, affinity, token
// count), then the PD route (the prefill hop, the decode relay of its blob) or the direct route (the
// client's body to a decode node). What follows each hop's end — done, an error answered as is, the
// fallback to local prefill or its refusal under --fallback fail — is pd_fallback_decide's decision
// (pd_fallback_policy.h); this file only executes it.
#include <algorithm>
#include <string>
#include <string_view>
#include <variant>

#include "baton/blob_pack.h"
#include "baton/pd/pd_protocol.h"
#include "pd_fallback_policy.h"
#include "request_affinity.h"
#include "router_impl.h"

namespace baton {

net::awaitable<void> router_impl::on_generation(http_exchange & ex, openai_endpoint ep) {
    route_ctx ctx;
    ctx.request_id = ex.request().id;
    ctx.t_arrival = steady::now();
    ctx.deadline = ctx.t_arrival + std::chrono::milliseconds(int64_t(cfg.timeout_s * 1000));
    ctx.trace.unix_ms = live_log::now_unix_ms();
    ctx.trace.path = ex.request().path;
    // However the request ends, its timeline goes to the live view.
    struct trace_on_exit {
        router_impl & r;
        route_ctx & c;
        http_exchange & e;
        ~trace_on_exit() { r.record_trace(c, e); }
    } trace_guard{*this, ctx, ex};
    ctx.path = ep == openai_endpoint::chat         ? "/v1/chat/completions"
               : ep == openai_endpoint::completion ? "/completion"
               : ep == openai_endpoint::infill     ? "/infill"
               : ep == openai_endpoint::messages   ? "/v1/messages"
                                                   : "/v1/completions";
    const std::string_view body = ex.request().body_text();
    // Parsed for routing (model, affinity, token count); the nodes apply their own limits (n: --n-max).
    openai_defaults route_defaults;
    route_defaults.n_max = 64;
    route_defaults.prompt = cfg.prompt;
    // Grammars: the router refuses only what no node may take (the flags' caps, still far inside libllama's
    // stack); each node enforces its own --grammar-max-*.
    route_defaults.sampling.grammar_bounds = grammar_limits_cap;
    // Several prompts in one request (docs/api.md "Several prompts") go whole to one node, which answers them
    // together (no PD: a prefill makes one state). Each is checked here; the first routes the request.
    auto several = openai_prompts_split(body, ep);
    if (!several.ok()) co_return (void) co_await ex.respond_error(several.status());
    // What the request's media need of a node: a projector that reads images, audio, or both (an image named by
    // an http(s) URL is not fetched yet: its bytes are empty).
    bool need_vision = false, need_audio = false;
    auto needs = [&](const std::vector<std::string> & files) {
        for (const auto & f : files) (media_looks_like_audio(f) ? need_audio : need_vision) = true;
    };
    for (size_t p = 1; p < several->size(); ++p) {
        auto other = openai_parse((*several)[p], ep, route_defaults);
        if (!other.ok())
            co_return (void) co_await ex.respond_error(
                Status(other.status().code(), "prompt[" + std::to_string(p) + "]: " + other.status().message()));
        if (const auto * pm = std::get_if<openai_prompt_media>(&other->input)) needs(pm->images);
    }
    auto parsed = openai_parse(several->empty() ? body : std::string_view((*several)[0]), ep, route_defaults);
    if (!parsed.ok()) co_return (void) co_await ex.respond_error(parsed.status());
    ctx.req = std::move(parsed.value());
    ctx.affinity = request_affinity_key(ctx.req);
    auto filter = model_filter(ctx.req.model);
    if (!filter.ok()) co_return (void) co_await ex.respond_error(filter.status());
    ctx.filter = filter.value();

    // Counting tokens may run the tokenizer and chat template: on the bridge pool, not the event loop.
    // With -m the prompt's tokens are hashed against the nodes' KV events (kv_view): the decode node that
    // holds the most of the prompt is preferred, then any node when the shared tier holds more of it (every
    // node of the chain key can fetch that), and PD is taken only when the tokens the best of those is missing
    // are at least --pd-min-tokens (a follow-up turn whose new tokens are few is prefilled where its
    // conversation already is, or on a decode node that fetches the conversation from the tier).
    uint32_t n_tokens = 0;
    const bool have_prefill = prefill.n_members() > 0;
    n_tokens = co_await http->offload([&] { return count_tokens(ctx.req, &ctx.tokens); });
    ctx.cached_decode = kv_cached(decode, ctx);
    ctx.tier_decode = kv_tier(decode, ctx);
    uint32_t held = 0, tier = 0;
    for (uint32_t c : ctx.cached_decode) held = std::max(held, c);
    for (uint32_t c : ctx.tier_decode) tier = std::max(tier, c);
    held = std::min(held, n_tokens);
    tier = std::min(tier, n_tokens);
    const uint32_t reusable = std::max(held, tier);
    // With the tokens known, decode affinity keys on the prompt up to the first block no node (nor the tier)
    // holds: among nodes that hold the same of it (ties go to the least loaded, then this key), tenants sharing
    // only a preamble spread, and one conversation's requests meet before the index knows where it is.
    if (!ctx.tokens.empty()) ctx.affinity = frontier_affinity_key(ctx.tokens, reusable, pd_kv_block_tokens);
    // The index counts whole blocks: a node holding a conversation (its last turn's prompt and answer) holds
    // up to a block more than it can show, so it is credited with pd_kv_block_tokens - 1 more tokens (a tier
    // entry holds exactly its blocks). (--pd-min-tokens 0 takes PD always.)
    const uint32_t unseen = held > 0 && held >= tier && cfg.pd_min_tokens > 0 ? pd_kv_block_tokens - 1 : 0;
    // A chat with images goes to a prefill node whenever there is one: the projector is a prefill node's (a
    // decode node needs none to continue an image prompt, docs/router.md "Images").
    if (const auto * chat_in = std::get_if<openai_chat>(&ctx.req.input)) needs(chat_in->images);
    if (const auto * pm = std::get_if<openai_prompt_media>(&ctx.req.input)) needs(pm->images);
    const bool images = need_vision || need_audio;
    const bool pd = have_prefill && several->empty() && (images || n_tokens - reusable >= cfg.pd_min_tokens + unseen);
    if (pd) {
        ctx.cached_prefill = kv_cached(prefill, ctx);
        ctx.tier_prefill = kv_tier(prefill, ctx);
    }
    metrics.mode(pd ? "pd" : "direct");
    metrics.kv_route(!ctx.tokens.empty(), held, tier, have_prefill && !pd && n_tokens >= cfg.pd_min_tokens);
    if (pd && cfg.pd_delta && held > 0) {
        // A delta: the decode node the decode hop will choose (the most cached within the load cap) holds the
        // prompt's first `base` tokens, so the prefill node ships only the cells past them. The decode hop then
        // prefers that node alone; another node (the load changed meanwhile) refuses the delta (422) and the
        // request falls back to a local prefill there (--fallback).
        if (auto target = decode.pick_affine(ctx.affinity, {}, ctx.filter,
                                             kv_route_scores(ctx.cached_decode, ctx.tokens.size(), ctx.tier_decode))) {
            const size_t t = target->index;
            ctx.delta_base = t < ctx.cached_decode.size() ? ctx.cached_decode[t] : 0;
            for (size_t i = 0; i < ctx.cached_decode.size(); ++i)
                if (i != t) ctx.cached_decode[i] = 0;
        }
    }
    ctx.trace.prompt_tokens = n_tokens;
    ctx.step("route", "", ctx.t_arrival, steady::now());
    if (images) {
        // Only a node with a projector can compute the prompt: a prefill node (PD) or the node answering
        // directly (registered nodes say whether they have one, "vision"; static nodes are taken on trust).
        node_filter with_projector = ctx.filter;
        with_projector.vision = need_vision;
        with_projector.audio = need_audio;
        if (!(pd ? prefill : decode).has_candidates({}, with_projector))
            co_return (void) co_await ex.respond_error(Status(
                status_code::unavailable,
                std::string(need_audio ? "audio" : "images") + ": no available " + (pd ? "prefill " : "") +
                    "node has a projector (--mmproj)" +
                    (need_audio ? " that reads " + std::string(need_vision ? "images and audio" : "audio") : "")));
        ctx.filter.vision = need_vision;  // (through PD, the prefill hop's only: the decode hop needs none)
        ctx.filter.audio = need_audio;
    }
    if (pd) {
        ctx.route = "pd";
        if (ctx.delta_base > 0) metrics.delta(ctx.delta_base);
        pd_fallback_decision next;
        auto blob = co_await prefill_hop(ex, ctx);
        // The decode hop takes any decode node (the state carries the images' cells); a local prefill after a
        // failed prefill hop (--fallback) needs a node with a projector again.
        ctx.filter.vision = need_vision && !blob.ok();
        ctx.filter.audio = need_audio && !blob.ok();
        if (blob.ok()) {
            // The decode hop starts while the blob is still arriving: the two transfers overlap. The blob goes
            // only to a node of the prefill node's group (one that can restore it).
            const node_filter model_only = ctx.filter;
            ctx.filter.group = prefill.group(blob->node);
            relay_result r;
            if (blob->held) {
                // Direct transfer: the decode node fetches the state from the prefill node (it stays there,
                // leased, until released below, so a decode node that fails before its answer leaves it for
                // the next one).
                const held_state & s = *blob->held;
                const http_headers where = {{std::string(pd_header_state_source), s.origin.text},
                                            {std::string(pd_header_state_id), s.id}};
                r = co_await relay(ex, ctx, std::string(pd_path_decode), "", "application/octet-stream", nullptr,
                                   where);
                ctx.filter = model_only;
                // (The decode node fetched the state inside its step: the step carries its bytes.)
                if (!ctx.trace.steps.empty() && ctx.trace.steps.back().name == "decode")
                    ctx.trace.steps.back().bytes = s.bytes;
                if (r.outcome == relay_outcome::done) metrics.direct_state(s.bytes);
                release_held(s, ctx.request_id);
            } else {
                http_headers coding;
                if (blob->packed) coding.emplace_back("Content-Encoding", std::string(blob_pack_coding));
                r = co_await relay(ex, ctx, std::string(pd_path_decode), "", "application/octet-stream", blob->blob,
                                   coding);
                ctx.filter = model_only;
                co_await prefill_done(ctx, blob.value());
            }
            next = pd_fallback_decide(pd_decode_ended{r.outcome, r.error, ex.begun()}, cfg.fallback);
        } else {
            next = pd_fallback_decide(pd_prefill_failed{blob.status(), ctx.router_full}, cfg.fallback);
        }
        if (std::holds_alternative<pd_finish>(next)) co_return;
        if (const auto * answer = std::get_if<pd_answer_client>(&next))
            co_return (void) co_await ex.respond_error(answer->error);
        if (const auto * refused = std::get_if<pd_fallback_refused>(&next)) {
            metrics.fallback(pd_fallback_reason_name(refused->reason));
            co_return (void) co_await ex.respond_error(refused->error);
        }
        const pd_fallback_reason reason = std::get<pd_fall_back>(next).reason;
        metrics.fallback(pd_fallback_reason_name(reason));
        ctx.route = std::string("fallback:") + pd_fallback_reason_name(reason);
    }
    relay_result r = co_await relay(ex, ctx, ctx.path, body, "application/json", nullptr);
    const pd_fallback_decision last = pd_fallback_decide(pd_direct_ended{r.outcome, r.error, ex.begun()}, cfg.fallback);
    if (const auto * answer = std::get_if<pd_answer_client>(&last)) co_await ex.respond_error(answer->error);
}

}  // namespace baton
