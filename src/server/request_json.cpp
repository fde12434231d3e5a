#include "server/request_json.h"

#include "core/json_parse.h"

namespace vega::server {

json parse_request_json(std::string_view body, int max_depth) {
    try {
        return parse_json_bounded<json>(body, max_depth, "the request body");
    } catch (const JsonError& e) {
        throw ApiError(400, e.what(), "invalid_request_error", "invalid_json");
    }
}

}  // namespace vega::server
