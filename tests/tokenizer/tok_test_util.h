// Shared helpers for the tokenizer tests: loading (cached per file) and the
// llama.cpp tokenizer test-vector format.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "test_data.h"
#include "tokenizer/tokenizer.h"

namespace vega::test {

// Tokenizer of a GGUF file under the data dir (e.g. "vocab/ggml-vocab-gpt-2.gguf"),
// loaded once per test binary.
inline const Tokenizer& tokenizer_for(const std::string& rel) {
    static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
    auto it = cache.find(rel);
    if (it == cache.end()) {
        auto f = gguf::File::open(data_file(rel));
        it = cache.emplace(rel, Tokenizer::from_gguf(*f)).first;
    }
    return *it->second;
}

// ".inp": every string is followed by "\n__ggml_vocab_test__\n".
inline std::vector<std::string> split_vocab_inputs(const std::string& s) {
    static const std::string sep = "\n__ggml_vocab_test__\n";
    std::vector<std::string> out;
    size_t pos = 0;
    while (true) {
        const size_t e = s.find(sep, pos);
        if (e == std::string::npos) break;
        out.push_back(s.substr(pos, e - pos));
        pos = e + sep.size();
    }
    return out;
}

// ".out": one line per string, each id written as " <id>".
inline std::vector<std::vector<int32_t>> parse_vocab_outputs(const std::string& s) {
    std::vector<std::vector<int32_t>> out;
    size_t pos = 0;
    while (pos < s.size()) {
        size_t e = s.find('\n', pos);
        if (e == std::string::npos) e = s.size();
        std::vector<int32_t> ids;
        const std::string line = s.substr(pos, e - pos);
        size_t i = 0;
        while (i < line.size()) {
            while (i < line.size() && line[i] == ' ') ++i;
            if (i >= line.size()) break;
            size_t j = i;
            while (j < line.size() && line[j] != ' ') ++j;
            ids.push_back(int32_t(std::stol(line.substr(i, j - i))));
            i = j;
        }
        out.push_back(std::move(ids));
        pos = e + 1;
    }
    return out;
}

}  // namespace vega::test
