// Python str operations on UTF-8 strings (code point indexing, whitespace, case).
#pragma once
#include "core/utf8.h"
#include <cstdint>
#include <string>
#include <vector>

namespace vega::tmpl::text {

// Decodes UTF-8 into code points (invalid bytes map to themselves as U+00xx).
std::vector<char32_t> decode(const std::string& s);
std::string encode(const std::vector<char32_t>& cps);
using vega::append_utf8;  // core/utf8.h
size_t count_code_points(const std::string& s);

bool is_space(char32_t c);  // str.isspace()
bool is_alpha(char32_t c);
bool is_digit(char32_t c);
char32_t to_upper(char32_t c);
char32_t to_lower(char32_t c);

// str.strip/lstrip/rstrip; chars_given=false strips whitespace.
std::string strip(const std::string& s, bool left, bool right, bool chars_given = false,
                  const std::string& chars = {});
// str.split(sep, maxsplit) / str.rsplit; no sep: runs of whitespace.
std::vector<std::string> split(const std::string& s, bool has_sep, const std::string& sep,
                               int64_t maxsplit, bool from_right);
std::vector<std::string> splitlines(const std::string& s, bool keepends = false);
// Raises OutputLimitError rather than build a result longer than max_size.
std::string replace(const std::string& s, const std::string& old, const std::string& neu, int64_t count,
                    size_t max_size = SIZE_MAX);
std::string upper(const std::string& s);
std::string lower(const std::string& s);
std::string capitalize(const std::string& s);  // str.capitalize()
std::string title(const std::string& s);       // str.title()
std::string swapcase(const std::string& s);
// Byte offsets of the first match at or after pos / the last match (npos if none), in
// linear time (these and everything below charge the render's budget, budget.h).
size_t find_bytes(const std::string& s, const std::string& sub, size_t pos = 0);
size_t rfind_bytes(const std::string& s, const std::string& sub);
bool contains(const std::string& s, const std::string& sub);
// Python str.find on code point offsets (-1 if not found).
int64_t find(const std::string& s, const std::string& sub, bool from_right);
int64_t count(const std::string& s, const std::string& sub);
// markupsafe.escape
std::string html_escape(const std::string& s);
bool starts_with(const std::string& s, const std::string& p);
bool ends_with(const std::string& s, const std::string& p);

}  // namespace vega::tmpl::text
