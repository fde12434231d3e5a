// libFuzzer target for the reply splitter (src/engine/tool_calls*.cpp, harmony.cpp): a
// model's reply split into reasoning, content and tool calls, in every format the engine
// reads, streamed in pieces as tokens arrive and whole. An input is 3 setting bytes (the
// format, the think / open_think / calls flags, the piece length 1..16), then the reply.
// Findings: an exception or crash in either split; streamed pieces (take() after each,
// then finish()) that do not add up to the whole-reply split (reasoning, content, the
// calls' names and arguments): what a streaming client receives must be what a
// non-streaming one does; a call whose arguments are not a JSON object.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/tool_calls.h"

namespace {

void check(bool ok) {
    if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 3) return 0;
    constexpr int kFormats = int(vega::ToolFormat::Pythonic) + 1;
    const auto fmt = vega::ToolFormat(data[0] % kFormats);
    const bool think = data[1] & 1, open_think = data[1] & 2, calls = !(data[1] & 4);
    const size_t piece = 1 + data[2] % 16;
    const std::string text(reinterpret_cast<const char*>(data + 3), size - 3);

    vega::ReplySplitter whole_s(fmt, think, open_think, calls);
    whole_s.add(text);
    const vega::ReplySplitter::Final whole = whole_s.finish();

    vega::ReplySplitter s(fmt, think, open_think, calls);
    std::string reasoning, content;
    for (size_t i = 0; i < text.size(); i += piece) {
        s.add(text.substr(i, piece));
        const auto d = s.take();
        reasoning += d.reasoning, content += d.content;
    }
    const vega::ReplySplitter::Final f = s.finish();
    check(reasoning + f.reasoning == whole.reasoning);
    check(content + f.content == whole.content);
    check(f.calls.size() == whole.calls.size());
    for (size_t i = 0; i < f.calls.size(); ++i) {
        check(f.calls[i].name == whole.calls[i].name);
        check(f.calls[i].arguments == whole.calls[i].arguments);
        check(nlohmann::json::parse(whole.calls[i].arguments, nullptr, false).is_object());
    }
    return 0;
}
