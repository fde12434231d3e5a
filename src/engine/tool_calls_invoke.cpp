// <invoke name="f"> tool calls: DeepSeek V3.2 / V4 (DSML) and MiniMax M2 (see
// tool_call_parsers.h).
#include "engine/tool_call_parsers.h"
#include "engine/tool_call_scan.h"

namespace vega {

using namespace tool_scan;

namespace {
const std::string kDsml = "<\uff5cDSML\uff5c", kDsmlEnd = "</\uff5cDSML\uff5c";
}  // namespace

const InvokeSyntax kDsmlSyntax = {{kDsml + "function_calls>", kDsml + "tool_calls>"},
                                  {kDsmlEnd + "function_calls>", kDsmlEnd + "tool_calls>"},
                                  kDsml + "invoke name=\"",
                                  kDsmlEnd + "invoke>",
                                  kDsml + "parameter name=\"",
                                  kDsmlEnd + "parameter>"};
const InvokeSyntax kMiniMaxSyntax = {{"<minimax:tool_call>"}, {"</minimax:tool_call>"}, "<invoke name=\"", "</invoke>",
                                     "<parameter name=\"", "</parameter>"};

namespace {

// A name attribute's value at s[i] (just after `name="`) up to its quote; `end` past the
// tag's '>' (other attributes before it go to `attrs`).
bool read_name_tag(const std::string& s, size_t i, std::string* name, std::string* attrs, size_t* end) {
    const size_t q = s.find('"', i);
    if (q == std::string::npos) return false;
    *name = s.substr(i, q - i);
    if (name->empty() || name->find_first_of("<>\n") != std::string::npos) return false;
    const size_t gt = s.find('>', q + 1);
    if (gt == std::string::npos) return false;
    *attrs = s.substr(q + 1, gt - q - 1);
    if (attrs->find('<') != std::string::npos) return false;
    *end = gt + 1;
    return true;
}

// INVOKE"f">(PARAM"p" attrs>VALUE END_PARAM)*END_INVOKE at s[i]; `end` past it.
bool read_invoke(const std::string& s, size_t i, const InvokeSyntax& x, const json& tools, ToolCall* tc, size_t* end) {
    std::string name, attrs;
    size_t k = 0;
    if (!read_name_tag(s, i + x.invoke.size(), &name, &attrs, &k) || !trim(attrs).empty()) return false;
    json args = json::object();
    for (;;) {
        k = skip_space(s, k);
        if (starts_with_at(s, k, x.end_invoke)) {
            *end = k + x.end_invoke.size();
            break;
        }
        if (!starts_with_at(s, k, x.param)) return false;
        std::string p;
        size_t v = 0;
        if (!read_name_tag(s, k + x.param.size(), &p, &attrs, &v)) return false;
        const size_t ve = s.find(x.end_param, v);
        if (ve == std::string::npos) return false;
        std::string value = s.substr(v, ve - v);
        if (!value.empty() && value.front() == '\n') value.erase(0, 1);
        if (!value.empty() && value.back() == '\n') value.pop_back();
        const std::string a = trim(attrs);
        if (a == "string=\"true\"") {
            args[p] = value;
        } else {
            json j = a == "string=\"false\"" ? json::parse(trim(value), nullptr, false) : json(json::value_t::discarded);
            args[p] = j.is_discarded() ? typed_value(tools, name, p, value) : j;
        }
        k = ve + x.end_param.size();
    }
    tc->name = name;
    tc->arguments = args.dump();
    return true;
}

}  // namespace

ParsedCalls parse_invoke_calls(const std::string& c, const InvokeSyntax& x, const json& tools) {
    size_t p = std::string::npos, which = 0;
    for (size_t k = 0; k < x.open.size(); ++k) {
        const size_t q = c.find(x.open[k]);
        if (q < p) p = q, which = k;
    }
    if (p == std::string::npos) return {};
    ParsedCalls out;
    out.before = c.substr(0, p);
    const std::string &open = x.open[which], &close = x.close[which];
    size_t i = p + open.size();
    for (;;) {
        i = skip_space(c, i);
        if (starts_with_at(c, i, close)) {
            i = skip_space(c, i + close.size());
            if (starts_with_at(c, i, open)) {  // another section
                i += open.size();
                continue;
            }
            break;
        }
        if (i == c.size()) break;  // the section still open where the reply ends
        if (!starts_with_at(c, i, x.invoke)) return {};
        ToolCall tc;
        if (!read_invoke(c, i, x, tools, &tc, &i)) return {};
        out.calls.push_back(std::move(tc));
    }
    if (out.calls.empty()) return {};
    out.after = trim(c.substr(i));
    return out;
}

}  // namespace vega
