// Tokenizer::from_gguf and the one concrete tokenizer: a Vocab plus the SPM or
// BPE model, with llama_tokenize's handling of special tokens, BOS/EOS and the
// SentencePiece space prefix.
#include "tokenizer/tokenizer.h"

#include <memory>

#include "core/error.h"
#include "gguf/gguf.h"
#include "tokenizer/models.h"
#include "tokenizer/vocab.h"

namespace vega {

namespace {

class VocabTokenizer final : public Tokenizer {
public:
    explicit VocabTokenizer(const gguf::File& f) {
        const std::string model = f.get_string("tokenizer.ggml.model");
        tok::PreTokenizerSpec spec;
        if (model == "gpt2") spec = tok::pre_tokenizer_spec(f.get_string("tokenizer.ggml.pre", ""));
        tok::load_vocab(f, v_, spec.add_bos, spec.clean_spaces, spec.ignore_merges);
        if (v_.kind == tok::VocabKind::Spm)
            spm_ = std::make_unique<tok::SpmModel>(v_);
        else
            bpe_ = std::make_unique<tok::BpeModel>(v_, f, spec.regexes);
    }

    std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const override {
        std::vector<int32_t> out;
        const std::vector<tok::Fragment> frags = tok::partition_specials(v_, text, parse_special);
        if (add_special && v_.add_bos) {
            if (v_.bos < 0) fail("tokenizer: the vocabulary asks for a BOS token but has none");
            out.push_back(v_.bos);
        }
        bool prev_special = true;  // SPM: text at the start or after a special token gets a space prefix
        std::string buf;
        for (const tok::Fragment& fr : frags) {
            if (fr.token >= 0) {
                out.push_back(fr.token);
                prev_special = true;
                continue;
            }
            const std::string_view raw = text.substr(fr.offset, fr.length);
            if (spm_) {
                buf.clear();
                if (v_.add_space_prefix && prev_special) buf += ' ';
                buf.append(raw);
                std::string esc;  // ' ' -> "▁" (U+2581)
                esc.reserve(buf.size() + buf.size() / 2);
                for (char c : buf) {
                    if (c == ' ')
                        esc += "\xE2\x96\x81";
                    else
                        esc += c;
                }
                spm_->encode(esc, out);
            } else {
                bpe_->encode(raw, out);
            }
            prev_special = false;
        }
        if (add_special && v_.add_eos) {
            if (v_.eos < 0) fail("tokenizer: the vocabulary asks for an EOS token but has none");
            out.push_back(v_.eos);
        }
        return out;
    }

    std::string token_to_piece(int32_t id, bool render_special) const override {
        return tok::token_piece(v_, id, render_special, false);
    }
    std::string decode(const std::vector<int32_t>& ids, bool render_special) const override {
        return tok::detokenize(v_, ids, render_special);
    }

    int32_t n_vocab() const override { return v_.size(); }
    int32_t bos() const override { return v_.bos; }
    int32_t eos() const override { return v_.eos; }
    int32_t eot() const override { return v_.eot; }
    bool add_bos() const override { return v_.add_bos; }
    bool add_eos() const override { return v_.add_eos; }
    bool is_eog(int32_t id) const override { return v_.eog.count(id) != 0; }
    const std::string& token_text(int32_t id) const override {
        check(id);
        return v_.text[id];
    }
    TokenAttr token_attr(int32_t id) const override {
        check(id);
        const uint32_t a = v_.attr[id];
        if (a & tok::kAttrControl) return TokenAttr::Control;
        if (a & tok::kAttrUserDefined) return TokenAttr::UserDefined;
        if (a & tok::kAttrUnknown) return TokenAttr::Unknown;
        if (a & tok::kAttrByte) return TokenAttr::Byte;
        if (a & tok::kAttrUnused) return TokenAttr::Unused;
        return TokenAttr::Normal;
    }
    std::string kind() const override {
        return v_.kind == tok::VocabKind::Spm ? "spm" : "bpe (" + (v_.pre.empty() ? std::string("default") : v_.pre) + ")";
    }

private:
    void check(int32_t id) const {
        if (id < 0 || id >= v_.size()) fail("token id {} is out of range (vocabulary of {} tokens)", id, v_.size());
    }

    tok::Vocab v_;
    std::unique_ptr<tok::SpmModel> spm_;
    std::unique_ptr<tok::BpeModel> bpe_;
};

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const gguf::File& f) { return std::make_unique<VocabTokenizer>(f); }

}  // namespace vega
