// The parsed template: expression and statement nodes.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "template/value.h"

namespace vega::tmpl {

struct Expr;
using ExprP = std::unique_ptr<Expr>;

struct CallArgs {
    std::vector<ExprP> pos;
    std::vector<std::pair<std::string, ExprP>> kw;
    ExprP star;     // *args
    ExprP starstar; // **kwargs
};

struct Expr {
    enum K {
        Literal,   // value
        Name,      // name
        TupleLit,  // items
        ListLit,   // items
        DictLit,   // items as key, value pairs
        Getattr,   // a.name
        Getitem,   // a[b]
        Slice,     // a[b:c:d] (null parts allowed)
        Call,      // a(args)
        Filter,    // a|name(args); a null inside a {% filter %} block
        Test,      // a is [not] name(args); negated
        Neg,       // -a
        Pos,       // +a
        Not,       // not a
        And,       // a and b
        Or,        // a or b
        Binary,    // a op b: + - * / // % **
        Concat,    // items joined with ~
        Compare,   // a (ops[i] items[i])...
        CondExpr,  // a if b else c (c may be null)
    };
    K k;
    int line = 0;
    Value value;
    std::string name;  // Name, Getattr attribute, Filter/Test name, Binary op
    bool negated = false;
    ExprP a, b, c, d;
    std::vector<ExprP> items;
    std::vector<std::string> ops;
    CallArgs args;
};

struct Stmt;
using StmtP = std::unique_ptr<Stmt>;
using Body = std::vector<StmtP>;

// An assignment target: a name, a tuple of names, or ns.attr.
struct Target {
    std::string name;               // single name (or the namespace for attr)
    std::string attr;               // ns.attr when not empty
    std::vector<std::string> names; // tuple unpacking when not empty
};

struct MacroDef {
    std::string name;
    std::vector<std::string> params;
    std::vector<ExprP> defaults;  // aligned to the last params
    Body body;
    // Whether the body reads `varargs` / `kwargs`: if not, extra arguments are an error.
    bool uses_varargs = false;
    bool uses_kwargs = false;
};

struct Stmt {
    enum K { Text, Output, If, For, Set, SetBlock, Macro, CallBlock, FilterBlock, Break, Continue, Scope, With };
    K k;
    int line = 0;
    std::string text;        // Text
    ExprP expr;              // Output, If test, For iter, Set value, CallBlock call, FilterBlock filter chain
    ExprP cond;              // For's inline if filter
    Target target;           // For, Set, SetBlock
    Body body, else_body;
    bool recursive = false;  // For
    std::shared_ptr<MacroDef> macro;  // Macro, CallBlock (the caller)
    std::vector<std::pair<Target, ExprP>> with_vars;  // With
};

struct Template {
    Body body;
};

}  // namespace vega::tmpl
