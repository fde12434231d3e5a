// Runs the vega binary (the one this build made) and captures its output.
#pragma once
#include <string>

namespace vega::test {

struct CmdResult {
    int exit_code = -1;
    std::string out;  // stdout
    std::string err;  // stderr
};

// args are passed through a shell; quote paths with quote().
CmdResult run_vega(const std::string& args);
std::string quote(const std::string& s);
// A fresh temporary directory for this test process.
std::string temp_dir();
// The vega binary the tests run: $VEGA_TEST_BINARY (e.g. a sanitizer build), else
// the one this build made.
std::string vega_binary();
// The device the end-to-end tests run on: $VEGA_TEST_DEVICE or "cpu".
std::string test_device();
// The device options of the end-to-end commands: "--devices $VEGA_TEST_DEVICES" when
// that is set (a layer split, e.g. 0,1 or 0,0), else "--device " + test_device().
std::string device_args();
// Whether a command failed only because $VEGA_TEST_DEVICES names more devices than the
// model has layers (llama-2-tiny-random's one layer over 0,1): the split refuses it, naming it.
bool split_needs_more_layers(const CmdResult& r);

}  // namespace vega::test
