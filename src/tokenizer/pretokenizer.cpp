// RegexSplitter: PCRE2 (UTF, UCP, JIT when available) over a sanitised copy of
// the text, with piece boundaries tracked in code points.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/unicode.h"

namespace vega::tok {

struct RegexSplitter::Compiled {
    pcre2_code* code = nullptr;
    bool jit = false;
    ~Compiled() {
        if (code) pcre2_code_free(code);
    }
};

RegexSplitter::RegexSplitter(const std::vector<std::string>& regexes) {
    for (const auto& pattern : regexes) {
        int err = 0;
        PCRE2_SIZE err_off = 0;
        // DOLLAR_ENDONLY: `$` means the end of the piece only, as in ECMAScript.
        pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                         PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &err_off, nullptr);
        if (!code) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(err, msg, sizeof msg);
            fail("pre-tokenizer regex '{}': {} at pattern offset {}", pattern, reinterpret_cast<const char*>(msg),
                 size_t(err_off));
        }
        auto c = std::make_unique<Compiled>();
        c->code = code;
        c->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
        re_.push_back(std::move(c));
    }
}

RegexSplitter::~RegexSplitter() = default;

std::vector<std::string> RegexSplitter::split(std::string_view text) const {
    const std::vector<uint32_t> cpts = decode_utf8(text);
    const size_t n = cpts.size();

    // Subject for PCRE2: valid UTF-8, one code point per input code point
    // (surrogates and values above U+10FFFF, which llama.cpp lets through, are
    // matched as U+FFFD: like them it is no letter, number, punctuation or space).
    // cpt_byte[i] = byte offset of code point i in `subject`.
    std::string subject;
    subject.reserve(text.size());
    std::vector<size_t> cpt_byte(n + 1);
    for (size_t i = 0; i < n; ++i) {
        cpt_byte[i] = subject.size();
        uint32_t c = cpts[i];
        if ((c >= 0xD800 && c <= 0xDFFF) || c > 0x10FFFF) c = 0xFFFD;
        append_utf8(subject, c);
    }
    cpt_byte[n] = subject.size();
    // Byte offset -> code point index (only read at code point starts and the end).
    std::vector<uint32_t> byte_cpt(subject.size() + 1);
    for (size_t i = 0; i <= n; ++i) byte_cpt[cpt_byte[i]] = uint32_t(i);

    std::vector<size_t> pieces = {n};  // piece lengths in code points
    if (n == 0) pieces.clear();
    pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
    for (const auto& re : re_) {
        std::vector<size_t> next;
        next.reserve(pieces.size() * 2);
        size_t start = 0;  // first code point of the current piece
        for (size_t len : pieces) {
            const size_t b0 = cpt_byte[start], b1 = cpt_byte[start + len];
            const auto* subj = reinterpret_cast<PCRE2_SPTR>(subject.data() + b0);
            const size_t subj_len = b1 - b0;
            size_t pos = 0, done = 0;  // byte offsets within the piece
            while (pos <= subj_len) {
                int rc = pcre2_match(re->code, subj, subj_len, pos, PCRE2_NO_UTF_CHECK, md, nullptr);
                if (rc == PCRE2_ERROR_JIT_STACKLIMIT)  // deep backtracking: retry with the interpreter
                    rc = pcre2_match(re->code, subj, subj_len, pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, nullptr);
                if (rc == PCRE2_ERROR_NOMATCH) break;
                if (rc < 0) fail("pre-tokenizer regex failed (PCRE2 error {}) at text byte {}", rc, b0 + pos);
                const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
                const size_t ms = ov[0], me = ov[1];
                if (ms > done) next.push_back(byte_cpt[b0 + ms] - byte_cpt[b0 + done]);  // unmatched gap
                if (me > ms) next.push_back(byte_cpt[b0 + me] - byte_cpt[b0 + ms]);
                done = me;
                if (me > ms) {
                    pos = me;
                } else {  // empty match: step over one code point
                    if (me >= subj_len) break;
                    pos = cpt_byte[byte_cpt[b0 + me] + 1] - b0;
                }
            }
            if (done < subj_len) next.push_back(byte_cpt[b1] - byte_cpt[b0 + done]);
            start += len;
        }
        pieces = std::move(next);
    }
    pcre2_match_data_free(md);

    std::vector<std::string> words;
    words.reserve(pieces.size());
    size_t start = 0;
    for (size_t len : pieces) {
        std::string w;
        for (size_t i = start; i < start + len; ++i) append_utf8(w, cpts[i]);
        words.push_back(std::move(w));
        start += len;
    }
    return words;
}

}  // namespace vega::tok
