// SHA-256 through OpenSSL's libcrypto (EVP), incremental or over a whole file.
#pragma once
#include <cstddef>
#include <string>

namespace vega::hub {

class Sha256 {
public:
    Sha256();
    ~Sha256();
    Sha256(const Sha256&) = delete;
    Sha256& operator=(const Sha256&) = delete;
    void reset();
    void update(const void* data, size_t n);
    std::string hex();  // finishes; call reset() before reusing

private:
    void* ctx_;  // EVP_MD_CTX
};

std::string sha256_hex(const std::string& bytes);
// Hashes the first `limit` bytes of a file (all of it by default) into `h` (not reset).
void sha256_update_file(Sha256& h, const std::string& path, size_t limit = size_t(-1));
std::string sha256_file(const std::string& path);

}  // namespace vega::hub
