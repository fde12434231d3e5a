#include "template/lexer.h"

#include <cstring>

#include "template/text.h"
#include "template/value.h"

namespace vega::tmpl {

namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

[[noreturn]] void syntax_error(const std::string& msg, int line) {
    throw RenderError{"TemplateSyntaxError", msg, line};
}

// Python's unicode-escape decoding of a string literal's body.
std::string unescape(const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        char c = s[i];
        if (c != '\\' || i + 1 >= s.size()) {
            out += c;
            continue;
        }
        char e = s[++i];
        auto hex = [&](size_t ndig) -> bool {
            if (i + ndig >= s.size() + 0 && i + ndig > s.size() - 1 + 1) return false;
            uint32_t v = 0;
            for (size_t k = 1; k <= ndig; ++k) {
                if (i + k >= s.size() || !isxdigit((unsigned char)s[i + k])) return false;
                char h = s[i + k];
                v = v * 16 + (isdigit((unsigned char)h) ? h - '0' : (tolower(h) - 'a' + 10));
            }
            text::append_utf8(out, v);
            i += ndig;
            return true;
        };
        switch (e) {
            case '\n': break;
            case '\\': out += '\\'; break;
            case '\'': out += '\''; break;
            case '"': out += '"'; break;
            case 'a': out += '\a'; break;
            case 'b': out += '\b'; break;
            case 'f': out += '\f'; break;
            case 'n': out += '\n'; break;
            case 'r': out += '\r'; break;
            case 't': out += '\t'; break;
            case 'v': out += '\v'; break;
            case 'x':
                if (!hex(2)) throw RenderError{"TemplateSyntaxError", "truncated \\xXX escape", 0};
                break;
            case 'u':
                if (!hex(4)) throw RenderError{"TemplateSyntaxError", "truncated \\uXXXX escape", 0};
                break;
            case 'U':
                if (!hex(8)) throw RenderError{"TemplateSyntaxError", "truncated \\UXXXXXXXX escape", 0};
                break;
            default:
                if (e >= '0' && e <= '7') {
                    uint32_t v = e - '0';
                    for (int k = 0; k < 2 && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '7'; ++k)
                        v = v * 8 + (s[++i] - '0');
                    text::append_utf8(out, v);
                } else {
                    out += '\\';
                    out += e;
                }
        }
    }
    return out;
}

class Lexer {
public:
    Lexer(const std::string& src, const LexOptions& opt) : opt_(opt) {
        // Normalise newlines like jinja2 and drop one trailing newline.
        src_.reserve(src.size());
        for (size_t i = 0; i < src.size(); ++i) {
            if (src[i] == '\r') {
                src_ += '\n';
                if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
            } else {
                src_ += src[i];
            }
        }
        if (!opt_.keep_trailing_newline && !src_.empty() && src_.back() == '\n') src_.pop_back();
    }

    std::vector<Token> run() {
        size_t n = src_.size();
        bool line_starting = true;
        while (pos_ < n) {
            size_t k = pos_;
            for (;;) {
                k = src_.find('{', k);
                if (k == std::string::npos || k + 1 >= n) {
                    k = std::string::npos;
                    break;
                }
                char c = src_[k + 1];
                if (c == '{' || c == '%' || c == '#') break;
                ++k;
            }
            if (k == std::string::npos) {
                emit_text(src_.substr(pos_));
                advance_to(n);
                break;
            }
            std::string text = src_.substr(pos_, k - pos_);
            char kind = src_[k + 1];
            char sign = k + 2 < n && (src_[k + 2] == '-' || src_[k + 2] == '+') ? src_[k + 2] : 0;
            if (sign == '-') {
                size_t e = text.size();
                while (e > 0 && is_ws(text[e - 1])) --e;
                text.resize(e);
            } else if (sign != '+' && opt_.lstrip_blocks && kind != '{') {
                size_t l_pos = text.rfind('\n');
                l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
                if (l_pos > 0 || line_starting) {
                    bool all_ws = l_pos < text.size();
                    for (size_t q = l_pos; q < text.size(); ++q)
                        if (!is_ws(text[q])) all_ws = false;
                    if (all_ws) text.resize(l_pos);
                }
            }
            emit_text(text);
            advance_to(k);
            size_t body = k + 2 + (sign ? 1 : 0);
            int tag_line = line_;
            if (kind == '#') {
                size_t f = src_.find("#}", body);
                if (f == std::string::npos) syntax_error("missing end of comment tag", tag_line);
                size_t end = f + 2;
                if (f > body && src_[f - 1] == '-') {
                    while (end < n && is_ws(src_[end])) ++end;
                } else if (f > body && src_[f - 1] == '+') {
                } else if (opt_.trim_blocks && end < n && src_[end] == '\n') {
                    ++end;
                }
                advance_to(end);
                line_starting = end > 0 && src_[end - 1] == '\n';
                continue;
            }
            if (kind == '%' && try_raw(body, line_starting)) continue;
            tokens_.push_back({kind == '%' ? Tok::BlockBegin : Tok::VarBegin, "", line_});
            advance_to(body);
            line_starting = lex_expression(kind == '%');
        }
        tokens_.push_back({Tok::Eof, "", line_});
        return std::move(tokens_);
    }

private:
    void emit_text(const std::string& t) {
        if (!t.empty()) tokens_.push_back({Tok::Text, t, line_});
    }

    void advance_to(size_t p) {
        for (size_t q = pos_; q < p; ++q)
            if (src_[q] == '\n') ++line_;
        pos_ = p;
    }

    // {% raw %} ... {% endraw %}: returns false if the tag at body is not raw.
    bool try_raw(size_t body, bool& line_starting) {
        size_t n = src_.size(), p = body;
        while (p < n && is_ws(src_[p])) ++p;
        if (src_.compare(p, 3, "raw") != 0) return false;
        p += 3;
        if (p < n && (isalnum((unsigned char)src_[p]) || src_[p] == '_')) return false;
        while (p < n && is_ws(src_[p])) ++p;
        if (src_.compare(p, 3, "-%}") == 0) {
            p += 3;
            while (p < n && is_ws(src_[p])) ++p;
        } else if (src_.compare(p, 2, "%}") == 0) {
            p += 2;
        } else {
            return false;
        }
        int start_line = line_;
        // Find {%[-+]? endraw [-+]?%}
        size_t q = p;
        for (;;) {
            size_t f = src_.find("{%", q);
            if (f == std::string::npos) syntax_error("missing end of raw directive", start_line);
            size_t r = f + 2;
            char sign = r < n && (src_[r] == '-' || src_[r] == '+') ? src_[r] : 0;
            if (sign) ++r;
            while (r < n && is_ws(src_[r])) ++r;
            if (src_.compare(r, 6, "endraw") != 0) {
                q = f + 2;
                continue;
            }
            r += 6;
            while (r < n && is_ws(src_[r])) ++r;
            size_t end;
            if (src_.compare(r, 3, "+%}") == 0) {
                end = r + 3;
            } else if (src_.compare(r, 3, "-%}") == 0) {
                end = r + 3;
                while (end < n && is_ws(src_[end])) ++end;
            } else if (src_.compare(r, 2, "%}") == 0) {
                end = r + 2;
                if (opt_.trim_blocks && end < n && src_[end] == '\n') ++end;
            } else {
                q = f + 2;
                continue;
            }
            std::string t = src_.substr(p, f - p);
            if (sign == '-') {
                size_t e = t.size();
                while (e > 0 && is_ws(t[e - 1])) --e;
                t.resize(e);
            }
            advance_to(p);
            emit_text(t);
            advance_to(end);
            line_starting = src_[end - 1] == '\n';
            return true;
        }
    }

    // Lexes tokens until the closing %} or }}; returns whether the end consumed a newline.
    bool lex_expression(bool block) {
        size_t n = src_.size();
        int start_line = line_;
        int depth = 0;
        while (true) {
            if (pos_ >= n) syntax_error(block ? "unexpected end of template, expected '%}'" : "unexpected end of template, expected '}}'", start_line);
            char c = src_[pos_];
            if (block && depth == 0) {
                if (src_.compare(pos_, 3, "+%}") == 0) {
                    tokens_.push_back({Tok::BlockEnd, "", line_});
                    advance_to(pos_ + 3);
                    return false;
                }
                if (src_.compare(pos_, 3, "-%}") == 0) {
                    tokens_.push_back({Tok::BlockEnd, "", line_});
                    size_t e = pos_ + 3;
                    while (e < n && is_ws(src_[e])) ++e;
                    advance_to(e);
                    return src_[e - 1] == '\n';
                }
                if (src_.compare(pos_, 2, "%}") == 0) {
                    tokens_.push_back({Tok::BlockEnd, "", line_});
                    size_t e = pos_ + 2;
                    if (opt_.trim_blocks && e < n && src_[e] == '\n') ++e;
                    advance_to(e);
                    return src_[e - 1] == '\n';
                }
            } else if (!block && depth == 0) {
                if (src_.compare(pos_, 3, "-}}") == 0) {
                    tokens_.push_back({Tok::VarEnd, "", line_});
                    size_t e = pos_ + 3;
                    while (e < n && is_ws(src_[e])) ++e;
                    advance_to(e);
                    return src_[e - 1] == '\n';
                }
                if (src_.compare(pos_, 2, "}}") == 0) {
                    tokens_.push_back({Tok::VarEnd, "", line_});
                    advance_to(pos_ + 2);
                    return false;
                }
            }
            if (is_ws(c)) {
                advance_to(pos_ + 1);
                continue;
            }
            int tl = line_;
            if (isdigit((unsigned char)c)) {
                size_t e = pos_;
                bool is_float = false;
                if (c == '0' && e + 1 < n && strchr("xXoObB", src_[e + 1])) {
                    e += 2;
                    while (e < n && (isxdigit((unsigned char)src_[e]) || src_[e] == '_')) ++e;
                } else {
                    while (e < n && (isdigit((unsigned char)src_[e]) || src_[e] == '_')) ++e;
                    if (e + 1 < n && src_[e] == '.' && isdigit((unsigned char)src_[e + 1])) {
                        is_float = true;
                        ++e;
                        while (e < n && (isdigit((unsigned char)src_[e]) || src_[e] == '_')) ++e;
                    }
                    if (e < n && (src_[e] == 'e' || src_[e] == 'E')) {
                        size_t x = e + 1;
                        if (x < n && (src_[x] == '+' || src_[x] == '-')) ++x;
                        if (x < n && isdigit((unsigned char)src_[x])) {
                            is_float = true;
                            e = x;
                            while (e < n && (isdigit((unsigned char)src_[e]) || src_[e] == '_')) ++e;
                        }
                    }
                }
                std::string lit;
                for (size_t q = pos_; q < e; ++q)
                    if (src_[q] != '_') lit += src_[q];
                tokens_.push_back({is_float ? Tok::Float : Tok::Int, lit, tl});
                advance_to(e);
                continue;
            }
            if (isalpha((unsigned char)c) || c == '_') {
                size_t e = pos_;
                while (e < n && (isalnum((unsigned char)src_[e]) || src_[e] == '_')) ++e;
                tokens_.push_back({Tok::Name, src_.substr(pos_, e - pos_), tl});
                advance_to(e);
                continue;
            }
            if (c == '\'' || c == '"') {
                size_t e = pos_ + 1;
                while (e < n && src_[e] != c) {
                    if (src_[e] == '\\') ++e;
                    ++e;
                }
                if (e >= n) syntax_error("unexpected end of string literal", tl);
                std::string body = src_.substr(pos_ + 1, e - pos_ - 1);
                std::string decoded;
                try {
                    decoded = unescape(body);
                } catch (RenderError& err) {
                    err.line = tl;
                    throw;
                }
                tokens_.push_back({Tok::String, decoded, tl});
                advance_to(e + 1);
                continue;
            }
            static const char* ops2[] = {"//", "**", "==", "!=", "<=", ">="};
            bool matched = false;
            for (const char* op : ops2)
                if (src_.compare(pos_, 2, op) == 0) {
                    tokens_.push_back({Tok::Op, op, tl});
                    advance_to(pos_ + 2);
                    matched = true;
                    break;
                }
            if (matched) continue;
            if (strchr("+-/*%~[](){}<>=.:|,;", c)) {
                if (c == '(' || c == '[' || c == '{') ++depth;
                if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
                tokens_.push_back({Tok::Op, std::string(1, c), tl});
                advance_to(pos_ + 1);
                continue;
            }
            syntax_error(std::string("unexpected char '") + c + "'", tl);
        }
    }

    std::string src_;
    LexOptions opt_;
    size_t pos_ = 0;
    int line_ = 1;
    std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(const std::string& source, const LexOptions& opt) {
    return Lexer(source, opt).run();
}

}  // namespace vega::tmpl
