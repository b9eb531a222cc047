// utf8_guard.cpp — see utf8_guard.h.
#include "utf8_guard.h"

#include <llama.h>

#include <cmath>

namespace baton {

bool utf8_advance(utf8_state & st, const std::string & bytes) {
    for (unsigned char b : bytes) {
        if (st.need > 0) {
            if (b < st.lo || b > st.hi) return false;
            --st.need;
            st.lo = 0x80, st.hi = 0xBF;
            continue;
        }
        if (b < 0x80) continue;
        if (b >= 0xC2 && b <= 0xDF) st = {1, 0x80, 0xBF};
        else if (b == 0xE0) st = {2, 0xA0, 0xBF};  // no overlong 3-byte forms
        else if (b == 0xED) st = {2, 0x80, 0x9F};  // no surrogates
        else if (b >= 0xE1 && b <= 0xEF) st = {2, 0x80, 0xBF};
        else if (b == 0xF0) st = {3, 0x90, 0xBF};  // no overlong 4-byte forms
        else if (b >= 0xF1 && b <= 0xF3) st = {3, 0x80, 0xBF};
        else if (b == 0xF4) st = {3, 0x80, 0x8F};  // nothing above U+10FFFF
        else return false;                         // 0x80..0xC1, 0xF5..0xFF
    }
    return true;
}

namespace {

struct guard_ctx {
    token_pieces pieces;
    utf8_state st;
};

guard_ctx & ctx_of(llama_sampler * s) { return *static_cast<guard_ctx *>(s->ctx); }

const char * guard_name(const llama_sampler *) { return "baton-utf8-guard"; }

void guard_accept(llama_sampler * s, llama_token token) {
    guard_ctx & c = ctx_of(s);
    if (token < 0 || size_t(token) >= c.pieces->size()) return;
    utf8_state next = c.st;
    if (utf8_advance(next, (*c.pieces)[size_t(token)])) c.st = next;
    else c.st = {};  // a token the guard did not allow (it was not in the chain): start over
}

void guard_apply(llama_sampler * s, llama_token_data_array * cur) {
    guard_ctx & c = ctx_of(s);
    for (size_t i = 0; i < cur->size; ++i) {
        const llama_token id = cur->data[i].id;
        if (id < 0 || size_t(id) >= c.pieces->size()) continue;
        const std::string & piece = (*c.pieces)[size_t(id)];
        utf8_state next = c.st;
        const bool ok = piece.empty() ? c.st.need == 0 : utf8_advance(next, piece);
        if (!ok) cur->data[i].logit = -INFINITY;
    }
}

void guard_reset(llama_sampler * s) { ctx_of(s).st = {}; }

llama_sampler * guard_clone(const llama_sampler * s);

void guard_free(llama_sampler * s) { delete static_cast<guard_ctx *>(s->ctx); }

llama_sampler_i k_guard_iface = [] {
    llama_sampler_i i{};
    i.name = guard_name;
    i.accept = guard_accept;
    i.apply = guard_apply;
    i.reset = guard_reset;
    i.clone = guard_clone;
    i.free = guard_free;
    return i;
}();

llama_sampler * guard_clone(const llama_sampler * s) {
    const auto & c = *static_cast<const guard_ctx *>(s->ctx);
    return llama_sampler_init(&k_guard_iface, new guard_ctx{c.pieces, c.st});
}

}  // namespace

llama_sampler * utf8_guard_make(token_pieces pieces) {
    return llama_sampler_init(&k_guard_iface, new guard_ctx{std::move(pieces), {}});
}

}  // namespace baton
