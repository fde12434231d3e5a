// The Hugging Face Hub API: request specs, URLs, the tree listing, and file choice.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace vega::hub {

// "owner/repo[:selector]" split and validated (no "..", no absolute paths).
struct RepoSpec {
    std::string repo;      // owner/name
    std::string selector;  // "" (default choice), a quant tag, or a file path ending in .gguf
    bool explicit_file() const;
};
RepoSpec parse_spec(const std::string& spec);

// One file of a repository as listed by the tree API.
struct HubFile {
    std::string path;
    uint64_t size = 0;
    std::string sha256;  // lfs oid (lower-case hex); empty for non-LFS files
};

// $HF_ENDPOINT, else https://huggingface.co (no trailing slash); `override_` wins when set.
std::string endpoint_or_default(const std::string& override_);
// {endpoint}/api/models/{repo}/tree/main[/{dir}]
std::string tree_url(const std::string& endpoint, const std::string& repo, const std::string& dir = "");
// {endpoint}/{repo}/resolve/main/{path} (path segments percent-encoded)
std::string resolve_url(const std::string& endpoint, const std::string& repo, const std::string& path);

// Parses the tree API's JSON array; keeps the "file" entries. Throws on malformed JSON.
std::vector<HubFile> parse_tree(const std::string& json_text, const std::string& repo);

// The file a selector names: explicit .gguf path as is; a quant tag picks the .gguf whose
// name contains it (case-insensitive; a whole-word match first); "" picks Q4_K_M if present,
// else the first .gguf. Throws, listing the .gguf files, when nothing matches.
HubFile choose_file(const std::vector<HubFile>& files, const RepoSpec& spec);

// True for lower-case or upper-case 64-digit hex.
bool is_sha256_hex(const std::string& s);

}  // namespace vega::hub
