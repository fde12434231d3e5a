// HTTP through libcurl: small GETs (the tree API) and resumable file downloads.
#pragma once
#include <cstdint>
#include <string>

namespace vega::hub {

struct HttpResponse {
    long status = 0;
    std::string body;
};

// GET url (following redirects). Network failures throw naming the URL; HTTP errors are
// returned in `status` for the caller to word.
HttpResponse http_get(const std::string& url, const std::string& token);

struct DownloadResult {
    long status = 0;          // final HTTP status (0 when nothing was requested)
    uint64_t resumed_from = 0;  // bytes that were already in the .part file and kept
    std::string sha256;       // of the whole .part file after the transfer
};

// Downloads url into part_path, resuming with a Range request when part_path already holds
// a prefix (shorter than expected_size; a server that answers 200 instead of 206 restarts
// it). Returns the sha256 of the whole file. HTTP errors (>= 400) throw with `what`
// (e.g. "file 'x.gguf' in 'owner/repo'") in the message; network errors name the URL.
DownloadResult download_file(const std::string& url, const std::string& part_path, uint64_t expected_size,
                             const std::string& token, const std::string& what, bool verbose);

}  // namespace vega::hub
