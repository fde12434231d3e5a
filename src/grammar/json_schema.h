// JSON Schema to GBNF (issue 29): the grammar of the JSON texts a schema accepts, for
// `response_format: {type: json_schema}`, `vega run --json-schema` and tool arguments.
// What it honours exactly: type (one or a list; `nullable`), properties (in their order,
// the required ones present, the others optional), required, additionalProperties
// (false, true or a schema; default true), items (one schema), minItems, maxItems,
// enum, const, minLength, maxLength, format (date, time, date-time, uuid; other formats
// are annotations, as validators treat them by default), integer minimum/maximum
// (draft 4's boolean and draft 6's numeric exclusive forms) when the range holds at most
// 1000 values or has no upper bound and a lower bound >= 0, anyOf, allOf of one schema,
// $ref to #/$defs/NAME or #/definitions/NAME (recursion allowed). oneOf is compiled as
// anyOf: a grammar cannot say "exactly one" (an instance matching two branches passes).
// Anything else (pattern, minimum on numbers, multipleOf, not, patternProperties,
// uniqueItems: true, tuple items, remote $ref, ...) is a SchemaError naming the keyword
// and where it is: a schema is never silently weakened.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "grammar/grammar.h"

namespace vega::grammar {

struct SchemaError : GrammarError {
    SchemaError(const std::string& keyword, const std::string& where, const std::string& what)
        : GrammarError("json schema: '" + keyword + "' at " + where + ": " + what), keyword(keyword) {}
    std::string keyword;
};

// The grammar of `schema`'s values without a root rule, to embed in a larger grammar
// (tool calls): `rules` (GBNF rules, the JSON primitives included) and `value`, the
// expression to reference. Rule names avoid "root" and names starting "tool-". Throws
// SchemaError.
struct SchemaRules {
    std::string rules, value;
};
SchemaRules json_schema_rules(const nlohmann::ordered_json& schema);

// GBNF text (rule "root") for the JSON values `schema` accepts, written compactly (at
// most one space between tokens, no newlines), object properties in the schema's order
// (hence ordered_json). Throws SchemaError.
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema);
// Any JSON object (response_format json_object).
std::string json_object_gbnf();

}  // namespace vega::grammar
