// gguf::Value: type names, numeric conversions and the human-readable form
// used by `vega inspect`.
#include <fmt/format.h>

#include <cstdint>
#include <limits>

#include "core/error.h"
#include "gguf/gguf.h"

namespace vega::gguf {

const char* value_type_name(ValueType t) {
    switch (t) {
        case ValueType::UINT8: return "uint8";
        case ValueType::INT8: return "int8";
        case ValueType::UINT16: return "uint16";
        case ValueType::INT16: return "int16";
        case ValueType::UINT32: return "uint32";
        case ValueType::INT32: return "int32";
        case ValueType::FLOAT32: return "float32";
        case ValueType::BOOL: return "bool";
        case ValueType::STRING: return "string";
        case ValueType::ARRAY: return "array";
        case ValueType::UINT64: return "uint64";
        case ValueType::INT64: return "int64";
        case ValueType::FLOAT64: return "float64";
    }
    return "invalid";
}

namespace {

bool is_unsigned(ValueType t) {
    return t == ValueType::UINT8 || t == ValueType::UINT16 || t == ValueType::UINT32 || t == ValueType::UINT64;
}
bool is_signed(ValueType t) {
    return t == ValueType::INT8 || t == ValueType::INT16 || t == ValueType::INT32 || t == ValueType::INT64;
}
bool is_float(ValueType t) { return t == ValueType::FLOAT32 || t == ValueType::FLOAT64; }

// A string for display on one line: control characters, quotes and backslashes escaped.
std::string escaped(const std::string& s) {
    std::string out;
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += char(c);
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c < 0x20 || c == 0x7f) {
            out += fmt::format("\\x{:02x}", c);
        } else {
            out += char(c);
        }
    }
    return out;
}

std::string quoted(const std::string& s) { return "\"" + escaped(s) + "\""; }

std::string scalar_to_string(const Value& v) {
    switch (v.type) {
        case ValueType::UINT8:
        case ValueType::UINT16:
        case ValueType::UINT32:
        case ValueType::UINT64: return fmt::format("{}", v.num.u64);
        case ValueType::INT8:
        case ValueType::INT16:
        case ValueType::INT32:
        case ValueType::INT64: return fmt::format("{}", v.num.i64);
        // float32 is kept as a double; print its shortest float form (1e-05, not 9.99999974e-06).
        case ValueType::FLOAT32: return fmt::format("{}", float(v.num.f64));
        case ValueType::FLOAT64: return fmt::format("{}", v.num.f64);
        case ValueType::BOOL: return v.num.b ? "true" : "false";
        default: return "?";
    }
}

// Array elements, abbreviated after max_items. Nested arrays are shown in brackets.
std::string array_items(const Value& v, size_t max_items) {
    std::string out;
    const size_t n = v.arr.size();
    for (size_t i = 0; i < n && i < max_items; ++i) {
        if (i) out += ", ";
        const Value& e = v.arr[i];
        if (e.type == ValueType::ARRAY)
            out += "[" + array_items(e, max_items) + "]";
        else if (e.type == ValueType::STRING)
            out += quoted(e.str);
        else
            out += scalar_to_string(e);
    }
    if (n > max_items) out += ", ...";
    return out;
}

}  // namespace

bool Value::is_integer() const { return is_unsigned(type) || is_signed(type); }

bool Value::is_number() const { return is_integer() || is_float(type) || type == ValueType::BOOL; }

int64_t Value::as_int() const {
    if (is_signed(type)) return num.i64;
    if (is_unsigned(type)) {
        if (num.u64 > uint64_t(std::numeric_limits<int64_t>::max()))
            fail("value {} of type {} does not fit in int64", num.u64, value_type_name(type));
        return int64_t(num.u64);
    }
    if (type == ValueType::BOOL) return num.b ? 1 : 0;
    fail("expected an integer, got {}", value_type_name(type));
}

double Value::as_double() const {
    if (is_float(type)) return num.f64;
    if (is_signed(type)) return double(num.i64);
    if (is_unsigned(type)) return double(num.u64);
    if (type == ValueType::BOOL) return num.b ? 1.0 : 0.0;
    fail("expected a number, got {}", value_type_name(type));
}

std::string Value::to_string(size_t max_items) const {
    if (type == ValueType::STRING) return escaped(str);  // one line, no quotes
    if (type == ValueType::ARRAY) {
        std::string head = fmt::format("[{} items]", arr.size());
        if (arr.empty()) return head;
        return head + " " + array_items(*this, max_items);
    }
    return scalar_to_string(*this);
}

}  // namespace vega::gguf
