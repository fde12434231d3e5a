// Chat templates: a renderer for the Jinja2 subset that Hugging Face chat templates use,
// matching Python jinja2 3.1 as transformers' apply_chat_template sets it up
// (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, the
// {% generation %} tag, tojson = json.dumps, raise_exception, strftime_now).
//
//   vega::ChatTemplate t(source);            // parse once (throws vega::Error)
//   std::string prompt = t.render(context);  // render many times (throws vega::Error)
//
// The context is a JSON object; its keys become template variables (messages, tools,
// add_generation_prompt, bos_token, eos_token, ...). Errors are one line naming the
// problem and the template line.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace vega {

namespace tmpl {
struct Template;
}

struct ChatTemplateOptions {
    // The time strftime_now() reads, ISO 8601 ("2026-01-15T09:30:00"); empty = now (local).
    std::string now;
    // Guards against hostile templates and conversations: going past one is a vega::Error
    // that names it, never a crash, a hang or unbounded memory.
    size_t max_output_bytes = 16u << 20;    // the output, and any one string or tojson result
    int max_recursion_depth = 200;          // nested macro calls, recursive loop() calls, set/filter blocks
    int64_t max_loop_iterations = 1000000;  // all loops of one render together
    // Nesting in the template source: blocks, brackets, and links of operator, filter,
    // attribute and subscript chains (`a+b+c` is 2 levels). Read by the constructor.
    int max_parse_depth = 256;
    // Nesting of lists and dicts: deeper JSON input is refused, and repr, ==, <, tojson and
    // hashing refuse deeper values the template builds.
    int max_value_depth = 512;
    // Work of one render: a step is an expression or statement evaluated, or 16 bytes of
    // string or one list element made, copied, searched or compared. Real templates take
    // thousands to a few hundred thousand; the default is about a second of CPU time.
    int64_t max_steps = 20000000;
    // Stack one render may use (less if the thread has less).
    size_t max_stack_bytes = 4u << 20;
};

class ChatTemplate {
public:
    // opt.max_parse_depth applies here; the other options to render().
    explicit ChatTemplate(const std::string& source, const ChatTemplateOptions& opt = {});
    std::string render(const nlohmann::ordered_json& context, const ChatTemplateOptions& opt = {}) const;

private:
    std::shared_ptr<const tmpl::Template> tpl_;
};

std::string render_chat_template(const std::string& source, const nlohmann::ordered_json& context,
                                 const ChatTemplateOptions& opt = {});


}  // namespace vega
