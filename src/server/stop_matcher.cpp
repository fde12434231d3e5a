#include "server/stop_matcher.h"

#include <algorithm>

namespace vega::server {

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
    stops_.erase(std::remove(stops_.begin(), stops_.end(), std::string()), stops_.end());
}

StopMatcher::Out StopMatcher::push(const std::string& piece) {
    Out out;
    held_ += piece;
    if (stops_.empty()) {
        out.text.swap(held_);
        return out;
    }
    // The earliest complete stop string wins.
    size_t first = std::string::npos;
    for (const std::string& s : stops_) first = std::min(first, held_.find(s));
    if (first != std::string::npos) {
        out.text = held_.substr(0, first);
        out.stopped = true;
        held_.clear();
        return out;
    }
    // Keep the longest tail that is a proper prefix of some stop string.
    size_t keep = 0;
    for (const std::string& s : stops_)
        for (size_t n = std::min(s.size() - 1, held_.size()); n > keep; --n)
            if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
                keep = n;
                break;
            }
    out.text = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return out;
}

std::string StopMatcher::flush() {
    std::string s;
    s.swap(held_);
    return s;
}

}  // namespace vega::server
