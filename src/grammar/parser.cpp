// GBNF parser: rules `name ::= alternatives`; alternatives are sequences separated by
// `|`; a sequence is terminals ("literal", [class], [^class], .), rule names and groups
// ( ... ), each optionally repeated by *, +, ?, {m}, {m,}, {m,n}. `#` starts a comment.
// A top-level sequence ends at a newline; newlines are free after `::=`, after `|` and
// inside parentheses (llama.cpp's rules, so its .gbnf files parse alike). Groups and
// repetitions become generated rules.
#include <algorithm>
#include <functional>
#include <map>

#include "core/utf8.h"
#include "grammar/grammar.h"

namespace vega::grammar {

namespace {

bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

// An element list before flattening: each alternative a list of elements.
using Alt = std::vector<Element>;

class Parser {
public:
    explicit Parser(std::string_view t) : t_(t) {}

    Grammar run(std::string_view root) {
        skip_space(true);
        while (i_ < t_.size()) {
            parse_rule();
            skip_space(true);
        }
        // Every referenced rule defined; the root present.
        for (size_t r = 0; r < defined_.size(); ++r)
            if (!defined_[r]) fail_at(first_use_[r], "rule '" + names_[r] + "' is used but not defined");
        const auto it = ids_.find(std::string(root));
        if (it == ids_.end()) throw GrammarError("the grammar has no rule '" + std::string(root) + "'");
        Grammar g;
        g.sets = std::move(sets_);
        for (size_t r = 0; r < names_.size(); ++r) {
            Rule rule;
            rule.name = names_[r];
            for (const Alt& a : alts_[r]) {
                rule.alts.push_back(uint32_t(g.elements.size()));
                for (const Element& e : a) g.elements.push_back(e);
                g.elements.push_back(Element{});
            }
            g.rules.push_back(std::move(rule));
        }
        if (g.elements.size() > kMaxElements) throw GrammarError("the grammar has more than " + std::to_string(kMaxElements) + " elements");
        g.root = uint32_t(it->second);
        check_left_recursion(g);
        return g;
    }

private:
    [[noreturn]] void fail_at(size_t pos, const std::string& what) const {
        size_t line = 1, col = 1;
        for (size_t k = 0; k < pos && k < t_.size(); ++k) {
            if (t_[k] == '\n') ++line, col = 1;
            else ++col;
        }
        throw GrammarError("line " + std::to_string(line) + ", column " + std::to_string(col) + ": " + what);
    }
    [[noreturn]] void fail(const std::string& what) const { fail_at(i_, what); }

    // Spaces, tabs, comments; newlines too when newline_ok.
    void skip_space(bool newline_ok) {
        while (i_ < t_.size()) {
            const char c = t_[i_];
            if (c == ' ' || c == '\t' || c == '\r' || (newline_ok && c == '\n')) {
                ++i_;
            } else if (c == '#') {
                while (i_ < t_.size() && t_[i_] != '\n') ++i_;
            } else {
                break;
            }
        }
    }

    std::string parse_name() {
        const size_t b = i_;
        while (i_ < t_.size() && is_name_char(t_[i_])) ++i_;
        if (i_ == b) fail("expected a rule name");
        return std::string(t_.substr(b, i_ - b));
    }

    uint32_t rule_id(const std::string& name, size_t use_pos) {
        auto it = ids_.find(name);
        if (it != ids_.end()) return uint32_t(it->second);
        if (names_.size() >= kMaxRules) fail("the grammar has more than " + std::to_string(kMaxRules) + " rules");
        const uint32_t id = uint32_t(names_.size());
        ids_.emplace(name, id);
        names_.push_back(name);
        alts_.emplace_back();
        defined_.push_back(false);
        first_use_.push_back(use_pos);
        return id;
    }
    // Generated rules are named "<parent>.<n>": '.' is not a name character, so they never
    // meet a rule of the text (defined or referenced, before or after).
    uint32_t new_rule(const std::string& parent) {
        std::string n;
        do n = parent + "." + std::to_string(++generated_); while (ids_.count(n));
        const uint32_t id = rule_id(n, i_);
        defined_[id] = true;
        return id;
    }

    void parse_rule() {
        const size_t at = i_;
        const std::string name = parse_name();
        skip_space(false);
        if (t_.substr(i_, 3) != "::=") fail("expected '::=' after rule name '" + name + "'");
        i_ += 3;
        skip_space(true);
        const uint32_t id = rule_id(name, at);
        if (defined_[id]) fail_at(at, "rule '" + name + "' is defined twice");
        defined_[id] = true;
        parent_ = name;
        alts_[id] = parse_alternatives(false);
        if (i_ < t_.size() && t_[i_] != '\n') fail("unexpected '" + std::string(1, t_[i_]) + "'");
    }

    std::vector<Alt> parse_alternatives(bool nested) {
        std::vector<Alt> alts;
        alts.push_back(parse_sequence(nested));
        while (i_ < t_.size() && t_[i_] == '|') {
            ++i_;
            skip_space(true);
            alts.push_back(parse_sequence(nested));
        }
        return alts;
    }

    Alt parse_sequence(bool nested) {
        Alt seq;
        size_t last_start = 0;  // where the last item's elements begin (for a repetition)
        bool have_last = false;
        while (i_ < t_.size()) {
            const char c = t_[i_];
            const size_t start = seq.size();
            if (c == '"') {
                ++i_;
                while (true) {
                    if (i_ >= t_.size() || t_[i_] == '\n') fail("unterminated string literal");
                    if (t_[i_] == '"') break;
                    const char32_t cp = parse_char();
                    seq.push_back(chars({{cp, cp}}, false));
                }
                ++i_;
                if (seq.size() == start) {  // "" matches the empty text: nothing to add
                    have_last = false;
                    skip_space(nested);
                    continue;
                }
                // (A repetition after it repeats all of its characters: they are the last item.)
            } else if (c == '[') {
                ++i_;
                bool neg = false;
                if (i_ < t_.size() && t_[i_] == '^') neg = true, ++i_;
                std::vector<std::pair<char32_t, char32_t>> ranges;
                while (true) {
                    if (i_ >= t_.size() || t_[i_] == '\n') fail("unterminated character class");
                    if (t_[i_] == ']') break;
                    const char32_t lo = parse_char();
                    char32_t hi = lo;
                    if (i_ + 1 < t_.size() && t_[i_] == '-' && t_[i_ + 1] != ']' && t_[i_ + 1] != '\n') {
                        ++i_;
                        hi = parse_char();
                        if (hi < lo) fail("character range end below its start");
                    }
                    ranges.push_back({lo, hi});
                }
                ++i_;
                seq.push_back(chars(std::move(ranges), neg));
            } else if (c == '.') {
                ++i_;
                seq.push_back(chars({{0, 0x10FFFF}}, false));
            } else if (is_name_char(c)) {
                const size_t at = i_;
                const std::string name = parse_name();
                Element e;
                e.kind = Element::Kind::Rule;
                e.index = rule_id(name, at);
                seq.push_back(e);
            } else if (c == '(') {
                ++i_;
                skip_space(true);
                const std::string saved = parent_;
                std::vector<Alt> alts = parse_alternatives(true);
                parent_ = saved;
                if (i_ >= t_.size() || t_[i_] != ')') fail("expected ')'");
                ++i_;
                seq.push_back(group(std::move(alts)));
            } else if (c == '*' || c == '+' || c == '?' || c == '{') {
                if (!have_last) fail(std::string("'") + c + "' repeats nothing");
                Alt item(seq.begin() + long(last_start), seq.end());
                seq.resize(last_start);
                ++i_;
                size_t lo = 0, hi = 0;
                bool unbounded = false;
                if (c == '*') unbounded = true;
                else if (c == '+') lo = 1, unbounded = true;
                else if (c == '?') hi = 1;
                else parse_braces(&lo, &hi, &unbounded);
                append_repeat(seq, item, lo, hi, unbounded);
                have_last = false;  // x** is an error, as in llama.cpp
                skip_space(nested);
                continue;
            } else {
                break;
            }
            last_start = start;
            have_last = true;
            skip_space(nested);
        }
        return seq;
    }

    // {m}, {m,}, {m,n} (the '{' consumed).
    void parse_braces(size_t* lo, size_t* hi, bool* unbounded) {
        auto number = [&] {
            const size_t b = i_;
            size_t v = 0;
            while (i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9') {
                v = v * 10 + size_t(t_[i_] - '0');
                if (v > kMaxRepeat) fail("repetition count above " + std::to_string(kMaxRepeat));
                ++i_;
            }
            if (i_ == b) fail("expected a number in {m,n}");
            return v;
        };
        skip_space(false);
        *lo = number();
        skip_space(false);
        if (i_ < t_.size() && t_[i_] == ',') {
            ++i_;
            skip_space(false);
            if (i_ < t_.size() && t_[i_] == '}') *unbounded = true;
            else *hi = number();
        } else {
            *hi = *lo;
        }
        skip_space(false);
        if (i_ >= t_.size() || t_[i_] != '}') fail("expected '}'");
        ++i_;
        if (!*unbounded && *hi < *lo) fail("{m,n} with n below m");
    }

    // item repeated lo times, then up to hi - lo more (or any number more).
    void append_repeat(Alt& seq, const Alt& item, size_t lo, size_t hi, bool unbounded) {
        for (size_t k = 0; k < lo; ++k) seq.insert(seq.end(), item.begin(), item.end());
        if (unbounded) {  // R ::= item R | (empty)
            const uint32_t r = new_rule(parent_);
            Alt more = item;
            Element self;
            self.kind = Element::Kind::Rule, self.index = r;
            more.push_back(self);
            alts_[r] = {more, Alt{}};
            seq.push_back(self);
        } else if (hi > lo) {  // optional tail: O_k ::= item O_{k-1} | (empty), O_1 ::= item | (empty)
            uint32_t inner = 0;
            bool have_inner = false;
            for (size_t k = 0; k < hi - lo; ++k) {
                const uint32_t r = new_rule(parent_);
                Alt one = item;
                if (have_inner) {
                    Element e;
                    e.kind = Element::Kind::Rule, e.index = inner;
                    one.push_back(e);
                }
                alts_[r] = {one, Alt{}};
                inner = r, have_inner = true;
            }
            Element e;
            e.kind = Element::Kind::Rule, e.index = inner;
            seq.push_back(e);
        }
        if (names_.size() > kMaxRules) fail("the grammar has more than " + std::to_string(kMaxRules) + " rules");
    }

    Element group(std::vector<Alt> alts) {
        const uint32_t r = new_rule(parent_);
        alts_[r] = std::move(alts);
        Element e;
        e.kind = Element::Kind::Rule, e.index = r;
        return e;
    }

    Element chars(std::vector<std::pair<char32_t, char32_t>> ranges, bool neg) {
        CharSet s;
        s.ranges = std::move(ranges), s.negated = neg;
        sets_.push_back(std::move(s));
        Element e;
        e.kind = Element::Kind::Chars, e.index = uint32_t(sets_.size() - 1);
        return e;
    }

    // One character of a literal or class: an escape, or one UTF-8 encoded code point.
    char32_t parse_char() {
        const unsigned char c = static_cast<unsigned char>(t_[i_]);
        if (c == '\\') {
            if (i_ + 1 >= t_.size()) fail("escape at the end of the text");
            const char e = t_[i_ + 1];
            i_ += 2;
            switch (e) {
                case 'n': return '\n';
                case 'r': return '\r';
                case 't': return '\t';
                case '\\': return '\\';
                case '"': return '"';
                case '[': return '[';
                case ']': return ']';
                case '-': return '-';
                case '^': return '^';
                case 'x': return parse_hex(2);
                case 'u': return parse_hex(4);
                case 'U': return parse_hex(8);
                default: i_ -= 2; fail(std::string("unknown escape '\\") + e + "'");
            }
        }
        // UTF-8
        const int len = utf8_sequence_length(c);
        if (len == 0 || i_ + size_t(len) > t_.size()) fail("invalid UTF-8 in the grammar");
        char32_t cp = utf8_lead_bits(c, len);
        for (int k = 1; k < len; ++k) {
            const unsigned char b = static_cast<unsigned char>(t_[i_ + size_t(k)]);
            if ((b >> 6) != 2) fail("invalid UTF-8 in the grammar");
            cp = (cp << 6) | (b & 0x3F);
        }
        constexpr char32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) fail("invalid UTF-8 in the grammar");
        i_ += size_t(len);
        return cp;
    }
    char32_t parse_hex(int n) {
        char32_t v = 0;
        for (int k = 0; k < n; ++k) {
            if (i_ >= t_.size()) fail("expected " + std::to_string(n) + " hex digits");
            const char h = t_[i_];
            int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
            if (d < 0) fail("expected " + std::to_string(n) + " hex digits");
            v = v * 16 + char32_t(d);
            ++i_;
        }
        if (v > 0x10FFFF) fail("code point above U+10FFFF");
        return v;
    }

    // A rule that can reach itself without consuming a character would loop the matcher.
    void check_left_recursion(const Grammar& g) const {
        const size_t n = g.rules.size();
        // Nullable rules (can match the empty text), to a fixed point.
        std::vector<char> nullable(n, 0);
        for (bool changed = true; changed;) {
            changed = false;
            for (size_t r = 0; r < n; ++r) {
                if (nullable[r]) continue;
                for (uint32_t a : g.rules[r].alts) {
                    bool all = true;
                    for (uint32_t p = a; g.elements[p].kind != Element::Kind::End; ++p)
                        if (g.elements[p].kind == Element::Kind::Chars || !nullable[g.elements[p].index]) {
                            all = false;
                            break;
                        }
                    if (all) {
                        nullable[r] = 1, changed = true;
                        break;
                    }
                }
            }
        }
        // Edges r -> s where s can start r (after a nullable prefix); a cycle is left recursion.
        std::vector<std::vector<uint32_t>> first(n);
        for (size_t r = 0; r < n; ++r)
            for (uint32_t a : g.rules[r].alts)
                for (uint32_t p = a; g.elements[p].kind == Element::Kind::Rule; ++p) {
                    first[r].push_back(g.elements[p].index);
                    if (!nullable[g.elements[p].index]) break;
                }
        std::vector<char> state(n, 0);  // 0 new, 1 on the path, 2 done
        std::function<void(size_t)> visit = [&](size_t r) {
            state[r] = 1;
            for (uint32_t s : first[r]) {
                if (state[s] == 1) throw LeftRecursionError(g.rules[s].name);
                if (state[s] == 0) visit(s);
            }
            state[r] = 2;
        };
        for (size_t r = 0; r < n; ++r)
            if (state[r] == 0) visit(r);
    }

    std::string_view t_;
    size_t i_ = 0;
    std::map<std::string, size_t> ids_;
    std::vector<std::string> names_;
    std::vector<std::vector<Alt>> alts_;
    std::vector<char> defined_;
    std::vector<size_t> first_use_;
    std::vector<CharSet> sets_;
    std::string parent_;
    int generated_ = 0;
};

}  // namespace

Grammar Grammar::parse(std::string_view text, std::string_view root) { return Parser(text).run(root); }

Grammar Grammar::after_literal(const Grammar& g, std::string_view literal) {
    Grammar out = g;
    auto chars = [&](CharSet cs) {
        out.sets.push_back(std::move(cs));
        out.elements.push_back({Element::Kind::Chars, uint32_t(out.sets.size() - 1)});
    };
    auto rule_ref = [&](uint32_t r) { out.elements.push_back({Element::Kind::Rule, r}); };
    auto end = [&] { out.elements.push_back({Element::Kind::End, 0}); };
    // after.space ::= [ \t\r\n] after.space1 | (empty); after.space1 ::= [ \t\r\n] | (empty):
    // at most two (a model left to repeat them may not stop).
    const uint32_t space1 = uint32_t(out.rules.size()), space = space1 + 1;
    const CharSet blank{{{U' ', U' '}, {U'\t', U'\t'}, {U'\n', U'\n'}, {U'\r', U'\r'}}, false};
    out.rules.push_back({"after.space1", {uint32_t(out.elements.size())}});
    chars(blank);
    end();
    out.rules[space1].alts.push_back(uint32_t(out.elements.size()));
    end();
    out.rules.push_back({"after.space", {uint32_t(out.elements.size())}});
    chars(blank);
    rule_ref(space1);
    end();
    out.rules[space].alts.push_back(uint32_t(out.elements.size()));
    end();
    // after.root ::= LITERAL after.space ROOT
    const uint32_t root = uint32_t(out.rules.size());
    out.rules.push_back({"after.root", {uint32_t(out.elements.size())}});
    for (size_t i = 0; i < literal.size();) {
        const unsigned char c = static_cast<unsigned char>(literal[i]);
        const int len = utf8_sequence_length(c);
        if (len == 0 || i + size_t(len) > literal.size()) throw GrammarError("after_literal: the literal is not UTF-8");
        char32_t cp = utf8_lead_bits(c, len);
        for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(literal[i + size_t(k)]) & 0x3F);
        chars(CharSet{{{cp, cp}}, false});
        i += size_t(len);
    }
    rule_ref(space);
    rule_ref(g.root);
    end();
    out.root = root;
    return out;
}

int Grammar::find_rule(std::string_view name) const {
    for (size_t r = 0; r < rules.size(); ++r)
        if (rules[r].name == name) return int(r);
    return -1;
}

}  // namespace vega::grammar
