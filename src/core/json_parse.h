// Untrusted JSON text (request bodies, `vega template -i` input) into nlohmann JSON with
// one bound on nesting. nlohmann's parser is iterative, but much of what follows is
// not: ordered_json copies values recursively (also while an object grows during the
// parse), dump() and the chat template's conversion recurse. The parse stops at the
// first array or object deeper than max_depth, so nothing deeper is ever built.
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "core/error.h"

namespace vega {

// Thrown by parse_json_bounded; `too_deep` tells the nesting bound from bad syntax.
struct JsonError : Error {
    bool too_deep = false;
    JsonError(const std::string& msg, bool deep) : Error(msg), too_deep(deep) {}
};

// Throws JsonError naming `what` ("the request body", "case.json") and the problem:
// nesting deeper than max_depth levels of arrays and objects, or the parser's message
// (bad syntax, invalid UTF-8, a number out of range such as 1e999).
template <class Json = nlohmann::ordered_json>
Json parse_json_bounded(std::string_view text, int max_depth, const std::string& what) {
    struct TooDeep {};
    // The callback sees each container open at the depth of its parent.
    auto guard = [max_depth](int depth, typename Json::parse_event_t event, Json&) {
        if ((event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start) && depth >= max_depth)
            throw TooDeep{};
        return true;
    };
    try {
        return Json::parse(text.begin(), text.end(), guard);
    } catch (const TooDeep&) {
        throw JsonError(what + " nests arrays and objects deeper than " + std::to_string(max_depth) + " levels", true);
    } catch (const nlohmann::json::exception& e) {
        throw JsonError(what + " is not valid JSON: " + e.what(), false);
    }
}

}  // namespace vega
