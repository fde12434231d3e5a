// vega inspect: a GGUF file's header, metadata and tensor table.
#include <fmt/format.h>

#include <cstdio>
#include <map>
#include <string>

#include "cli/commands.h"
#include "gguf/gguf.h"

namespace vega::cli {

namespace {

struct InspectOptions {
    std::string path;
    size_t max_items = 8;
    bool no_tensors = false;
};

// 1.23 GiB, 45.6 MiB, 7.8 KiB.
std::string bytes_str(double b) {
    if (b >= 1024.0 * 1024.0 * 1024.0) return fmt::format("{:.2f} GiB", b / (1024.0 * 1024.0 * 1024.0));
    if (b >= 1024.0 * 1024.0) return fmt::format("{:.1f} MiB", b / (1024.0 * 1024.0));
    return fmt::format("{:.1f} KiB", b / 1024.0);
}

// A mixture of experts (<arch>.expert_count > 0): the expert layout and how much of
// the weights one decoded token reads. Expert tensors are the routed ones, *_exps*
// (ffn_gate_exps, ffn_up_exps, ffn_down_exps; not shared experts, *_shexp*, which
// every token uses). Per token: n_used / n_expert of the expert bytes, every other
// weight, less token_embd when the file has an output.weight (a token reads one
// embedding row; a tied output reads all of token_embd).
void print_experts(const gguf::File& f, uint64_t total) {
    const std::string a = f.get_string("general.architecture", "") + ".";
    const gguf::Value* v = f.find(a + "expert_count");
    if (!v || !v->is_integer() || v->as_int() <= 0) return;
    const int64_t n_expert = v->as_int();
    const gguf::Value* u = f.find(a + "expert_used_count");
    const int64_t n_used = u && u->is_integer() ? u->as_int() : 0;
    const gguf::Value* ff = f.find(a + "expert_feed_forward_length");
    int64_t n_ff_exp = ff && ff->is_integer() ? ff->as_int() : 0;
    uint64_t expert_bytes = 0, embd_bytes = 0;
    bool has_output = false;
    for (const auto& t : f.tensors()) {
        if (t.name.find("_exps") != std::string::npos) {
            expert_bytes += t.n_bytes;
            if (n_ff_exp <= 0 && t.name.find("ffn_gate_exps") != std::string::npos) n_ff_exp = t.ne[1];
        }
        if (t.name == "token_embd.weight") embd_bytes = t.n_bytes;
        if (t.name == "output.weight") has_output = true;
    }
    fmt::print("experts: {} per layer, {} used per token, expert FFN {}; expert weights {} of {}", n_expert,
               n_used > 0 ? std::to_string(n_used) : "?", n_ff_exp > 0 ? std::to_string(n_ff_exp) : "?",
               bytes_str(double(expert_bytes)), bytes_str(double(total)));
    if (n_used > 0 && n_used <= n_expert) {
        const double active = double(total - expert_bytes - (has_output ? embd_bytes : 0)) +
                              double(expert_bytes) * double(n_used) / double(n_expert);
        fmt::print(" (active per token ~ {}: {}/{} of the expert weights, all other weights{})", bytes_str(active),
                   n_used, n_expert, has_output ? " but token_embd" : "");
    }
    fmt::print("\n");
}

void inspect(const InspectOptions& o) {
    auto f = gguf::File::open(o.path);
    fmt::print("file: {}\nGGUF version {}, {} bytes, alignment {}, tensor data at byte {}\n", f->path(), f->version(),
               f->file_size(), f->alignment(), f->data_offset());
    fmt::print("\nmetadata ({} keys):\n", f->metadata().size());
    for (const auto& kv : f->metadata())
        fmt::print("  {:<45} {:<8} {}\n", kv.key, gguf::value_type_name(kv.value.type), kv.value.to_string(o.max_items));
    uint64_t total = 0;
    std::map<std::string, std::pair<int, uint64_t>> by_type;
    for (const auto& t : f->tensors()) {
        total += t.n_bytes;
        auto& e = by_type[type_traits(t.type).name ? type_traits(t.type).name : "?"];
        e.first++;
        e.second += t.n_bytes;
    }
    fmt::print("\ntensors ({}, {:.2f} MB):", f->tensors().size(), double(total) / 1e6);
    for (const auto& [name, e] : by_type) fmt::print(" {} x{} ({:.2f} MB)", name, e.first, double(e.second) / 1e6);
    fmt::print("\n");
    print_experts(*f, total);
    if (o.no_tensors) return;
    fmt::print("  {:<36} {:<6} {:<24} {:>12} {:>12}\n", "name", "type", "shape (ne0 first)", "bytes", "offset");
    for (const auto& t : f->tensors()) {
        std::string shape;
        for (int i = 0; i < t.n_dims; ++i) shape += (i ? " x " : "") + std::to_string(t.ne[i]);
        fmt::print("  {:<36} {:<6} {:<24} {:>12} {:>12}\n", t.name, type_traits(t.type).name ? type_traits(t.type).name : "?",
                   shape, t.n_bytes, f->data_offset() + t.offset);
    }
}

}  // namespace

void register_inspect(CLI::App& app) {
    auto o = std::make_shared<InspectOptions>();
    CLI::App* cmd = app.add_subcommand("inspect", "print a GGUF file's metadata and tensor table");
    cmd->add_option("model", o->path, "GGUF file")->required()->check(CLI::ExistingFile);
    cmd->add_option("--max-items", o->max_items, "array items shown per key")->capture_default_str();
    cmd->add_flag("--no-tensors", o->no_tensors, "omit the tensor table");
    cmd->callback([o] { inspect(*o); });
}

}  // namespace vega::cli
