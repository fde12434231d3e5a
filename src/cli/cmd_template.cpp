// vega template: render a chat template (Jinja2, as transformers' apply_chat_template
// does) over one conversation and print the result exactly, with nothing added.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "core/error.h"
#include "core/json_parse.h"
#include "template/chat_template.h"

namespace vega::cli {

namespace {

struct TemplateOptions {
    std::string template_file;
    std::string input;
};

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("cannot read '{}'", path);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void render(const TemplateOptions& o) {
    std::string source = slurp(o.template_file);
    ChatTemplateOptions opt;
    std::string text = slurp(o.input);
    nlohmann::ordered_json in = parse_json_bounded(text, opt.max_value_depth, o.input);
    if (!in.is_object()) fail("{}: expected a JSON object with 'messages'", o.input);
    if (!in.contains("messages")) fail("{}: no 'messages'", o.input);
    nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
    // Moved, not copied: a conversation may be large, and nlohmann copies recursively.
    ctx["messages"] = std::move(in["messages"]);
    if (in.contains("tools") && !in["tools"].is_null()) ctx["tools"] = std::move(in["tools"]);
    // As transformers: add_generation_prompt is always passed (default false); the
    // special tokens only when given (else the template sees them undefined).
    ctx["add_generation_prompt"] = in.value("add_generation_prompt", false);
    for (const char* k : {"bos_token", "eos_token"})
        if (in.contains(k)) ctx[k] = in[k];
    if (in.contains("now")) {
        if (!in["now"].is_string()) fail("{}: 'now' must be an ISO time string", o.input);
        opt.now = in["now"].get<std::string>();
    }
    std::string out = ChatTemplate(source).render(ctx, opt);
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
}

}  // namespace

void register_template(CLI::App& app) {
    auto o = std::make_shared<TemplateOptions>();
    CLI::App* cmd = app.add_subcommand("template", "render a chat template over a conversation (JSON)");
    cmd->add_option("-t,--template", o->template_file, "Jinja2 chat template file")->required()->check(CLI::ExistingFile);
    cmd->add_option("-i,--input", o->input,
                    "JSON with messages, and optionally tools, add_generation_prompt, bos_token, eos_token, now")
        ->required()
        ->check(CLI::ExistingFile);
    cmd->callback([o] { render(*o); });
}

}  // namespace vega::cli
