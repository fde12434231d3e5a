#include "server/request_json.h"

namespace vega::server {

namespace {
struct TooDeep {};
}  // namespace

json parse_request_json(std::string_view body, int max_depth) {
    // The parser itself is iterative; the callback sees each container open with its
    // depth and stops the parse at the first one past the bound.
    auto guard = [max_depth](int depth, json::parse_event_t event, json&) {
        if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) && depth >= max_depth)
            throw TooDeep{};
        return true;
    };
    try {
        return json::parse(body.begin(), body.end(), guard);
    } catch (const TooDeep&) {
        throw ApiError(400, "the request JSON nests deeper than " + std::to_string(max_depth) + " levels (arrays and objects)",
                       "invalid_request_error", "invalid_json");
    } catch (const json::exception& e) {  // parse_error, and out_of_range for numbers like 1e999
        throw ApiError(400, std::string("the body is not valid JSON: ") + e.what(), "invalid_request_error", "invalid_json");
    }
}

}  // namespace vega::server
