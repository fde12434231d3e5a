#include "run_vega.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#ifndef VEGA_BINARY
#define VEGA_BINARY "vega"
#endif

namespace vega::test {

std::string quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += (c == '\'') ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

std::string temp_dir() {
    static std::string dir = [] {
        std::string tmpl = (std::filesystem::temp_directory_path() / "vega-test-XXXXXX").string();
        char* d = mkdtemp(tmpl.data());
        return std::string(d ? d : "/tmp");
    }();
    return dir;
}

std::string vega_binary() {
    const char* b = std::getenv("VEGA_TEST_BINARY");
    return b && *b ? b : VEGA_BINARY;
}

std::string test_device() {
    const char* d = std::getenv("VEGA_TEST_DEVICE");
    return d && *d ? d : "cpu";
}

std::string device_args() {
    const char* d = std::getenv("VEGA_TEST_DEVICES");
    return d && *d ? std::string("--devices ") + d : "--device " + test_device();
}

bool split_refuses_model(const CmdResult& r) {
    const char* d = std::getenv("VEGA_TEST_DEVICES");
    return d && *d && r.exit_code != 0 &&
           (r.err.find("no layer; use fewer devices") != std::string::npos ||
            r.err.find("use --split-mode layer") != std::string::npos);
}

static std::string slurp(const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

CmdResult run_vega(const std::string& args) {
    static int counter = 0;
    const std::string base = temp_dir() + "/cmd" + std::to_string(getpid()) + "_" + std::to_string(counter++);
    const std::string cmd = quote(vega_binary()) + " " + args + " >" + base + ".out 2>" + base + ".err";
    const int rc = std::system(cmd.c_str());
    CmdResult r;
    r.exit_code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    r.out = slurp(base + ".out");
    r.err = slurp(base + ".err");
    std::filesystem::remove(base + ".out");
    std::filesystem::remove(base + ".err");
    return r;
}

}  // namespace vega::test
