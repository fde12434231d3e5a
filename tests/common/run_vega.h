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
// that is set (a layer split, e.g. 0,1 or 0,0; "0,1 --split-mode tensor" for tensor
// parallel), else "--device " + test_device().
std::string device_args();
// Whether a command failed only because the split of $VEGA_TEST_DEVICES does not fit the
// model, refused by name: more devices than layers (llama-2-tiny-random's one layer over
// 0,1), or a tensor-parallel split its heads, FFN rows or blocks do not divide, or a
// mixture of experts under tensor parallel ("... use --split-mode layer").
bool split_refuses_model(const CmdResult& r);

}  // namespace vega::test
