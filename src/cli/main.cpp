// vega — LLM inference for AMD gfx906 (and NVIDIA, and the CPU).
#include <cstdio>
#include <cstring>
#include <exception>

#include "cli/commands.h"
#include "core/error.h"

int main(int argc, char** argv) {
    CLI::App app{"vega: run GGUF language models on gfx906 GPUs, NVIDIA GPUs and the CPU"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "vega 0.1.0");
    vega::cli::register_run(app);
    vega::cli::register_eval(app);
    vega::cli::register_perplexity(app);
    vega::cli::register_inspect(app);
    vega::cli::register_tokenize(app);
    vega::cli::register_synth(app);
    vega::cli::register_bench(app);
    vega::cli::register_template(app);
#ifdef VEGA_HAVE_NET
    vega::cli::register_pull(app);
#endif
    vega::cli::register_serve(app);
    vega::cli::register_chat(app);
    vega::cli::register_probe(app);
    // -hf (llama.cpp's spelling) for --hf-repo: CLI11 has no multi-letter short options.
    for (int i = 1; i < argc; ++i)
        if (std::strcmp(argv[i], "-hf") == 0) argv[i] = const_cast<char*>("--hf-repo");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    } catch (const vega::Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "error: out of host memory\n");
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
