#include "template/text.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "template/budget.h"
#include "template/value.h"

namespace vega::tmpl::text {

size_t find_bytes(const std::string& s, const std::string& sub, size_t pos) {
    if (pos > s.size()) return std::string::npos;
    if (sub.empty()) return pos;
    // glibc's memmem is linear in the worst case (std::string::find is not: 'aaa...'
    // searched for 'aa...ab' takes n*m).
    const void* p = memmem(s.data() + pos, s.size() - pos, sub.data(), sub.size());
    size_t f = p ? size_t((const char*)p - s.data()) : std::string::npos;
    charge_bytes((p ? f : s.size()) - pos + sub.size());
    return f;
}

size_t rfind_bytes(const std::string& s, const std::string& sub) {
    if (sub.size() > s.size()) return std::string::npos;
    // The last match is the first match of the reversed needle in the reversed string.
    std::string rs(s.rbegin(), s.rend()), rsub(sub.rbegin(), sub.rend());
    size_t f = find_bytes(rs, rsub, 0);
    return f == std::string::npos ? f : s.size() - f - sub.size();
}

bool contains(const std::string& s, const std::string& sub) { return find_bytes(s, sub, 0) != std::string::npos; }

std::vector<char32_t> decode(const std::string& s) {
    charge_bytes(s.size() * sizeof(char32_t));
    std::vector<char32_t> out;
    out.reserve(s.size());
    size_t i = 0, n = s.size();
    while (i < n) {
        unsigned char c = s[i];
        int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (len == 0 || i + len > n) {
            out.push_back(c);
            ++i;
            continue;
        }
        char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
        bool ok = true;
        for (int k = 1; k < len; ++k) {
            unsigned char cc = s[i + k];
            if ((cc >> 6) != 2) {
                ok = false;
                break;
            }
            cp = (cp << 6) | (cc & 0x3f);
        }
        if (!ok) {
            out.push_back(c);
            ++i;
            continue;
        }
        out.push_back(cp);
        i += len;
    }
    return out;
}

std::string encode(const std::vector<char32_t>& cps) {
    std::string out;
    out.reserve(cps.size());
    for (char32_t c : cps) append_utf8(out, c);
    return out;
}

size_t count_code_points(const std::string& s) {
    charge_bytes(s.size());
    size_t n = 0;
    for (unsigned char c : s)
        if ((c & 0xc0) != 0x80) ++n;
    return n;
}

bool is_space(char32_t c) {
    return c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f) || c == 0x85 || c == 0xa0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f ||
           c == 0x205f || c == 0x3000;
}

bool is_digit(char32_t c) { return c >= '0' && c <= '9'; }

char32_t to_upper(char32_t c) {
    if (c >= 'a' && c <= 'z') return c - 32;
    if ((c >= 0xe0 && c <= 0xfe && c != 0xf7)) return c - 32;
    if (c >= 0x3b1 && c <= 0x3c9 && c != 0x3c2) return c - 32;  // Greek
    if (c >= 0x430 && c <= 0x44f) return c - 32;                // Cyrillic
    if (c >= 0x450 && c <= 0x45f) return c - 80;
    return c;
}

char32_t to_lower(char32_t c) {
    if (c >= 'A' && c <= 'Z') return c + 32;
    if ((c >= 0xc0 && c <= 0xde && c != 0xd7)) return c + 32;
    if (c >= 0x391 && c <= 0x3a9 && c != 0x3a2) return c + 32;
    if (c >= 0x410 && c <= 0x42f) return c + 32;
    if (c >= 0x400 && c <= 0x40f) return c + 80;
    return c;
}

bool is_alpha(char32_t c) {
    if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    return to_upper(c) != c || to_lower(c) != c || (c >= 0x4e00 && c <= 0x9fff);
}

static bool cased(char32_t c) { return to_upper(c) != c || to_lower(c) != c; }

std::string strip(const std::string& s, bool left, bool right, bool chars_given, const std::string& chars) {
    auto cps = decode(s);
    std::vector<char32_t> set;
    if (chars_given) set = decode(chars);
    std::sort(set.begin(), set.end());  // a long `chars` costs log(n) per character, not n
    auto strip_it = [&](char32_t c) {
        return chars_given ? std::binary_search(set.begin(), set.end(), c) : is_space(c);
    };
    size_t b = 0, e = cps.size();
    if (left)
        while (b < e && strip_it(cps[b])) ++b;
    if (right)
        while (e > b && strip_it(cps[e - 1])) --e;
    // Fast path for ASCII-only edits: keep bytes exactly.
    return encode(std::vector<char32_t>(cps.begin() + b, cps.begin() + e));
}

std::vector<std::string> split(const std::string& s, bool has_sep, const std::string& sep, int64_t maxsplit,
                               bool from_right) {
    std::vector<std::string> out;
    if (has_sep) {
        if (sep.empty()) throw std::invalid_argument("empty separator");
        // rsplit is split of the reversed string by the reversed separator, pieces reversed back.
        std::string rs, rsep;
        if (from_right) rs.assign(s.rbegin(), s.rend()), rsep.assign(sep.rbegin(), sep.rend());
        const std::string& str = from_right ? rs : s;
        const std::string& sp = from_right ? rsep : sep;
        size_t pos = 0;
        while (maxsplit < 0 || (int64_t)out.size() < maxsplit) {
            size_t f = find_bytes(str, sp, pos);
            if (f == std::string::npos) break;
            check_items(out.size() + 2);
            out.push_back(str.substr(pos, f - pos));
            pos = f + sp.size();
        }
        out.push_back(str.substr(pos));
        if (from_right) {
            for (auto& piece : out) std::reverse(piece.begin(), piece.end());
            std::reverse(out.begin(), out.end());
        }
        return out;
    }
    auto cps = decode(s);
    if (!from_right) {
        size_t i = 0, n = cps.size();
        while (true) {
            while (i < n && is_space(cps[i])) ++i;
            if (i >= n) break;
            if (maxsplit >= 0 && (int64_t)out.size() >= maxsplit) {
                size_t e = n;
                while (e > i && is_space(cps[e - 1])) --e;
                out.push_back(encode(std::vector<char32_t>(cps.begin() + i, cps.begin() + e)));
                break;
            }
            size_t j = i;
            while (j < n && !is_space(cps[j])) ++j;
            check_items(out.size() + 1);
            out.push_back(encode(std::vector<char32_t>(cps.begin() + i, cps.begin() + j)));
            i = j;
        }
    } else {
        std::vector<std::string> rev;
        int64_t e = (int64_t)cps.size();
        while (true) {
            while (e > 0 && is_space(cps[e - 1])) --e;
            if (e <= 0) break;
            if (maxsplit >= 0 && (int64_t)rev.size() >= maxsplit) {
                int64_t b = 0;
                while (b < e && is_space(cps[b])) ++b;
                rev.push_back(encode(std::vector<char32_t>(cps.begin() + b, cps.begin() + e)));
                break;
            }
            int64_t j = e;
            while (j > 0 && !is_space(cps[j - 1])) --j;
            check_items(rev.size() + 1);
            rev.push_back(encode(std::vector<char32_t>(cps.begin() + j, cps.begin() + e)));
            e = j;
        }
        out.assign(rev.rbegin(), rev.rend());
    }
    return out;
}

static bool is_line_break(char32_t c) {
    return c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || c == 0x1c || c == 0x1d || c == 0x1e ||
           c == 0x85 || c == 0x2028 || c == 0x2029;
}

std::vector<std::string> splitlines(const std::string& s, bool keepends) {
    auto cps = decode(s);
    std::vector<std::string> out;
    size_t i = 0, n = cps.size(), start = 0;
    while (i < n) {
        if (is_line_break(cps[i])) {
            size_t eol = i;
            if (cps[i] == '\r' && i + 1 < n && cps[i + 1] == '\n') ++i;
            ++i;
            check_items(out.size() + 1);
            out.push_back(encode(std::vector<char32_t>(cps.begin() + start, cps.begin() + (keepends ? i : eol))));
            start = i;
        } else {
            ++i;
        }
    }
    if (start < n) out.push_back(encode(std::vector<char32_t>(cps.begin() + start, cps.end())));
    return out;
}

std::string replace(const std::string& s, const std::string& old, const std::string& neu, int64_t count,
                    size_t max_size) {
    std::string out;
    // The result can be far larger than its inputs ('a'*n).replace('a', 'a'*n): refuse
    // before it is built.
    auto grow = [&](size_t n) {
        if (n > max_size - std::min(out.size(), max_size))
            raise("OutputLimitError", "output exceeds the limit of " + std::to_string(max_size) + " bytes");
    };
    if (old.empty()) {
        // Python inserts neu between every character (and at both ends).
        auto cps = decode(s);
        int64_t done = 0;
        for (size_t k = 0; k <= cps.size(); ++k) {
            if (count < 0 || done < count) {
                grow(neu.size());
                out += neu;
                ++done;
            }
            if (k < cps.size()) append_utf8(out, cps[k]);
        }
        return out;
    }
    size_t pos = 0;
    int64_t done = 0;
    while (count < 0 || done < count) {
        size_t f = find_bytes(s, old, pos);
        if (f == std::string::npos) break;
        grow(f - pos + neu.size());
        out.append(s, pos, f - pos);
        out += neu;
        pos = f + old.size();
        ++done;
    }
    grow(s.size() - pos);
    out.append(s, pos, std::string::npos);
    return out;
}

std::string upper(const std::string& s) {
    auto c = decode(s);
    for (auto& x : c) x = to_upper(x);
    return encode(c);
}

std::string lower(const std::string& s) {
    auto c = decode(s);
    for (auto& x : c) x = to_lower(x);
    return encode(c);
}

std::string capitalize(const std::string& s) {
    auto c = decode(s);
    for (size_t k = 0; k < c.size(); ++k) c[k] = k == 0 ? to_upper(c[k]) : to_lower(c[k]);
    return encode(c);
}

std::string title(const std::string& s) {
    auto c = decode(s);
    bool prev_cased = false;
    for (auto& x : c) {
        if (cased(x)) {
            x = prev_cased ? to_lower(x) : to_upper(x);
            prev_cased = true;
        } else {
            prev_cased = false;
        }
    }
    return encode(c);
}

std::string swapcase(const std::string& s) {
    auto c = decode(s);
    for (auto& x : c) x = to_upper(x) != x ? to_upper(x) : to_lower(x);
    return encode(c);
}

int64_t find(const std::string& s, const std::string& sub, bool from_right) {
    size_t f = from_right ? rfind_bytes(s, sub) : find_bytes(s, sub, 0);
    if (f == std::string::npos) return -1;
    return (int64_t)count_code_points(s.substr(0, f));
}

int64_t count(const std::string& s, const std::string& sub) {
    if (sub.empty()) return (int64_t)count_code_points(s) + 1;
    int64_t n = 0;
    size_t pos = 0;
    while ((pos = find_bytes(s, sub, pos)) != std::string::npos) {
        ++n;
        pos += sub.size();
    }
    return n;
}

std::string html_escape(const std::string& s) {
    std::string out;
    out.reserve(s.size());
    for (char c : s) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '\'': out += "&#39;"; break;
            case '"': out += "&#34;"; break;
            default: out += c;
        }
    }
    return out;
}

bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0 && s.size() >= p.size(); }
bool ends_with(const std::string& s, const std::string& p) {
    return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

}  // namespace vega::tmpl::text
