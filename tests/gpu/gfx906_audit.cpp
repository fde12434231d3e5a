// gfx906 audit (v2): compiles every GPU kernel source for gfx906 with the HIP
// toolchain and checks each kernel against what its source declares, in
// `// @audit kernel=<glob> key=value ...` lines (the glob, without spaces, matches
// the demangled kernel name; the longest matching spec applies):
//   min_waves=N      occupancy floor, waves per SIMD, as the audit computes it
//                    (occupancy() below: VGPRs, SGPRs, LDS, waves per block; never
//                    the compiler's "Occupancy" remark, which ignores LDS shared by
//                    the CU's four SIMDs)
//   threads=N        the launch's block size where the kernel has no launch bounds
//   expect=a,b       instructions that must appear ("dpp": DPP or ds_swizzle)
//   hot-loop checks, on the innermost loop with the most vector-memory loads
//   (loop_stats() below, from the compiler's loop annotations):
//   loop_inflight=N  at least N loads outstanding at the loop's first wait
//   loop_waits=N     at most N waits on vector memory per iteration
//   loop_trips=N     at most N memory round trips per iteration (waits with a load
//                    issued since the previous wait: latencies paid in sequence)
//   loop_vmcnt0=N    at most N vmcnt(0) waits followed by more loads in the iteration
//   loop_cndmask=N   at most N v_cndmask per iteration (dynamic register indexing)
//   loop_x4          the loop's weight/KV stream uses dwordx4 loads
//   no_flat, no_glc  no flat_load / no glc loads anywhere in the kernel
// Fails on scratch (spills), LDS over 64 KiB, occupancy under the floor, a missing
// expected instruction, a failed hot-loop check, or a matvec / GEMM / attention kernel
// without hot-loop checks. Prints a table per kernel and writes it as markdown
// (docs/GFX906_AUDIT.md).
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
    int min_waves = 1, threads = 0;
    std::vector<std::string> expect;
    int loop_inflight = -1, loop_waits = -1, loop_trips = -1, loop_vmcnt0 = -1, loop_cndmask = -1;
    bool loop_x4 = false, no_flat = false, no_glc = false;
    bool used = false;
    bool has_loop_checks() const {
        return loop_inflight >= 0 || loop_waits >= 0 || loop_trips >= 0 || loop_vmcnt0 >= 0 || loop_cndmask >= 0 ||
               loop_x4;
    }
};

struct Kernel {
    std::string file, mangled, name;
    int sgpr = -1, vgpr = -1, scratch = -1, lds = -1, vspill = 0, sspill = 0;
    int max_threads = -1;  // .max_flat_workgroup_size (1024 without launch bounds)
    std::string isa;
};

// Waves per SIMD that fit on a gfx906 CU (4 SIMDs, 10 waves each, 64 KiB LDS):
// VGPRs in granules of 4 of 256 per lane, SGPRs in granules of 16 of 800 per
// SIMD, LDS in granules of 512 bytes of 64 KiB per CU, a block's waves spread
// over the 4 SIMDs, at most 40 waves per CU and 16 blocks of more than one wave
// (barrier slots; LLVM's getMaxWorkGroupsPerCU).
struct Occupancy {
    int waves = 0, blocks = 0, waves_per_block = 0;
    std::string limiter;
};

Occupancy occupancy(int vgpr, int sgpr, int lds, int threads) {
    auto up = [](int v, int g) { return (std::max(v, 1) + g - 1) / g * g; };
    Occupancy o;
    o.waves_per_block = std::max(1, (threads + 63) / 64);
    const int w_vgpr = std::min(10, 256 / up(vgpr, 4)), w_sgpr = std::min(10, 800 / up(sgpr, 16));
    const int by_regs = 4 * std::min(w_vgpr, w_sgpr) / o.waves_per_block;
    const int by_lds = lds > 0 ? 65536 / up(lds, 512) : 1 << 30;
    const int by_slots = o.waves_per_block == 1 ? 40 : std::min(16, 40 / o.waves_per_block);
    o.blocks = std::min({by_regs, by_lds, by_slots});
    o.waves = o.blocks * o.waves_per_block / 4;
    o.limiter = o.blocks == by_lds ? "LDS" : o.blocks == by_regs ? (w_vgpr <= w_sgpr ? "VGPRs" : "SGPRs") : "blocks/CU";
    return o;
}

// The hot loop of a kernel's ISA: the innermost loop (blocks the compiler marks
// "in Loop: Header=X", or X's header) with the most vector-memory loads. Its
// blocks are walked in layout order from the header (wrapping around), twice, with
// a count of loads outstanding; a `s_waitcnt vmcnt(N)` with more than N
// outstanding is a wait (a memory round trip). Stats from the second pass (steady
// state). Branches inside the loop are ignored: every block counts as executed.
struct LoopStats {
    bool found = false;
    std::string header;
    int loads = 0, x4 = 0, inflight_at_first_wait = 0, waits = 0, vmcnt0_then_load = 0, cndmask = 0;
    int trips = 0;  // waits with a load issued since the previous wait: latencies paid one after another
};

bool is_vmem_load(const std::string& l) {
    return l.find("global_load") != std::string::npos || l.find("buffer_load") != std::string::npos ||
           l.find("flat_load") != std::string::npos;
}

int vmcnt_of(const std::string& l) {  // N of "s_waitcnt ... vmcnt(N)", -1 if none
    if (l.find("s_waitcnt") == std::string::npos) return -1;
    const auto p = l.find("vmcnt(");
    return p == std::string::npos ? -1 : std::atoi(l.c_str() + p + 6);
}

LoopStats loop_stats(const std::string& isa) {
    // Basic blocks: label -> (loop header it belongs to, its instruction lines).
    struct Block {
        std::string label, loop;
        std::vector<std::string> lines;
    };
    std::vector<Block> blocks(1);
    std::istringstream in(isa);
    const std::regex label_re(R"(^\.(LBB\w+):(.*)$)"), in_loop_re(R"(Header=(BB\w+))"), head_re(R"(Loop Header)");
    // The loop a block belongs to, from its label's annotation ("in Loop: Header=X",
    // or "Loop Header": its own).
    auto annotate = [&](Block& b, const std::string& text) {
        std::smatch h;
        if (std::regex_search(text, h, in_loop_re)) b.loop = h[1];
        else if (std::regex_search(text, head_re)) b.loop = b.label;
    };
    for (std::string line; std::getline(in, line);) {
        std::smatch m;
        if (std::regex_match(line, m, label_re)) {
            Block b;
            b.label = m[1].str().substr(1);  // "LBB3_9" -> "BB3_9"
            annotate(b, m[2]);
            blocks.push_back(b);
            continue;
        }
        const auto first = line.find_first_not_of(" \t");
        if (first != std::string::npos && line[first] == ';' && blocks.back().loop.empty() && blocks.back().lines.empty()) {
            // A nested loop's header carries its annotation on the comment line
            // after its label ("; Parent Loop ..." then "; =>  This Inner Loop Header").
            annotate(blocks.back(), line);
            continue;
        }
        if (!line.empty() && (line[0] == '\t' || line[0] == ' ') && first != std::string::npos && line[first] != ';' &&
            line[first] != '.')
            blocks.back().lines.push_back(line);
    }
    // Loops that are innermost: no block of theirs heads another loop.
    std::map<std::string, int> loads_of;
    for (const Block& b : blocks)
        if (!b.loop.empty())
            for (const auto& l : b.lines) loads_of[b.loop] += is_vmem_load(l);
    LoopStats st;
    std::string best;
    for (const auto& [h, n] : loads_of)
        if (best.empty() || n > loads_of[best]) best = h;
    if (best.empty()) return st;
    std::vector<const Block*> body;
    size_t head = 0;
    for (const Block& b : blocks)
        if (b.loop == best) {
            if (b.label == best) head = body.size();
            body.push_back(&b);
        }
    std::rotate(body.begin(), body.begin() + long(head), body.end());
    st.found = true;
    st.header = best;
    int outstanding = 0;
    bool issued_since_wait = false;
    for (int pass = 0; pass < 2; ++pass) {
        bool any_wait = false, saw_vmcnt0 = false;
        for (const Block* b : body)
            for (const auto& l : b->lines) {
                const int n = vmcnt_of(l);
                if (n >= 0) {
                    if (outstanding > n) {
                        if (pass == 1) {
                            if (!any_wait) st.inflight_at_first_wait = outstanding;
                            ++st.waits;
                            st.trips += issued_since_wait;
                        }
                        issued_since_wait = false;
                        any_wait = true;
                        outstanding = n;
                    }
                    if (n == 0) saw_vmcnt0 = true;
                }
                if (is_vmem_load(l)) {
                    ++outstanding;
                    issued_since_wait = true;
                    if (pass == 1) {
                        ++st.loads;
                        st.x4 += l.find("dwordx4") != std::string::npos;
                        if (saw_vmcnt0) ++st.vmcnt0_then_load, saw_vmcnt0 = false;
                    }
                }
                if (pass == 1 && l.find("v_cndmask") != std::string::npos) ++st.cndmask;
            }
    }
    if (st.waits == 0) st.inflight_at_first_wait = st.loads;  // no wait inside the loop: all in flight
    return st;
}

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
            auto num = [&](const char* key, int* v) {
                if (kv.rfind(key, 0) == 0) *v = std::atoi(kv.c_str() + std::strlen(key));
            };
            num("min_waves=", &s.min_waves);
            num("threads=", &s.threads);
            num("loop_inflight=", &s.loop_inflight);
            num("loop_waits=", &s.loop_waits);
            num("loop_trips=", &s.loop_trips);
            num("loop_vmcnt0=", &s.loop_vmcnt0);
            num("loop_cndmask=", &s.loop_cndmask);
            if (kv == "loop_x4") s.loop_x4 = true;
            if (kv == "no_flat") s.no_flat = true;
            if (kv == "no_glc") s.no_glc = true;
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

// --self-test: the occupancy model and the loop walk against hand-worked cases
// (each one would fail if its rule were dropped).
int self_test() {
    int bad = 0;
    auto occ = [&](int vgpr, int sgpr, int lds, int threads, int want, const char* limiter, const char* why) {
        const Occupancy o = occupancy(vgpr, sgpr, lds, threads);
        if (o.waves != want || o.limiter != limiter) {
            std::printf("self-test FAIL occupancy(%d, %d, %d, %d) = %d (%s), want %d (%s): %s\n", vgpr, sgpr, lds, threads,
                        o.waves, o.limiter.c_str(), want, limiter, why);
            ++bad;
        }
    };
    occ(40, 70, 18580, 256, 3, "LDS", "18580 B -> 18944 allocated, 3 blocks of 4 waves per CU");
    occ(40, 48, 16512, 256, 3, "LDS", "16.5 KB is still 3 blocks (the compiler's remark says 6)");
    occ(40, 48, 16384, 256, 4, "LDS", "exactly 16 KiB: 4 blocks");
    occ(84, 52, 0, 128, 3, "VGPRs", "84 VGPRs: 3 waves per SIMD");
    occ(28, 24, 0, 128, 8, "blocks/CU", "2-wave blocks: at most 16 per CU (barrier slots)");
    occ(18, 20, 0, 64, 10, "VGPRs", "1-wave blocks take no barrier slot: 40 per CU");
    occ(16, 110, 0, 256, 7, "SGPRs", "110 SGPRs -> 112 allocated of 800: 7 waves");
    occ(65, 20, 0, 256, 3, "VGPRs", "65 VGPRs round up to 68: 3 waves");
    // A loop: header with two loads and a wait leaving one in flight, a latch with a
    // vmcnt(0) followed by another load, one v_cndmask, and a dwordx4 load.
    const std::string isa =
        "k:\n"
        "\ts_load_dword s0, s[0:1], 0x0\n"
        ".LBB0_1:                                ; =>This Inner Loop Header: Depth=1\n"
        "\tglobal_load_dwordx4 v[0:3], v[8:9], off\n"
        "\tglobal_load_dword v4, v[10:11], off\n"
        "\ts_waitcnt vmcnt(1)\n"
        "\tv_cndmask_b32_e32 v5, v0, v1, vcc\n"
        ".LBB0_2:                                ;   in Loop: Header=BB0_1 Depth=1\n"
        "\ts_waitcnt vmcnt(0)\n"
        "\tglobal_load_dword v6, v[12:13], off\n"
        "\ts_cbranch_scc1 .LBB0_1\n"
        ".LBB0_3:\n"
        "\ts_endpgm\n";
    const LoopStats st = loop_stats(isa);
    // Steady state: 1 load carried in from the last iteration, +2 = 3 outstanding at the
    // first wait (vmcnt(1)); then vmcnt(0) (a second wait, but no load was issued between
    // the two: one round trip), then a load after it.
    const bool ok = st.found && st.header == "BB0_1" && st.loads == 3 && st.x4 == 1 && st.inflight_at_first_wait == 3 &&
                    st.waits == 2 && st.trips == 1 && st.vmcnt0_then_load == 1 && st.cndmask == 1;
    if (!ok) {
        std::printf("self-test FAIL loop_stats: found %d header %s loads %d x4 %d inflight %d waits %d vmcnt0+load %d cndmask %d\n",
                    st.found, st.header.c_str(), st.loads, st.x4, st.inflight_at_first_wait, st.waits, st.vmcnt0_then_load,
                    st.cndmask);
        ++bad;
    }
    // A nested loop: its header's annotation is on the comment line after the label,
    // and its latch block comes before the header in layout. The inner loop (2 loads,
    // one round trip) must win over the outer one (1 load).
    const std::string nested =
        "k:\n"
        ".LBB1_1:                                ; =>This Loop Header: Depth=1\n"
        "                                        ;     Child Loop BB1_3 Depth 2\n"
        "\tglobal_load_dword v0, v[8:9], off\n"
        ".LBB1_2:                                ;   in Loop: Header=BB1_3 Depth=2\n"
        "\ts_cbranch_scc1 .LBB1_4\n"
        ".LBB1_3:                                ;   Parent Loop BB1_1 Depth=1\n"
        "                                        ; =>  This Inner Loop Header: Depth=2\n"
        "\tglobal_load_dwordx4 v[0:3], v[8:9], off\n"
        "\tglobal_load_dwordx4 v[4:7], v[10:11], off\n"
        "\ts_waitcnt vmcnt(0)\n"
        "\ts_cbranch_scc1 .LBB1_2\n"
        ".LBB1_4:                                ;   in Loop: Header=BB1_1 Depth=1\n"
        "\ts_cbranch_scc1 .LBB1_1\n"
        "\ts_endpgm\n";
    const LoopStats ns = loop_stats(nested);
    if (!(ns.found && ns.header == "BB1_3" && ns.loads == 2 && ns.x4 == 2 && ns.inflight_at_first_wait == 2 &&
          ns.trips == 1)) {
        std::printf("self-test FAIL nested loop: found %d header %s loads %d x4 %d inflight %d trips %d\n", ns.found,
                    ns.header.c_str(), ns.loads, ns.x4, ns.inflight_at_first_wait, ns.trips);
        ++bad;
    }
    std::printf("audit self-test: %s\n", bad ? "FAILED" : "ok");
    return bad ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc == 2 && std::string(argv[1]) == "--self-test") return self_test();
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
            else if (line.find("LDS Size [bytes/block]:") != std::string::npos) k.lds = field(line, "LDS Size [bytes/block]:");
        }
        // ISA per kernel: from "<mangled>:" to the next ".Lfunc_end".
        const std::string isa = read(s_out);
        // Block size bound and LDS from the code object metadata (amdhsa.kernels).
        {
            std::istringstream md_in(isa.substr(std::min(isa.size(), isa.find("amdhsa.kernels:"))));
            int max_wg = -1, lds = -1;
            for (std::string line; std::getline(md_in, line);) {
                if (line.rfind("  - ", 0) == 0) max_wg = -1, lds = -1;  // a new kernel entry
                const int w = field(line, ".max_flat_workgroup_size:"), g = field(line, ".group_segment_fixed_size:");
                if (w >= 0 && line.rfind("    .", 0) == 0) max_wg = w;
                if (g >= 0 && (line.rfind("    .", 0) == 0 || line.rfind("  - .", 0) == 0)) lds = g;
                if (line.rfind("    .name:", 0) == 0) {
                    std::istringstream nw(line.substr(10));
                    std::string name;
                    nw >> name;
                    for (Kernel& k : fk)
                        if (k.mangled == name) {
                            k.max_threads = max_wg;
                            if (lds >= 0) k.lds = lds;
                        }
                }
            }
        }
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
        int floor, threads;
        Occupancy occ;
        LoopStats loop;
        int flat, glc;
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
        const int threads = best && best->threads > 0 ? best->threads : k.max_threads > 0 ? k.max_threads : 1024;
        const Occupancy occ = occupancy(k.vgpr, k.sgpr, std::max(k.lds, 0), threads);
        const int floor = best ? best->min_waves : 1;
        if (occ.waves < floor)
            bad.push_back("occupancy " + std::to_string(occ.waves) + " < " + std::to_string(floor) + " (" + occ.limiter + ")");
        const LoopStats loop = loop_stats(k.isa);
        int flat = 0, glc = 0;
        {
            std::istringstream in(k.isa);
            for (std::string l; std::getline(in, l);) {
                if (l.find("flat_load") != std::string::npos) ++flat;
                if (is_vmem_load(l) && l.find(" glc") != std::string::npos) ++glc;
            }
        }
        std::string exp;
        if (best) {
            best->used = true;
            for (const std::string& e : best->expect) {
                exp += (exp.empty() ? "" : ",") + e;
                if (!has_instr(k.isa, e)) bad.push_back("missing " + e);
            }
            const Spec& sp = *best;
            if (sp.has_loop_checks() && !loop.found) bad.push_back("no loop found for the hot-loop checks");
            if (loop.found) {
                if (sp.loop_inflight >= 0 && loop.inflight_at_first_wait < sp.loop_inflight)
                    bad.push_back("loop: " + std::to_string(loop.inflight_at_first_wait) + " loads in flight at the first wait < " +
                                  std::to_string(sp.loop_inflight));
                if (sp.loop_waits >= 0 && loop.waits > sp.loop_waits)
                    bad.push_back("loop: " + std::to_string(loop.waits) + " waits per iteration > " + std::to_string(sp.loop_waits));
                if (sp.loop_trips >= 0 && loop.trips > sp.loop_trips)
                    bad.push_back("loop: " + std::to_string(loop.trips) + " round trips per iteration > " +
                                  std::to_string(sp.loop_trips));
                if (sp.loop_vmcnt0 >= 0 && loop.vmcnt0_then_load > sp.loop_vmcnt0)
                    bad.push_back("loop: " + std::to_string(loop.vmcnt0_then_load) + " vmcnt(0) waits with loads after > " +
                                  std::to_string(sp.loop_vmcnt0));
                if (sp.loop_cndmask >= 0 && loop.cndmask > sp.loop_cndmask)
                    bad.push_back("loop: " + std::to_string(loop.cndmask) + " v_cndmask > " + std::to_string(sp.loop_cndmask));
                if (sp.loop_x4 && loop.x4 == 0) bad.push_back("loop: no dwordx4 loads");
            }
            if (sp.no_flat && flat > 0) bad.push_back(std::to_string(flat) + " flat_load");
            if (sp.no_glc && glc > 0) bad.push_back(std::to_string(glc) + " glc loads");
        }
        const std::string short_name = shorten(k.name);
        const bool hot = short_name.rfind("matvec", 0) == 0 || short_name.rfind("attn_", 0) == 0 ||
                         short_name.rfind("gemm", 0) == 0;
        if (hot && !(best && best->has_loop_checks()))
            bad.push_back("a matvec / GEMM / attention kernel without hot-loop checks");
        std::string status = "ok";
        if (!bad.empty()) {
            status.clear();
            for (const auto& b : bad) status += (status.empty() ? "FAIL: " : "; ") + b;
            failures.push_back(short_name + " (" + k.file + "): " + status);
        }
        rows.push_back({&k, floor, threads, occ, loop, flat, glc, exp, status});
    }
    for (auto& [file, v] : specs)
        for (const Spec& s : v)
            if (!s.used && s.glob != "*") failures.push_back(file + ".cu: @audit kernel=" + s.glob + " matches no kernel");

    std::ostringstream table;
    table << "| kernel | file | VGPRs | SGPRs | LDS B | threads | waves/SIMD (limit) | floor | hot loop: loads, x4, "
             "in flight at 1st wait, waits (round trips), vmcnt(0)+load, cndmask | expects | status |\n"
          << "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |\n";
    for (const RowOut& r : rows) {
        std::string loop = "-";
        if (r.loop.found)
            loop = std::to_string(r.loop.loads) + ", " + std::to_string(r.loop.x4) + ", " +
                   std::to_string(r.loop.inflight_at_first_wait) + ", " + std::to_string(r.loop.waits) + " (" +
                   std::to_string(r.loop.trips) + "), " +
                   std::to_string(r.loop.vmcnt0_then_load) + ", " + std::to_string(r.loop.cndmask);
        if (r.flat || r.glc) loop += " (flat " + std::to_string(r.flat) + ", glc " + std::to_string(r.glc) + ")";
        table << "| `" << shorten(r.k->name) << "` | " << r.k->file << " | " << r.k->vgpr << " | " << r.k->sgpr << " | "
              << r.k->lds << " | " << r.threads << " | " << r.occ.waves << " (" << r.occ.limiter << ") | " << r.floor << " | "
              << loop << " | " << r.expect << " | " << r.status << " |\n";
    }
    std::printf("%s", table.str().c_str());
    std::printf("audit: %zu kernels, %zu failures\n", rows.size(), failures.size());
    for (const auto& f : failures) std::printf("FAIL %s\n", f.c_str());

    if (!md.empty()) {
        std::ofstream o(md);
        o << "# gfx906 kernel audit\n\n"
          << "Generated by the `gfx906_audit` test (ctest label `gfx906-audit`, source tests/gpu/gfx906_audit.cpp):\n"
          << "every kernel in src/backend/gpu/kernels is compiled with `hipcc --offload-arch=" << arch
          << "` (Debian HIP 5.2, clang 15).\n"
          << "Registers come from `-Rpass-analysis=kernel-resource-usage`; block size bounds and LDS from the code\n"
          << "object metadata; instructions from the `--cuda-device-only -S` ISA.\n\n"
          << "**Occupancy** (waves per SIMD) is the audit's own count, not the compiler's remark: VGPRs in granules\n"
          << "of 4 of 256, SGPRs in granules of 16 of 800 per SIMD, LDS in granules of 512 B of the CU's 64 KiB\n"
          << "(shared by its 4 SIMDs), a block's waves spread over the 4 SIMDs, at most 40 waves and 16 multi-wave\n"
          << "blocks per CU. `threads` is the launch bound (1024 where a kernel declares none). The limit in\n"
          << "parentheses is what caps it.\n\n"
          << "**Hot loop**: the innermost loop with the most vector-memory loads, walked in layout order from its\n"
          << "header, twice (steady state), every block counted as executed. Columns: loads per iteration, of\n"
          << "them dwordx4, loads outstanding at the first wait, waits on vector memory per iteration and, in\n"
          << "parentheses, round trips (waits with a load issued since the previous wait: latencies paid one\n"
          << "after another), vmcnt(0) waits followed by more loads, v_cndmask per iteration; flat/glc loads of the\n"
          << "whole kernel are noted when present.\n\n"
          << "A kernel fails on scratch (spills), LDS over 64 KiB, occupancy under its declared floor, a missing\n"
          << "expected instruction (`dpp` = a DPP modifier or ds_swizzle), a failed hot-loop check, or (matvec and\n"
          << "attention kernels) no hot-loop checks declared. Floors and checks are declared next to the kernels as\n"
          << "`// @audit kernel=<glob> min_waves=N expect=... loop_...` lines; where a kernel is below issue 10's\n"
          << "targets, its declared check holds today's level and the comment beside it says so.\n"
          << "Template arguments: (GgmlType)N is the GGML type id (2 Q4_0, 3 Q4_1, 6 Q5_0, 7 Q5_1, 8 Q8_0, 10 Q2_K,\n"
          << "11 Q3_K, 12 Q4_K, 13 Q5_K, 14 Q6_K, 20 IQ4_NL, 23 IQ4_XS, 39 MXFP4, 0 F32, 1 F16, 30 BF16), then\n"
          << "activation rows per block, then the fused SwiGLU flag.\n\n"
          << rows.size() << " kernels, " << failures.size() << " failures.\n\n"
          << table.str();
        std::printf("audit: wrote %s\n", md.c_str());
    }
    return failures.empty() ? 0 : 1;
}
