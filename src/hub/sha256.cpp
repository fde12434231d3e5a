#include "hub/sha256.h"

#include <openssl/evp.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace vega::hub {

static EVP_MD_CTX* C(void* p) { return static_cast<EVP_MD_CTX*>(p); }

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
    if (!ctx_) throw std::bad_alloc();
    reset();
}

Sha256::~Sha256() { EVP_MD_CTX_free(C(ctx_)); }

void Sha256::reset() {
    if (EVP_DigestInit_ex(C(ctx_), EVP_sha256(), nullptr) != 1) fail("sha256: EVP_DigestInit_ex failed");
}

void Sha256::update(const void* data, size_t n) {
    if (n && EVP_DigestUpdate(C(ctx_), data, n) != 1) fail("sha256: EVP_DigestUpdate failed");
}

std::string Sha256::hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (EVP_DigestFinal_ex(C(ctx_), md, &len) != 1) fail("sha256: EVP_DigestFinal_ex failed");
    static const char* digits = "0123456789abcdef";
    std::string s;
    for (unsigned i = 0; i < len; ++i) {
        s += digits[md[i] >> 4];
        s += digits[md[i] & 15];
    }
    return s;
}

std::string sha256_hex(const std::string& bytes) {
    Sha256 h;
    h.update(bytes.data(), bytes.size());
    return h.hex();
}

void sha256_update_file(Sha256& h, const std::string& path, size_t limit) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) fail("cannot open '{}': {}", path, std::strerror(errno));
    std::vector<char> buf(1 << 20);
    size_t left = limit;
    while (left > 0) {
        const size_t n = std::fread(buf.data(), 1, std::min(buf.size(), left), f);
        if (n == 0) break;
        h.update(buf.data(), n);
        left -= n;
    }
    const bool err = std::ferror(f);
    std::fclose(f);
    if (err) fail("cannot read '{}'", path);
}

std::string sha256_file(const std::string& path) {
    Sha256 h;
    sha256_update_file(h, path);
    return h.hex();
}

}  // namespace vega::hub
