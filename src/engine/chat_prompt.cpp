#include "engine/chat_prompt.h"

#include "core/error.h"
#include "model/model.h"
#include "template/chat_template.h"

namespace vega {

const char* const kChatmlTemplate =
    "{%- for message in messages -%}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}";

struct ChatPrompt::Impl {
    std::unique_ptr<ChatTemplate> plain, tools;  // tools: the tool_use variant, when the model has one
    std::string eos;
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
        return;
    }
    impl_->mentions_tools = own.find("tools") != std::string::npos;
    impl_->plain = parse(own, "the model's chat template (tokenizer.chat_template)");
    const std::string tool_use = f.get_string("tokenizer.chat_template.tool_use", "");
    if (!tool_use.empty()) impl_->tools = parse(tool_use, "the model's tool_use chat template");
}

ChatPrompt::~ChatPrompt() = default;

bool ChatPrompt::uses_tools() const { return impl_->tools != nullptr || impl_->mentions_tools; }

std::string ChatPrompt::render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
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
    const std::string text = render(messages, tools, add_generation_prompt);
    const bool has_bos = !bos_.empty() && text.rfind(bos_, 0) == 0;
    return tok.encode(text, !has_bos, true);
}

}  // namespace vega
