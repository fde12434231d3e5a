#include "server/template_check.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "engine/chat_prompt.h"

namespace vega::server {

TemplateCheck check_chat_template(const ChatPrompt& chat) {
    using json = nlohmann::ordered_json;
    const json user = {{"role", "user"}, {"content", "Hello, who are you?"}};
    const json system = {{"role", "system"}, {"content", "You are a helpful assistant."}};
    const json assistant = {{"role", "assistant"}, {"content", "I am an assistant."}};
    const json tools = json::array({{{"type", "function"},
                                     {"function",
                                      {{"name", "get_weather"},
                                       {"description", "The weather in a city."},
                                       {"parameters",
                                        {{"type", "object"},
                                         {"properties", {{"city", {{"type", "string"}}}}},
                                         {"required", json::array({"city"})}}}}}}});
    struct Probe {
        const char* name;
        json messages, tools;
    };
    std::vector<Probe> probes = {
        {"one user message", json::array({user}), nullptr},
        {"a system message", json::array({system, user}), nullptr},
        {"a multi-turn chat", json::array({system, user, assistant, user}), nullptr},
    };
    // OpenAI's tool round trip as clients send it: null content, arguments as a JSON string
    // (an id of 9 letters and digits, as vega writes them: Mistral templates refuse others).
    const json call = {{"role", "assistant"},
                       {"content", nullptr},
                       {"tool_calls", json::array({{{"id", "call0AbC1"},
                                                    {"type", "function"},
                                                    {"function", {{"name", "get_weather"}, {"arguments", "{\"city\": \"Paris\"}"}}}}})}};
    const json result = {{"role", "tool"}, {"tool_call_id", "call0AbC1"}, {"content", "{\"temp\": 18}"}};
    if (chat.uses_tools()) {
        probes.push_back({"tools", json::array({user}), tools});
        probes.push_back({"a tool round trip", json::array({user, call, result}), tools});
    }
    TemplateCheck out;
    for (const Probe& p : probes) {
        ++out.probes;
        try {
            chat.render(p.messages, p.tools, true);
        } catch (const std::exception& e) {
            if (!out.failures.empty()) out.failures += "; ";
            out.failures += std::string(p.name) + ": " + e.what();
            if (&p == &probes.front()) out.basic_fails = true;
        }
    }
    return out;
}

}  // namespace vega::server
