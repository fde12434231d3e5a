// Options and set-up shared by the subcommands that run a model.
#pragma once
#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "engine/sampler.h"
#include "engine/session.h"
#include "model/model.h"

namespace vega::cli {

struct ModelOptions {
    std::string model_path;
    std::string hf_repo;      // -hf REPO[:QUANT|:FILE.gguf], used when -m is not given
    std::string hf_endpoint;  // --hf-endpoint (default: $HF_ENDPOINT or huggingface.co)
    std::string device = "auto";
    std::string devices;               // --devices 0,1,..: the devices of a split (empty: --device alone)
    std::string split_mode = "layer";  // --split-mode: layer, tensor, or none (the first of --devices only)
    std::string tensor_split;          // --tensor-split 3,1: each device's share of the layers (empty: free memory)
    int threads = 0;
    int ctx = 0;
    int batch = 512;
    std::string kv_type = "f16";
};

// Adds --temp, --top-k, --top-p, --min-p, --repeat-penalty, --repeat-last-n,
// --frequency-penalty, --presence-penalty and --seed.
void add_sampling_options(CLI::App& cmd, SamplerParams& sp);

// Adds -m/--model, -hf/--hf-repo, --hf-endpoint, -t/--threads, --device, --devices,
// --split-mode, --tensor-split, -c/--ctx-size, -b/--batch-size, --kv-type.
void add_model_options(CLI::App& cmd, ModelOptions& o, bool ctx_option = true);

// The model file: -m, else -hf resolved through the download cache (downloading it if
// needed); fails with how to get a model when neither is given.
std::string resolve_model_path(const ModelOptions& o, bool verbose);

// A model loaded on its backends (one, or one per device of a layer split) with one session.
struct Loaded {
    std::vector<std::unique_ptr<Backend>> backends;  // in stage order
    Backend& backend() const { return *backends.front(); }
    std::unique_ptr<Model> model;
    std::unique_ptr<Session> session;
    std::string model_path;  // the file loaded (from -m, or the cache for -hf)
    double load_seconds = 0;
};

// Creates the backend, loads the model (progress on stderr when verbose) and a session.
Loaded load(const ModelOptions& o, bool verbose, int n_seq = 1);

GgmlType parse_kv_type(const std::string& s);
// The device list of --devices ("0,1", "cpu,0") or --device alone, and the shares of
// --tensor-split (empty: by free memory); fails naming a malformed item.
std::vector<std::string> parse_device_list(const ModelOptions& o);
std::vector<double> parse_tensor_split(const std::string& s);
std::string kv_type_name(GgmlType t);
double now_seconds();

}  // namespace vega::cli
