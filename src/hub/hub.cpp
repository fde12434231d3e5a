#include "hub/hub.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "core/error.h"
#include "hub/cache.h"
#include "hub/download.h"
#include "hub/hub_api.h"

namespace fs = std::filesystem;

namespace vega::hub {

namespace {

// The refs.json key a non-file selector is recorded under.
std::string ref_key(const RepoSpec& s) {
    if (s.selector.empty()) return ":default";
    std::string k = "quant:" + s.selector;
    for (char& c : k) c = char(std::toupper((unsigned char)c));
    return k;
}

// The cached file a request names without asking the Hub, if it is there and verified.
std::string cached(const std::string& root, const RepoSpec& s) {
    std::string file = s.selector;
    if (!s.explicit_file()) {
        const auto ref = read_ref(root, s.repo, ref_key(s));
        if (!ref) return "";
        try {  // refs.json is ours, but never follow a path out of the repo directory
            if (!parse_spec(s.repo + ":" + *ref).explicit_file()) return "";
        } catch (const Error&) {
            return "";
        }
        file = *ref;
    }
    const std::string p = file_path(root, s.repo, file);
    return read_verified(p) ? p : "";
}

void remove_quiet(const std::string& p) {
    std::error_code ec;
    fs::remove(p, ec);
}

}  // namespace

std::string resolve_hf_model(const HfRequest& req) {
    const RepoSpec spec = parse_spec(req.spec);
    const std::string root = req.cache_dir.empty() ? cache_root() : req.cache_dir;
    if (std::string p = cached(root, spec); !p.empty()) {
        if (req.verbose) std::fprintf(stderr, "vega: using cached %s\n", p.c_str());
        return p;
    }

    const std::string endpoint = endpoint_or_default(req.endpoint);
    std::string token = req.token;
    if (token.empty())
        if (const char* t = std::getenv("HF_TOKEN"); t && *t) token = t;

    // The file list (of the file's folder, for an explicit path in a folder).
    std::string dir;
    if (spec.explicit_file() && spec.selector.find('/') != std::string::npos)
        dir = spec.selector.substr(0, spec.selector.rfind('/'));
    const std::string list_url = tree_url(endpoint, spec.repo, dir);
    const HttpResponse list = http_get(list_url, token);
    if (list.status == 404 || list.status == 401) {
        const std::string hint = token.empty() ? " (set HF_TOKEN if it is private or gated)" : "";
        if (!dir.empty())
            fail("repository '{}' or its folder '{}' not found (HTTP {} from {}){}", spec.repo, dir, list.status,
                 list_url, hint);
        fail("repository '{}' not found (HTTP {} from {}){}", spec.repo, list.status, list_url, hint);
    }
    if (list.status == 403)
        fail("repository '{}': access denied (HTTP 403 from {}); accept its license on the Hub and set HF_TOKEN",
             spec.repo, list_url);
    if (list.status != 200) fail("listing the files of '{}': HTTP {} from {}", spec.repo, list.status, list_url);
    const HubFile f = choose_file(parse_tree(list.body, spec.repo), spec);

    const std::string path = file_path(root, spec.repo, f.path);
    if (const auto v = read_verified(path); v && (f.sha256.empty() || v->sha256 == f.sha256)) {
        if (!spec.explicit_file()) write_ref(root, spec.repo, ref_key(spec), f.path);
        if (req.verbose) std::fprintf(stderr, "vega: using cached %s\n", path.c_str());
        return path;
    }
    // Whatever is at the final path now is stale or unverified.
    remove_quiet(path);
    remove_quiet(sidecar_path(path));
    std::error_code ec;
    fs::create_directories(fs::path(path).parent_path(), ec);
    if (ec) fail("cannot create the cache folder '{}': {}", fs::path(path).parent_path().string(), ec.message());

    const std::string part = path + ".part";
    const std::string what = fmt::format("'{}' in '{}'", f.path, spec.repo);
    const DownloadResult r =
        download_file(resolve_url(endpoint, spec.repo, f.path), part, f.size, token, what, req.verbose);
    if (f.sha256.empty()) {
        std::fprintf(stderr, "vega: warning: the Hub lists no sha256 for %s; not verified\n", what.c_str());
    } else if (r.sha256 != f.sha256) {
        remove_quiet(part);  // a retry starts clean
        fail("checksum mismatch for {}: expected sha256 {}, got {} (the download was deleted)", what, f.sha256,
             r.sha256);
    }
    // The sidecar first, then the file: a file at the final path always has its record.
    const uint64_t size = fs::file_size(part, ec);
    if (ec) fail("cannot stat '{}': {}", part, ec.message());
    write_verified(path, spec.repo, f.path, Verified{r.sha256, size});
    fs::rename(part, path, ec);
    if (ec) {
        remove_quiet(sidecar_path(path));
        fail("cannot move '{}' into place: {}", part, ec.message());
    }
    if (!spec.explicit_file()) write_ref(root, spec.repo, ref_key(spec), f.path);
    return path;
}

}  // namespace vega::hub
