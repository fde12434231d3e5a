// gpt-oss's harmony replies (see harmony.h).
#include "engine/harmony.h"

#include "engine/tool_call_scan.h"

namespace vega {

using namespace tool_scan;

namespace {

const std::string kStart = "<|start|>", kChannel = "<|channel|>", kMessage = "<|message|>";
const std::string kEnds[] = {"<|end|>", "<|return|>", "<|call|>", "<|start|>"};  // (a missing <|end|>: the next <|start|>)

// The word after `key` in a header ("to=" -> the recipient, "<|channel|>" -> the
// channel), up to a space or a marker; empty when absent.
std::string header_word(const std::string& h, const std::string& key) {
    const size_t k = h.find(key);
    if (k == std::string::npos) return "";
    const size_t b = k + key.size(), e = h.find_first_of(" <\n", b);
    return h.substr(b, e == std::string::npos ? std::string::npos : e - b);
}

void append_part(std::string& to, const std::string& part) {
    if (part.empty()) return;
    if (!to.empty()) to += '\n';
    to += part;
}

// Whether the reply (from its first non-space byte) opens a harmony header, or (while
// streaming) may still: its bytes so far are a prefix of an opening.
int opens_harmony(const std::string& t, bool final) {  // 1 yes, 0 no, -1 not known yet
    const size_t i = skip_space(t, 0);
    for (const std::string& w : {kChannel, std::string("to="), kStart}) {
        if (starts_with_at(t, i, w)) return 1;
        const size_t rest = t.size() - i;
        if (!final && rest < w.size() && w.compare(0, rest, t, i, rest) == 0) return -1;
    }
    return 0;
}

}  // namespace

HarmonyReply read_harmony(const std::string& t, bool final, bool calls) {
    HarmonyReply r;
    const int opens = opens_harmony(t, final);
    if (opens == 0) {
        r.harmony = false;
        r.content = t;
        return r;
    }
    if (opens < 0) return r;
    size_t i = skip_space(t, 0);
    while (i < t.size()) {
        if (starts_with_at(t, i, kStart)) i += kStart.size();
        const size_t m = t.find(kMessage, i);
        if (m == std::string::npos) break;  // the header is not complete
        const std::string header = t.substr(i, m - i);
        std::string recipient = header_word(header, "to="), channel = header_word(header, kChannel);
        const size_t b = m + kMessage.size();
        size_t e = std::string::npos, end_len = 0;
        for (const std::string& w : kEnds) {
            const size_t q = t.find(w, b);
            if (q < e) e = q, end_len = w == kStart ? 0 : w.size();
        }
        const bool ended = e != std::string::npos;
        size_t body_end = e;
        if (!ended) {  // the reply stops inside this body
            body_end = t.size();
            if (!final)
                for (const std::string& w : kEnds) body_end = std::min(body_end, t.size() - partial_suffix(t, b, w));
        }
        const std::string body = t.substr(b, body_end - b);
        if (!recipient.empty() && calls) {
            if (!ended && !final) break;  // a call is read whole
            ToolCall tc;
            tc.name = recipient.rfind("functions.", 0) == 0 ? recipient.substr(10) : recipient;
            size_t a = 0;
            if (!tc.name.empty() && read_args(body, 0, &tc.arguments, &a) && skip_space(body, a) == body.size()) {
                r.calls.push_back(std::move(tc));
            } else {
                r.malformed = true;
                append_part(r.content, body);
            }
        } else if (channel == "analysis") {
            append_part(r.reasoning, body);
        } else {
            append_part(r.content, body);
        }
        if (!ended) break;
        i = e + end_len;
    }
    return r;
}

}  // namespace vega
