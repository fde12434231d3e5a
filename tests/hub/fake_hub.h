// A loopback stand-in for the Hugging Face Hub (cpp-httplib on 127.0.0.1, a free port,
// served from a thread of the test process): the tree API and the resolve endpoint (via
// a redirect, with Range support), recording what it was asked and what it sent.
#pragma once
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "hub/sha256.h"

namespace vega::test {

class FakeHub {
public:
    std::string repo = "owner/model-GGUF";
    std::map<std::string, std::string> files;       // path -> content
    std::map<std::string, std::string> listed_sha;  // path -> sha256 to list instead of the real one
    std::set<std::string> missing_blobs;            // listed, but resolve answers 404

    struct Seen {
        std::string path;
        std::string range;
        std::string auth;
    };

    FakeHub() {
        srv_.Get(R"(/api/models/([^/]+/[^/]+)/tree/main)", [this](const httplib::Request& req, httplib::Response& res) {
            record(req);
            if (req.matches[1] != repo) {
                res.status = 404;
                res.set_content(R"({"error":"Repository not found"})", "application/json");
                return;
            }
            nlohmann::json arr = nlohmann::json::array();
            arr.push_back({{"type", "file"}, {"path", "README.md"}, {"size", 12}, {"oid", "abc"}});
            for (const auto& [p, content] : files) {
                const auto it = listed_sha.find(p);
                const std::string sha = it != listed_sha.end() ? it->second : hub::sha256_hex(content);
                arr.push_back({{"type", "file"}, {"path", p}, {"size", content.size()}, {"oid", "0123"},
                               {"lfs", {{"oid", sha}, {"size", content.size()}, {"pointerSize", 134}}}});
            }
            arr.push_back({{"type", "directory"}, {"path", "extra"}, {"size", 0}, {"oid", "def"}});
            res.set_content(arr.dump(), "application/json");
        });
        // The Hub answers resolve with a redirect to its CDN; do the same.
        srv_.Get(R"(/([^/]+/[^/]+)/resolve/main/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
            record(req);
            res.set_redirect("/cdn/" + req.matches[1].str() + "/" + req.matches[2].str(), 302);
        });
        srv_.Get(R"(/cdn/([^/]+/[^/]+)/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
            record(req);
            const std::string path = req.matches[2];
            const auto it = files.find(path);
            if (req.matches[1] != repo || it == files.end() || missing_blobs.count(path)) {
                res.status = 404;
                res.set_content("Entry not found", "text/plain");
                return;
            }
            const std::string* content = &it->second;
            // (cpp-httplib applies the Range and calls the provider for just those bytes.)
            res.set_content_provider(content->size(), "application/octet-stream",
                                     [this, content](size_t offset, size_t length, httplib::DataSink& sink) {
                                         const size_t n = std::min<size_t>(length, 64 * 1024);
                                         sink.write(content->data() + offset, n);
                                         bytes_sent += n;
                                         return true;
                                     });
        });
        port_ = srv_.bind_to_any_port("127.0.0.1");
        if (port_ <= 0) throw std::runtime_error("cannot bind a loopback port");
        thread_ = std::thread([this] { srv_.listen_after_bind(); });
        while (!srv_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // so stop() works
    }
    ~FakeHub() { stop(); }

    void stop() {
        if (thread_.joinable()) {
            srv_.stop();
            thread_.join();
        }
    }

    std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

    std::vector<Seen> seen() {
        std::lock_guard<std::mutex> lk(mu_);
        return seen_;
    }
    size_t n_requests() {
        std::lock_guard<std::mutex> lk(mu_);
        return seen_.size();
    }

    std::atomic<uint64_t> bytes_sent{0};  // body bytes of the file responses

private:
    // (In the handler, not a logger: a logger runs after the answer, when the client
    // may already have sent its next request.)
    void record(const httplib::Request& req) {
        std::lock_guard<std::mutex> lk(mu_);
        seen_.push_back({req.path, req.get_header_value("Range"), req.get_header_value("Authorization")});
    }

    httplib::Server srv_;
    std::thread thread_;
    int port_ = -1;
    std::mutex mu_;
    std::vector<Seen> seen_;
};

inline std::string random_bytes(size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::string s(n, '\0');
    for (auto& c : s) c = char(rng());
    return s;
}

}  // namespace vega::test
