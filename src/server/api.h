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

struct CompletionParams {
    Endpoint endpoint = Endpoint::Chat;
    std::string model;             // echoed back; any value is accepted
    json messages;                 // chat: the conversation (array of objects)
    json tools;                    // chat: optional tool definitions (null when absent)
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
CompletionParams parse_completion_request(const json& body, Endpoint ep);

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
// stream_options.include_usage: the chunk after the final one (choices empty).
json usage_chunk(const CompletionParams& p, const std::string& id, long created, const Usage& u);

}  // namespace vega::server
