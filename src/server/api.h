// The OpenAI API surface: request bodies parsed and checked into CompletionParams
// (every error an ApiError with OpenAI's status, type and code), and the response
// objects and SSE chunks built from results.
#pragma once
#include <nlohmann/json.hpp>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "engine/tool_calls.h"

namespace vega::grammar { struct Grammar; }

namespace vega::server {

using json = nlohmann::ordered_json;

// Becomes {"error": {"message", "type", "code"}} with HTTP status `status`.
struct ApiError : std::runtime_error {
    int status;
    std::string type, code;
    ApiError(int st, std::string msg, std::string ty = "invalid_request_error", std::string c = "")
        : std::runtime_error(std::move(msg)), status(st), type(std::move(ty)), code(std::move(c)) {}
};
json error_body(int status, const std::string& message, const std::string& type, const std::string& code);

enum class Endpoint { Chat, Completion };

// OpenAI's tool_choice: none (tools not shown to the model), auto (the reply may call),
// required (it must call one or more), or a named function (it must call that one).
enum class ToolChoice { Auto, None, Required, Named };

struct CompletionParams {
    Endpoint endpoint = Endpoint::Chat;
    std::string model;             // echoed back; any value is accepted
    json messages;                 // chat: the conversation (array of objects)
    json tools;                    // chat: tool definitions for the template (null when absent or tool_choice none)
    ToolChoice tool_choice = ToolChoice::Auto;
    std::string tool_name;         // ToolChoice::Named: the function
    bool parallel_tool_calls = true;
    // logprobs: -1 off; else the alternatives per token (chat top_logprobs 0..20 with
    // logprobs true; completions logprobs 0..20).
    int logprobs = -1;
    std::string prompt;            // completions
    int max_tokens = -1;           // -1: until end of generation or the context is full
    SamplerParams sampling;
    std::vector<std::string> stop;
    bool stream = false;
    bool include_usage = false;    // stream_options.include_usage
    bool ignore_eos = false;       // extension (as llama.cpp's server): keep going past end-of-generation tokens
    // Extension (llama.cpp's server field `grammar`): GBNF text the output must follow.
    std::shared_ptr<const grammar::Grammar> grammar;
};

// Throws ApiError(400) naming the field for missing, ill-typed or out-of-range values.
// tool_format: the syntax the server's chat template teaches (a required or named
// tool_choice is forced in it; None: the Hermes syntax).
CompletionParams parse_completion_request(const json& body, Endpoint ep, ToolFormat tool_format = ToolFormat::None);

struct Usage {
    int prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
};

// Whole responses (stream = false).
json completion_response(const CompletionParams& p, const std::string& id, long created, const std::string& text,
                         const char* finish_reason, const Usage& u);
// One SSE chunk's JSON: text delta (finish_reason null), or, with finish_reason,
// the final chunk (empty delta). first: chat's first chunk carries the role.
json stream_chunk(const CompletionParams& p, const std::string& id, long created, const std::string& text,
                  const char* finish_reason, bool first);
// A chat reply split into reasoning, content and tool calls (engine/tool_calls.h).
struct ChatReply {
    std::string reasoning, content;
    std::vector<ToolCall> calls;
    std::vector<std::string> call_ids;  // one per call
};
// Whole chat response with reasoning_content and tool_calls (content null when the
// reply is only calls).
json chat_reply_response(const CompletionParams& p, const std::string& id, long created, const ChatReply& reply,
                         const char* finish_reason, const Usage& u);
// One chat SSE chunk carrying `delta` (role added when first), finish_reason null.
json chat_delta_chunk(const CompletionParams& p, const std::string& id, long created, json delta, bool first);
// A choice's "logprobs" value for these tokens, in the endpoint's OpenAI shape (chat:
// {content: [{token, logprob, bytes, top_logprobs}]}; completions: {tokens,
// token_logprobs, top_logprobs, text_offset}, offsets from text_offset0).
struct TokenLp;
json logprobs_json(const CompletionParams& p, const std::vector<TokenLp>& lps, size_t text_offset0 = 0);
// stream_options.include_usage: the chunk after the final one (choices empty).
json usage_chunk(const CompletionParams& p, const std::string& id, long created, const Usage& u);

}  // namespace vega::server
