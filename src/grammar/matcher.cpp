// The grammar matcher (grammar.h): stacks of element positions, expanded until every
// top is a character set; a code point advances the stacks whose top contains it.
#include <algorithm>
#include <cstdio>

#include "core/utf8.h"
#include "grammar/grammar.h"

namespace vega::grammar {

bool CharSet::contains(char32_t c) const {
    bool in = false;
    for (const auto& [lo, hi] : ranges)
        if (c >= lo && c <= hi) {
            in = true;
            break;
        }
    return in != negated;
}

bool CharSet::intersects(char32_t lo, char32_t hi) const {
    if (!negated) {
        for (const auto& [a, b] : ranges)
            if (a <= hi && b >= lo) return true;
        return false;
    }
    // Complement: some point of [lo, hi] outside every range. Walk [lo, hi] past the
    // ranges that cover its current start.
    char32_t c = lo;
    for (bool moved = true; moved && c <= hi;) {
        moved = false;
        for (const auto& [a, b] : ranges)
            if (c >= a && c <= b) {
                if (b >= hi) return false;
                c = b + 1, moved = true;
            }
    }
    return c <= hi;
}

Matcher::Matcher(const Grammar& g) : g_(&g) {
    std::vector<Stack> out;
    // Start: the root's alternatives, each expanded.
    for (uint32_t a : g.rules[g.root].alts) {
        Stack s;
        if (g.elements[a].kind != Element::Kind::End) s.push_back(a);
        expand(std::move(s), out, 0);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    stacks_ = std::move(out);
}

// s's top made a character set: rules on top are replaced by each of their
// alternatives (their continuation kept below, unless the rule ends its sequence: a
// tail call keeps repetitions from growing the stack). An empty stack is kept: the
// text may end there. The parser refused left recursion, so this terminates; depth is
// bounded anyway.
void Matcher::expand(Stack s, std::vector<Stack>& out, int depth) const {
    if (depth > 10000 || out.size() > kMaxStacks) return;
    if (s.empty()) {
        out.push_back(std::move(s));
        return;
    }
    const uint32_t pos = s.back();
    const Element& e = g_->elements[pos];
    if (e.kind == Element::Kind::Chars) {
        out.push_back(std::move(s));
        return;
    }
    s.pop_back();
    if (g_->elements[pos + 1].kind != Element::Kind::End) s.push_back(pos + 1);  // continuation
    const Rule& r = g_->rules[e.index];
    for (size_t k = 0; k < r.alts.size(); ++k) {
        Stack t = k + 1 < r.alts.size() ? s : std::move(s);
        if (g_->elements[r.alts[k]].kind != Element::Kind::End) t.push_back(r.alts[k]);
        expand(std::move(t), out, depth + 1);
    }
}

bool Matcher::advance(char32_t c) {
    std::vector<Stack> out;
    for (const Stack& s : stacks_) {
        if (s.empty()) continue;
        const uint32_t pos = s.back();
        if (!g_->sets[g_->elements[pos].index].contains(c)) continue;
        Stack t(s.begin(), s.end() - 1);
        if (g_->elements[pos + 1].kind != Element::Kind::End) t.push_back(pos + 1);
        expand(std::move(t), out, 0);
    }
    if (out.size() > kMaxStacks) out.clear();  // refuse: ambiguity past the bound
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    stacks_ = std::move(out);
    return !stacks_.empty();
}

namespace {
// The code points a UTF-8 sequence of n bytes may encode (shortest form only: an
// overlong encoding such as C1 BB for '{' is invalid UTF-8, not another way to write it).
constexpr char32_t kUtf8Min[5] = {0, 0, 0x80, 0x800, 0x10000};
constexpr char32_t kUtf8Max[5] = {0, 0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
bool is_surrogate(char32_t c) { return c >= 0xD800 && c <= 0xDFFF; }
}  // namespace

// The pending bytes of a UTF-8 sequence can still become a valid character some stack
// allows: the code points they can complete to form one range.
bool Matcher::pending_ok() const {
    const int need = partial_need_;
    char32_t lo = utf8_lead_bits(partial_[0], need);
    for (int k = 1; k < partial_len_; ++k) lo = (lo << 6) | (partial_[k] & 0x3F);
    char32_t hi = lo;
    for (int k = partial_len_; k < need; ++k) lo = lo << 6, hi = (hi << 6) | 0x3F;
    lo = std::max(lo, kUtf8Min[need]), hi = std::min(hi, kUtf8Max[need]);
    if (lo > hi || (is_surrogate(lo) && is_surrogate(hi))) return false;
    for (const Stack& s : stacks_)
        if (!s.empty() && g_->sets[g_->elements[s.back()].index].intersects(lo, hi)) return true;
    return false;
}

bool Matcher::accept(std::string_view bytes) {
    for (const char ch : bytes) {
        if (stacks_.empty()) return false;
        const uint8_t b = static_cast<uint8_t>(ch);
        if (partial_need_ > 0) {
            if ((b >> 6) != 2) return stacks_.clear(), false;  // not a continuation byte
            partial_[partial_len_++] = b;
            if (partial_len_ < partial_need_) {
                if (!pending_ok()) return stacks_.clear(), false;
                continue;
            }
            const int need = partial_need_;
            char32_t cp = utf8_lead_bits(partial_[0], need);
            for (int k = 1; k < need; ++k) cp = (cp << 6) | (partial_[k] & 0x3F);
            partial_len_ = partial_need_ = 0;
            if (cp < kUtf8Min[need] || cp > kUtf8Max[need] || is_surrogate(cp)) return stacks_.clear(), false;
            if (!advance(cp)) return false;
            continue;
        }
        if (b < 0x80) {
            if (!advance(b)) return false;
            continue;
        }
        const int need = utf8_sequence_length(b);
        if (need == 0) return stacks_.clear(), false;  // a stray continuation or invalid byte
        // (C0, C1 and F5..F7 can only start overlong or out-of-range sequences: pending_ok refuses them.)
        partial_[0] = b, partial_len_ = 1, partial_need_ = need;
        if (!pending_ok()) return stacks_.clear(), false;
    }
    return !stacks_.empty();
}

bool Matcher::allows(std::string_view bytes) const {
    // Most tokens fail at their first character: test it against the stack tops before
    // copying the matcher (a sampler asks this for many tokens per step).
    if (!bytes.empty() && partial_need_ == 0) {
        const uint8_t b = static_cast<uint8_t>(bytes[0]);
        char32_t lo = b, hi = b;
        if (b >= 0x80) {
            const int need = utf8_sequence_length(b);
            if (need == 0) return false;
            lo = utf8_lead_bits(b, need) << (6 * (need - 1));
            hi = lo | ((char32_t(1) << (6 * (need - 1))) - 1);
        }
        bool any = false;
        for (const Stack& s : stacks_)
            if (!s.empty() && g_->sets[g_->elements[s.back()].index].intersects(lo, hi)) {
                any = true;
                break;
            }
        if (!any) return false;
    }
    Matcher m = *this;
    return m.accept(bytes);
}

uint64_t Matcher::stacks_taking(char32_t c) const {
    if (partial_need_ > 0 || stacks_.size() > 64) return kUnknown;
    uint64_t m = 0;
    for (size_t i = 0; i < stacks_.size(); ++i)
        if (!stacks_[i].empty() && g_->sets[g_->elements[stacks_[i].back()].index].contains(c)) m |= uint64_t(1) << i;
    return m;
}

bool Matcher::loops_on(char32_t c) const {
    if (partial_need_ > 0) return false;
    Matcher next = *this;
    return next.advance(c) && next.stacks_ == stacks_;
}

size_t Matcher::next_char_options() const {
    constexpr size_t kAll = 0x110000;
    if (partial_need_ > 0) return kAll;
    size_t n = 0;
    for (const Stack& s : stacks_) {
        if (s.empty()) continue;
        const CharSet& cs = g_->sets[g_->elements[s.back()].index];
        if (cs.negated) return kAll;
        for (const auto& [lo, hi] : cs.ranges) n += size_t(hi - lo) + 1;
    }
    return std::min(n, kAll);
}

bool Matcher::can_end() const {
    if (partial_need_ > 0) return false;
    for (const Stack& s : stacks_)
        if (s.empty()) return true;
    return false;
}

std::string Grammar::to_string() const {
    auto cp_text = [](char32_t c) {
        std::string o;
        if (c == '"' || c == '\\' || c == ']' || c == '[' || c == '-' || c == '^') return std::string("\\") + char(c);
        if (c < 0x20 || c > 0x7E) {
            char buf[16];
            std::snprintf(buf, sizeof buf, c <= 0xFFFF ? "\\u%04X" : "\\U%08X", unsigned(c));
            return std::string(buf);
        }
        return std::string(1, char(c));
    };
    std::string out;
    for (const Rule& r : rules) {
        out += r.name + " ::=";
        for (size_t k = 0; k < r.alts.size(); ++k) {
            out += k ? " |" : "";
            for (uint32_t p = r.alts[k]; elements[p].kind != Element::Kind::End; ++p) {
                const Element& e = elements[p];
                if (e.kind == Element::Kind::Rule) {
                    out += " " + rules[e.index].name;
                } else {
                    const CharSet& s = sets[e.index];
                    out += s.negated ? " [^" : " [";
                    for (const auto& [lo, hi] : s.ranges) out += lo == hi ? cp_text(lo) : cp_text(lo) + "-" + cp_text(hi);
                    out += "]";
                }
            }
        }
        out += "\n";
    }
    return out;
}

}  // namespace vega::grammar
