#include "serve_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "run_vega.h"
#include "test_data.h"

namespace vega::test {

ServeProcess::ServeProcess(const std::string& args) {
    static int n = 0;
    log_path_ = temp_dir() + "/serve-" + std::to_string(getpid()) + "-" + std::to_string(n++) + ".log";
    const std::string cmd = "exec " + quote(vega_binary()) + " serve --host 127.0.0.1 --port 0 " + args + " 2> " + quote(log_path_);
    pid_ = fork();
    if (pid_ == 0) {
        execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
        _exit(127);
    }
    const std::regex re("listening on http://127\\.0\\.0\\.1:([0-9]+)");
    for (int i = 0; i < 600 && port_ < 0; ++i) {  // up to 60 s (model load)
        std::smatch m;
        const std::string l = log();
        if (std::regex_search(l, m, re)) port_ = std::stoi(m[1].str());
        else if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
            pid_ = -1;
            break;
        } else std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
}

ServeProcess::~ServeProcess() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    for (int i = 0; i < 100; ++i) {
        if (waitpid(pid_, nullptr, WNOHANG) == pid_) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
}

bool ServeProcess::stop_within(double seconds) {
    terminate();
    return wait_exit(seconds);
}

void ServeProcess::terminate() {
    if (pid_ > 0) kill(pid_, SIGTERM);
}

bool ServeProcess::wait_exit(double seconds) {
    if (pid_ <= 0) return false;
    for (double waited = 0; waited < seconds; waited += 0.02) {
        int status = 0;
        if (waitpid(pid_, &status, WNOHANG) == pid_) {
            pid_ = -1;
            exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
            return exit_status_ == 0;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;  // the destructor kills it
}

std::string stories_serve_args(const std::string& extra) {
    return "-m " + quote(data_file("models/stories260K.gguf")) + " --device cpu -t 2 -q " + extra;
}

std::string write_temp_file(const std::string& name, const std::string& text) {
    const std::string p = temp_dir() + "/" + name;
    std::ofstream(p) << text;
    return p;
}

std::string chatml_template_file() {
    return write_temp_file(
        "chatml.jinja",
        "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
        "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}");
}

std::string ServeProcess::log() const {
    std::ifstream f(log_path_);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

}  // namespace vega::test
