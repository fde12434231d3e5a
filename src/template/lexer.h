// Splits template source into tokens the way jinja2's lexer does with
// trim_blocks=True and lstrip_blocks=True (whitespace control, raw blocks, comments).
#pragma once
#include <string>
#include <vector>

namespace vega::tmpl {

enum class Tok { Text, BlockBegin, BlockEnd, VarBegin, VarEnd, Name, String, Int, Float, Op, Eof };

struct Token {
    Tok type;
    std::string value;  // Text: the data; Name/Op: the spelling; String: decoded; Int/Float: the digits
    int line;
};

struct LexOptions {
    bool trim_blocks = true;
    bool lstrip_blocks = true;
    bool keep_trailing_newline = false;
};

// Throws RenderError{"TemplateSyntaxError", msg, line} on malformed input.
std::vector<Token> tokenize(const std::string& source, const LexOptions& opt = {});

}  // namespace vega::tmpl
