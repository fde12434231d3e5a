// Starts `vega serve ... --port 0` as a child process for a test, waits for its
// "listening on http://127.0.0.1:PORT" line, and stops it (SIGTERM) at the end.
#pragma once
#include <string>

namespace vega::test {

class ServeProcess {
public:
    // args: everything after `vega serve` except --port (the model, options).
    explicit ServeProcess(const std::string& args);
    ~ServeProcess();
    ServeProcess(const ServeProcess&) = delete;
    ServeProcess& operator=(const ServeProcess&) = delete;

    int port() const { return port_; }
    bool ok() const { return port_ > 0; }
    std::string log() const;  // the server's stderr so far
    // Sends SIGTERM; true when the process exited (status 0) within `seconds`.
    bool stop_within(double seconds);
    // Sends SIGTERM and returns at once; wait_exit() then waits for the exit.
    void terminate();
    // True when the process exited with status 0 within `seconds`.
    bool wait_exit(double seconds);
    // After wait_exit saw the process end: its exit status (-1: killed by a signal).
    int exit_status() const { return exit_status_; }

private:
    int pid_ = -1;
    int port_ = -1;
    int exit_status_ = -1;
    std::string log_path_;
};

// `vega serve` arguments for stories260K on the CPU (2 threads, no request log), then `extra`.
std::string stories_serve_args(const std::string& extra);
// Writes `text` to a file of that name in the test's temporary directory; returns its path.
std::string write_temp_file(const std::string& name, const std::string& text);
// A chatml template file (the tests' models have no chat template of their own).
std::string chatml_template_file();

}  // namespace vega::test
