// Stop strings over streamed pieces: text that could still become a stop string
// is held back, a stop string split across pieces is found, the earliest stop
// wins, and the held tail comes out at the end.
#include <gtest/gtest.h>

#include "server/stop_matcher.h"

namespace vega::server {
namespace {

std::string feed(StopMatcher& m, const std::vector<std::string>& pieces, bool* stopped) {
    std::string out;
    *stopped = false;
    for (const std::string& p : pieces) {
        StopMatcher::Out o = m.push(p);
        out += o.text;
        if (o.stopped) {
            *stopped = true;
            return out;
        }
    }
    return out + m.flush();
}

TEST(StopMatcher, NoStopsPassEverythingThrough) {
    StopMatcher m({});
    EXPECT_EQ(m.push("abc").text, "abc");
    EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, HoldsBackAPossibleStartAndFindsSplitStops) {
    StopMatcher m({"</end>"});
    StopMatcher::Out o = m.push("hello </e");
    EXPECT_EQ(o.text, "hello ");  // "</e" may start the stop string
    EXPECT_FALSE(o.stopped);
    o = m.push("nd> tail");
    EXPECT_EQ(o.text, "");
    EXPECT_TRUE(o.stopped);
}

TEST(StopMatcher, ReleasesHeldTextThatDidNotBecomeAStop) {
    StopMatcher m({"</end>"});
    EXPECT_EQ(m.push("a </e").text, "a ");
    EXPECT_EQ(m.push("x").text, "</ex");
    EXPECT_EQ(m.push("</").text, "");
    EXPECT_EQ(m.flush(), "</");
}

TEST(StopMatcher, EarliestStopWinsAndEmptyStopsAreIgnored) {
    StopMatcher m({"", "world", "o w"});
    bool stopped = false;
    EXPECT_EQ(feed(m, {"hell", "o", " world"}, &stopped), "hell");
    EXPECT_TRUE(stopped);
}

TEST(StopMatcher, UnicodeStopStrings) {
    StopMatcher m({"ß!"});
    bool stopped = false;
    EXPECT_EQ(feed(m, {"gro", "ß", "!", "x"}, &stopped), "gro");
    EXPECT_TRUE(stopped);
    StopMatcher n({"ß!"});
    EXPECT_EQ(feed(n, {"gro", "ß", "e"}, &stopped), "große");
    EXPECT_FALSE(stopped);
}

}  // namespace
}  // namespace vega::server
