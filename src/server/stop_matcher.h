// Stop strings over streamed text. push() takes the next piece of generated text
// and returns what can be sent now: everything except a tail that could still
// grow into a stop string. When a stop string appears, the text before it is
// returned, stopped is set, and the rest is dropped (OpenAI's `stop`).
#pragma once
#include <string>
#include <vector>

namespace vega::server {

class StopMatcher {
public:
    explicit StopMatcher(std::vector<std::string> stops);

    struct Out {
        std::string text;      // safe to send
        bool stopped = false;  // a stop string was found (text ends before it)
    };
    Out push(const std::string& piece);
    // The held-back tail, at the end of generation (no stop string followed).
    std::string flush();

private:
    std::vector<std::string> stops_;
    std::string held_;
};

}  // namespace vega::server
