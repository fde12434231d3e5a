// JSON in and out: Python's json.dumps (what the tojson filter does) and the
// conversion of nlohmann JSON input into template values.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "template/value.h"

namespace vega::tmpl {

// json.dumps(x, ensure_ascii, indent, separators, sort_keys).
struct DumpOptions {
    bool ensure_ascii = false;
    bool has_indent = false;
    std::string indent;  // the indent unit
    std::string item_sep = ", ";
    std::string key_sep = ": ";
    bool sort_keys = false;
    size_t max_bytes = SIZE_MAX;  // OutputLimitError past this size
};
std::string json_dumps(const Value& v, const DumpOptions& o);

// JSON objects become dicts (key order kept), arrays lists, numbers int or float.
// Raises RecursionError for input nested deeper than max_depth.
Value from_json(const nlohmann::ordered_json& j, int max_depth = BudgetLimits{}.max_value_depth);

}  // namespace vega::tmpl
