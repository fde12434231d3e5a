// Locating ../shared/testdata for tests. VEGA_TEST_DATA set: a missing file is a
// failure. Unset: data tests skip and say why.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace vega::test {

// Directory from VEGA_TEST_DATA, or "" when unset.
std::string data_dir();
// Full path of a file under the data dir. Fails the test (fatal) if the data dir
// is set but the file is missing.
std::string data_file(const std::string& rel);
// Reads a whole file as bytes.
std::string read_file(const std::string& path);
// A raw little-endian float32 file (vega eval --logits-out, the reference logits).
std::vector<float> read_f32(const std::string& path);
// A text file's lines, without their newlines.
std::vector<std::string> read_lines(const std::string& path);
// A test-name-safe id of a data file: "models/synth-llama-q4_0.gguf" -> "synth_llama_q4_0_gguf".
std::string data_file_id(const std::string& rel);

}  // namespace vega::test

// Skips the current test (with the reason printed) when VEGA_TEST_DATA is unset.
#define VEGA_REQUIRE_TEST_DATA()                                                          \
    do {                                                                                  \
        if (::vega::test::data_dir().empty())                                             \
            GTEST_SKIP() << "VEGA_TEST_DATA is not set; data-driven test skipped";        \
    } while (0)
