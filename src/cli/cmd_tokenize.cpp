// vega tokenize: print the token ids of a text, space-separated, on one line.
// Needs only the vocabulary (a vocab-only GGUF works).
#include <cstdio>
#include <fstream>
#include <string>

#include "cli/commands.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace vega::cli {

namespace {

struct TokenizeOptions {
    std::string model;
    std::string text;
    std::string file;
    bool bos = false;
    bool special = false;
    bool pieces = false;
};

void tokenize(const TokenizeOptions& o) {
    auto f = gguf::File::open(o.model);
    auto tok = Tokenizer::from_gguf(*f);
    std::string text = o.text;
    if (!o.file.empty()) {
        std::ifstream in(o.file, std::ios::binary);
        if (!in) fail("cannot read '{}'", o.file);
        text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());  // bytes exactly
    }
    // add_special=false: BOS is added here only when asked (--bos), never EOS.
    std::vector<int32_t> ids = tok->encode(text, /*add_special=*/false, o.special);
    if (o.bos) {
        if (tok->bos() < 0) fail("{}: the vocabulary has no BOS token", o.model);
        ids.insert(ids.begin(), tok->bos());
    }
    std::string line;
    for (size_t i = 0; i < ids.size(); ++i) {
        if (i) line += ' ';
        line += std::to_string(ids[i]);
        if (o.pieces) line += ":'" + tok->token_to_piece(ids[i], true) + "'";
    }
    std::printf("%s\n", line.c_str());
}

}  // namespace

void register_tokenize(CLI::App& app) {
    auto o = std::make_shared<TokenizeOptions>();
    CLI::App* cmd = app.add_subcommand("tokenize", "print the token ids of a text");
    cmd->add_option("-m,--model", o->model, "GGUF model or vocabulary file")->required()->check(CLI::ExistingFile);
    auto* p = cmd->add_option("-p,--prompt", o->text, "text to tokenize");
    auto* f = cmd->add_option("-f,--file", o->file, "tokenize this file's bytes exactly")->check(CLI::ExistingFile);
    p->excludes(f);
    cmd->add_flag("--bos", o->bos, "prepend the BOS token");
    cmd->add_flag("--special", o->special, "parse special-token text (e.g. <|eot_id|>)");
    cmd->add_flag("--pieces", o->pieces, "print each id with its text");
    cmd->callback([o] { tokenize(*o); });
}

}  // namespace vega::cli
