// tokenizer.ggml.pre -> regex list and flags, as in llama.cpp (c392e50,
// llm_tokenizer_bpe and llama_vocab::impl::load).
#include "tokenizer/pretokenizer.h"

namespace vega::tok {

namespace {

// GPT-2's original pattern.
const char* const kGpt2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
// Llama 3 (tiktoken cl100k with case-insensitive contractions spelled out).
const char* const kLlama3 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}|"
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// Qwen2: like Llama 3 but digits one at a time.
const char* const kQwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* const kPoro = " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{964}\\x{6D4}\\x{60C})]+";
const char* const kCjk = "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+";

}  // namespace

PreTokenizerSpec pre_tokenizer_spec(const std::string& pre) {
    PreTokenizerSpec s;
    auto is = [&](std::initializer_list<const char*> names) {
        for (const char* n : names)
            if (pre == n) return true;
        return false;
    };
    if (is({"llama3", "llama-v3", "llama-bpe", "falcon3"})) {
        s.regexes = {kLlama3};
        s.ignore_merges = true;
        s.add_bos = true;
    } else if (is({"dbrx", "smaug-bpe", "chatglm-bpe"})) {
        s.regexes = {kLlama3};
    } else if (pre == "deepseek-llm") {
        s.regexes = {
            "[\r\n]",
            // Cased letters (\p{LC}) as llama.cpp lists them, written as escapes.
            "\\s?["
            "A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}"
            "\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}"
            "\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}"
            "\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}"
            "\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}"
            "\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}"
            "\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}"
            "\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}"
            "\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}"
            "\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}"
            "\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}"
            "\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}"
            "\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}"
            "\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}"
            "\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}"
            "\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}"
            "\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}"
            "\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+",
            "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
            "\\s+$",
            kCjk,
            "\\p{N}+",
        };
        s.clean_spaces = false;
    } else if (pre == "deepseek-coder") {
        s.regexes = {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", kCjk, "\\p{N}"};
        s.clean_spaces = false;
    } else if (pre == "deepseek-v3") {
        s.regexes = {
            "\\p{N}{1,3}",
            "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
            "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
            " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
        };
        s.clean_spaces = false;
    } else if (pre == "falcon") {
        s.regexes = {"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2, "[0-9][0-9][0-9]"};
    } else if (is({"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v1-en", "jina-v2-es", "jina-v2-de",
                   "jina-v2-code", "roberta-bpe", "mpt", "olmo", "jais"})) {
        s.regexes = {kGpt2};
    } else if (is({"starcoder", "refact", "codeshell", "exaone", "minerva-7b"})) {
        s.regexes = {"\\p{N}", kGpt2};
    } else if (is({"command-r", "smollm"})) {
        s.regexes = {"\\p{N}", kGpt2};
        s.clean_spaces = false;
    } else if (is({"qwen2", "deepseek-r1-qwen", "megrez"})) {
        s.regexes = {kQwen2};
        s.clean_spaces = false;
    } else if (pre == "stablelm2") {
        s.regexes = {kQwen2};
    } else if (is({"poro-chat"})) {
        s.regexes = {kPoro};
        s.clean_spaces = false;
    } else if (is({"bloom", "gpt3-finnish"})) {
        s.regexes = {kPoro};
    } else if (pre == "viking") {
        s.regexes = {kPoro, "\\p{N}"};
        s.clean_spaces = false;
    } else if (pre == "tekken") {
        s.regexes = {
            "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])"
            "([^a-z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)",
        };
        s.clean_spaces = false;
        s.ignore_merges = true;
        s.add_bos = true;
    } else {
        // "default", "" and names this engine does not know: llama.cpp's default list.
        s.known = pre.empty() || pre == "default";
        s.regexes = {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2, "\\p{N}+", "[0-9][0-9][0-9]"};
    }
    return s;
}

}  // namespace vega::tok
