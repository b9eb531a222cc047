// grammar_check.cpp — see grammar_check.h.
//
// gbnf_scan mirrors libllama 0.7's llama_grammar_parser (src/llama-grammar.cpp: parse_space, parse_name,
// parse_char, parse_token, parse_sequence, parse_alternates, parse_rule, parse) step by step, so the rule
// table it builds — ids, alternatives, the synthetic rules of groups and repetitions — is the one libllama
// would build, but with an explicit stack of open groups instead of recursion, and every count checked
// before the work it counts is done. A rule is kept as items: a terminal item stands for a string's
// characters or a class's ranges (n elements; only its place matters), a reference item for one rule
// reference, and separator items between alternatives. gbnf_shape then analyses the table iteratively:
// which rules can match nothing, the graph of "starts with" edges, its cycles, longest chain and fan-out,
// and the work of libllama's left-recursion check.
#include "baton/grammar_check.h"

#include <algorithm>
#include <array>
#include <bitset>
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace baton {

namespace {

constexpr uint32_t k_terminal = UINT32_MAX;  // item.ref of a terminal
constexpr uint32_t k_alt = UINT32_MAX - 1;   // item.ref of a separator between alternatives

struct item {
    uint32_t ref = k_terminal;  // a rule id, k_terminal or k_alt
    uint32_t n = 1;             // elements it stands for
    uint32_t cls = 0;           // a terminal: the characters c it can match a string of c only of, an index
                                // into gbnf_scan's classes (0: any)
};

// A set of characters: code points below 256 by value, the others folded onto 128..255 (a superset: two
// sets that may share a character always share a bucket).
using char_set = std::bitset<256>;
size_t char_bucket(uint32_t cp) { return cp < 256 ? cp : 128 + (cp & 127); }

enum class rule_kind : uint8_t { named, group, repetition };

struct rule_info {
    bool defined = false;
    rule_kind kind = rule_kind::named;
    std::vector<item> body;  // alternatives separated by k_alt items
    size_t at = 0;           // byte of the definition, the '(' or the repetition operator
    size_t first_use = 0;    // byte of the first reference (for undefined rules)
    std::string name;        // named: its name; synthetic: the named rule it is part of
};

struct sv_hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

bool is_word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || (c >= '0' && c <= '9');
}
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

std::string shown(std::string_view name) { return std::string(name.substr(0, 64)) + (name.size() > 64 ? "..." : ""); }

uint64_t sat_add(uint64_t a, uint64_t b, uint64_t cap) { return a >= cap || b >= cap - a ? cap : a + b; }

// One open rule or group: libllama's parse_alternates/parse_sequence locals.
struct frame {
    uint32_t rule_id = 0;
    bool nested = false;  // a group: newlines are spaces, ')' closes it
    std::vector<item> body;
    size_t last_sym_start = 0;  // first item of the last symbol (what a repetition repeats)
    uint64_t n_prev_rules = 1;  // libllama's repetition accounting
    size_t n_rules_before = 0;  // a group: symbols before it opened
};

class gbnf_scan {
  public:
    gbnf_scan(std::string_view s, const grammar_limits & l) : s_(s), lim_(l) {}

    Status run() {
        if (size_t nul = s_.find('\0'); nul != std::string_view::npos)
            return fail_status("a NUL byte at byte " + std::to_string(nul) +
                               " (libllama would read only the text before it)");
        size_t pos = space(0, true);
        while (pos < s_.size())
            if (!rule(pos)) return err_;
        for (uint32_t id = 0; id < rules_.size(); ++id)
            if (!rules_[id].defined)
                return fail_status("rule '" + shown(rules_[id].name) + "' is used at byte " +
                                   std::to_string(rules_[id].first_use) + " but never defined");
        if (rules_.empty() || symbols_.find(std::string_view("root")) == symbols_.end())
            return fail_status("no rule named 'root'");
        return {};
    }

    std::vector<rule_info> & rules() { return rules_; }
    const std::vector<char_set> & classes() const { return classes_; }

  private:
    std::string_view s_;
    const grammar_limits & lim_;
    std::unordered_map<std::string, uint32_t, sv_hash, std::equal_to<>> symbols_;  // libllama's symbol_ids
    std::vector<rule_info> rules_;                                                 // by id
    std::vector<frame> frames_;
    uint64_t elements_ = 0;  // every element built so far (overwritten rules included: an upper bound)
    std::vector<char_set> classes_{char_set().set()};  // terminals' item::cls sets; [0]: any
    std::unordered_map<char_set, uint32_t> class_ids_{{char_set().set(), 0}};
    Status err_;

    char at(size_t p) const { return p < s_.size() ? s_[p] : '\0'; }

    Status fail_status(const std::string & m) { return err_ = Status(status_code::invalid_argument, "grammar: " + m); }
    bool fail(const std::string & m) {
        err_ = Status(status_code::invalid_argument, "grammar: " + m);
        return false;
    }
    bool fail_at(const std::string & what, size_t p) { return fail(what + " at byte " + std::to_string(p)); }

    // space: libllama's parse_space (comments run to the end of the line; newlines only when newline_ok).
    size_t space(size_t p, bool newline_ok) const {
        while (p < s_.size()) {
            const char c = s_[p];
            if (c == '#') {
                while (p < s_.size() && s_[p] != '\r' && s_[p] != '\n') ++p;
            } else if (c == ' ' || c == '\t' || (newline_ok && (c == '\r' || c == '\n'))) {
                ++p;
            } else {
                break;
            }
        }
        return p;
    }

    size_t name_end(size_t p) const {
        while (p < s_.size() && is_word_char(s_[p])) ++p;
        return p;
    }

    // character: libllama's parse_char: the byte after one (possibly escaped) character, or 0 on error.
    size_t character(size_t p) {
        if (p >= s_.size()) {
            fail_at("unexpected end of input", p);
            return 0;
        }
        if (s_[p] == '\\') {
            size_t hex = 0;
            switch (at(p + 1)) {
                case 'x': hex = 2; break;
                case 'u': hex = 4; break;
                case 'U': hex = 8; break;
                case 't':
                case 'r':
                case 'n':
                case '\\':
                case '"':
                case '[':
                case ']':
                case '-': return p + 2;
                default: fail_at("unknown escape", p); return 0;
            }
            for (size_t i = 0; i < hex; ++i)
                if (!is_hex(at(p + 2 + i))) {
                    fail_at("expecting " + std::to_string(hex) + " hex digits", p);
                    return 0;
                }
            return p + 2 + hex;
        }
        // decode_utf8: the lead byte's length, stopping at the end.
        static constexpr uint8_t len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
        return std::min(s_.size(), p + len[uint8_t(s_[p]) >> 4]);
    }

    // code_at: the code point of the (possibly escaped) character at p, which character(p) accepts or
    // refuses itself (anything here for a malformed one).
    uint32_t code_at(size_t p) const {
        if (at(p) == '\\') {
            const char e = at(p + 1);
            const size_t hex = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
            if (hex == 0) return e == 't' ? '\t' : e == 'r' ? '\r' : e == 'n' ? '\n' : uint8_t(e);
            uint32_t v = 0;
            for (size_t i = 0; i < hex; ++i) {
                const char h = at(p + 2 + i);
                v = v * 16 + uint32_t(is_digit(h) ? h - '0' : (h | 0x20) - 'a' + 10);
            }
            return v;
        }
        const uint8_t lead = uint8_t(at(p));
        static constexpr uint8_t len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
        const size_t l = len[lead >> 4];
        uint32_t v = l == 1 ? lead : lead & (0xFFu >> (l + 1));
        for (size_t i = 1; i < l; ++i) v = (v << 6) | (uint8_t(at(p + i)) & 0x3Fu);
        return v;
    }

    uint32_t class_of(const char_set & s) {
        const auto [it, added] = class_ids_.try_emplace(s, uint32_t(classes_.size()));
        if (added) classes_.push_back(s);
        return it->second;
    }

    bool count_elements(uint64_t n, size_t p) {
        if (n > lim_.elements_max || elements_ > lim_.elements_max - n)
            return fail_at("more than " + std::to_string(lim_.elements_max) +
                               " elements after expanding repetitions (--grammar-max-elements)",
                           p);
        elements_ += n;
        return true;
    }

    bool new_symbol_fits(size_t p) {
        if (symbols_.size() >= lim_.rules_max)
            return fail_at("more than " + std::to_string(lim_.rules_max) +
                               " rules, counting groups and repetitions (--grammar-max-rules)",
                           p);
        return true;
    }

    // symbol: libllama's get_symbol_id (an existing name keeps its id).
    bool symbol(std::string_view name, size_t p, uint32_t & id) {
        if (auto it = symbols_.find(name); it != symbols_.end()) {
            id = it->second;
            return true;
        }
        if (!new_symbol_fits(p)) return false;
        id = uint32_t(symbols_.size());
        symbols_.emplace(std::string(name), id);
        if (rules_.size() <= id) rules_.resize(size_t(id) + 1);
        rules_[id].name = std::string(name);
        rules_[id].first_use = p;
        return true;
    }

    // generated: libllama's generate_symbol_id (base_N, N the symbol count; it may reuse a name, as there).
    // base by value: callers pass a rule's own name, which rules_.resize below may move (regression: TSan
    // saw the name read after the vector's reallocation freed it).
    bool generated(std::string base, rule_kind kind, size_t p, uint32_t & id) {
        if (!new_symbol_fits(p)) return false;
        id = uint32_t(symbols_.size());
        symbols_.insert_or_assign(base + '_' + std::to_string(id), id);
        if (rules_.size() <= id) rules_.resize(size_t(id) + 1);
        rules_[id] = rule_info{};
        rules_[id].kind = kind;
        rules_[id].at = p;
        rules_[id].first_use = p;
        rules_[id].name = std::move(base);
        return true;
    }

    void define(uint32_t id, std::vector<item> body) {
        rules_[id].defined = true;
        rules_[id].body = std::move(body);
    }

    const std::string & base_name() const { return rules_[frames_.front().rule_id].name; }

    // rule: libllama's parse_rule, with parse_alternates/parse_sequence unrolled over frames_.
    bool rule(size_t & pos) {
        const size_t start = pos, end = name_end(pos);
        if (end == start) return fail_at("expecting a rule name", pos);
        uint32_t id = 0;
        if (!symbol(s_.substr(start, end - start), start, id)) return false;
        rules_[id].at = start;
        pos = space(end, false);
        if (s_.substr(pos, 3) != "::=") return fail_at("expecting ::=", pos);
        pos = space(pos + 3, true);
        frames_.clear();
        frames_.push_back(frame{id, false, {}, 0, 1, 0});
        if (!alternates(pos)) return false;
        if (at(pos) == '\r') pos += at(pos + 1) == '\n' ? 2 : 1;
        else if (at(pos) == '\n') ++pos;
        else if (pos < s_.size()) return fail_at("expecting a newline or the end", pos);
        pos = space(pos, true);
        return true;
    }

    // alternates runs until the rule frame that is open on entry is complete.
    bool alternates(size_t & pos) {
        for (;;) {
            frame & f = frames_.back();
            bool consumed = false;
            if (!sequence_item(pos, consumed)) return false;
            if (consumed) continue;
            if (at(pos) == '|') {
                if (!count_elements(1, pos)) return false;
                f.body.push_back({k_alt, 1});
                f.last_sym_start = f.body.size();
                f.n_prev_rules = 1;
                pos = space(pos + 1, true);
                continue;
            }
            if (!count_elements(1, pos)) return false;  // END
            const uint32_t id = f.rule_id;
            const bool nested = f.nested;
            const size_t n_before = f.n_rules_before;
            define(id, std::move(f.body));
            frames_.pop_back();
            if (!nested) return true;
            if (at(pos) != ')') return fail_at("expecting ')'", pos);
            frame & parent = frames_.back();
            parent.n_prev_rules = std::max<uint64_t>(1, symbols_.size() - n_before);
            parent.last_sym_start = parent.body.size();
            if (!count_elements(1, pos)) return false;
            parent.body.push_back({id, 1});
            pos = space(pos + 1, parent.nested);
        }
    }

    void symbol_done(frame & f, item it) {
        f.last_sym_start = f.body.size();
        f.n_prev_rules = 1;
        if (it.n > 0) f.body.push_back(it);
    }

    // sequence_item: one step of libllama's parse_sequence loop; consumed false where it would break.
    bool sequence_item(size_t & pos, bool & consumed) {
        frame & f = frames_.back();
        consumed = true;
        const char c = at(pos);
        const size_t here = pos;
        if (pos >= s_.size()) {
            consumed = false;
        } else if (c == '"') {
            uint32_t n = 0;
            size_t bucket = 0;
            bool one_bucket = true;  // every character in one bucket: the literal matches a string of it only
            for (++pos; at(pos) != '"';) {
                if (pos >= s_.size()) return fail_at("unexpected end of input in the string", here);
                const size_t cb = char_bucket(code_at(pos));
                if (n == 0) bucket = cb;
                one_bucket = one_bucket && cb == bucket;
                if (!(pos = character(pos))) return false;
                ++n;
            }
            if (!count_elements(n, here)) return false;
            char_set only;
            if (one_bucket) only.set(bucket);
            symbol_done(f, {k_terminal, n, class_of(only)});
            pos = space(pos + 1, f.nested);
        } else if (c == '[') {
            uint32_t n = 0;
            char_set first;
            const bool negated = at(++pos) == '^';
            if (negated) ++pos;
            while (at(pos) != ']') {
                if (pos >= s_.size()) return fail_at("unexpected end of input in the character class", here);
                const uint32_t lo = code_at(pos);
                if (!(pos = character(pos))) return false;
                ++n;
                uint32_t hi = lo;
                if (at(pos) == '-' && at(pos + 1) != ']') {
                    if (pos + 1 >= s_.size()) return fail_at("unexpected end of input in the character class", here);
                    hi = code_at(pos + 1);
                    if (!(pos = character(pos + 1))) return false;
                    ++n;
                }
                if (hi >= lo && hi - lo >= 256) first.set();
                // (64-bit: a range ending at U+FFFFFFFF, which \U escapes can name, must not wrap the counter.)
                for (uint64_t cp = lo; cp <= hi && hi - lo < 256; ++cp) first.set(char_bucket(uint32_t(cp)));
            }
            if (!count_elements(n, here)) return false;
            symbol_done(f, {k_terminal, n, negated ? 0 : class_of(first)});
            pos = space(pos + 1, f.nested);
        } else if (c == '<' || c == '!') {
            if (c == '!') ++pos;
            if (at(pos) != '<') return fail_at("expecting '<'", pos);
            const size_t open = pos++;
            if (at(pos) == '[') {
                const size_t digits = ++pos;
                uint64_t v = 0;
                while (is_digit(at(pos)) && v <= UINT32_MAX) v = v * 10 + uint64_t(at(pos++) - '0');
                if (pos == digits) return fail_at("expecting an integer", pos);
                if (v > UINT32_MAX) return fail_at("a token id above " + std::to_string(UINT32_MAX), digits);
                if (at(pos) != ']') return fail_at("expecting ']'", pos);
                if (at(++pos) != '>') return fail_at("expecting '>'", pos);
                ++pos;
            } else {
                while (pos < s_.size() && s_[pos] != '>') ++pos;
                if (pos >= s_.size()) return fail_at("expecting '>'", pos);
                if (++pos - open > grammar_token_text_max)
                    return fail_at("a token reference longer than " + std::to_string(grammar_token_text_max) + " bytes",
                                   open);
            }
            if (!count_elements(1, here)) return false;
            symbol_done(f, {k_terminal, 1});
            pos = space(pos, f.nested);
        } else if (is_word_char(c)) {
            const size_t end = name_end(pos);
            uint32_t id = 0;
            if (!symbol(s_.substr(pos, end - pos), pos, id)) return false;
            if (!count_elements(1, here)) return false;
            symbol_done(f, {id, 1});
            pos = space(end, f.nested);
        } else if (c == '(') {
            if (frames_.size() > lim_.depth_max)
                return fail_at("groups nested deeper than " + std::to_string(lim_.depth_max) + " (--grammar-max-depth)",
                               pos);
            pos = space(pos + 1, true);
            const size_t n_before = symbols_.size();
            uint32_t id = 0;
            if (!generated(base_name(), rule_kind::group, here, id)) return false;
            frames_.push_back(frame{id, true, {}, 0, 1, n_before});  // invalidates f
        } else if (c == '.') {
            if (!count_elements(1, here)) return false;
            symbol_done(f, {k_terminal, 1});
            pos = space(pos + 1, f.nested);
        } else if (c == '*' || c == '+' || c == '?') {
            pos = space(pos + 1, f.nested);
            return repeat(c == '+' ? 1 : 0, c == '?' ? 1 : UINT64_MAX, here);
        } else if (c == '{') {
            pos = space(pos + 1, f.nested);
            uint64_t lo = 0, hi = 0;
            if (!count(pos, lo)) return fail_at("expecting an integer", pos);
            pos = space(pos, f.nested);
            if (at(pos) == '}') {
                hi = lo;
                pos = space(pos + 1, f.nested);
            } else if (at(pos) == ',') {
                pos = space(pos + 1, f.nested);
                hi = UINT64_MAX;
                if (is_digit(at(pos))) {
                    count(pos, hi);
                    pos = space(pos, f.nested);
                }
                if (at(pos) != '}') return fail_at("expecting '}'", pos);
                pos = space(pos + 1, f.nested);
            } else {
                return fail_at("expecting ','", pos);
            }
            if (lo > grammar_repeat_max || (hi != UINT64_MAX && hi > grammar_repeat_max))
                return fail_at("a repetition count above " + std::to_string(grammar_repeat_max), here);
            if (hi < lo) return fail_at("a repetition whose maximum is below its minimum", here);
            return repeat(lo, hi, here);
        } else {
            consumed = false;
        }
        return true;
    }

    // count reads a decimal count at pos (saturating above grammar_repeat_max); false when there is none.
    bool count(size_t & pos, uint64_t & out) {
        if (!is_digit(at(pos))) return false;
        out = 0;
        while (is_digit(at(pos))) {
            out = std::min<uint64_t>(out * 10 + uint64_t(at(pos) - '0'), uint64_t(grammar_repeat_max) + 1);
            ++pos;
        }
        return true;
    }

    // repeat: libllama's handle_repetitions for the last symbol of the open frame (hi UINT64_MAX: no maximum).
    bool repeat(uint64_t lo, uint64_t hi, size_t op) {
        frame & f = frames_.back();
        if (f.last_sym_start == f.body.size()) return fail_at("a repetition without an item before it", op);
        const bool no_max = hi == UINT64_MAX;
        const uint64_t total = !no_max && hi > 0 ? hi : lo > 0 ? lo : 1;
        if (f.n_prev_rules * total >= grammar_repeat_max)  // n_prev_rules <= rules_max: no overflow
            return fail_at("a repetition of " + std::to_string(total) + " copies of " + std::to_string(f.n_prev_rules) +
                               " rules (libllama refuses " + std::to_string(grammar_repeat_max) + " or more)",
                           op);
        const std::vector<item> prev(f.body.begin() + std::ptrdiff_t(f.last_sym_start), f.body.end());
        uint64_t prev_elements = 0;
        for (const item & it : prev) prev_elements += it.n;
        const uint64_t n_opt = no_max ? 1 : hi - lo;
        // (lo - 1) inline copies, n_opt rules of prev + a reference + ALT + END, one reference to them.
        const uint64_t copies = (lo > 0 ? lo - 1 : 0) * prev_elements;
        if (!count_elements(sat_add(copies, n_opt * (prev_elements + 3) + 1, UINT64_MAX), op)) return false;
        if (lo == 0) f.body.resize(f.last_sym_start);
        for (uint64_t i = 1; i < lo; ++i) f.body.insert(f.body.end(), prev.begin(), prev.end());
        uint32_t last = 0;
        for (uint64_t i = 0; i < n_opt; ++i) {
            uint32_t id = 0;
            if (!generated(base_name(), rule_kind::repetition, op, id)) return false;
            std::vector<item> rec = prev;
            if (i > 0 || no_max) rec.push_back({no_max ? id : last, 1});
            rec.push_back({k_alt, 1});
            define(id, std::move(rec));
            last = id;
        }
        if (n_opt > 0) f.body.push_back({last, 1});
        f.n_prev_rules *= total;
        return true;
    }
};

// describe names a rule for a message.
std::string describe(const rule_info & r) {
    switch (r.kind) {
        case rule_kind::group: return "a group at byte " + std::to_string(r.at) + " in rule '" + shown(r.name) + "'";
        case rule_kind::repetition:
            return "a repetition at byte " + std::to_string(r.at) + " in rule '" + shown(r.name) + "'";
        case rule_kind::named: break;
    }
    return "rule '" + shown(r.name) + "' (byte " + std::to_string(r.at) + ")";
}

Status refuse(const std::string & m) { return Status(status_code::invalid_argument, "grammar: " + m); }

// csr: adjacency lists in two arrays.
struct csr {
    std::vector<uint32_t> begin;  // [n + 1]
    std::vector<uint32_t> to;
    std::vector<uint8_t> tail;  // per edge: the reference ends its alternative (nothing is pushed)
};

// shape analyses a parsed rule table.
Status gbnf_shape(const std::vector<rule_info> & rules, const std::vector<char_set> & classes,
                  const grammar_limits & lim) {
    const uint32_t n = uint32_t(rules.size());
    // Alternatives: [begin, end) item ranges, rule by rule.
    struct alt {
        uint32_t rule, begin, end;
    };
    std::vector<alt> alts;
    std::vector<uint8_t> direct_empty(n, 0);  // libllama's rules_may_be_empty: an empty alternative
    for (uint32_t r = 0; r < n; ++r) {
        const auto & b = rules[r].body;
        uint32_t start = 0;
        for (uint32_t i = 0; i <= b.size(); ++i) {
            if (i < b.size() && b[i].ref != k_alt) continue;
            alts.push_back({r, start, i});
            if (start == i) direct_empty[r] = 1;
            start = i + 1;
        }
    }

    // Which rules can match nothing (a fixpoint over a worklist: each alternative waits for its references).
    std::vector<uint8_t> nullable(n, 0);
    std::vector<uint32_t> waiting(alts.size(), 0);
    std::vector<uint32_t> occ_begin(size_t(n) + 1, 0), occ;
    std::vector<uint32_t> work;
    for (uint32_t a = 0; a < alts.size(); ++a) {
        const auto & b = rules[alts[a].rule].body;
        for (uint32_t i = alts[a].begin; i < alts[a].end; ++i) {
            if (b[i].ref == k_terminal) {
                waiting[a] = UINT32_MAX;
                break;
            }
            ++waiting[a];
        }
        if (waiting[a] != UINT32_MAX)
            for (uint32_t i = alts[a].begin; i < alts[a].end; ++i) ++occ_begin[b[i].ref + 1];
        if (waiting[a] == 0 && !nullable[alts[a].rule]) {
            nullable[alts[a].rule] = 1;
            work.push_back(alts[a].rule);
        }
    }
    for (uint32_t r = 0; r < n; ++r) occ_begin[r + 1] += occ_begin[r];
    occ.resize(occ_begin[n]);
    {
        std::vector<uint32_t> fill(occ_begin.begin(), occ_begin.end() - 1);
        for (uint32_t a = 0; a < alts.size(); ++a) {
            if (waiting[a] == UINT32_MAX) continue;
            const auto & b = rules[alts[a].rule].body;
            for (uint32_t i = alts[a].begin; i < alts[a].end; ++i) occ[fill[b[i].ref]++] = a;
        }
    }
    while (!work.empty()) {
        const uint32_t r = work.back();
        work.pop_back();
        for (uint32_t k = occ_begin[r]; k < occ_begin[r + 1]; ++k) {
            const uint32_t a = occ[k];
            if (--waiting[a] == 0 && !nullable[alts[a].rule]) {
                nullable[alts[a].rule] = 1;
                work.push_back(alts[a].rule);
            }
        }
    }

    // "Starts with" edges: every reference reachable from an alternative's start through references that
    // can match nothing (g); the subset libllama's left-recursion check follows, through rules with an empty
    // alternative only (gl).
    auto build = [&](const std::vector<uint8_t> & pass) {
        csr g;
        g.begin.assign(size_t(n) + 1, 0);
        for (int phase = 0; phase < 2; ++phase) {
            std::vector<uint32_t> fill;
            if (phase == 1) {
                for (uint32_t r = 0; r < n; ++r) g.begin[r + 1] += g.begin[r];
                g.to.resize(g.begin[n]);
                g.tail.resize(g.begin[n]);
                fill.assign(g.begin.begin(), g.begin.end() - 1);
            }
            for (const alt & a : alts) {
                const auto & b = rules[a.rule].body;
                for (uint32_t i = a.begin; i < a.end && b[i].ref != k_terminal; ++i) {
                    if (phase == 0) ++g.begin[a.rule + 1];
                    else {
                        g.tail[fill[a.rule]] = i + 1 == a.end;
                        g.to[fill[a.rule]++] = b[i].ref;
                    }
                    if (!pass[b[i].ref]) break;
                }
            }
        }
        return g;
    };
    const csr g = build(nullable);
    const csr gl = build(direct_empty);

    // Cycles (left recursion) and a post-order, by an iterative depth-first search.
    std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the path, 2 done
    std::vector<uint32_t> order;
    order.reserve(n);
    std::vector<std::pair<uint32_t, uint32_t>> stack;  // (rule, next edge)
    for (uint32_t root = 0; root < n; ++root) {
        if (color[root]) continue;
        stack.push_back({root, g.begin[root]});
        color[root] = 1;
        while (!stack.empty()) {
            auto & [r, e] = stack.back();
            if (e < g.begin[r + 1]) {
                const uint32_t to = g.to[e++];
                if (color[to] == 1)
                    return refuse(describe(rules[to]) +
                                  " can reach itself before matching a character (left recursion, also through rules "
                                  "that can match nothing)");
                if (color[to] == 0) {
                    color[to] = 1;
                    stack.push_back({to, g.begin[to]});
                }
                continue;
            }
            color[r] = 2;
            order.push_back(r);
            stack.pop_back();
        }
    }

    // In post-order every rule's successors come first: chain length, fan-out and the check's work.
    const uint64_t h_cap = lim.fanout_max, w_cap = uint64_t(lim.fanout_max) * 16;
    const uint64_t cost_cap = lim.elements_max * 4;
    auto too_wide = [&](const std::string & where) {
        return refuse("more than " + std::to_string(h_cap) + " alternatives (or " + std::to_string(w_cap) +
                      " parse stacks on the way to them) " + where + " (--grammar-max-fanout)");
    };
    std::vector<uint32_t> depth(n, 0);
    std::vector<uint64_t> heads(n, 0), explored(n, 0), cost(n, 0);
    std::vector<uint32_t> first_alt(size_t(n) + 1, 0);
    for (const alt & a : alts) ++first_alt[a.rule + 1];
    for (uint32_t r = 0; r < n; ++r) first_alt[r + 1] += first_alt[r];
    for (uint32_t r : order) {
        uint32_t d = 0;
        for (uint32_t e = g.begin[r]; e < g.begin[r + 1]; ++e) d = std::max(d, depth[g.to[e]]);
        depth[r] = d + 1;
        if (depth[r] > lim.chain_max)
            return refuse(describe(rules[r]) + " starts a chain of more than " + std::to_string(lim.chain_max) +
                          " rules before any character (--grammar-max-chain)");
        uint64_t h_rule = 0, w_rule = 0, elements = 1;
        for (uint32_t a = first_alt[r]; a < first_alt[r + 1]; ++a) {
            const auto & b = rules[r].body;
            uint64_t h = 0, w = 0;
            for (uint32_t i = alts[a].end; i-- > alts[a].begin;) {
                const item & it = b[i];
                elements += it.n;
                if (it.ref == k_terminal) {
                    h = 1;
                    w = 1;
                } else {
                    const bool pass = nullable[it.ref];
                    h = sat_add(heads[it.ref], pass ? h : 0, h_cap + 1);
                    w = sat_add(sat_add(1, explored[it.ref], w_cap + 1), pass ? w : 0, w_cap + 1);
                }
                if (h > h_cap || w > w_cap) return too_wide("at one position in " + describe(rules[r]));
            }
            h_rule = sat_add(h_rule, h, h_cap + 1);
            w_rule = sat_add(w_rule, sat_add(1, w, w_cap + 1), w_cap + 1);
            if (a + 1 < first_alt[r + 1]) ++elements;  // the separator
        }
        if (h_rule > h_cap || w_rule > w_cap) return too_wide("where " + describe(rules[r]) + " starts");
        heads[r] = h_rule;
        explored[r] = w_rule;
        uint64_t c = elements;
        for (uint32_t e = gl.begin[r]; e < gl.begin[r + 1]; ++e) c = sat_add(c, cost[gl.to[e]], cost_cap + 1);
        cost[r] = c;
    }

    // Runs: among how many elements in a row a string of one repeated character can be split (per
    // character bucket, saturating). libllama reads every vocabulary token against every parse stack along
    // every such split without merging them: about C(run + L, L) ways for a token of L such characters, so a
    // long run (root ::= item{215} with item ::= [a-z]{0,8}) makes one sampling step take seconds. An element
    // extends a run past itself only if it can match nothing or a string of that character alone (absorb);
    // one that starts with the character but needs something else after it ends the run (start). ("," kv)?
    // repeated for every optional property of a JSON object is one way per property, not a run.
    // Right recursion makes this a fixpoint: passes in post-order until nothing grows (values only grow, so
    // a refusal in any pass stands); a grammar still growing after 8 passes keeps what it reached.
    using run_row = std::array<uint8_t, 256>;
    std::vector<run_row> start(n, run_row{}), absorb(n, run_row{});
    std::vector<char_set> whole(n);  // characters c such that the rule can match a non-empty string of c only
    auto add = [](uint8_t a, uint8_t b) { return uint8_t(std::min<unsigned>(255u, unsigned(a) + b)); };
    bool grew = true;
    for (int pass = 0; pass < 8 && grew; ++pass) {
        grew = false;
        for (uint32_t r : order) {
            const auto & b = rules[r].body;
            run_row st{}, ab{};
            char_set wh;
            for (uint32_t a = first_alt[r]; a < first_alt[r + 1]; ++a) {
                run_row row{};
                char_set only = char_set().set();  // the suffix can match a string of c only (or nothing)
                char_set some;                     // ... a non-empty one
                for (uint32_t i = alts[a].end; i-- > alts[a].begin;) {
                    const item & it = b[i];
                    if (it.ref == k_terminal) {
                        const char_set & cs = classes[it.cls];
                        for (size_t c = 0; c < 256; ++c) row[c] = cs[c];
                        only &= cs;
                        some |= cs;
                        continue;
                    }
                    const uint32_t x = it.ref;
                    if (!nullable[x]) {
                        row = start[x];
                        only &= whole[x];
                        some |= whole[x];
                        continue;
                    }
                    uint8_t most = 0;
                    for (size_t c = 0; c < 256; ++c) {
                        row[c] = std::max(start[x][c], add(absorb[x][c], row[c]));
                        most = std::max(most, row[c]);
                    }
                    some |= whole[x];
                    if (most > grammar_nullable_run_max)
                        return refuse(describe(rules[r]) + " has more than " +
                                      std::to_string(grammar_nullable_run_max) +
                                      " elements in a row that can each match nothing or a string of one repeated "
                                      "character (a token of that character could be split among them in too many "
                                      "ways)");
                }
                only &= some;
                wh |= only;
                for (size_t c = 0; c < 256; ++c) {
                    st[c] = std::max(st[c], row[c]);
                    if (only[c]) ab[c] = std::max(ab[c], row[c]);
                }
            }
            if (st != start[r] || ab != absorb[r] || wh != whole[r]) {
                grew = true;
                start[r] = st;
                absorb[r] = ab;
                whole[r] = wh;
            }
        }
    }

    // libllama's left-recursion check starts from each rule not yet visited, in id order, and walks every
    // path (it has no memo): the elements it visits, bounded.
    std::vector<uint8_t> visited(n, 0);
    std::vector<uint32_t> todo;
    uint64_t work_total = 0;
    for (uint32_t r = 0; r < n; ++r) {
        if (visited[r]) continue;
        work_total = sat_add(work_total, cost[r], cost_cap + 1);
        if (work_total > cost_cap)
            return refuse("rules start with other rules in too many ways: libllama's left-recursion check would visit "
                          "more than " +
                          std::to_string(cost_cap) + " elements (4 x --grammar-max-elements), from " +
                          describe(rules[r]));
        visited[r] = 1;
        todo.push_back(r);
        while (!todo.empty()) {
            const uint32_t x = todo.back();
            todo.pop_back();
            for (uint32_t e = gl.begin[x]; e < gl.begin[x + 1]; ++e)
                if (!visited[gl.to[e]]) {
                    visited[gl.to[e]] = 1;
                    todo.push_back(gl.to[e]);
                }
        }
    }
    return {};
}

}  // namespace

Status grammar_limits_check(const grammar_limits & l) {
    auto in = [](const char * flag, uint64_t v, uint64_t cap) -> Status {
        if (v >= 1 && v <= cap) return {};
        return Status(status_code::invalid_argument,
                      std::string(flag) + ": " + std::to_string(v) + " is not in 1.." + std::to_string(cap));
    };
    const grammar_limits & c = grammar_limits_cap;
    BATON_RETURN_IF_ERROR(in("--grammar-max-depth", l.depth_max, c.depth_max));
    BATON_RETURN_IF_ERROR(in("--grammar-max-chain", l.chain_max, c.chain_max));
    BATON_RETURN_IF_ERROR(in("--grammar-max-rules", l.rules_max, c.rules_max));
    BATON_RETURN_IF_ERROR(in("--grammar-max-elements", l.elements_max, c.elements_max));
    return in("--grammar-max-fanout", l.fanout_max, c.fanout_max);
}

Status grammar_check(std::string_view gbnf, const grammar_limits & limits) {
    BATON_RETURN_IF_ERROR(grammar_limits_check(limits));
    gbnf_scan scan(gbnf, limits);
    BATON_RETURN_IF_ERROR(scan.run());
    return gbnf_shape(scan.rules(), scan.classes(), limits);
}

}  // namespace baton
