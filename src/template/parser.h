// Builds the AST from tokens (jinja2's grammar and operator precedence).
#pragma once
#include <memory>
#include <string>

#include "template/ast.h"
#include "template/lexer.h"

namespace vega::tmpl {

// Nesting deeper than this (blocks, brackets, chained operators and filters) is refused by
// default: the tree is walked recursively when it is rendered and freed.
inline constexpr int kMaxParseDepth = 256;

// Throws RenderError{"TemplateSyntaxError", msg, line}.
std::unique_ptr<Template> parse_template(const std::string& source, const LexOptions& opt = {},
                                         int max_depth = kMaxParseDepth);

}  // namespace vega::tmpl
