#include "template/parser.h"

#include <cstdlib>
#include <initializer_list>

namespace vega::tmpl {

namespace {

// Does any expression in the body (not in nested macros) read the variable `name`?
bool expr_reads(const Expr* e, const std::string& name) {
    if (!e) return false;
    if (e->k == Expr::Name && e->name == name) return true;
    if (expr_reads(e->a.get(), name) || expr_reads(e->b.get(), name) || expr_reads(e->c.get(), name) ||
        expr_reads(e->d.get(), name))
        return true;
    for (auto& x : e->items)
        if (expr_reads(x.get(), name)) return true;
    for (auto& x : e->args.pos)
        if (expr_reads(x.get(), name)) return true;
    for (auto& [k, x] : e->args.kw)
        if (expr_reads(x.get(), name)) return true;
    return expr_reads(e->args.star.get(), name) || expr_reads(e->args.starstar.get(), name);
}

bool body_reads(const Body& body, const std::string& name) {
    for (auto& s : body) {
        if (expr_reads(s->expr.get(), name) || expr_reads(s->cond.get(), name)) return true;
        if (body_reads(s->body, name) || body_reads(s->else_body, name)) return true;
        for (auto& [t, e] : s->with_vars)
            if (expr_reads(e.get(), name)) return true;
        if (s->k == Stmt::CallBlock && body_reads(s->macro->body, name)) return true;
    }
    return false;
}

class Parser {
public:
    Parser(std::vector<Token> toks, int max_depth) : t_(std::move(toks)), max_depth_(max_depth) {}

    std::unique_ptr<Template> run() {
        auto tpl = std::make_unique<Template>();
        tpl->body = subparse({});
        if (cur().type != Tok::Eof) fail("unexpected '" + describe(cur()) + "'");
        return tpl;
    }

private:
    // One level of nesting: a block, a bracket, a recursive grammar rule.
    struct DepthGuard {
        Parser& p;
        explicit DepthGuard(Parser& pp) : p(pp) { p.enter(); }
        ~DepthGuard() { --p.depth_; }
    };
    // A left-deep chain (a+b+c, x|f|g, a.b.c, a[0][0]) is parsed by a loop but makes a tree
    // one level deeper per link, which evaluating and freeing walk recursively: each link
    // counts as a level of nesting until the chain ends.
    struct ChainGuard {
        Parser& p;
        int links = 0;
        explicit ChainGuard(Parser& pp) : p(pp) {}
        void link() {
            p.enter();
            ++links;
        }
        ~ChainGuard() { p.depth_ -= links; }
    };
    void enter() {
        if (depth_ >= max_depth_)
            fail("template nesting is too deep (more than " + std::to_string(max_depth_) +
                 " levels of blocks, brackets or chained operators; max_parse_depth)");
        ++depth_;
    }

    const Token& cur() const { return t_[i_]; }
    const Token& look(size_t n = 1) const { return t_[std::min(i_ + n, t_.size() - 1)]; }
    void next() {
        if (i_ + 1 < t_.size()) ++i_;
    }
    [[noreturn]] void fail(const std::string& msg, int line = -1) const {
        throw RenderError{"TemplateSyntaxError", msg, line < 0 ? cur().line : line};
    }
    static std::string describe(const Token& t) {
        switch (t.type) {
            case Tok::Eof: return "end of template";
            case Tok::BlockEnd: return "end of statement block";
            case Tok::VarEnd: return "end of print statement";
            case Tok::BlockBegin: return "begin of statement block";
            case Tok::VarBegin: return "begin of print statement";
            case Tok::Text: return "template data";
            default: return t.value;
        }
    }
    bool is_op(const char* op) const { return cur().type == Tok::Op && cur().value == op; }
    bool is_name(const char* n) const { return cur().type == Tok::Name && cur().value == n; }
    bool skip_op(const char* op) {
        if (!is_op(op)) return false;
        next();
        return true;
    }
    bool skip_name(const char* n) {
        if (!is_name(n)) return false;
        next();
        return true;
    }
    void expect_op(const char* op) {
        if (!skip_op(op)) fail(std::string("expected '") + op + "', got '" + describe(cur()) + "'");
    }
    std::string expect_name() {
        if (cur().type != Tok::Name) fail("expected a name, got '" + describe(cur()) + "'");
        std::string v = cur().value;
        next();
        return v;
    }
    void expect_block_end() {
        if (cur().type != Tok::BlockEnd) fail("expected end of statement block, got '" + describe(cur()) + "'");
        next();
    }
    ExprP node(Expr::K k, int line) {
        auto e = std::make_unique<Expr>();
        e->k = k;
        e->line = line;
        return e;
    }

    // ---- statements ----
    // Parses until a block tag named in `ends`; leaves the name token current.
    Body subparse(std::initializer_list<const char*> ends) {
        DepthGuard g(*this);
        Body body;
        while (cur().type != Tok::Eof) {
            const Token& t = cur();
            if (t.type == Tok::Text) {
                auto s = std::make_unique<Stmt>();
                s->k = Stmt::Text;
                s->line = t.line;
                s->text = t.value;
                body.push_back(std::move(s));
                next();
            } else if (t.type == Tok::VarBegin) {
                int line = t.line;
                next();
                auto s = std::make_unique<Stmt>();
                s->k = Stmt::Output;
                s->line = line;
                s->expr = parse_tuple(false, true, {}, false);
                if (cur().type != Tok::VarEnd) fail("expected end of print statement, got '" + describe(cur()) + "'");
                next();
                body.push_back(std::move(s));
            } else if (t.type == Tok::BlockBegin) {
                next();
                if (cur().type == Tok::Name)
                    for (const char* e : ends)
                        if (cur().value == e) return body;
                body.push_back(parse_statement());
            } else {
                fail("unexpected '" + describe(t) + "'");
            }
        }
        if (ends.size()) {
            std::string want;
            for (const char* e : ends) want += (want.empty() ? "'" : " or '") + std::string(e) + "'";
            fail("unexpected end of template, expected " + want);
        }
        return body;
    }

    StmtP stmt(Stmt::K k, int line) {
        auto s = std::make_unique<Stmt>();
        s->k = k;
        s->line = line;
        return s;
    }

    StmtP parse_statement() {
        if (cur().type != Tok::Name) fail("tag name expected");
        std::string kw = cur().value;
        int line = cur().line;
        next();
        if (kw == "if") return parse_if(line);
        if (kw == "for") return parse_for(line);
        if (kw == "set") return parse_set(line);
        if (kw == "macro") return parse_macro(line);
        if (kw == "call") return parse_call_block(line);
        if (kw == "filter") return parse_filter_block(line);
        if (kw == "with") return parse_with(line);
        if (kw == "break" || kw == "continue") {
            if (loop_depth_ == 0) fail("'" + kw + "' outside of a loop", line);
            expect_block_end();
            return stmt(kw == "break" ? Stmt::Break : Stmt::Continue, line);
        }
        if (kw == "generation") {
            expect_block_end();
            auto s = stmt(Stmt::Scope, line);
            s->body = subparse({"endgeneration"});
            next();
            expect_block_end();
            return s;
        }
        fail("encountered unknown tag '" + kw + "'", line);
    }

    StmtP parse_if(int line) {
        auto s = stmt(Stmt::If, line);
        s->expr = parse_tuple(false, true, {}, false);
        expect_block_end();
        s->body = subparse({"elif", "else", "endif"});
        std::string tag = cur().value;
        int tl = cur().line;
        next();
        if (tag == "elif") {
            DepthGuard g(*this);  // an elif is an if nested in the else branch
            s->else_body.push_back(parse_if(tl));
            return s;  // the nested if consumed endif
        }
        if (tag == "else") {
            expect_block_end();
            s->else_body = subparse({"endif"});
            next();
        }
        expect_block_end();
        return s;
    }

    Target parse_target(bool with_namespace, const char* end_name) {
        Target t;
        if (with_namespace && cur().type == Tok::Name && look().type == Tok::Op && look().value == ".") {
            t.name = expect_name();
            next();
            t.attr = expect_name();
            return t;
        }
        bool paren = skip_op("(");
        std::vector<std::string> names;
        bool is_tuple = false;
        while (true) {
            if (!names.empty()) {
                if (!skip_op(",")) break;
                is_tuple = true;
            }
            if (cur().type != Tok::Name || (end_name && is_name(end_name)) || is_op(")") || is_op("=")) break;
            std::string n = expect_name();
            if (n == "true" || n == "false" || n == "none" || n == "True" || n == "False" || n == "None")
                fail("cannot assign to '" + n + "'");
            names.push_back(n);
        }
        if (paren) expect_op(")");
        if (names.empty()) fail("expected an assignment target, got '" + describe(cur()) + "'");
        if (is_tuple || paren)
            t.names = names;
        else
            t.name = names[0];
        if (paren && names.size() == 1 && !is_tuple) t.name = names[0], t.names.clear();
        return t;
    }

    StmtP parse_for(int line) {
        auto s = stmt(Stmt::For, line);
        s->target = parse_target(false, "in");
        if (!skip_name("in")) fail("expected 'in', got '" + describe(cur()) + "'");
        s->expr = parse_tuple(false, false, "recursive", false);
        if (skip_name("if")) s->cond = parse_expression(true);
        if (skip_name("recursive")) s->recursive = true;
        expect_block_end();
        ++loop_depth_;
        s->body = subparse({"endfor", "else"});
        --loop_depth_;
        if (cur().value == "else") {
            next();
            expect_block_end();
            s->else_body = subparse({"endfor"});
        }
        next();
        expect_block_end();
        return s;
    }

    StmtP parse_set(int line) {
        Target t = parse_target(true, nullptr);
        if (skip_op("=")) {
            auto s = stmt(Stmt::Set, line);
            s->target = t;
            s->expr = parse_tuple(false, true, {}, false);
            expect_block_end();
            return s;
        }
        auto s = stmt(Stmt::SetBlock, line);
        s->target = t;
        if (is_op("|")) s->expr = parse_filter(nullptr, false);
        expect_block_end();
        s->body = subparse({"endset"});
        next();
        expect_block_end();
        return s;
    }

    void parse_signature(MacroDef& m) {
        expect_op("(");
        while (!is_op(")")) {
            if (!m.params.empty()) expect_op(",");
            if (is_op(")")) break;
            std::string p = expect_name();
            m.params.push_back(p);
            if (skip_op("=")) {
                m.defaults.push_back(parse_expression(true));
            } else if (!m.defaults.empty()) {
                fail("non-default argument follows default argument");
            }
        }
        expect_op(")");
    }

    StmtP parse_macro(int line) {
        auto s = stmt(Stmt::Macro, line);
        s->macro = std::make_shared<MacroDef>();
        s->macro->name = expect_name();
        parse_signature(*s->macro);
        expect_block_end();
        int saved = loop_depth_;
        loop_depth_ = 0;
        s->macro->body = subparse({"endmacro"});
        loop_depth_ = saved;
        s->macro->uses_varargs = body_reads(s->macro->body, "varargs");
        s->macro->uses_kwargs = body_reads(s->macro->body, "kwargs");
        next();
        expect_block_end();
        return s;
    }

    StmtP parse_call_block(int line) {
        auto s = stmt(Stmt::CallBlock, line);
        s->macro = std::make_shared<MacroDef>();
        s->macro->name = "caller";
        if (is_op("(")) parse_signature(*s->macro);
        s->expr = parse_expression(true);
        if (s->expr->k != Expr::Call) fail("expected call", line);
        expect_block_end();
        s->macro->body = subparse({"endcall"});
        s->macro->uses_varargs = body_reads(s->macro->body, "varargs");
        s->macro->uses_kwargs = body_reads(s->macro->body, "kwargs");
        next();
        expect_block_end();
        return s;
    }

    StmtP parse_filter_block(int line) {
        auto s = stmt(Stmt::FilterBlock, line);
        s->expr = parse_filter(nullptr, true);
        expect_block_end();
        s->body = subparse({"endfilter"});
        next();
        expect_block_end();
        return s;
    }

    StmtP parse_with(int line) {
        auto s = stmt(Stmt::With, line);
        while (cur().type != Tok::BlockEnd) {
            if (!s->with_vars.empty()) expect_op(",");
            Target t = parse_target(false, nullptr);
            expect_op("=");
            s->with_vars.emplace_back(t, parse_expression(true));
        }
        expect_block_end();
        s->body = subparse({"endwith"});
        next();
        expect_block_end();
        return s;
    }

    // ---- expressions ----
    bool is_tuple_end(const char* extra_end) const {
        if (cur().type == Tok::VarEnd || cur().type == Tok::BlockEnd || cur().type == Tok::Eof) return true;
        if (is_op(")")) return true;
        if (extra_end && is_name(extra_end)) return true;
        return false;
    }

    ExprP parse_tuple(bool simplified, bool with_condexpr, const char* extra_end, bool explicit_parens) {
        int line = cur().line;
        std::vector<ExprP> args;
        bool is_tuple = false;
        while (true) {
            if (!args.empty()) expect_op(",");
            if (is_tuple_end(extra_end)) break;
            if (simplified)
                args.push_back(parse_primary());
            else
                args.push_back(parse_expression(with_condexpr));
            if (is_op(","))
                is_tuple = true;
            else
                break;
        }
        if (!is_tuple) {
            if (!args.empty()) return std::move(args[0]);
            if (!explicit_parens) fail("expected an expression, got '" + describe(cur()) + "'");
        }
        auto e = node(Expr::TupleLit, line);
        e->items = std::move(args);
        return e;
    }

    ExprP parse_expression(bool with_condexpr) {
        DepthGuard g(*this);
        if (!with_condexpr) return parse_or();
        ExprP e = parse_or();
        ChainGuard chain(*this);
        while (is_name("if")) {
            chain.link();
            int line = cur().line;
            next();
            auto c = node(Expr::CondExpr, line);
            c->b = parse_or();  // the test
            c->a = std::move(e);
            if (skip_name("else")) c->c = parse_expression(true);
            e = std::move(c);
        }
        return e;
    }

    ExprP parse_or() {
        ExprP l = parse_and();
        ChainGuard chain(*this);
        while (is_name("or")) {
            chain.link();
            int line = cur().line;
            next();
            auto e = node(Expr::Or, line);
            e->a = std::move(l);
            e->b = parse_and();
            l = std::move(e);
        }
        return l;
    }

    ExprP parse_and() {
        ExprP l = parse_not();
        ChainGuard chain(*this);
        while (is_name("and")) {
            chain.link();
            int line = cur().line;
            next();
            auto e = node(Expr::And, line);
            e->a = std::move(l);
            e->b = parse_not();
            l = std::move(e);
        }
        return l;
    }

    ExprP parse_not() {
        if (is_name("not")) {
            DepthGuard g(*this);
            int line = cur().line;
            next();
            auto e = node(Expr::Not, line);
            e->a = parse_not();
            return e;
        }
        return parse_compare();
    }

    ExprP parse_compare() {
        int line = cur().line;
        ExprP l = parse_math1();
        ExprP cmp;
        while (true) {
            std::string op;
            if (cur().type == Tok::Op &&
                (cur().value == "==" || cur().value == "!=" || cur().value == "<" || cur().value == "<=" ||
                 cur().value == ">" || cur().value == ">=")) {
                op = cur().value;
                next();
            } else if (is_name("in")) {
                op = "in";
                next();
            } else if (is_name("not") && look().type == Tok::Name && look().value == "in") {
                op = "notin";
                next();
                next();
            } else {
                break;
            }
            if (!cmp) {
                cmp = node(Expr::Compare, line);
                cmp->a = std::move(l);
            }
            cmp->ops.push_back(op);
            cmp->items.push_back(parse_math1());
        }
        return cmp ? std::move(cmp) : std::move(l);
    }

    ExprP binary(const std::string& op, ExprP l, ExprP r, int line) {
        auto e = node(Expr::Binary, line);
        e->name = op;
        e->a = std::move(l);
        e->b = std::move(r);
        return e;
    }

    ExprP parse_math1() {
        ExprP l = parse_concat();
        ChainGuard chain(*this);
        while (is_op("+") || is_op("-")) {
            chain.link();
            std::string op = cur().value;
            int line = cur().line;
            next();
            l = binary(op, std::move(l), parse_concat(), line);
        }
        return l;
    }

    ExprP parse_concat() {
        int line = cur().line;
        ExprP l = parse_math2();
        if (!is_op("~")) return l;
        auto e = node(Expr::Concat, line);
        e->items.push_back(std::move(l));
        while (skip_op("~")) e->items.push_back(parse_math2());
        return e;
    }

    ExprP parse_math2() {
        ExprP l = parse_pow();
        ChainGuard chain(*this);
        while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
            chain.link();
            std::string op = cur().value;
            int line = cur().line;
            next();
            l = binary(op, std::move(l), parse_pow(), line);
        }
        return l;
    }

    ExprP parse_pow() {
        ExprP l = parse_unary(true);
        ChainGuard chain(*this);
        while (is_op("**")) {
            chain.link();
            int line = cur().line;
            next();
            l = binary("**", std::move(l), parse_unary(true), line);
        }
        return l;
    }

    ExprP parse_unary(bool with_filter) {
        DepthGuard g(*this);
        int line = cur().line;
        ExprP e;
        if (is_op("-") || is_op("+")) {
            bool neg = cur().value == "-";
            next();
            e = node(neg ? Expr::Neg : Expr::Pos, line);
            e->a = parse_unary(false);
        } else {
            e = parse_primary();
        }
        e = parse_postfix(std::move(e));
        if (with_filter) e = parse_filter_expr(std::move(e));
        return e;
    }

    ExprP parse_primary() {
        DepthGuard g(*this);
        const Token& t = cur();
        int line = t.line;
        if (t.type == Tok::Name) {
            std::string v = t.value;
            next();
            auto e = node(Expr::Literal, line);
            if (v == "true" || v == "True") {
                e->value = Value::boolean(true);
            } else if (v == "false" || v == "False") {
                e->value = Value::boolean(false);
            } else if (v == "none" || v == "None") {
                e->value = Value::none();
            } else {
                e->k = Expr::Name;
                e->name = v;
            }
            return e;
        }
        if (t.type == Tok::String) {
            std::string s;
            while (cur().type == Tok::String) {
                s += cur().value;
                next();
            }
            auto e = node(Expr::Literal, line);
            e->value = Value::string(s);
            return e;
        }
        if (t.type == Tok::Int || t.type == Tok::Float) {
            auto e = node(Expr::Literal, line);
            const std::string& v = t.value;
            if (t.type == Tok::Float) {
                e->value = Value::number(std::strtod(v.c_str(), nullptr));
            } else {
                int base = 10;
                std::string digits = v;
                if (v.size() > 2 && v[0] == '0' && isalpha((unsigned char)v[1])) {
                    char b = (char)tolower(v[1]);
                    base = b == 'x' ? 16 : b == 'o' ? 8 : 2;
                    digits = v.substr(2);
                }
                errno = 0;
                long long x = std::strtoll(digits.c_str(), nullptr, base);
                if (errno == ERANGE) fail("integer literal too large");
                e->value = Value::integer(x);
            }
            next();
            return e;
        }
        if (is_op("(")) {
            next();
            ExprP e = parse_tuple(false, true, nullptr, true);
            expect_op(")");
            return e;
        }
        if (is_op("[")) {
            next();
            auto e = node(Expr::ListLit, line);
            while (!is_op("]")) {
                if (!e->items.empty()) expect_op(",");
                if (is_op("]")) break;
                e->items.push_back(parse_expression(true));
            }
            expect_op("]");
            return e;
        }
        if (is_op("{")) {
            next();
            auto e = node(Expr::DictLit, line);
            while (!is_op("}")) {
                if (!e->items.empty()) expect_op(",");
                if (is_op("}")) break;
                e->items.push_back(parse_expression(true));
                expect_op(":");
                e->items.push_back(parse_expression(true));
            }
            expect_op("}");
            return e;
        }
        fail("unexpected '" + describe(t) + "'");
    }

    ExprP parse_postfix(ExprP e) {
        ChainGuard chain(*this);
        while (true) {
            if (is_op(".") || is_op("[") || is_op("(")) chain.link();
            if (is_op(".") || is_op("[")) {
                e = parse_subscript(std::move(e));
            } else if (is_op("(")) {
                e = parse_call(std::move(e));
            } else {
                break;
            }
        }
        return e;
    }

    ExprP parse_filter_expr(ExprP e) {
        ChainGuard chain(*this);
        while (true) {
            if (is_op("|") || is_name("is") || is_op("(")) chain.link();
            if (is_op("|")) {
                e = parse_filter(std::move(e), false);
            } else if (is_name("is")) {
                e = parse_test(std::move(e));
            } else if (is_op("(")) {
                e = parse_call(std::move(e));
            } else {
                break;
            }
        }
        return e;
    }

    ExprP parse_subscript(ExprP e) {
        int line = cur().line;
        if (skip_op(".")) {
            if (cur().type == Tok::Name) {
                auto g = node(Expr::Getattr, line);
                g->a = std::move(e);
                g->name = cur().value;
                next();
                return g;
            }
            if (cur().type == Tok::Int) {
                auto g = node(Expr::Getitem, line);
                g->a = std::move(e);
                g->b = node(Expr::Literal, line);
                g->b->value = Value::integer(std::strtoll(cur().value.c_str(), nullptr, 10));
                next();
                return g;
            }
            fail("expected name or number");
        }
        expect_op("[");
        std::vector<ExprP> args;
        while (!is_op("]")) {
            if (!args.empty()) expect_op(",");
            args.push_back(parse_subscribed());
        }
        expect_op("]");
        if (args.empty()) fail("expected subscript expression", line);
        if (args.size() > 1)
            for (auto& a : args)  // a[1:2, 3]: Python slice objects, which templates never use
                if (a->k == Expr::Slice) fail("a slice inside a tuple subscript is not supported", line);
        ExprP idx;
        if (args.size() == 1) {
            idx = std::move(args[0]);
        } else {
            idx = node(Expr::TupleLit, line);
            idx->items = std::move(args);
        }
        if (idx->k == Expr::Slice) {
            idx->a = std::move(e);
            return idx;
        }
        auto g = node(Expr::Getitem, line);
        g->a = std::move(e);
        g->b = std::move(idx);
        return g;
    }

    // A subscript: an expression or a slice (the slice's object is filled in later).
    ExprP parse_subscribed() {
        int line = cur().line;
        ExprP start;
        if (!skip_op(":")) {
            start = parse_expression(true);
            if (!skip_op(":")) return start;
        }
        auto s = node(Expr::Slice, line);
        s->b = std::move(start);
        if (!is_op("]") && !is_op(",") && !is_op(":")) s->c = parse_expression(true);
        if (skip_op(":")) {
            if (!is_op("]") && !is_op(",")) s->d = parse_expression(true);
        }
        return s;
    }

    void parse_call_args(CallArgs& a) {
        expect_op("(");
        bool require_comma = false;
        while (!is_op(")")) {
            if (require_comma) {
                expect_op(",");
                if (is_op(")")) break;
            }
            if (skip_op("*")) {
                a.star = parse_expression(true);
            } else if (skip_op("**")) {
                a.starstar = parse_expression(true);
            } else if (cur().type == Tok::Name && look().type == Tok::Op && look().value == "=") {
                std::string key = cur().value;
                next();
                next();
                a.kw.emplace_back(key, parse_expression(true));
            } else {
                if (!a.kw.empty() || a.star || a.starstar) fail("invalid syntax for function call expression");
                a.pos.push_back(parse_expression(true));
            }
            require_comma = true;
        }
        expect_op(")");
    }

    ExprP parse_call(ExprP e) {
        auto c = node(Expr::Call, cur().line);
        c->a = std::move(e);
        parse_call_args(c->args);
        return c;
    }

    ExprP parse_filter(ExprP e, bool start_inline) {
        ChainGuard chain(*this);
        while (is_op("|") || start_inline) {
            chain.link();
            if (!start_inline) next();
            start_inline = false;
            int line = cur().line;
            auto f = node(Expr::Filter, line);
            f->name = expect_name();
            while (is_op(".")) {
                next();
                f->name += "." + expect_name();
            }
            if (is_op("(")) parse_call_args(f->args);
            f->a = std::move(e);
            e = std::move(f);
        }
        return e;
    }

    ExprP parse_test(ExprP e) {
        int line = cur().line;
        next();  // 'is'
        auto t = node(Expr::Test, line);
        t->negated = skip_name("not");
        t->name = expect_name();
        while (is_op(".")) {
            next();
            t->name += "." + expect_name();
        }
        if (is_op("(")) {
            parse_call_args(t->args);
        } else if ((cur().type == Tok::Name || cur().type == Tok::String || cur().type == Tok::Int ||
                    cur().type == Tok::Float || is_op("(") || is_op("[") || is_op("{")) &&
                   !is_name("else") && !is_name("or") && !is_name("and")) {
            if (is_name("is")) fail("you cannot chain multiple tests with is");
            ExprP arg = parse_primary();
            arg = parse_postfix(std::move(arg));
            t->args.pos.push_back(std::move(arg));
        }
        t->a = std::move(e);
        return t;
    }

    std::vector<Token> t_;
    size_t i_ = 0;
    int max_depth_;
    int depth_ = 0;
    int loop_depth_ = 0;
};

}  // namespace

std::unique_ptr<Template> parse_template(const std::string& source, const LexOptions& opt, int max_depth) {
    return Parser(tokenize(source, opt), max_depth).run();
}

}  // namespace vega::tmpl
