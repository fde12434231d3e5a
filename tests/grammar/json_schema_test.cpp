// JSON Schema to grammar: hand-written function-calling schemas, and Debian's
// json-schema-test-suite (draft 4): for every keyword file the compiler claims, the
// grammar accepts each valid instance and refuses each invalid one (instances written
// as a model would: declared properties first, in the schema's order). Cases whose
// schema uses a keyword the compiler refuses are counted and listed, not judged.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"

namespace vega::grammar {
namespace {

using json = nlohmann::ordered_json;  // schemas keep their property order
using ojson = nlohmann::ordered_json;

bool accepts(const Grammar& g, const std::string& text) {
    Matcher m(g);
    return m.accept(text) && m.can_end();
}

Grammar compile(const json& schema) { return Grammar::parse(json_schema_to_gbnf(schema)); }

TEST(JsonSchema, FunctionArguments) {
    const json schema = json::parse(R"({
      "type": "object",
      "properties": {
        "city": {"type": "string", "minLength": 1, "maxLength": 20},
        "unit": {"enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
        "when": {"type": "string", "format": "date"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
        "note": {"type": ["string", "null"]}
      },
      "required": ["city", "days"],
      "additionalProperties": false
    })");
    const Grammar g = compile(schema);
    EXPECT_TRUE(accepts(g, R"({"city": "Oslo", "days": 3})"));
    EXPECT_TRUE(accepts(g, R"({"city":"Oslo","unit":"celsius","days":14,"when":"2026-11-25","tags":["a","b"],"note":null})"));
    EXPECT_TRUE(accepts(g, "{ \"city\": \"Oslo\", \"days\": 1 }"));
    EXPECT_FALSE(accepts(g, "{\n  \"city\": \"Oslo\",\n  \"days\": 1\n}"));  // compact: no newlines, one space
    EXPECT_FALSE(accepts(g, "{\"city\":  \"Oslo\", \"days\": 1}"));
    EXPECT_FALSE(accepts(g, R"({"days": 3})"));                          // city required
    EXPECT_FALSE(accepts(g, R"({"city": "", "days": 3})"));              // minLength
    EXPECT_FALSE(accepts(g, R"({"city": "Oslo", "days": 15})"));         // maximum
    EXPECT_FALSE(accepts(g, R"({"city": "Oslo", "days": 0})"));          // minimum
    EXPECT_FALSE(accepts(g, R"({"city": "Oslo", "unit": "kelvin", "days": 3})"));
    EXPECT_FALSE(accepts(g, R"({"city": "Oslo", "days": 3, "x": 1})"));  // additionalProperties
    EXPECT_FALSE(accepts(g, R"({"city": "Oslo", "days": 3, "tags": ["a","b","c","d"]})"));
    EXPECT_FALSE(accepts(g, R"({"city": "Oslo", "days": 3, "when": "2026-13-01"})"));
    EXPECT_FALSE(accepts(g, R"({"city": "Oslo", "days": 2.5})"));
}

TEST(JsonSchema, RefsAndRecursion) {
    const json schema = json::parse(R"({
      "$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
                "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["v"],
                "additionalProperties": false}},
      "$ref": "#/$defs/node"
    })");
    const Grammar g = compile(schema);
    EXPECT_TRUE(accepts(g, R"({"v": 1, "kids": [{"v": 2}, {"v": 3, "kids": [{"v": 4}]}]})"));
    EXPECT_FALSE(accepts(g, R"({"v": 1, "kids": [{"w": 2}]})"));
}

// A loop of references with no JSON text between them would be a left-recursive
// grammar (found by vega_schema_fuzz: {"$ref": "#"} compiled to "ref-root ::= ref-root",
// which the grammar parser then refused with a rule name the client never wrote). It is a
// SchemaError naming the reference, from both entry points; a loop through an object or
// an array (text between) still compiles.
TEST(JsonSchema, ReferenceLoopsWithoutTextAreRefused) {
    auto refusal = [](const char* text) {
        const json schema = json::parse(text);
        std::string rules_refusal = "compiled";
        try {
            (void)json_schema_rules(schema);
        } catch (const SchemaError& e) {
            rules_refusal = e.keyword + " | " + e.what();
        }
        try {
            (void)json_schema_to_gbnf(schema);
        } catch (const SchemaError& e) {
            EXPECT_EQ(rules_refusal, e.keyword + " | " + e.what()) << text;
            return e.keyword + " | " + e.what();
        }
        EXPECT_EQ(rules_refusal, "compiled") << text;
        return std::string("compiled");
    };
    EXPECT_EQ(refusal(R"({"$ref": "#"})").rfind("$ref | json schema: '$ref' at #: the references loop back", 0), 0u);
    EXPECT_EQ(refusal(R"({"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "null"}]}}, "$ref": "#/$defs/a"})")
                  .rfind("$ref | json schema: '$ref' at #/$defs/a: the references loop back", 0),
              0u);
    EXPECT_EQ(refusal(R"({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/a"}]}},
                          "$ref": "#/$defs/a"})")
                  .rfind("$ref", 0),
              0u);
    EXPECT_EQ(refusal(R"({"type": "array", "items": {"$ref": "#"}})"), "compiled");
    EXPECT_EQ(refusal(R"({"$defs": {"n": {"type": "object", "properties": {"next": {"anyOf": [{"$ref": "#/$defs/n"},
                          {"type": "null"}]}}}}, "$ref": "#/$defs/n"})"),
              "compiled");
    const Grammar nested = compile(json::parse(R"({"type": "array", "items": {"$ref": "#"}})"));
    EXPECT_TRUE(accepts(nested, "[[], [[]]]"));
    EXPECT_FALSE(accepts(nested, "[1]"));
}

TEST(JsonSchema, UnsupportedKeywordsAreNamed) {
    auto keyword_of = [](const char* text) {
        try {
            json_schema_to_gbnf(json::parse(text));
        } catch (const SchemaError& e) {
            return e.keyword + " | " + e.what();
        }
        return std::string("compiled");
    };
    EXPECT_EQ(keyword_of(R"({"type": "string", "pattern": "^a"})").rfind("pattern | json schema: 'pattern' at #: not supported", 0), 0u);
    EXPECT_EQ(keyword_of(R"({"properties": {"x": {"multipleOf": 2}}})").rfind("multipleOf | json schema: 'multipleOf' at #/properties/x", 0), 0u);
    EXPECT_EQ(keyword_of(R"({"type": "number", "minimum": 0.5})").rfind("minimum", 0), 0u);
    EXPECT_EQ(keyword_of(R"({"$ref": "http://example.com/s.json"})").rfind("$ref", 0), 0u);
    EXPECT_EQ(keyword_of(R"({"type": "array", "items": [{}, {}]})").rfind("items", 0), 0u);
    EXPECT_EQ(keyword_of(R"({"type": "integer", "minimum": 0, "maximum": 100000})").rfind("maximum", 0), 0u);
    EXPECT_EQ(keyword_of(R"(false)").rfind("false", 0), 0u);
    // Keywords of the wrong JSON type are SchemaErrors naming them (vega_http_fuzz: "nullable":
    // ["city"] in a tool's parameters threw json's type_error out of the request parser).
    EXPECT_EQ(keyword_of(R"({"type": "object", "nullable": ["city"]})").rfind("nullable | json schema: 'nullable' at #: must be a boolean", 0), 0u);
    EXPECT_EQ(keyword_of(R"({"type": "string", "format": 5})").rfind("format | json schema: 'format' at #: must be a string", 0), 0u);
    EXPECT_EQ(keyword_of(R"({"type": "integer", "minimum": 1, "exclusiveMinimum": "yes"})").rfind("exclusiveMinimum", 0), 0u);
    EXPECT_EQ(keyword_of(R"({"type": "integer", "maximum": 9, "exclusiveMaximum": [true]})").rfind("exclusiveMaximum", 0), 0u);
    EXPECT_EQ(keyword_of(R"({"type": ["string", "null"], "nullable": false, "format": "uuid"})"), "compiled");
    EXPECT_EQ(keyword_of(R"({"title": "x", "description": "y", "type": "boolean"})"), "compiled");
    EXPECT_TRUE(accepts(Grammar::parse(json_object_gbnf()), R"({"a": [1, {"b": null}]})"));
    EXPECT_FALSE(accepts(Grammar::parse(json_object_gbnf()), R"([1])"));
}

// ---- Debian's json-schema-test-suite (draft 4) ----

std::string suite_dir() {
    if (const char* d = std::getenv("VEGA_JSON_SCHEMA_SUITE")) return d;
    return "/usr/share/json-schema-test-suite/tests/draft4";
}

// The instance as a model following the grammar writes it: declared properties first,
// in the schema's order, then the others; through items and $refs.
ojson canon(const json& v, const json& schema, const json& root, int depth = 0) {
    if (depth > 32 || !schema.is_object()) return ojson::parse(v.dump());
    if (schema.contains("$ref") && schema["$ref"].is_string()) {
        const std::string r = schema["$ref"];
        if (r == "#") return canon(v, root, root, depth + 1);
        for (const char* pre : {"#/definitions/", "#/$defs/"})
            if (r.rfind(pre, 0) == 0) {
                const std::string key = std::string(pre).substr(2, std::string(pre).size() - 3);
                const std::string name = r.substr(std::string(pre).size());
                if (root.contains(key) && root[key].contains(name)) return canon(v, root[key][name], root, depth + 1);
            }
    }
    if (v.is_object()) {
        ojson o = ojson::object();
        std::set<std::string> done;
        if (schema.contains("properties") && schema["properties"].is_object())
            for (const auto& [k, sub] : schema["properties"].items())
                if (v.contains(k)) o[k] = canon(v[k], sub, root, depth + 1), done.insert(k);
        const json extra = schema.value("additionalProperties", json::object());
        for (const auto& [k, x] : v.items())
            if (!done.count(k)) o[k] = canon(x, extra, root, depth + 1);
        return o;
    }
    if (v.is_array() && schema.contains("items") && schema["items"].is_object()) {
        ojson a = ojson::array();
        for (const json& x : v) a.push_back(canon(x, schema["items"], root, depth + 1));
        return a;
    }
    return ojson::parse(v.dump());
}

TEST(JsonSchemaSuite, ClaimedKeywordsAgreeWithTheSuite) {
    const std::string dir = suite_dir();
    if (!std::filesystem::exists(dir))
        GTEST_SKIP() << "json-schema-test-suite not installed (" << dir << "; Debian: apt-get install json-schema-test-suite, "
                     << "scripts/setup.sh does)";
    // Files whose keyword the compiler claims; oneOf only for valid instances (a
    // grammar cannot refuse an instance for matching two branches).
    const std::set<std::string> claimed = {"type", "properties", "required", "additionalProperties", "items",
                                           "minItems", "maxItems", "minLength", "maxLength", "enum", "anyOf",
                                           "oneOf", "allOf", "ref", "definitions", "default"};
    int judged = 0, skipped = 0;
    std::map<std::string, int> unsupported;
    for (const std::string& name : claimed) {
        const std::string path = dir + "/" + name + ".json";
        ASSERT_TRUE(std::filesystem::exists(path)) << path;
        std::ifstream f(path);
        const json groups = json::parse(f);
        for (const json& grp : groups) {
            const json& schema = grp["schema"];
            std::string gbnf;
            try {
                gbnf = json_schema_to_gbnf(schema);
            } catch (const SchemaError& e) {
                ++unsupported[e.keyword];
                skipped += int(grp["tests"].size());
                continue;
            }
            const Grammar g = Grammar::parse(gbnf);
            for (const json& t : grp["tests"]) {
                const bool valid = t["valid"];
                if (name == "oneOf" && !valid) continue;
                const std::string text = canon(t["data"], schema, schema).dump();
                EXPECT_EQ(accepts(g, text), valid) << name << ".json: " << grp["description"] << " / " << t["description"]
                                                   << "\n  instance: " << text << "\n  schema: " << schema.dump();
                ++judged;
            }
        }
    }
    std::string list;
    for (const auto& [k, n] : unsupported) list += " " + k + " (" + std::to_string(n) + ")";
    std::printf("[ json-schema-test-suite ] %d instances judged, %d in groups with refused keywords:%s\n", judged, skipped,
                list.c_str());
    EXPECT_GT(judged, 120);
}

}  // namespace
}  // namespace vega::grammar
