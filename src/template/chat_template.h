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
    // Guards against hostile templates.
    size_t max_output_bytes = 16u << 20;
    int max_recursion_depth = 200;
    int64_t max_loop_iterations = 1000000;
};

class ChatTemplate {
public:
    explicit ChatTemplate(const std::string& source);
    std::string render(const nlohmann::ordered_json& context, const ChatTemplateOptions& opt = {}) const;

private:
    std::shared_ptr<const tmpl::Template> tpl_;
};

std::string render_chat_template(const std::string& source, const nlohmann::ordered_json& context,
                                 const ChatTemplateOptions& opt = {});

}  // namespace vega
