// The built-in filters, tests, methods and globals of the chat-template environment.
#pragma once
#include <string>
#include <unordered_map>

#include "template/value.h"

namespace vega::tmpl {

class Renderer;

// Filters (filters.cpp). Returns false if there is no filter of that name.
bool call_filter(Renderer& r, const std::string& name, const Value& v, Args& args, Value& out);
// Tests (tests.cpp). Returns false if there is no test of that name.
bool call_test(Renderer& r, const std::string& name, const Value& v, Args& args, bool& out);
bool has_filter(const std::string& name);
bool has_test(const std::string& name);

// Methods of str / dict / list values (methods.cpp). `found` = the attribute exists;
// unsafe (list.append etc.) attributes come back as an Undefined raising SecurityError.
bool lookup_method(const Value& self, const std::string& name, Value& out);

// Python's printf-style `str % args` and str.format (methods.cpp).
std::string percent_format(Renderer& r, const std::string& fmt, const Value& args);

// Globals: range, dict, namespace, raise_exception, strftime_now, cycler, joiner (globals.cpp).
void add_globals(std::unordered_map<std::string, Value>& g);


// Reads an argument by position or keyword, with a default.
class ArgReader {
public:
    ArgReader(Args& a, const char* fname, std::initializer_list<const char*> names);
    bool has(size_t i) const { return have_[i]; }
    const Value& get(size_t i) const { return vals_[i]; }
    Value get_or(size_t i, Value def) const { return have_[i] ? vals_[i] : def; }
    bool get_bool(size_t i, bool def) const;
    int64_t get_int(size_t i, int64_t def) const;
    std::string get_str(size_t i, const std::string& def) const;

private:
    std::vector<Value> vals_;
    std::vector<bool> have_;
};

}  // namespace vega::tmpl
