// text_specials.cpp — the one-pass special-token split (see text_specials.h for why it equals libllama's).
#include "text_specials.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <functional>
#include <map>
#include <queue>

namespace baton {

namespace {

// libllama tests isspace(char) on the bytes next to a stripping token; glibc answers the same for a byte
// read as signed or unsigned (its table mirrors 128..255 at -128..-1), so this is that test.
bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

}  // namespace

special_matcher special_matcher::build(const std::vector<special_text> & ranked) {
    special_matcher m;
    std::vector<std::map<uint8_t, int32_t>> kids(1);
    std::vector<node> nodes(1);
    for (const special_text & t : ranked) {
        if (t.text.empty() || t.text.size() > UINT32_MAX) continue;
        int32_t s = 0;
        for (size_t i = t.text.size(); i-- > 0;) {  // reversed: the automaton runs from the text's end
            const uint8_t c = uint8_t(t.text[i]);
            auto it = kids[size_t(s)].find(c);
            if (it != kids[size_t(s)].end()) {
                s = it->second;
                continue;
            }
            const int32_t n = int32_t(nodes.size());
            nodes.emplace_back();
            kids.emplace_back();
            kids[size_t(s)][c] = n;
            s = n;
        }
        if (nodes[size_t(s)].pattern >= 0) continue;  // the same text again: the better rank keeps it
        nodes[size_t(s)].pattern = int32_t(m.patterns_.size());
        m.patterns_.push_back({t.token, uint32_t(t.text.size()), t.lstrip, t.rstrip});
    }
    // Failure links breadth first, so a node's fail target (shallower) is done before the node.
    std::vector<int32_t> order;
    order.reserve(nodes.size());
    for (const auto & [c, child] : kids[0]) order.push_back(child);
    for (size_t q = 0; q < order.size(); ++q) {
        const int32_t u = order[q];
        node & nu = nodes[size_t(u)];
        const int32_t fu = nu.fail;
        nu.shorter = nodes[size_t(fu)].pattern >= 0 ? fu : nodes[size_t(fu)].shorter;
        for (const auto & [c, v] : kids[size_t(u)]) {
            int32_t f = fu;
            for (;;) {
                auto it = kids[size_t(f)].find(c);
                if (it != kids[size_t(f)].end() && it->second != v) {
                    nodes[size_t(v)].fail = it->second;
                    break;
                }
                if (f == 0) {
                    nodes[size_t(v)].fail = 0;
                    break;
                }
                f = nodes[size_t(f)].fail;
            }
            order.push_back(v);
        }
    }
    for (size_t i = 0; i < nodes.size(); ++i) {
        nodes[i].edge_begin = uint32_t(m.edges_.size());
        nodes[i].edge_count = uint32_t(kids[i].size());
        for (const auto & [c, to] : kids[i]) m.edges_.push_back({c, to});
    }
    m.nodes_ = std::move(nodes);
    return m;
}

int32_t special_matcher::step(int32_t state, uint8_t c) const {
    for (;;) {
        const node & n = nodes_[size_t(state)];
        const edge * b = edges_.data() + n.edge_begin;
        const edge * e = b + n.edge_count;
        const edge * it = std::lower_bound(b, e, c, [](const edge & x, uint8_t v) { return x.byte < v; });
        if (it != e && it->byte == c) return it->to;
        if (state == 0) return 0;
        state = n.fail;
    }
}

std::vector<special_piece> special_matcher::partition(std::string_view text) const {
    const size_t n = text.size();
    std::vector<special_piece> pieces;
    if (n == 0) return pieces;
    // offer[i]: the node of the longest special text starting at i that may still be taken (-1: none).
    std::vector<int32_t> offer(n, -1);
    std::vector<uint64_t> heap;  // (rank << 32) | position: libllama's order, rank first
    int32_t s = 0;
    for (size_t i = n; i-- > 0;) {
        s = step(s, uint8_t(text[i]));
        const int32_t best = nodes_[size_t(s)].pattern >= 0 ? s : nodes_[size_t(s)].shorter;
        if (best < 0) continue;
        offer[i] = best;
        heap.push_back(uint64_t(uint32_t(nodes_[size_t(best)].pattern)) << 32 | uint64_t(i));
    }
    if (heap.empty()) {
        pieces.push_back({0, uint32_t(n), -1});
        return pieces;
    }
    std::priority_queue<uint64_t, std::vector<uint64_t>, std::greater<uint64_t>> queue(std::greater<uint64_t>(),
                                                                                       std::move(heap));
    enum : uint8_t { uncut = 0, in_token = 1, swallowed = 2 };
    std::vector<uint8_t> cut(n, uncut);
    std::vector<special_piece> tokens;
    while (!queue.empty()) {
        const size_t pos = size_t(uint32_t(queue.top()));
        queue.pop();
        if (cut[pos] != uncut) continue;  // inside a token already taken: nothing can start here any more
        int32_t nd = offer[pos];
        const pattern & p = patterns_[size_t(nodes_[size_t(nd)].pattern)];
        const size_t end = pos + p.length;
        size_t room = 0;
        while (pos + room < end && cut[pos + room] == uncut) ++room;
        if (pos + room < end) {
            // A cut inside: the longest shorter text here that ends before it (cuts only grow, so a text
            // that does not fit now never will).
            nd = nodes_[size_t(nd)].shorter;
            while (nd >= 0 && patterns_[size_t(nodes_[size_t(nd)].pattern)].length > room)
                nd = nodes_[size_t(nd)].shorter;
            if (nd >= 0) {
                offer[pos] = nd;
                queue.push(uint64_t(uint32_t(nodes_[size_t(nd)].pattern)) << 32 | uint64_t(pos));
            }
            continue;
        }
        std::memset(cut.data() + pos, in_token, p.length);
        tokens.push_back({uint32_t(pos), p.length, p.token});
        if (p.lstrip)
            for (size_t j = pos; j > 0 && cut[j - 1] == uncut && is_space(text[j - 1]); --j) cut[j - 1] = swallowed;
        if (p.rstrip)
            for (size_t j = end; j < n && cut[j] == uncut && is_space(text[j]); ++j) cut[j] = swallowed;
    }
    std::sort(tokens.begin(), tokens.end(),
              [](const special_piece & a, const special_piece & b) { return a.offset < b.offset; });
    size_t t = 0;
    for (size_t i = 0; i < n;) {
        if (t < tokens.size() && tokens[t].offset == i) {
            pieces.push_back(tokens[t]);
            i += tokens[t++].length;
        } else if (cut[i] == swallowed) {
            ++i;
        } else {
            size_t j = i;
            while (j < n && cut[j] == uncut) ++j;
            pieces.push_back({uint32_t(i), uint32_t(j - i), -1});
            i = j;
        }
    }
    return pieces;
}

}  // namespace baton
