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
