// gfx906 audit: compiles every GPU kernel source for gfx906 with the HIP
// toolchain and checks each kernel against what its source declares
// (`// @audit kernel=<glob> min_waves=N expect=a,b` lines; the glob, without
// spaces, matches the demangled kernel name; the longest matching spec applies). Fails on scratch
// (spills), LDS over 64 KiB, occupancy under the declared floor, or an expected
// instruction missing from the kernel's ISA ("dpp" means a DPP modifier or
// ds_swizzle: the wave reductions). Prints a table per kernel and writes it as
// markdown (docs/GFX906_AUDIT.md).
//
// usage: vega_gfx906_audit --hipcc PATH --src ROOT --work DIR [--md FILE] [--arch gfx906]
#include <cxxabi.h>
#include <fnmatch.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

struct Spec {
    std::string glob;
    int min_waves = 1;
    std::vector<std::string> expect;
    bool used = false;
};

struct Kernel {
    std::string file, mangled, name;
    int sgpr = -1, vgpr = -1, scratch = -1, waves = -1, lds = -1, vspill = 0, sspill = 0;
    std::string isa;
};

std::string read(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

std::string demangle(const std::string& m) {
    int st = 0;
    char* d = abi::__cxa_demangle(m.c_str(), nullptr, nullptr, &st);
    std::string r = st == 0 && d ? d : m;
    std::free(d);
    return r;
}

std::vector<Spec> parse_specs(const std::string& src) {
    std::vector<Spec> v;
    std::regex re(R"(//\s*@audit\s+kernel=(\S+)(.*))");
    std::istringstream in(src);
    for (std::string line; std::getline(in, line);) {
        std::smatch m;
        if (!std::regex_search(line, m, re)) continue;
        Spec s;
        s.glob = m[1];
        std::istringstream rest(m[2].str());
        for (std::string kv; rest >> kv;) {
            if (kv.rfind("min_waves=", 0) == 0) s.min_waves = std::atoi(kv.c_str() + 10);
            if (kv.rfind("expect=", 0) == 0) {
                std::stringstream e(kv.substr(7));
                for (std::string x; std::getline(e, x, ',');)
                    if (!x.empty()) s.expect.push_back(x);
            }
        }
        v.push_back(s);
    }
    return v;
}

int field(const std::string& line, const char* key) {
    const auto p = line.find(key);
    if (p == std::string::npos) return -1;
    return std::atoi(line.c_str() + p + std::strlen(key));
}

bool has_instr(const std::string& isa, const std::string& what) {
    if (what == "dpp")
        return isa.find("_dpp") != std::string::npos || isa.find("quad_perm") != std::string::npos ||
               isa.find("row_") != std::string::npos || isa.find("ds_swizzle") != std::string::npos;
    return isa.find(what) != std::string::npos;
}

std::string shorten(std::string n) {
    for (const char* junk : {"vega::gpu::(anonymous namespace)::", "vega::gpu::", "(vega::GgmlType)", "vega::"}) {
        for (size_t p; (p = n.find(junk)) != std::string::npos;) n.erase(p, std::strlen(junk));
    }
    if (!n.empty() && n.back() == ')') {  // drop the parameter list (matching parenthesis from the end)
        int depth = 0;
        for (size_t i = n.size(); i-- > 0;) {
            depth += n[i] == ')' ? 1 : n[i] == '(' ? -1 : 0;
            if (depth == 0) {
                n = n.substr(0, i);
                break;
            }
        }
    }
    if (n.rfind("void ", 0) == 0) n = n.substr(5);
    return n;
}

}  // namespace

int main(int argc, char** argv) {
    std::string hipcc = "hipcc", root, work, md, arch = "gfx906";
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i];
        if (a == "--hipcc") hipcc = argv[i + 1];
        else if (a == "--src") root = argv[i + 1];
        else if (a == "--work") work = argv[i + 1];
        else if (a == "--md") md = argv[i + 1];
        else if (a == "--arch") arch = argv[i + 1];
    }
    if (root.empty() || work.empty()) {
        std::fprintf(stderr, "usage: %s --hipcc PATH --src ROOT --work DIR [--md FILE]\n", argv[0]);
        return 2;
    }
    fs::create_directories(work);
    std::vector<fs::path> sources;
    for (const auto& e : fs::directory_iterator(fs::path(root) / "src/backend/gpu/kernels"))
        if (e.path().extension() == ".cu") sources.push_back(e.path());
    std::sort(sources.begin(), sources.end());
    if (sources.empty()) {
        std::fprintf(stderr, "no kernel sources under %s/src/backend/gpu/kernels\n", root.c_str());
        return 1;
    }

    std::vector<Kernel> kernels;
    std::vector<std::string> failures;
    std::map<std::string, std::vector<Spec>> specs;
    for (const fs::path& src : sources) {
        const std::string stem = src.stem().string();
        const fs::path s_out = fs::path(work) / (stem + ".s"), rem = fs::path(work) / (stem + ".remarks");
        const std::string cmd = hipcc + " -x hip --offload-arch=" + arch +
                                " -O3 -std=c++17 -DVEGA_GPU_TARGET_GFX906=1 -Wno-unused-command-line-argument --cuda-device-only -S"
                                " -Rpass-analysis=kernel-resource-usage -I" + root + "/src -o " + s_out.string() +
                                " " + src.string() + " 2> " + rem.string();
        std::printf("audit: %s\n", cmd.c_str());
        std::fflush(stdout);
        if (std::system(cmd.c_str()) != 0) {
            std::fprintf(stderr, "%s", read(rem).c_str());
            failures.push_back(src.filename().string() + ": does not compile for " + arch);
            continue;
        }
        specs[stem] = parse_specs(read(src));
        // Resource remarks: "Function Name: X" followed by its fields.
        std::istringstream in(read(rem));
        std::vector<Kernel> fk;
        for (std::string line; std::getline(in, line);) {
            if (line.find("kernel-resource-usage") == std::string::npos) continue;
            const auto fn = line.find("Function Name: ");
            if (fn != std::string::npos) {
                Kernel k;
                k.file = src.filename().string();
                std::istringstream w(line.substr(fn + 15));
                w >> k.mangled;
                k.name = demangle(k.mangled);
                fk.push_back(k);
                continue;
            }
            if (fk.empty()) continue;
            Kernel& k = fk.back();
            if (line.find("SGPRs Spill:") != std::string::npos) k.sspill = field(line, "SGPRs Spill:");
            else if (line.find("VGPRs Spill:") != std::string::npos) k.vspill = field(line, "VGPRs Spill:");
            else if (line.find("SGPRs:") != std::string::npos) k.sgpr = field(line, "SGPRs:");
            else if (line.find("VGPRs:") != std::string::npos) k.vgpr = field(line, "VGPRs:");
            else if (line.find("ScratchSize [bytes/lane]:") != std::string::npos) k.scratch = field(line, "ScratchSize [bytes/lane]:");
            else if (line.find("Occupancy [waves/SIMD]:") != std::string::npos) k.waves = field(line, "Occupancy [waves/SIMD]:");
            else if (line.find("LDS Size [bytes/block]:") != std::string::npos) k.lds = field(line, "LDS Size [bytes/block]:");
        }
        // ISA per kernel: from "<mangled>:" to the next ".Lfunc_end".
        const std::string isa = read(s_out);
        for (Kernel& k : fk) {
            const auto b = isa.find("\n" + k.mangled + ":");
            if (b == std::string::npos) continue;
            const auto e = isa.find(".Lfunc_end", b);
            k.isa = isa.substr(b, e == std::string::npos ? std::string::npos : e - b);
        }
        kernels.insert(kernels.end(), fk.begin(), fk.end());
    }

    // Check every kernel against its most specific spec.
    struct RowOut {
        const Kernel* k;
        int floor;
        std::string expect, status;
    };
    std::vector<RowOut> rows;
    for (const Kernel& k : kernels) {
        Spec* best = nullptr;
        for (Spec& s : specs[fs::path(k.file).stem().string()])
            if (fnmatch(s.glob.c_str(), k.name.c_str(), 0) == 0 && (!best || s.glob.size() > best->glob.size())) best = &s;
        std::vector<std::string> bad;
        if (k.scratch != 0 || k.vspill > 0 || k.sspill > 0) bad.push_back("scratch " + std::to_string(k.scratch) + " B/lane");
        if (k.lds > 65536) bad.push_back("LDS " + std::to_string(k.lds) + " B > 64 KiB");
        const int floor = best ? best->min_waves : 1;
        if (k.waves < floor) bad.push_back("occupancy " + std::to_string(k.waves) + " < " + std::to_string(floor));
        std::string exp;
        if (best) {
            best->used = true;
            for (const std::string& e : best->expect) {
                exp += (exp.empty() ? "" : ",") + e;
                if (!has_instr(k.isa, e)) bad.push_back("missing " + e);
            }
        }
        std::string status = "ok";
        if (!bad.empty()) {
            status.clear();
            for (const auto& b : bad) status += (status.empty() ? "FAIL: " : "; ") + b;
            failures.push_back(shorten(k.name) + " (" + k.file + "): " + status);
        }
        rows.push_back({&k, floor, exp, status});
    }
    for (auto& [file, v] : specs)
        for (const Spec& s : v)
            if (!s.used && s.glob != "*") failures.push_back(file + ".cu: @audit kernel=" + s.glob + " matches no kernel");

    std::ostringstream table;
    table << "| kernel | file | VGPRs | SGPRs | LDS B | scratch B | waves/SIMD | floor | expects | status |\n"
          << "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |\n";
    for (const RowOut& r : rows)
        table << "| `" << shorten(r.k->name) << "` | " << r.k->file << " | " << r.k->vgpr << " | " << r.k->sgpr << " | "
              << r.k->lds << " | " << r.k->scratch << " | " << r.k->waves << " | " << r.floor << " | " << r.expect
              << " | " << r.status << " |\n";
    std::printf("%s", table.str().c_str());
    std::printf("audit: %zu kernels, %zu failures\n", rows.size(), failures.size());
    for (const auto& f : failures) std::printf("FAIL %s\n", f.c_str());

    if (!md.empty()) {
        std::ofstream o(md);
        o << "# gfx906 kernel audit\n\n"
          << "Generated by the `gfx906_audit` test (ctest label `gfx906-audit`, source tests/gpu/gfx906_audit.cpp):\n"
          << "every kernel in src/backend/gpu/kernels is compiled with `hipcc --offload-arch=" << arch
          << "` (Debian HIP 5.2, clang 15);\n"
          << "resources come from `-Rpass-analysis=kernel-resource-usage`, instructions from the `--cuda-device-only -S` ISA.\n"
          << "A kernel fails on scratch (spills), LDS over 64 KiB, occupancy under its declared floor, or a missing\n"
          << "expected instruction (`dpp` = a DPP modifier or ds_swizzle in the wave reductions). Floors and expectations\n"
          << "are declared next to the kernels as `// @audit kernel=<glob> min_waves=N expect=...` lines.\n"
          << "Template arguments: (GgmlType)N is the GGML type id (2 Q4_0, 3 Q4_1, 6 Q5_0, 7 Q5_1, 8 Q8_0, 12 Q4_K,\n"
          << "13 Q5_K, 14 Q6_K, 0 F32, 1 F16, 30 BF16), then activation rows per block, then the fused SwiGLU flag.\n\n"
          << rows.size() << " kernels, " << failures.size() << " failures.\n\n"
          << table.str();
        std::printf("audit: wrote %s\n", md.c_str());
    }
    return failures.empty() ? 0 : 1;
}
