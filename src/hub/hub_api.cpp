#include "hub/hub_api.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "core/error.h"

namespace vega::hub {

namespace {

std::string lower(std::string s) {
    for (char& c : s) c = char(std::tolower((unsigned char)c));
    return s;
}

bool ends_with_gguf(const std::string& s) {
    return s.size() > 5 && lower(s.substr(s.size() - 5)) == ".gguf";
}

bool name_char(char c) { return std::isalnum((unsigned char)c) || c == '-' || c == '_' || c == '.'; }

// A path component: name characters only, not "." or "..".
bool good_component(const std::string& s) {
    if (s.empty() || s == "." || s == "..") return false;
    return std::all_of(s.begin(), s.end(), name_char);
}

// A relative path of good components (also what a Hub listing may put into the cache).
bool good_rel_path(const std::string& p) {
    if (p.empty() || p.front() == '/' || p.back() == '/') return false;
    size_t a = 0;
    while (true) {
        const size_t b = p.find('/', a);
        const std::string c = p.substr(a, b == std::string::npos ? std::string::npos : b - a);
        // File names on the Hub may hold spaces, '+', etc.; keep them but never separators
        // or traversal.
        if (c.empty() || c == "." || c == ".." || c.find('\\') != std::string::npos ||
            c.find('\0') != std::string::npos)
            return false;
        if (b == std::string::npos) return true;
        a = b + 1;
    }
}

[[noreturn]] void bad_spec(const std::string& spec) {
    fail("bad model '{}': expected OWNER/REPO, OWNER/REPO:QUANT or OWNER/REPO:FILE.gguf "
         "(e.g. bartowski/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M)",
         spec);
}

bool word_char(char c) { return std::isalnum((unsigned char)c) || c == '_'; }

// 2: whole-word match, 1: substring, 0: none (case-insensitive).
int match_tag(const std::string& path, const std::string& tag) {
    const std::string p = lower(path), t = lower(tag);
    int best = 0;
    for (size_t i = p.find(t); i != std::string::npos; i = p.find(t, i + 1)) {
        const bool left = i == 0 || !word_char(p[i - 1]);
        const bool right = i + t.size() >= p.size() || !word_char(p[i + t.size()]);
        best = std::max(best, left && right ? 2 : 1);
    }
    return best;
}

std::string basename(const std::string& p) {
    const size_t s = p.rfind('/');
    return s == std::string::npos ? p : p.substr(s + 1);
}

std::string list_ggufs(const std::vector<HubFile>& files) {
    std::string s;
    for (const auto& f : files)
        if (ends_with_gguf(f.path)) s += (s.empty() ? "" : ", ") + f.path;
    return s.empty() ? "(none)" : s;
}

}  // namespace

bool RepoSpec::explicit_file() const { return ends_with_gguf(selector); }

RepoSpec parse_spec(const std::string& spec) {
    RepoSpec r;
    const size_t colon = spec.find(':');
    r.repo = spec.substr(0, colon);
    if (colon != std::string::npos) {
        r.selector = spec.substr(colon + 1);
        if (r.selector.empty()) bad_spec(spec);
    }
    const size_t slash = r.repo.find('/');
    if (slash == std::string::npos || !good_component(r.repo.substr(0, slash)) ||
        !good_component(r.repo.substr(slash + 1)))
        bad_spec(spec);
    if (r.explicit_file()) {
        if (!good_rel_path(r.selector)) bad_spec(spec);
    } else if (!r.selector.empty() && !std::all_of(r.selector.begin(), r.selector.end(), name_char)) {
        bad_spec(spec);
    }
    return r;
}

std::string endpoint_or_default(const std::string& override_) {
    std::string e = override_;
    if (e.empty()) {
        const char* env = std::getenv("HF_ENDPOINT");
        e = env && *env ? env : "https://huggingface.co";
    }
    while (!e.empty() && e.back() == '/') e.pop_back();
    return e;
}

static std::string encode_path(const std::string& p) {
    static const char* hex = "0123456789ABCDEF";
    std::string s;
    for (unsigned char c : p) {
        if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
            s += char(c);
        } else {
            s += '%';
            s += hex[c >> 4];
            s += hex[c & 15];
        }
    }
    return s;
}

std::string tree_url(const std::string& endpoint, const std::string& repo, const std::string& dir) {
    std::string u = endpoint + "/api/models/" + repo + "/tree/main";
    if (!dir.empty()) u += "/" + encode_path(dir);
    return u;
}

std::string resolve_url(const std::string& endpoint, const std::string& repo, const std::string& path) {
    return endpoint + "/" + repo + "/resolve/main/" + encode_path(path);
}

bool is_sha256_hex(const std::string& s) {
    return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit((unsigned char)c); });
}

std::vector<HubFile> parse_tree(const std::string& json_text, const std::string& repo) {
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(json_text);
    } catch (const std::exception& e) {
        fail("the Hub's file list for '{}' is not valid JSON: {}", repo, e.what());
    }
    if (!j.is_array()) fail("the Hub's file list for '{}' is not a JSON array", repo);
    std::vector<HubFile> out;
    for (const auto& e : j) {
        if (!e.is_object() || e.value("type", "") != "file") continue;
        const auto p = e.find("path");
        if (p == e.end() || !p->is_string()) continue;
        HubFile f;
        f.path = p->get<std::string>();
        if (!good_rel_path(f.path)) continue;  // never let a listing name paths outside the cache
        if (const auto s = e.find("size"); s != e.end() && s->is_number_unsigned()) f.size = s->get<uint64_t>();
        if (const auto l = e.find("lfs"); l != e.end() && l->is_object()) {
            std::string oid = l->value("oid", "");
            if (oid.rfind("sha256:", 0) == 0) oid = oid.substr(7);
            if (is_sha256_hex(oid)) f.sha256 = lower(oid);
            if (const auto s = l->find("size"); s != l->end() && s->is_number_unsigned()) f.size = s->get<uint64_t>();
        }
        out.push_back(std::move(f));
    }
    return out;
}

HubFile choose_file(const std::vector<HubFile>& files, const RepoSpec& spec) {
    if (spec.explicit_file()) {
        for (const auto& f : files)
            if (f.path == spec.selector) return f;
        fail("file '{}' not found in '{}' (its .gguf files: {})", spec.selector, spec.repo, list_ggufs(files));
    }
    // Candidates: .gguf files, multimodal projectors last.
    std::vector<const HubFile*> ggufs;
    for (const auto& f : files)
        if (ends_with_gguf(f.path) && lower(basename(f.path)).rfind("mmproj", 0) != 0) ggufs.push_back(&f);
    if (ggufs.empty())
        for (const auto& f : files)
            if (ends_with_gguf(f.path)) ggufs.push_back(&f);
    if (ggufs.empty()) fail("'{}' has no .gguf files", spec.repo);

    const std::string tag = spec.selector.empty() ? "Q4_K_M" : spec.selector;
    const HubFile* best = nullptr;
    int best_score = 0;
    for (const HubFile* f : ggufs) {
        const int s = match_tag(f->path, tag);
        if (s > best_score) best = f, best_score = s;
    }
    if (best) return *best;
    if (spec.selector.empty()) return *ggufs.front();
    fail("no .gguf file in '{}' matches '{}'; available: {}", spec.repo, spec.selector, list_ggufs(files));
}

}  // namespace vega::hub
