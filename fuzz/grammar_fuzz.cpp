// libFuzzer target for the GBNF parser and the grammar matcher (src/grammar/). An input
// is grammar text, optionally followed by a NUL byte and bytes to feed the matcher (in
// pieces of up to 7 bytes, as tokens arrive; allows() is asked before each). Any outcome
// but a parsed grammar or a GrammarError (a crash, a sanitizer report, another
// exception, a timeout or running out of memory) is a finding.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "grammar/grammar.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    const size_t nul = in.find('\0');
    const std::string_view text = in.substr(0, nul);
    const std::string_view feed = nul == std::string_view::npos ? std::string_view() : in.substr(nul + 1);
    try {
        const vega::grammar::Grammar g = vega::grammar::Grammar::parse(text);
        (void)g.to_string();
        vega::grammar::Matcher m(g);
        for (size_t i = 0; i < feed.size() && !m.dead(); i += 7) {
            const std::string_view piece = feed.substr(i, 7);
            const bool ok = m.allows(piece);
            if (m.accept(piece) != ok) __builtin_trap();  // allows() must predict accept()
            (void)m.can_end();
        }
    } catch (const vega::grammar::GrammarError&) {
    }
    return 0;
}
