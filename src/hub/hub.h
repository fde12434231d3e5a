// Model downloads from the Hugging Face Hub: `vega pull REPO[:FILE]` and `-hf REPO[:QUANT]`.
// resolve_hf_model() returns the local path of the chosen GGUF, downloading it (with
// resume and sha256 verification) into the cache when it is not there yet.
#pragma once
#include <string>

namespace vega::hub {

struct HfRequest {
    std::string spec;      // "owner/repo", "owner/repo:Q4_K_M" or "owner/repo:file.gguf"
    std::string endpoint;  // "" = $HF_ENDPOINT, else https://huggingface.co
    std::string cache_dir; // "" = cache_root() (VEGA_CACHE_DIR / XDG_CACHE_HOME / ~/.cache)
    std::string token;     // "" = $HF_TOKEN (sent as Authorization: Bearer)
    bool verbose = true;   // progress and status lines on stderr
};

// The local path of the requested file; downloads and verifies it if needed. When the
// request was already satisfied from the cache (file + verified sidecar, and for quant
// and default selectors a recorded choice), no network request is made at all.
std::string resolve_hf_model(const HfRequest& req);

}  // namespace vega::hub
