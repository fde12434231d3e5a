// Builds the AST from tokens (jinja2's grammar and operator precedence).
#pragma once
#include <memory>
#include <string>

#include "template/ast.h"
#include "template/lexer.h"

namespace vega::tmpl {

// Throws RenderError{"TemplateSyntaxError", msg, line}.
std::unique_ptr<Template> parse_template(const std::string& source, const LexOptions& opt = {});

// Nesting deeper than this (brackets, blocks) is refused.
inline constexpr int kMaxParseDepth = 256;

}  // namespace vega::tmpl
