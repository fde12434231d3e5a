#include "test_data.h"

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace vega::test {

std::string data_dir() {
    const char* d = std::getenv("VEGA_TEST_DATA");
    return d ? std::string(d) : std::string();
}

std::string data_file(const std::string& rel) {
    const std::string p = data_dir() + "/" + rel;
    if (!std::filesystem::exists(p)) {
        ADD_FAILURE() << "test data file missing: " << p << " (VEGA_TEST_DATA=" << data_dir() << ")";
    }
    return p;
}

std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

std::vector<float> read_f32(const std::string& path) {
    const std::string bytes = read_file(path);
    std::vector<float> v(bytes.size() / sizeof(float));
    std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
    return v;
}

std::vector<std::string> read_lines(const std::string& path) {
    std::ifstream f(path);
    std::vector<std::string> v;
    for (std::string l; std::getline(f, l);) v.push_back(l);
    return v;
}

std::string data_file_id(const std::string& rel) {
    std::string n = rel.substr(rel.find('/') + 1);
    for (char& c : n)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    return n;
}

}  // namespace vega::test
