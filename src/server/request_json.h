// Request bodies into JSON, with one bound on nesting: everything downstream (the
// request structs, the chat template's values, dumps) walks the tree recursively, so
// a body that nests deeper than kMaxJsonDepth is refused at parse, with a 400 that
// names the limit.
#pragma once
#include <string_view>

#include "server/api.h"

namespace vega::server {

// Arrays and objects inside one another: tool schemas need a dozen levels or so.
constexpr int kMaxJsonDepth = 128;

// Throws ApiError(400, code "invalid_json") for malformed JSON, numbers out of range
// (1e999), invalid UTF-8, or nesting deeper than max_depth.
json parse_request_json(std::string_view body, int max_depth = kMaxJsonDepth);

}  // namespace vega::server
