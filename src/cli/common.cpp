#include "cli/common.h"

#include <cctype>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

#include "backend/backend_factory.h"
#include "cli/limited_option.h"
#include "core/env.h"
#include "core/error.h"
#ifdef VEGA_HAVE_NET
#include "hub/hub.h"
#endif

namespace vega::cli {

void add_model_options(CLI::App& cmd, ModelOptions& o, bool ctx_option) {
    cmd.add_option("-m,--model", o.model_path, "GGUF model file")->check(CLI::ExistingFile);
    // (main() turns "-hf" into "--hf-repo": CLI11 has no multi-letter short options.)
    cmd.add_option("--hf-repo", o.hf_repo,
                   "-hf: a Hugging Face repo to take the model from when -m is not given: REPO[:QUANT|:FILE.gguf] "
                   "(downloaded once into the cache, see `vega pull`)");
    cmd.add_option("--hf-endpoint", o.hf_endpoint, "Hugging Face Hub URL (default: $HF_ENDPOINT or https://huggingface.co)");
    const OptionLimits& lim = option_limits();
    add_limited_option(cmd, o.threads, lim.threads, "CPU threads (0: all cores, the default)");
    CLI::Option* one = cmd.add_option("--device", o.device, "cpu, gpu, a GPU index, or auto (GPU when present)")
                           ->capture_default_str();
    cmd.add_option("--devices", o.devices,
                   "several devices, comma-separated (0,1 or cpu,0): the model's layers are split over them in "
                   "order (--split-mode layer), the KV cache with them")
        ->excludes(one);
    cmd.add_option("--split-mode", o.split_mode,
                   "how --devices share the model: layer (each holds a contiguous range of layers), tensor (each "
                   "holds its share of every layer's heads and FFN rows; one all-reduce after each attention and "
                   "FFN block, over peer memory on NVIDIA where it serves, else through NCCL/RCCL when found) or "
                   "none (the first device holds all)")
        ->capture_default_str();
    cmd.add_option("--tensor-split", o.tensor_split,
                   "each device's share of the layers, comma-separated (3,1: three quarters on the first); default: "
                   "in proportion to each device's free memory");
    if (ctx_option) add_limited_option(cmd, o.ctx, lim.ctx_size, "context size in tokens (0: the model's, at most 4096; the default)");
    add_limited_option(cmd, o.batch, lim.batch_size, "most tokens per forward call")->capture_default_str();
    cmd.add_option("--kv-type", o.kv_type, "KV cache type: f16, q8_0 (about half the memory; K and V in 8-bit blocks) or f32")->capture_default_str();
}

void add_sampling_options(CLI::App& cmd, SamplerParams& sp) {
    const OptionLimits& lim = option_limits();
    add_limited_option(cmd, sp.temperature, lim.temperature, "temperature (0 = greedy)")->capture_default_str();
    add_limited_option(cmd, sp.top_k, lim.top_k, "top-k (0 = off)")->capture_default_str();
    add_limited_option(cmd, sp.top_p, lim.top_p, "top-p (1 = off)")->capture_default_str();
    add_limited_option(cmd, sp.min_p, lim.min_p, "min-p (0 = off)")->capture_default_str();
    add_limited_option(cmd, sp.repeat_penalty, lim.repeat_penalty, "repetition penalty (1 = off)")->capture_default_str();
    add_limited_option(cmd, sp.repeat_last_n, lim.repeat_last_n, "tokens the penalties look back (0 = off, -1 = all)")
        ->capture_default_str();
    add_limited_option(cmd, sp.frequency_penalty, lim.frequency_penalty, "frequency penalty")->capture_default_str();
    add_limited_option(cmd, sp.presence_penalty, lim.presence_penalty, "presence penalty")->capture_default_str();
    // Every 64-bit value is a seed: no range to check.
    cmd.add_option("--seed", sp.seed, "sampling seed (0 = random)")->capture_default_str();
}

// The --kv-type spelling of a cache type (f16, q8_0, f32).
std::string kv_type_name(GgmlType t) {
    std::string n = type_traits(t).name;
    for (char& c : n) c = char(std::tolower(static_cast<unsigned char>(c)));
    return n;
}

GgmlType parse_kv_type(const std::string& s) {
    if (s == "f16") return GgmlType::F16;
    if (s == "f32") return GgmlType::F32;
    if (s == "q8_0" || s == "q8") return GgmlType::Q8_0;
    fail("unknown --kv-type '{}' (use f16, q8_0 or f32)", s);
}

double now_seconds() {
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}

std::string resolve_model_path(const ModelOptions& o, bool verbose) {
    if (!o.model_path.empty()) return o.model_path;
    if (o.hf_repo.empty())
        fail("no model given: use -m FILE.gguf, or -hf REPO[:QUANT] to download one from Hugging Face "
             "(e.g. -hf bartowski/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M, or first `vega pull REPO[:QUANT]`)");
#ifdef VEGA_HAVE_NET
    hub::HfRequest req;
    req.spec = o.hf_repo;
    req.endpoint = o.hf_endpoint;
    req.verbose = verbose;
    return hub::resolve_hf_model(req);
#else
    fail("-hf needs a build with network support (cmake -DVEGA_NET=ON, libcurl); use -m FILE.gguf");
#endif
}

std::vector<std::string> parse_device_list(const ModelOptions& o) {
    if (o.split_mode != "layer" && o.split_mode != "tensor" && o.split_mode != "none")
        fail("unknown --split-mode '{}' (use layer, tensor or none)", o.split_mode);
    if (o.devices.empty()) {
        if (!o.tensor_split.empty()) fail("--tensor-split needs --devices (the devices it splits over)");
        return {o.device};
    }
    std::vector<std::string> out;
    size_t b = 0;
    for (;;) {
        const size_t e = o.devices.find(',', b);
        std::string item = o.devices.substr(b, e == std::string::npos ? std::string::npos : e - b);
        if (item.empty()) fail("--devices '{}' has an empty item (use e.g. 0,1)", o.devices);
        out.push_back(item);
        if (e == std::string::npos) break;
        b = e + 1;
    }
    if (o.split_mode == "none") out.resize(1);
    return out;
}

std::vector<double> parse_tensor_split(const std::string& s) {
    std::vector<double> out;
    if (s.empty()) return out;
    size_t b = 0;
    for (;;) {
        const size_t e = s.find(',', b);
        const std::string item = s.substr(b, e == std::string::npos ? std::string::npos : e - b);
        char* end = nullptr;
        const double v = std::strtod(item.c_str(), &end);
        if (item.empty() || *end != '\0' || !(v >= 0) || !std::isfinite(v))
            fail("--tensor-split '{}': '{}' is not a non-negative number", s, item);
        out.push_back(v);
        if (e == std::string::npos) break;
        b = e + 1;
    }
    return out;
}

Loaded load(const ModelOptions& opts, bool verbose, int n_seq) {
    ModelOptions o = opts;
    o.model_path = resolve_model_path(opts, verbose);
    Loaded l;
    l.model_path = o.model_path;
    const double t0 = now_seconds();
    const std::vector<std::string> devices = parse_device_list(o);
    const std::vector<double> shares = parse_tensor_split(o.tensor_split);
    if (!shares.empty() && shares.size() != devices.size())
        fail("--tensor-split '{}' has {} value(s) for {} device(s) in --devices", o.tensor_split, shares.size(),
             devices.size());
    if (!shares.empty() && o.split_mode == "tensor")
        fail("--tensor-split weighs a layer split; --split-mode tensor splits every layer evenly");
    Placement place;
    place.mode = o.split_mode == "tensor" ? SplitMode::kTensor : SplitMode::kLayer;
    place.shares = shares;
    for (const std::string& d : devices) {
        l.backends.push_back(create_backend(d, o.threads));
        place.devices.push_back(l.backends.back().get());
    }
    int last = -1;
    const bool tty = isatty(fileno(stderr));  // progress only on a terminal
    l.model = Model::load(o.model_path, place, [&](float f) {
        const int pct = int(f * 100);
        if (verbose && tty && pct / 10 != last / 10) {
            std::fprintf(stderr, "\rvega: loading %s %3d%%", o.model_path.c_str(), pct);
            last = pct;
        }
    });
    for (auto& be : l.backends) be->set_notes(verbose);
    if (verbose)
        std::fprintf(stderr, "\rvega: loaded %s: %s on %s\n", o.model_path.c_str(), l.model->describe().c_str(),
                     l.model->describe_placement().c_str());
    ContextParams cp;
    cp.n_ctx = o.ctx;
    cp.n_batch = o.batch;
    cp.n_seq = n_seq;
    cp.kv_type = parse_kv_type(o.kv_type);
    // Batched decode steps replay one graph per batch-size bucket (checked on the H200:
    // the GPU end-to-end tests pass with it); VEGA_BATCH_GRAPHS=0 turns it off (A/B).
    cp.batch_graphs = env::flag("VEGA_BATCH_GRAPHS", true);
    l.session = std::make_unique<Session>(*l.model, cp);
    if (verbose) {
        const ContextParams& p = l.session->params();
        const double mib = double(l.session->kv_bytes()) / (1 << 20);
        std::fprintf(stderr, "vega: KV cache %.*f %s: %d cells x %d sequence(s), %s (-c, --parallel, --kv-type)\n",
                     mib < 1024 ? 1 : 2, mib < 1024 ? mib : mib / 1024, mib < 1024 ? "MiB" : "GiB", p.n_ctx, p.n_seq,
                     kv_type_name(p.kv_type).c_str());
        if (const std::string c = l.session->collective_name(); !c.empty())
            std::fprintf(stderr, "vega: tensor parallel all-reduce: %s%s\n", c.c_str(),
                         l.session->use_graphs() ? "" : " (decode steps run op by op: not recorded as graphs)");
    }
    // VEGA_GRAPHS=0: every decode step runs op by op (A/B and diagnosis of graph replay).
    if (!env::flag("VEGA_GRAPHS", true)) l.session->set_use_graphs(false);
    l.load_seconds = now_seconds() - t0;
    return l;
}

}  // namespace vega::cli
