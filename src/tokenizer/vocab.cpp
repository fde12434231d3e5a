// Vocabulary loading from GGUF metadata, with llama.cpp's defaults and fix-ups
// (llama_vocab::impl::load at c392e50).
#include "tokenizer/vocab.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"
#include "gguf/gguf.h"
#include "tokenizer/unicode.h"

namespace vega::tok {

namespace {

// GGUF token_type (llama_token_type) -> attribute bits.
uint32_t attr_from_type(int64_t type) {
    switch (type) {
        case 1: return kAttrNormal;
        case 2: return kAttrUnknown;
        case 3: return kAttrControl;
        case 4: return kAttrUserDefined;
        case 5: return kAttrUnused;
        case 6: return kAttrByte;
        default: return kAttrUndefined;
    }
}

bool one_of(const std::string& s, std::initializer_list<const char*> names) {
    for (const char* n : names)
        if (s == n) return true;
    return false;
}

}  // namespace

void load_vocab(const gguf::File& f, Vocab& v, bool bpe_add_bos_default, bool bpe_clean_spaces, bool bpe_ignore_merges) {
    const std::string& path = f.path();
    v.model = f.get_string("tokenizer.ggml.model");
    v.pre = f.get_string("tokenizer.ggml.pre", "");
    if (v.model == "llama") {
        v.kind = VocabKind::Spm;
        v.bos = 1, v.eos = 2, v.unk = 0;
        v.add_bos = true, v.add_eos = false;
        v.add_space_prefix = true;
        v.clean_spaces = false;
    } else if (v.model == "gpt2") {
        v.kind = VocabKind::Bpe;
        v.bos = 11, v.eos = 11, v.unk = -1;
        v.add_bos = bpe_add_bos_default, v.add_eos = false;
        v.add_space_prefix = false;
        v.clean_spaces = bpe_clean_spaces;
        v.ignore_merges = bpe_ignore_merges;
    } else {
        fail("{}: metadata key 'tokenizer.ggml.model' = '{}' is not a supported tokenizer (llama, gpt2)", path, v.model);
    }
    if (f.find("tokenizer.ggml.add_space_prefix")) v.add_space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix");

    std::vector<std::string> tokens = f.get_string_array("tokenizer.ggml.tokens");
    if (tokens.empty()) fail("{}: metadata key 'tokenizer.ggml.tokens' is missing or empty", path);
    if (tokens.size() > size_t(INT32_MAX)) fail("{}: metadata key 'tokenizer.ggml.tokens' has too many entries", path);
    const size_t n = tokens.size();
    std::vector<float> scores = f.get_float_array("tokenizer.ggml.scores");
    if (!scores.empty() && scores.size() != n)
        fail("{}: metadata key 'tokenizer.ggml.scores' has {} entries, tokenizer.ggml.tokens has {}", path,
             scores.size(), n);
    std::vector<int64_t> types = f.get_int_array("tokenizer.ggml.token_type");
    if (!types.empty() && types.size() != n)
        fail("{}: metadata key 'tokenizer.ggml.token_type' has {} entries, tokenizer.ggml.tokens has {}", path,
             types.size(), n);

    v.text.resize(n);
    v.score.assign(n, 0.0f);
    v.attr.assign(n, kAttrNormal);
    v.to_id.reserve(n);
    for (size_t i = 0; i < n; ++i) {
        if (tokens[i].empty()) tokens[i] = "[EMPTY_" + std::to_string(i) + "]";  // as llama.cpp
        v.to_id[tokens[i]] = int32_t(i);
        v.text[i] = std::move(tokens[i]);
        if (!scores.empty()) v.score[i] = scores[i];
        if (!types.empty()) v.attr[i] = attr_from_type(types[i]);
    }
    const int32_t n_tok = int32_t(n);
    auto valid = [&](int32_t id) { return id >= 0 && id < n_tok ? id : -1; };
    v.bos = valid(v.bos), v.eos = valid(v.eos), v.unk = valid(v.unk);

    // Special ids from metadata; out-of-range values keep the default (llama.cpp warns).
    auto read_id = [&](const char* key, int32_t& id) {
        const gguf::Value* val = f.find(key);
        if (!val) return;
        const int64_t x = f.get_int(key);
        if (x >= 0 && x < n_tok) id = int32_t(x);
    };
    read_id("tokenizer.ggml.bos_token_id", v.bos);
    read_id("tokenizer.ggml.eos_token_id", v.eos);
    read_id("tokenizer.ggml.eot_token_id", v.eot);
    read_id("tokenizer.ggml.eom_token_id", v.eom);
    read_id("tokenizer.ggml.unknown_token_id", v.unk);
    read_id("tokenizer.ggml.fim_pre_token_id", v.fim_pre);
    read_id("tokenizer.ggml.fim_suf_token_id", v.fim_suf);
    read_id("tokenizer.ggml.fim_mid_token_id", v.fim_mid);
    read_id("tokenizer.ggml.fim_pad_token_id", v.fim_pad);
    read_id("tokenizer.ggml.fim_rep_token_id", v.fim_rep);
    read_id("tokenizer.ggml.fim_sep_token_id", v.fim_sep);
    read_id("tokenizer.ggml.prefix_token_id", v.fim_pre);  // deprecated spellings
    read_id("tokenizer.ggml.suffix_token_id", v.fim_suf);
    read_id("tokenizer.ggml.middle_token_id", v.fim_mid);
    if (f.find("tokenizer.ggml.add_bos_token")) v.add_bos = f.get_bool("tokenizer.ggml.add_bos_token");
    if (f.find("tokenizer.ggml.add_eos_token")) v.add_eos = f.get_bool("tokenizer.ggml.add_eos_token");

    // Special tokens found by their text (llama.cpp's workaround for converters
    // that do not record them); such tokens are forced to be control tokens.
    // llama.cpp walks a hash map; this walks ids in order (same result unless a
    // vocabulary has several candidates for one role).
    auto detect = [&](int32_t& id, std::initializer_list<const char*> names) {
        if (id != -1) return;
        for (int32_t i = 0; i < n_tok; ++i) {
            if (v.to_id.at(v.text[i]) != i || !one_of(v.text[i], names)) continue;
            id = i;
            if (!(v.attr[i] & kAttrControl)) v.attr[i] = kAttrControl;
            return;
        }
    };
    detect(v.eot, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>",
                   "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"});  // <｜end▁of▁sentence｜>
    detect(v.eom, {"<|eom_id|>"});
    detect(v.fim_pre, {"<|fim_prefix|>", "<fim-prefix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>", "<PRE>"});
    detect(v.fim_suf, {"<|fim_suffix|>", "<fim-suffix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81hole\xEF\xBD\x9C>", "<SUF>"});
    detect(v.fim_mid, {"<|fim_middle|>", "<fim-middle>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>", "<MID>"});
    detect(v.fim_pad, {"<|fim_pad|>", "<fim-pad>", "<PAD>"});
    detect(v.fim_rep, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>"});
    detect(v.fim_sep, {"<|file_sep|>"});

    // End of generation: FIM pad/repo/sep, every token named like an end marker
    // (forced to control), and the eos / eot / eom ids.
    for (int32_t id : {v.fim_pad, v.fim_rep, v.fim_sep})
        if (id >= 0) v.eog.insert(id);
    for (int32_t i = 0; i < n_tok; ++i) {
        if (v.to_id.at(v.text[i]) != i) continue;
        if (one_of(v.text[i], {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>",
                               "<EOT>"})) {
            v.eog.insert(i);
            if (!(v.attr[i] & kAttrControl)) v.attr[i] = kAttrControl;
        }
    }
    for (int32_t id : {v.eos, v.eot, v.eom})
        if (id >= 0) v.eog.insert(id);
    // gemma 4 ends its turn with <turn|>, and a turn of tool calls with <|tool_response>
    // (the tool answers next).
    for (const char* name : {"<turn|>", "<|tool_response>"}) {
        const int32_t id = v.find(name);
        if (id >= 0 && (v.attr[id] & kAttrControl)) v.eog.insert(id);
    }
    // gpt-oss (harmony): <|return|> ends the reply and <|call|> a tool call; <|end|> only
    // ends one message of it (the analysis before the final answer), so it does not end
    // generation there (llama.cpp's rule for vocabularies with both).
    if (const int32_t ret = v.find("<|return|>"), call = v.find("<|call|>"); ret >= 0 && call >= 0) {
        v.eog.insert(ret);
        v.eog.insert(call);
        if (const int32_t end = v.find("<|end|>"); end >= 0) v.eog.erase(end);
    }

    // Tokens matched as whole strings before the regular tokenizer runs.
    for (int32_t i = 0; i < n_tok; ++i)
        if (v.attr[i] & (kAttrControl | kAttrUserDefined | kAttrUnknown)) v.specials.push_back(i);
    std::stable_sort(v.specials.begin(), v.specials.end(),
                     [&](int32_t a, int32_t b) { return v.text[a].size() > v.text[b].size(); });

    // Per-model strip attributes that GGUF does not carry (llama.cpp hard-codes them).
    std::string name = f.get_string("general.name", "");
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    auto set_attr = [&](const char* tok, uint32_t bit, bool on) {
        const int32_t id = v.find(tok);
        if (id < 0) return;
        v.attr[id] = on ? (v.attr[id] | bit) : (v.attr[id] & ~bit);
    };
    if (v.pre.find("jina-v2-de") != std::string::npos || v.pre.find("jina-v2-es") != std::string::npos ||
        v.pre.find("jina-v2-code") != std::string::npos) {
        set_attr("<mask>", kAttrLStrip, true);
    } else if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
        for (int32_t id : v.specials) v.attr[id] |= kAttrRStrip;
        set_attr("</s>", kAttrRStrip, true);
        for (const char* t : {"<unk>", "<s>", "<|endoftext|>"}) set_attr(t, kAttrRStrip, false);
    }
}

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

}  // namespace

std::vector<Fragment> partition_specials(const Vocab& v, std::string_view text, bool parse_special) {
    std::vector<Fragment> frags;
    if (text.empty()) return frags;
    frags.push_back({-1, 0, text.size()});
    std::vector<Fragment> next;
    for (int32_t id : v.specials) {
        const uint32_t a = v.attr[id];
        if (!parse_special && (a & (kAttrControl | kAttrUnknown))) continue;
        const std::string& tok = v.text[id];
        bool changed = false;
        next.clear();
        for (const Fragment& fr : frags) {
            if (fr.token >= 0) {
                next.push_back(fr);
                continue;
            }
            size_t off = fr.offset, len = fr.length;  // the part still to search
            while (true) {
                const size_t m = text.substr(off, len).find(tok);
                if (m == std::string_view::npos) break;
                changed = true;
                const size_t match = off + m;
                size_t left_len = match - off;
                if (a & kAttrLStrip)
                    while (left_len > 0 && is_space(text[off + left_len - 1])) --left_len;
                if (left_len > 0) next.push_back({-1, off, left_len});
                next.push_back({id, 0, 0});
                size_t right_off = match + tok.size();
                size_t right_len = off + len - right_off;
                if (a & kAttrRStrip)
                    while (right_len > 0 && is_space(text[right_off])) ++right_off, --right_len;
                off = right_off, len = right_len;
            }
            if (len > 0) next.push_back({-1, off, len});
        }
        if (changed) frags.swap(next);
    }
    return frags;
}

std::string token_piece(const Vocab& v, int32_t id, bool special, bool lstrip) {
    if (id < 0 || id >= v.size()) fail("token id {} is out of range (vocabulary of {} tokens)", id, v.size());
    const uint32_t a = v.attr[id];
    const std::string& t = v.text[id];
    if (!special && (a & (kAttrUnknown | kAttrControl))) return {};
    std::string s;
    if (a & (kAttrUnknown | kAttrControl | kAttrUserDefined)) {
        s = t;
    } else if (v.kind == VocabKind::Spm) {
        if (a & kAttrNormal) {
            // "▁" (U+2581) stands for a space
            for (size_t i = 0; i < t.size();) {
                if (t.compare(i, 3, "\xE2\x96\x81") == 0) {
                    s += ' ';
                    i += 3;
                } else {
                    s += t[i++];
                }
            }
        } else if ((a & kAttrByte) && t.size() >= 5) {  // "<0xNN>"
            s += char(std::stoi(t.substr(3, 2), nullptr, 16));
        }
    } else if (a & kAttrNormal) {
        for (uint32_t c : decode_utf8(t)) {
            const int b = cpt_to_byte(c);
            if (b >= 0) {
                s += char(b);
            } else {  // not a byte-level code point: llama.cpp writes a marker
                std::string u;
                append_utf8(u, c);
                s += "[UNK_BYTE_0x";
                for (unsigned char ch : u) s += fmt::format("{:02x}", ch);
                s += t + "]";
            }
        }
    }
    if (lstrip && !s.empty() && s[0] == ' ') s.erase(0, 1);
    return s;
}

std::string detokenize(const Vocab& v, const std::vector<int32_t>& ids, bool special) {
    std::string out;
    bool remove_space = v.add_space_prefix;
    for (int32_t id : ids) {
        out += token_piece(v, id, special, remove_space);
        remove_space = false;
    }
    if (!v.clean_spaces || out.empty()) return out;

    // clean_up_tokenization_spaces, pass for pass as llama_detokenize does it (in place).
    char* t = out.data();
    int total = int(out.size());
    const int total1 = total;
    total = 1;
    for (int i = 1; i < total1; ++i) {  // " ?", " !", " .", " ," -> drop the space
        const char x = t[i];
        if (t[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) --total;
        t[total++] = x;
    }
    const int total2 = total;
    total = 1;
    for (int i = 1; i < total2; ++i) {  // " ' " -> "'"
        const char x = t[i];
        if (x == '\'' && i + 1 < total2 && t[i - 1] == ' ' && t[i + 1] == ' ') {
            --total;
            t[++i] = '\0';
        }
        t[total++] = x;
    }
    const int total3 = total;
    total = 1;
    for (int i = 1; i < total3; ++i) {  // " 's", " 'm", " 're", " 've" -> drop the space
        const char x = t[i];
        if (t[i - 1] == ' ' && x == '\'' && i + 1 < total3) {
            const char x1 = t[i + 1];
            if (x1 == 's' || x1 == 'm') {
                --total;
            } else if (i + 2 < total3) {
                const char x2 = t[i + 2];
                if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) --total;
            }
        }
        t[total++] = x;
    }
    out.resize(size_t(total));
    return out;
}

}  // namespace vega::tok
