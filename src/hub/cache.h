// The download cache: <root>/hf/<owner>/<repo>/<file>, a sidecar <file>.json with the
// verified sha256 and size, and refs.json per repository recording which file a selector
// chose (so that `REPO:QUANT` resolves offline).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace vega::hub {

// $VEGA_CACHE_DIR, else $XDG_CACHE_HOME/vega, else $HOME/.cache/vega.
std::string cache_root();

std::string repo_dir(const std::string& root, const std::string& repo);
std::string file_path(const std::string& root, const std::string& repo, const std::string& file);
std::string sidecar_path(const std::string& file_path);

struct Verified {
    std::string sha256;
    uint64_t size = 0;
};
// The sidecar's record when the file is present, the sidecar parses and the sizes agree.
std::optional<Verified> read_verified(const std::string& file_path);
void write_verified(const std::string& file_path, const std::string& repo, const std::string& file,
                    const Verified& v);

// refs.json: selector key -> file path within the repo.
std::optional<std::string> read_ref(const std::string& root, const std::string& repo, const std::string& key);
void write_ref(const std::string& root, const std::string& repo, const std::string& key, const std::string& file);

}  // namespace vega::hub
