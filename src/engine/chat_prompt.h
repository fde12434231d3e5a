// Chat messages -> prompt text through the model's Jinja chat template (GGUF
// tokenizer.chat_template, its tool_use variant when tools are passed, or a file
// given by the user), rendered as transformers' apply_chat_template does.
#pragma once
#include <memory>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace vega {

class Model;
class Tokenizer;


class ChatPrompt {
public:
    // override_text: a template given by the user (wins over the model's). A model
    // with neither gets chatml, and `warning` says so. Throws vega::Error when a
    // template does not parse.
    ChatPrompt(const Model& model, const std::string& override_text, std::string* warning);
    ~ChatPrompt();

    // messages: [{role, content, ...}], tools: array or null. Assistant messages with
    // tool_calls are adapted for the template (engine/tool_calls.h template_messages).
    std::string render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                       bool add_generation_prompt) const;
    // The rendering as token ids: special tokens parsed, BOS added as the model wants
    // unless the template already wrote it.
    std::vector<int32_t> encode(const Tokenizer& tok, const nlohmann::ordered_json& messages,
                                const nlohmann::ordered_json& tools, bool add_generation_prompt) const;
    // A rendering's tokens (as encode makes them).
    std::vector<int32_t> tokens(const Tokenizer& tok, const std::string& text) const;
    // The template reads `tools` (it has a tool_use variant, or its text names them).
    bool uses_tools() const;
    // The template text in use (both variants when the model has two): what
    // detect_tool_format and template_thinks read.
    const std::string& source() const;

private:
    std::string render_as_is(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                             bool add_generation_prompt) const;
    struct Impl;
    std::unique_ptr<Impl> impl_;
    std::string bos_;
};

// ChatML, for models without a template (with a warning).
extern const char* const kChatmlTemplate;

}  // namespace vega
