#include "hub/cache.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <unistd.h>

#include "core/error.h"
#include "hub/hub_api.h"

namespace fs = std::filesystem;

namespace vega::hub {

namespace {

std::string env(const char* name) {
    const char* v = std::getenv(name);
    return v && *v ? v : "";
}

std::optional<nlohmann::json> read_json(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return std::nullopt;
    std::stringstream ss;
    ss << f.rdbuf();
    try {
        return nlohmann::json::parse(ss.str());
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

// Writes through a temporary file and a rename, so readers never see half a file.
void write_json_atomic(const std::string& path, const nlohmann::json& j) {
    const std::string tmp = path + ".tmp" + std::to_string(getpid());
    {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        f << j.dump(2) << "\n";
        if (!f.flush()) fail("cannot write '{}'", tmp);
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) {
        fs::remove(tmp, ec);
        fail("cannot write '{}': {}", path, ec.message());
    }
}

}  // namespace

std::string cache_root() {
    if (std::string d = env("VEGA_CACHE_DIR"); !d.empty()) return d;
    if (std::string d = env("XDG_CACHE_HOME"); !d.empty()) return d + "/vega";
    if (std::string h = env("HOME"); !h.empty()) return h + "/.cache/vega";
    fail("no cache directory: set VEGA_CACHE_DIR (or XDG_CACHE_HOME or HOME)");
}

std::string repo_dir(const std::string& root, const std::string& repo) { return root + "/hf/" + repo; }

std::string file_path(const std::string& root, const std::string& repo, const std::string& file) {
    return repo_dir(root, repo) + "/" + file;
}

std::string sidecar_path(const std::string& file_path) { return file_path + ".json"; }

std::optional<Verified> read_verified(const std::string& path) {
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    if (ec) return std::nullopt;
    const auto j = read_json(sidecar_path(path));
    if (!j || !j->is_object()) return std::nullopt;
    const auto sha = j->find("sha256");
    const auto sz = j->find("size");
    if (sha == j->end() || !sha->is_string() || sz == j->end() || !sz->is_number_unsigned()) return std::nullopt;
    Verified v{sha->get<std::string>(), sz->get<uint64_t>()};
    if (!is_sha256_hex(v.sha256) || v.size != size) return std::nullopt;
    return v;
}

void write_verified(const std::string& path, const std::string& repo, const std::string& file, const Verified& v) {
    write_json_atomic(sidecar_path(path), {{"repo", repo}, {"file", file}, {"sha256", v.sha256}, {"size", v.size}});
}

std::optional<std::string> read_ref(const std::string& root, const std::string& repo, const std::string& key) {
    const auto j = read_json(repo_dir(root, repo) + "/refs.json");
    if (!j || !j->is_object()) return std::nullopt;
    const auto it = j->find(key);
    if (it == j->end() || !it->is_string()) return std::nullopt;
    return it->get<std::string>();
}

void write_ref(const std::string& root, const std::string& repo, const std::string& key, const std::string& file) {
    const std::string path = repo_dir(root, repo) + "/refs.json";
    nlohmann::json j = nlohmann::json::object();
    if (auto old = read_json(path); old && old->is_object()) j = *old;
    j[key] = file;
    write_json_atomic(path, j);
}

}  // namespace vega::hub
