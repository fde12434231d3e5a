#include "engine/chat_prompt.h"

#include "core/error.h"
#include "engine/tool_calls.h"
#include "model/model.h"
#include "template/chat_template.h"

namespace vega {

// ChatML, with tools in the Hermes form (the format vega parses when a template
// teaches none: engine/tool_calls.h): tool definitions in the system turn, an
// assistant's calls as <tool_call> blocks, tool results as <tool_response> user turns.
// Without tools it is plain ChatML.
const char* const kChatmlTemplate =
    "{%- if tools -%}"
    "{{ '<|im_start|>system\\n' }}"
    "{%- if messages[0]['role'] == 'system' -%}{{ messages[0]['content'] + '\\n\\n' }}{%- endif -%}"
    "{{ '# Tools\\n\\nYou may call one or more functions. Their signatures are within <tools></tools>:\\n<tools>\\n' }}"
    "{%- for t in tools -%}{{ t | tojson }}{{ '\\n' }}{%- endfor -%}"
    "{{ '</tools>\\n\\nFor each function call, answer with a JSON object of the function name and arguments '"
    "+ 'within <tool_call></tool_call> tags:\\n<tool_call>\\n{\"name\": <function-name>, \"arguments\": '"
    "+ '<args-json-object>}\\n</tool_call><|im_end|>\\n' }}"
    "{%- endif -%}"
    "{%- for message in messages -%}"
    "{%- if tools and loop.first and message['role'] == 'system' -%}"
    "{%- elif message['role'] == 'assistant' and message['tool_calls'] -%}"
    "{{ '<|im_start|>assistant\\n' + message['content'] }}"
    "{%- for tc in message['tool_calls'] -%}"
    "{{ '<tool_call>\\n{\"name\": ' + (tc['function']['name'] | tojson) + ', \"arguments\": ' + "
    "(tc['function']['arguments'] | tojson) + '}\\n</tool_call>' }}"
    "{%- endfor -%}"
    "{{ '<|im_end|>\\n' }}"
    "{%- elif message['role'] == 'tool' -%}"
    "{{ '<|im_start|>user\\n<tool_response>\\n' + message['content'] + '\\n</tool_response><|im_end|>\\n' }}"
    "{%- else -%}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}";

struct ChatPrompt::Impl {
    std::unique_ptr<ChatTemplate> plain, tools;  // tools: the tool_use variant, when the model has one
    std::string eos;
    std::string source;  // the template text(s) in use
    bool mentions_tools = false;
};

namespace {
std::string token_or_empty(const Tokenizer& t, int32_t id) { return id >= 0 ? t.token_text(id) : std::string(); }
}  // namespace

ChatPrompt::ChatPrompt(const Model& model, const std::string& override_text, std::string* warning)
    : impl_(std::make_unique<Impl>()) {
    const Tokenizer& tok = model.tokenizer();
    bos_ = token_or_empty(tok, tok.bos());
    impl_->eos = token_or_empty(tok, tok.eos());
    auto parse = [](const std::string& text, const char* what) {
        try {
            return std::make_unique<ChatTemplate>(text);
        } catch (const Error& e) {
            fail("{} does not parse: {}", what, e.what());
        }
    };
    if (!override_text.empty()) {
        impl_->source = override_text;
        impl_->mentions_tools = override_text.find("tools") != std::string::npos;
        impl_->plain = parse(override_text, "the chat template file");
        return;
    }
    const gguf::File& f = model.file();
    const std::string own = f.get_string("tokenizer.chat_template", "");
    if (own.empty()) {
        if (warning)
            *warning = "the model has no chat template (tokenizer.chat_template); using chatml. Pass "
                       "--chat-template-file for the model's own format";
        impl_->plain = parse(kChatmlTemplate, "chatml");
        impl_->source = kChatmlTemplate;
        impl_->mentions_tools = true;
        return;
    }
    impl_->mentions_tools = own.find("tools") != std::string::npos;
    impl_->plain = parse(own, "the model's chat template (tokenizer.chat_template)");
    const std::string tool_use = f.get_string("tokenizer.chat_template.tool_use", "");
    if (!tool_use.empty()) impl_->tools = parse(tool_use, "the model's tool_use chat template");
    impl_->source = own + tool_use;
}

const std::string& ChatPrompt::source() const { return impl_->source; }

ChatPrompt::~ChatPrompt() = default;

bool ChatPrompt::uses_tools() const { return impl_->tools != nullptr || impl_->mentions_tools; }

std::string ChatPrompt::render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                               bool add_generation_prompt) const {
    // OpenAI's tool round trip as templates expect it (null content -> "", arguments as
    // objects); a template that concatenates the arguments as a string gets the strings.
    bool has_calls = false;
    if (messages.is_array())
        for (const auto& m : messages) has_calls |= m.is_object() && m.contains("tool_calls");
    if (!has_calls) return render_as_is(messages, tools, add_generation_prompt);
    try {
        return render_as_is(template_messages(messages, true), tools, add_generation_prompt);
    } catch (const Error& first) {
        try {
            return render_as_is(template_messages(messages, false), tools, add_generation_prompt);
        } catch (const Error&) {
            throw first;
        }
    }
}

std::string ChatPrompt::render_as_is(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                     bool add_generation_prompt) const {
    nlohmann::ordered_json ctx;
    ctx["messages"] = messages;
    const bool with_tools = tools.is_array() && !tools.empty();
    if (with_tools) ctx["tools"] = tools;
    ctx["add_generation_prompt"] = add_generation_prompt;
    ctx["bos_token"] = bos_;
    ctx["eos_token"] = impl_->eos;
    const ChatTemplate& t = with_tools && impl_->tools ? *impl_->tools : *impl_->plain;
    return t.render(ctx);
}

std::vector<int32_t> ChatPrompt::encode(const Tokenizer& tok, const nlohmann::ordered_json& messages,
                                        const nlohmann::ordered_json& tools, bool add_generation_prompt) const {
    return tokens(tok, render(messages, tools, add_generation_prompt));
}

std::vector<int32_t> ChatPrompt::tokens(const Tokenizer& tok, const std::string& text) const {
    const bool has_bos = !bos_.empty() && text.rfind(bos_, 0) == 0;
    return tok.encode(text, !has_bos, true);
}

}  // namespace vega
