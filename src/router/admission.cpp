// admission.cpp — a request's way to a node: how many tokens its prompt has (which decides PD or direct),
// and acquire_node, which gives it a node with room or keeps it waiting in the router's bounded FIFO queue
// (capacity_gate) until one frees up, its deadline passes or its client goes away.
#include <string>
#include <variant>

#include "router_impl.h"

namespace baton {

uint32_t router_impl::count_tokens(const openai_request & r, std::vector<token_id> * tokens) const {
    if (vocab && chat) {
        auto rendered = chat->render_request(r, *vocab);
        if (rendered.ok()) {
            auto g = openai_to_gen(rendered.value(), *vocab);
            if (g.ok()) {
                if (tokens) *tokens = g->prompt;
                return uint32_t(g->prompt.size());
            }
        }
    }
    if (const auto * ids = std::get_if<openai_prompt_tokens>(&r.input)) return uint32_t(ids->tokens.size());
    // Without a vocabulary: about 4 bytes per token (documented; pass -m for exact counts).
    size_t bytes = 0;
    if (const auto * text = std::get_if<openai_prompt_text>(&r.input)) bytes = text->text.size();
    if (const auto * chat = std::get_if<openai_chat>(&r.input))
        for (const auto & m : chat->messages) bytes += m.content.size() + m.role.size() + 8;
    if (const auto * pm = std::get_if<openai_prompt_media>(&r.input)) bytes = pm->text.size();
    if (const auto * m = std::get_if<openai_prompt_mixed>(&r.input))
        for (const auto & part : m->parts)
            bytes += std::holds_alternative<token_id>(part) ? 4 : std::get<std::string>(part).size();
    if (const auto * in = std::get_if<openai_infill>(&r.input)) {  // (its layout is a node's to build)
        bytes += in->prefix.size() + in->suffix.size() + in->prompt.size();
        for (const auto & c : in->extra) bytes += c.filename.size() + c.text.size() + 4;
    }
    return uint32_t(bytes / 4);
}

namespace {
// per_node: what `ask` (kv_view's answer for urls) says of each usable node of pool, by node index.
template <class Ask>
std::vector<uint32_t> per_node(node_pool & pool, const route_ctx & ctx, Ask ask) {
    if (ctx.tokens.empty()) return {};
    const auto candidates = pool.usable_urls(ctx.filter);
    std::vector<std::string> urls;
    for (const auto & c : candidates) urls.push_back(c.second);
    const std::vector<uint32_t> held = ask(urls);
    std::vector<uint32_t> out(pool.size(), 0);
    for (size_t k = 0; k < candidates.size(); ++k)
        if (candidates[k].first < out.size()) out[candidates[k].first] = held[k];
    return out;
}
}  // namespace

std::vector<uint32_t> router_impl::kv_cached(node_pool & pool, const route_ctx & ctx) {
    return per_node(pool, ctx,
                    [&](const std::vector<std::string> & urls) { return kv.cached_tokens(ctx.tokens, urls); });
}

std::vector<uint32_t> router_impl::kv_tier(node_pool & pool, const route_ctx & ctx) {
    return per_node(pool, ctx, [&](const std::vector<std::string> & urls) { return kv.tier_tokens(ctx.tokens, urls); });
}

net::awaitable<std::optional<node_hold>> router_impl::acquire_node(http_exchange & ex, node_pool & pool,
                                                                   capacity_gate & gate, route_ctx & ctx,
                                                                   const std::vector<size_t> & tried, bool affine,
                                                                   Status & why) {
    bool & router_full = ctx.router_full;
    auto pick = [&]() -> std::optional<node_hold> {
        const bool p = &pool == &prefill;
        const std::vector<uint32_t> cached = kv_route_scores(p ? ctx.cached_prefill : ctx.cached_decode,
                                                             ctx.tokens.size(), p ? ctx.tier_prefill : ctx.tier_decode);
        auto n = affine ? pool.acquire_affine(ctx.affinity, tried, ctx.filter, cached)
                        : pool.acquire_least_loaded(tried, ctx.filter, cached);
        if (!n) return std::nullopt;
        return node_hold(&pool, &gate, n->index);
    };
    if (auto n = pick()) co_return n;
    notify_ptr w;
    for (;;) {
        if (!pool.has_candidates(tried, ctx.filter)) {
            why = Status(status_code::unavailable,
                         std::string("no healthy ") + (&pool == &prefill ? "prefill" : "decode") + " node" +
                             (ctx.filter.model.empty() ? "" : " for model " + ctx.filter.model) +
                             (ctx.filter.group.empty() ? "" : " that can restore the blob"));
            break;
        }
        if (!w) {
            w = gate.enter(ex.executor());
            if (!w) {
                why = Status(status_code::unavailable,
                             "the router's queue is full (--queue-max " + std::to_string(cfg.queue_max) + ")");
                router_full = true;
                co_return std::nullopt;
            }
            if (auto n = pick()) {  // room freed up while entering the queue
                gate.leave(w, true);
                co_return n;
            }
        }
        const bool woken = co_await ex.wait(*w, ctx.deadline);
        if (ex.client_gone()) {
            why = Status(status_code::cancelled, "the client went away while waiting for a node");
            break;
        }
        if (auto n = pick()) {
            gate.leave(w, false);
            co_return n;
        }
        if (!woken && steady::now() >= ctx.deadline) {
            why = Status(status_code::deadline_exceeded, "request deadline passed while waiting for a node with room");
            break;
        }
        if (woken) gate.requeue(w);  // someone else took the room: keep this place in line
    }
    if (w) gate.leave(w, true);
    co_return std::nullopt;
}

}  // namespace baton
