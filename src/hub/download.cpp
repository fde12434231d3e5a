#include "hub/download.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "core/error.h"
#include "hub/sha256.h"

namespace vega::hub {

namespace {

double now() {
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}

void global_init() {
    static const bool ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
    if (!ok) fail("libcurl initialisation failed");
}

struct CurlDeleter {
    void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct SlistDeleter {
    void operator()(curl_slist* s) const { curl_slist_free_all(s); }
};

// A handle with the options every request shares.
struct Request {
    std::unique_ptr<CURL, CurlDeleter> curl;
    std::unique_ptr<curl_slist, SlistDeleter> headers;
    char errbuf[CURL_ERROR_SIZE] = {};

    Request(const std::string& url, const std::string& token) {
        global_init();
        curl.reset(curl_easy_init());
        if (!curl) fail("libcurl: cannot create a handle");
        CURL* c = curl.get();
        curl_easy_setopt(c, CURLOPT_URL, url.c_str());
        curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
        curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
        curl_easy_setopt(c, CURLOPT_USERAGENT, "vega/0.1.0");
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);  // abort a stalled transfer after a minute
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
        curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
        // (libcurl does not send this header on to another host after a redirect.)
        if (!token.empty()) {
            const std::string h = "Authorization: Bearer " + token;
            headers.reset(curl_slist_append(nullptr, h.c_str()));
            curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
        }
    }

    // Runs the transfer; a network-level failure throws naming the URL.
    long perform(const std::string& url) {
        const CURLcode rc = curl_easy_perform(curl.get());
        if (rc != CURLE_OK && rc != CURLE_WRITE_ERROR && rc != CURLE_ABORTED_BY_CALLBACK)
            fail("cannot fetch {}: {}", url, errbuf[0] ? errbuf : curl_easy_strerror(rc));
        long status = 0;
        curl_easy_getinfo(curl.get(), CURLINFO_RESPONSE_CODE, &status);
        return status;
    }
};

size_t collect(char* p, size_t size, size_t n, void* ud) {
    auto* s = static_cast<std::string*>(ud);
    if (s->size() > (64u << 20)) return 0;  // no API answer is this large
    s->append(p, size * n);
    return size * n;
}

std::string human_mb(uint64_t bytes) { return fmt::format("{:.1f} MB", double(bytes) / 1e6); }

struct Transfer {
    CURL* curl = nullptr;
    int fd = -1;
    std::string part;
    Sha256* hash = nullptr;
    uint64_t offset = 0;         // bytes of the file before this transfer's first byte
    uint64_t received = 0;       // body bytes written by this transfer
    long status = 0;
    bool started = false;
    long long range_start = -1;  // Content-Range start of the current response
    std::string error;           // set when the callback aborted the transfer
    // progress
    bool tty = false;
    bool verbose = false;
    uint64_t total = 0;
    double t0 = 0, last_draw = 0;
    std::string name;
};

size_t on_header(char* p, size_t size, size_t n, void* ud) {
    auto* t = static_cast<Transfer*>(ud);
    const std::string line(p, size * n);
    if (line.rfind("HTTP/", 0) == 0) {
        t->range_start = -1;  // a new response (e.g. after a redirect)
    } else if (line.size() > 14 && strncasecmp(line.c_str(), "content-range:", 14) == 0) {
        const size_t b = line.find("bytes");
        if (b != std::string::npos) t->range_start = std::strtoll(line.c_str() + b + 5, nullptr, 10);
    }
    return size * n;
}

bool write_all(int fd, const char* p, size_t n) {
    while (n > 0) {
        const ssize_t w = ::write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= size_t(w);
    }
    return true;
}

size_t on_body(char* p, size_t size, size_t n, void* ud) {
    auto* t = static_cast<Transfer*>(ud);
    const size_t len = size * n;
    if (!t->started) {
        t->started = true;
        curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &t->status);
        if (t->status == 200 && t->offset > 0) {  // the server ignored the Range: start over
            if (::ftruncate(t->fd, 0) != 0 || ::lseek(t->fd, 0, SEEK_SET) != 0) {
                t->error = fmt::format("cannot truncate '{}': {}", t->part, std::strerror(errno));
                return 0;
            }
            t->hash->reset();
            t->offset = 0;
            if (t->verbose) std::fprintf(stderr, "vega: the server does not resume downloads; starting over\n");
        } else if (t->status == 206 && t->range_start != (long long)t->offset) {
            t->error = fmt::format("the server resumed at byte {} instead of {}", t->range_start, t->offset);
            return 0;
        }
    }
    if (t->status != 200 && t->status != 206) return len;  // an error page: not part of the file
    if (!write_all(t->fd, p, len)) {
        t->error = fmt::format("cannot write '{}': {}", t->part, std::strerror(errno));
        return 0;
    }
    t->hash->update(p, len);
    t->received += len;
    return len;
}

void draw(Transfer& t, bool final) {
    const double tn = now();
    if (!final && tn - t.last_draw < 0.1) return;
    t.last_draw = tn;
    const uint64_t done = t.offset + t.received;
    const double frac = t.total ? std::min(1.0, double(done) / double(t.total)) : 0.0;
    const int width = 30;
    const int fill = int(frac * width);
    const double secs = std::max(1e-3, tn - t.t0);
    std::fprintf(stderr, "\r%s %3d%% [%s%s] %s / %s  %.1f MB/s  ", t.name.c_str(), int(frac * 100),
                 std::string(size_t(fill), '#').c_str(), std::string(size_t(width - fill), ' ').c_str(),
                 human_mb(done).c_str(), human_mb(t.total).c_str(), double(t.received) / 1e6 / secs);
    if (final) std::fputc('\n', stderr);
    std::fflush(stderr);
}

int on_progress(void* ud, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    auto* t = static_cast<Transfer*>(ud);
    if (t->tty && t->verbose && (t->status == 0 || t->status == 200 || t->status == 206)) draw(*t, false);
    return 0;
}

[[noreturn]] void http_error(long status, const std::string& what, const std::string& url) {
    if (status == 404) fail("{} not found (HTTP 404 from {})", what, url);
    if (status == 401 || status == 403)
        fail("{}: access denied (HTTP {} from {}); for a private or gated repository set HF_TOKEN", what, status, url);
    fail("{}: HTTP {} from {}", what, status, url);
}

struct Fd {
    int fd = -1;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

// On failure, removes a .part file that is still empty (nothing worth resuming); runs
// while the lock is still held, so never another process's file.
struct EmptyPartCleanup {
    int fd;
    const std::string& path;
    bool armed = true;
    ~EmptyPartCleanup() {
        struct stat st {};
        if (armed && ::fstat(fd, &st) == 0 && st.st_size == 0) ::unlink(path.c_str());
    }
};

}  // namespace

HttpResponse http_get(const std::string& url, const std::string& token) {
    Request r(url, token);
    HttpResponse out;
    curl_easy_setopt(r.curl.get(), CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(r.curl.get(), CURLOPT_WRITEDATA, &out.body);
    curl_easy_setopt(r.curl.get(), CURLOPT_ACCEPT_ENCODING, "");
    out.status = r.perform(url);
    return out;
}

DownloadResult download_file(const std::string& url, const std::string& part_path, uint64_t expected_size,
                             const std::string& token, const std::string& what, bool verbose) {
    Fd f;
    f.fd = ::open(part_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (f.fd < 0) fail("cannot create '{}': {}", part_path, std::strerror(errno));
    if (::flock(f.fd, LOCK_EX | LOCK_NB) != 0)
        fail("'{}' is being downloaded by another process (lock on {})", what, part_path);
    EmptyPartCleanup cleanup{f.fd, part_path};
    struct stat st {};
    if (::fstat(f.fd, &st) != 0) fail("cannot stat '{}': {}", part_path, std::strerror(errno));
    uint64_t have = uint64_t(st.st_size);
    if (expected_size == 0 || have > expected_size) {  // unknown size or too long: start over
        if (::ftruncate(f.fd, 0) != 0) fail("cannot truncate '{}': {}", part_path, std::strerror(errno));
        have = 0;
    }

    Sha256 hash;
    DownloadResult res;
    if (have > 0) sha256_update_file(hash, part_path, have);
    if (::lseek(f.fd, off_t(have), SEEK_SET) < 0) fail("cannot seek '{}': {}", part_path, std::strerror(errno));
    if (expected_size > 0 && have == expected_size) {  // complete already: only the check is left
        res.resumed_from = have;
        res.sha256 = hash.hex();
        cleanup.armed = false;
        return res;
    }

    Transfer t;
    t.fd = f.fd;
    t.part = part_path;
    t.hash = &hash;
    t.offset = have;
    t.verbose = verbose;
    t.tty = isatty(fileno(stderr));
    t.total = expected_size;
    t.t0 = t.last_draw = now();
    t.name = "vega: " + what;
    if (verbose) {
        if (have > 0)
            std::fprintf(stderr, "vega: resuming %s at %s of %s from %s\n", what.c_str(), human_mb(have).c_str(),
                         human_mb(expected_size).c_str(), url.c_str());
        else
            std::fprintf(stderr, "vega: downloading %s (%s) from %s\n", what.c_str(), human_mb(expected_size).c_str(),
                         url.c_str());
    }

    Request r(url, token);
    CURL* c = r.curl.get();
    t.curl = c;
    const std::string range = std::to_string(have) + "-";
    if (have > 0) curl_easy_setopt(c, CURLOPT_RANGE, range.c_str());
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &t);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    long status = 0;
    try {
        status = r.perform(url);
    } catch (const Error& e) {
        if (verbose && t.tty) std::fputc('\n', stderr);
        if (t.offset + t.received > 0) throw Error(std::string(e.what()) + " (run again to resume)");
        throw;
    }
    if (!t.error.empty()) fail("downloading {}: {}", url, t.error);
    if (status != 200 && status != 206) {
        if (verbose && t.tty) std::fputc('\n', stderr);
        http_error(status, what, url);
    }
    if (verbose && t.tty) draw(t, true);
    if (::fsync(f.fd) != 0) fail("cannot write '{}': {}", part_path, std::strerror(errno));
    const uint64_t got = t.offset + t.received;
    if (expected_size > 0 && got != expected_size)
        fail("downloading {}: got {} bytes, expected {} (run again to resume)", url, got, expected_size);
    cleanup.armed = false;
    res.status = status;
    res.resumed_from = t.offset;
    res.sha256 = hash.hex();
    if (verbose) {
        std::fprintf(stderr, "vega: downloaded %s: %s in %.1f s\n", what.c_str(), human_mb(t.received).c_str(),
                     now() - t.t0);
    }
    return res;
}

}  // namespace vega::hub
