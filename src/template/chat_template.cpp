#include "template/chat_template.h"

#include <cstdio>
#include <ctime>

#include "core/error.h"
#include "template/json.h"
#include "template/parser.h"
#include "template/renderer.h"

namespace vega {

namespace {

std::string one_line(std::string s) {
    for (char& c : s)
        if (c == '\n' || c == '\r') c = ' ';
    return s;
}

[[noreturn]] void rethrow(const tmpl::RenderError& e, const char* what) {
    std::string where = e.line > 0 ? fmt::format("chat template line {}", e.line) : std::string("chat template");
    fail("{}: {} ({}): {}", where, what, e.kind, one_line(e.msg));
}

std::tm parse_now(const std::string& iso) {
    std::tm tm{};
    if (iso.empty()) {
        std::time_t t = std::time(nullptr);
        localtime_r(&t, &tm);
        return tm;
    }
    int Y = 0, M = 0, D = 0, h = 0, m = 0, s = 0;
    int n = std::sscanf(iso.c_str(), "%d-%d-%d%*c%d:%d:%d", &Y, &M, &D, &h, &m, &s);
    if (n < 3 || M < 1 || M > 12 || D < 1 || D > 31 || h < 0 || h > 23 || m < 0 || m > 59 || s < 0 || s > 60)
        fail("invalid time '{}' (expected ISO 8601, e.g. 2026-01-15T09:30:00)", iso);
    tm.tm_year = Y - 1900;
    tm.tm_mon = M - 1;
    tm.tm_mday = D;
    tm.tm_hour = h;
    tm.tm_min = m;
    tm.tm_sec = s;
    std::time_t t = timegm(&tm);  // fills tm_wday and tm_yday
    gmtime_r(&t, &tm);
    return tm;
}

}  // namespace

ChatTemplate::ChatTemplate(const std::string& source, const ChatTemplateOptions& opt) {
    try {
        tpl_ = tmpl::parse_template(source, {}, opt.max_parse_depth);
    } catch (const tmpl::RenderError& e) {
        rethrow(e, "syntax error");
    }
}

std::string ChatTemplate::render(const nlohmann::ordered_json& context, const ChatTemplateOptions& opt) const {
    if (!context.is_object()) fail("chat template context must be a JSON object");
    tmpl::Limits lim;
    lim.max_output = opt.max_output_bytes;
    lim.max_call_depth = opt.max_recursion_depth;
    lim.max_loop_iterations = opt.max_loop_iterations;
    lim.max_steps = opt.max_steps;
    lim.max_value_depth = opt.max_value_depth;
    lim.max_stack_bytes = opt.max_stack_bytes;
    tmpl::Renderer r(lim, parse_now(opt.now));
    try {
        return r.render(*tpl_, tmpl::from_json(context, opt.max_value_depth));
    } catch (const tmpl::RenderError& e) {
        rethrow(e, "render error");
    }
}

std::string render_chat_template(const std::string& source, const nlohmann::ordered_json& context,
                                 const ChatTemplateOptions& opt) {
    return ChatTemplate(source, opt).render(context, opt);
}

}  // namespace vega
