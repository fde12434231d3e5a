#include "test_data.h"

#include <cctype>
#include <cstdlib>
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

std::string data_file_id(const std::string& rel) {
    std::string n = rel.substr(rel.find('/') + 1);
    for (char& c : n)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    return n;
}

}  // namespace vega::test
