// vega pull: download a GGUF from the Hugging Face Hub into the cache (verified by
// sha256, resumable) and print its local path on stdout.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "hub/hub.h"

namespace vega::cli {

void register_pull(CLI::App& app) {
    auto o = std::make_shared<hub::HfRequest>();
    auto quiet = std::make_shared<bool>(false);
    CLI::App* cmd = app.add_subcommand(
        "pull", "download a GGUF model from Hugging Face into the cache and print its path");
    cmd->footer(
        "REPO alone takes the repo's Q4_K_M file if it has one, else its first .gguf; REPO:QUANT the .gguf\n"
        "whose name holds QUANT (any case); REPO:FILE.gguf that file. Files are verified against the Hub's\n"
        "sha256 and kept in $VEGA_CACHE_DIR (else $XDG_CACHE_HOME/vega, else ~/.cache/vega) under\n"
        "hf/OWNER/REPO/; a cached file is used again without network access. HF_TOKEN is sent when set.\n"
        "Example: vega pull bartowski/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M");
    cmd->add_option("model", o->spec, "REPO, REPO:QUANT or REPO:FILE.gguf")->required();
    cmd->add_option("--hf-endpoint", o->endpoint, "Hub URL (default: $HF_ENDPOINT or https://huggingface.co)");
    cmd->add_flag("-q,--quiet", *quiet, "no progress or status lines on stderr");
    cmd->callback([o, quiet] {
        o->verbose = !*quiet;
        const std::string path = hub::resolve_hf_model(*o);
        std::printf("%s\n", path.c_str());
    });
}

}  // namespace vega::cli
