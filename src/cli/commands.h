// Each `vega` subcommand registers itself on the CLI11 app; main() runs the one chosen.
#pragma once
#include <CLI/CLI.hpp>

namespace vega::cli {

void register_run(CLI::App& app);
void register_eval(CLI::App& app);
void register_perplexity(CLI::App& app);
void register_inspect(CLI::App& app);
void register_tokenize(CLI::App& app);
void register_synth(CLI::App& app);
void register_bench(CLI::App& app);
void register_template(CLI::App& app);
void register_pull(CLI::App& app);
void register_serve(CLI::App& app);
void register_chat(CLI::App& app);
void register_probe(CLI::App& app);

}  // namespace vega::cli
