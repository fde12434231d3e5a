// libFuzzer target for the JSON Schema compiler (src/grammar/json_schema.cpp): the
// schemas a client sends in `response_format` and tool definitions, compiled straight,
// without the HTTP layer in front (vega_http_fuzz reaches it only through whole
// requests). An input is schema JSON, optionally a NUL byte and bytes fed to the
// compiled grammar's matcher in pieces of up to 7 (tokens). The JSON is read with the
// server's own bounded parser (nesting 128, as a request body). Findings: any outcome
// of the compiler but GBNF text or a SchemaError (a crash, a sanitizer report, another
// exception, a timeout, running out of memory); GBNF that the grammar parser refuses
// (the compiler must only write valid grammars); embeddable rules
// (json_schema_rules) that fail where the whole grammar compiled; a matcher whose
// allows() does not predict accept().
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "server/api.h"
#include "server/request_json.h"

namespace {

void check(bool ok) {
    if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    const size_t nul = in.find('\0');
    const std::string_view text = in.substr(0, nul);
    const std::string_view feed = nul == std::string_view::npos ? std::string_view() : in.substr(nul + 1);
    vega::server::json schema;
    try {
        schema = vega::server::parse_request_json(text);
    } catch (const vega::server::ApiError& e) {
        check(e.status == 400);
        return 0;
    }
    std::string gbnf;
    try {
        gbnf = vega::grammar::json_schema_to_gbnf(schema);
    } catch (const vega::grammar::SchemaError&) {
        return 0;  // refused, with the keyword and where: the expected outcome for most inputs
    }
    // A schema that compiled is a grammar that parses, and embeds as rules too.
    vega::grammar::Grammar g = [&] {
        try {
            return vega::grammar::Grammar::parse(gbnf);
        } catch (const vega::grammar::GrammarError&) {
            std::abort();  // the compiler wrote GBNF its own parser refuses
        }
    }();
    try {
        (void)vega::grammar::json_schema_rules(schema);
    } catch (const vega::grammar::SchemaError&) {
        std::abort();  // the whole grammar compiled, the embeddable rules did not
    }
    vega::grammar::Matcher m(g);
    for (size_t i = 0; i < feed.size() && !m.dead(); i += 7) {
        const std::string_view piece = feed.substr(i, 7);
        const bool ok = m.allows(piece);
        check(m.accept(piece) == ok);  // allows() must predict accept()
        (void)m.can_end();
    }
    return 0;
}
