// The server's start-up check of its chat template: a template comes from the model
// file or --chat-template-file and may fail (raise_exception, a TypeError, a bound of
// the template engine) on the conversations clients send. Rendering a few probe
// conversations before listening turns "every chat request fails" into one line at
// start.
#pragma once
#include <string>

namespace vega {
class ChatPrompt;
}

namespace vega::server {

struct TemplateCheck {
    int probes = 0;          // conversations rendered
    std::string failures;    // "system message: ...; tools: ..." (empty: every probe rendered)
    bool basic_fails = false;  // even one user message fails: every chat request will
};

// Renders: one user message; system + user; a multi-turn exchange; and, when the
// template reads `tools`, one user message with a tool definition.
TemplateCheck check_chat_template(const ChatPrompt& chat);

}  // namespace vega::server
