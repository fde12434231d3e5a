// gpt-oss replies in OpenAI's harmony format. The chat template's generation prompt ends
// with "<|start|>assistant"; the reply is messages
//   HEADER <|message|> BODY END
// the first one's header right there, each later one opened by "<|start|>assistant".
// HEADER: [" to=" RECIPIENT] "<|channel|>" CHANNEL [" to=" RECIPIENT] [" <|constrain|>json"]
// (the recipient on either side of the channel). END: <|end|>, or <|return|> / <|call|>,
// which end generation (so the last message usually has none).
//   - channel "analysis": reasoning;
//   - a recipient ("functions.NAME"): a call of NAME, BODY its JSON arguments;
//   - anything else ("final", a "commentary" preamble): content.
// Every marker is a special token: the reply must be rendered with them.
#pragma once
#include <string>
#include <vector>

#include "engine/tool_calls.h"

namespace vega {

struct HarmonyReply {
    bool harmony = true;      // false: the reply does not open with a harmony header (plain text)
    std::string reasoning;    // analysis bodies, "\n" between them
    std::string content;      // final and preamble bodies, "\n" between them
    std::vector<ToolCall> calls;
    bool malformed = false;   // a call's body is not a JSON object (it was put into content)
};

// Reads `text` (the reply so far). final = false (streaming): leaves out what may still
// change: a message whose header is not complete, a call not yet ended, and bytes at
// the end that may become a marker; each result is then a prefix of the final one.
// calls = false: call messages are content (a request without tools).
HarmonyReply read_harmony(const std::string& text, bool final, bool calls);

}  // namespace vega
