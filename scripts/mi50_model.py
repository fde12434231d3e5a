#!/usr/bin/env python3
"""A model of vega's llama2-7b decode (B=1, tg128) on an MI50, from the gfx906 audit.

Nothing here was measured on an MI50: there is no gfx906 card in this project's reach.
The model takes, per decode kernel, the bytes it moves and, from docs/GFX906_AUDIT.md (the
audit's own occupancy and hot-loop count), its waves per SIMD and the memory round trips per
loop iteration. It then bounds the kernel's time by bandwidth and by latency, and adds a gap
per launch:

  t_kernel = max(bytes / BW, rounds * lifetime) + GAP
  lifetime = P * (iterations * trips * LAT + LAT) [+ LAT for a block epilogue's q8]
  rounds   = max(1, rows / (R * P) / (waves_per_SIMD * 4 SIMDs * 60 CUs))

A matvec wave takes R output rows at once (both matrices' rows, for the fused gate/up)
and P row sets in turn (the block epilogues: 8-wave blocks of one 32-row chunk). Each
lane takes kU chunks of 32 weights per iteration, so iterations = ceil(n_in / (32 * 64 *
kU)). The kernels per layer are gfx906's 7: q, k, v (one matrix per launch, rope and the
cache store in the epilogue), attention, o and down (residual + next norm + q8), gate/up
(SwiGLU + q8 of h). Small kernels (attention at tg128 depths, the final norm, argmax)
count as 2 * LAT + GAP each.

Left out of the model:
- instruction issue and dot4 throughput (assumed hidden under memory);
- L2 hits on the activations;
- imbalance between the HBM channels;
- clocks below peak;
- the attention's real cost at depth (tg128 averages 64 positions: under 1% of the bytes);
- the CPU side of a step (graph replay assumed).

The same model of a qwen3moe-30b-a3b decode step (B=1, Q4_0; `vega synth --shape
qwen3moe-30b-a3b`): per layer the attention block (q, k, v, o matvecs and 3 small kernels:
the q/k head norms, rope + cache store, attention; 7 launches, as qk-norm models do not take
the fused rope epilogue) and the routed-expert FFN (5 launches: router matvec, route + sort,
the 8 chosen experts' gate/up grouped, their down grouped, combine + residual + norm). The
grouped expert matvec is src/backend/gpu/kernels/moe.cu's expert_matvec_q as of 2026-11-25:
one wave per output row, one 32-weight chunk per lane and iteration, no row sets in turn,
4 waves/SIMD (its audit floor); GFX906_AUDIT.md has no row for it yet, so its round trips
per iteration are an assumption (1, as the dense Q4_0 matvecs; --moe-expert-trips). The F32
router counts as one latency round trip or its bytes. Weights read per token: attention,
router, 8 of 128 experts' gate/up/down, the output matrix (Q6_K, as llama-quantize leaves it
in a Q4_0 file).

A prompt at depth (pp512 @ d8192, llama2-7b Q4_0): the tiled attention kernel
(kernels/attention_dot2.cu) from its instruction budget per tile (docs/KERNELS.md): per
wave and K/V tile, 512 v_dot2_f32_f16 (4 query rows x 64 positions x 128 dims, q.k and
p.v) and 32 non-broadcast ds_read_b128 (1 KB each); the CU issues 64 v_dot2 lanes a clock
(full rate: 26.5 TFLOPS f16 at 1.725 GHz) and reads 128 LDS bytes a clock. The kernel takes
the larger of the two plus --attn-overhead (softmax, staging, barriers; a fraction), with
the causal half-tile of each block's last tile. The matmuls of a 512-row prompt run on the
dot4 GEMM (below).

Prompts on the dot4 GEMM (kernels/gemm_dot4.cu, issue 25): the tile of arch/gfx906.h (64
weight rows x 64 activation rows, K steps of 2 chunks, 4 x 4 outputs a thread, 256 threads,
2 blocks per CU by LDS: 2 waves per SIMD). Per wave and K step the model counts:
  VALU   per chunk 128 v_dot4 (16 outputs x 8) + the per-chunk float scaling (GEMM_FLOAT:
         3 a pair: cvt, mul, fma; +1 for a min; per half for per-half scales) + 8 loop and
         address instructions; per step the staging (GEMM_STAGE: addresses, the half
         chunk's decode, the record) -- each VALU instruction 4 clocks on its SIMD;
  LDS    per chunk 16 ds_read_b128 a lane (4 weight rows + 4 activation rows, 2 halves),
         no broadcast credit, plus the step's two ds_write_b128 a lane: at 128 bytes per
         CU and clock.
A CU holds 8 waves; a step takes max(VALU, LDS) clocks when the two overlap fully and
VALU + LDS when they do not: the two bounds of the prediction. Blocks run in rounds of 120
(2 per CU); weights come from DRAM once (the column tiles of a row tile run together and
share it through L2). Left out: the barrier per step and the global loads' latency (one
round trip a step, hidden by the other block when it is not), the LDS broadcast of rows
that several lanes read, the activation quantization and norms (one pass over 512 x 4096
floats a layer), clocks below peak.

  scripts/mi50_model.py [--audit docs/GFX906_AUDIT.md] [--lat 0.6,0.9,1.2] [--gap 1,3]
                        [--trips N]  (what-if: every decode matvec at N round trips per iteration)
                        [--launches-per-layer N]  (what-if: N kernels per layer instead of 7)
                        [--moe-attn-launches N] [--moe-ffn-launches N]  (what-if: qwen3moe's 7 + 5)
                        [--moe-expert-trips N] [--moe-down-rows R]  (what-if: the grouped expert matvec)
                        [--attn-overhead F] [--depth D]  (the prompt-at-depth model)
                        [--tp-sum-us 5,10,20,40] [--tp-ranks 2,4]  (tensor parallel: an all-reduce's us)
"""
import argparse
import math
import re

CLOCK = 1.725e9  # MI50 peak engine clock, Hz

BW = 860e9  # bytes/s, what MI50 users measure with plain reads
CUS, SIMDS = 60, 4
E, F, LAYERS, VOCAB = 4096, 11008, 32, 32000
# bytes per weight; the llama.cpp mixes: Q4_K_M keeps attn_v and half of ffn_down in Q6_K,
# the output matrix is Q6_K in all three files.
# IQ4_XS and MXFP4: the GPU layout's bytes (gpu_mat.h: 16 code bytes and a 1-byte scale a
# chunk, IQ4_XS's f16 d per 256): MXFP4's are the file's, IQ4_XS's 2 more per 256.
BPW = {"Q4_0": 18 / 32, "Q8_0": 34 / 32, "Q4_K": 144 / 256, "Q6_K": 210 / 256, "F32": 4,
       "IQ4_XS": (17 + 2 / 8) / 32, "MXFP4": 17 / 32}
TYPE_ID = {"Q4_0": 2, "Q8_0": 8, "Q4_K": 12, "Q6_K": 14, "IQ4_XS": 23, "MXFP4": 39}
# VALU instructions per 32-weight chunk on gfx906: (decode, per activation row). An
# estimate from kernels/quant_chunk.h and wave.h, not an ISA count: decoding 4 code words
# (Q4_0: and + shift-and; the codebook types: per 4 codes 2 v_perm_b32, the bit-3 mask
# (and, 2 shifts, sub) and v_bfi, plus the nibble split) and, per activation row, 8 dot4,
# the scales and the accumulation. The ALU bound is chunks x (decode + rows x per row) at
# 64 lane-ops per CU and clock; with one activation row it stays under the memory time
# for every type here, with 8 (the prompt's batch matvec) it does not.
VALU_PER_CHUNK = {"Q4_0": (12, 14), "Q8_0": (2, 14), "Q4_K": (14, 16), "Q6_K": (30, 16),
                  "IQ4_XS": (72, 14), "MXFP4": (74, 14)}
# Decode matvec kernels by epilogue (src/backend/gpu/kernels/matvec.cu, arch/gfx906.h):
# EPI -> (gate/up pair, rows per wave R, chunks per lane and iteration U, row sets in turn P).
# 0 plain (the output matrix), 1 residual + norm + q8 (o, down; 8-wave blocks, 4 passes),
# 2 gate/up + SwiGLU + q8 of h (8-wave blocks, 4 passes), 3 rope + cache store (q, k, v).
KERNEL = {0: (False, 1, 2, 1), 1: (False, 1, 2, 4), 2: (True, 1, 1, 4), 3: (False, 2, 1, 1),
          4: (False, 2, 1, 1)}  # 4: q/k/v with the head norms' per-head tail (kEpiNormRope)


TRIPS_OVERRIDE = None
SMALL_PER_LAYER = 1  # attention (split + merge in one launch)

# qwen3moe-30b-a3b (src/model/synth.cpp): n_embd 2048, 48 layers, 32 heads of 128 (q is
# 4096 wide), 4 KV heads, 128 experts of FFN 768, 8 used per token, vocab 151936.
MOE_E, MOE_LAYERS, MOE_Q, MOE_KV, MOE_VOCAB = 2048, 48, 32 * 128, 4 * 128, 151936
MOE_EXPERTS, MOE_USED, MOE_FF = 128, 8, 768
MOE_ATTN_LAUNCHES, MOE_FFN_LAUNCHES = 7, 5
# The grouped expert matvec (kernels/moe.cu): waves/SIMD, round trips per iteration,
# output rows per wave of the down projection (1: one wave per row, as compiled).
EXPERT_WAVES, EXPERT_TRIPS, EXPERT_DOWN_ROWS = 4, 1, 1
FORK_TG128 = 80.0  # the best gfx906 llama.cpp fork's published Qwen3-30B-A3B Q4_0 tg128, t/s


def audit_rows(path):
    """(type id, epilogue) -> (waves/SIMD, round trips per iteration) for the 1-row decode matvecs."""
    out = {}
    for line in open(path):
        m = re.match(r"\| `matvec_q<(\d+), 1, (true|false), (\d), (\d), (\d)>` \|.*?\| (\d+) \((\w+|blocks/CU)\) \| \d+ \| "
                     r"\d+, \d+, \d+, \d+ \((\d+)\)", line)
        if not m:
            continue
        epi = int(m.group(3))
        sw, r, u, _ = KERNEL[epi]
        if (m.group(2) == "true") == sw and int(m.group(4)) == r and int(m.group(5)) == u:
            out[(int(m.group(1)), epi)] = (int(m.group(6)), int(m.group(8)))
    return out


def alu_seconds(rows, n_in, type_name, act_rows, mats=1):
    """VALU-bound seconds of `rows` x `n_in` weights against `act_rows` activation rows."""
    d, per = VALU_PER_CHUNK[type_name]
    return rows * n_in / 32 * mats * (d + act_rows * per) / (CUS * 64 * CLOCK)


def matvec_bounds(rows, n_in, type_name, epi, audit, lat):
    """(bandwidth-bound s, latency-bound s, bytes, waves/SIMD, trips, iterations) of one matvec."""
    waves, trips = audit[(TYPE_ID[type_name], epi)]
    swiglu, r, u, passes = KERNEL[epi]
    trips = TRIPS_OVERRIDE or trips
    mats = 2 if swiglu else 1
    bytes_ = rows * n_in * BPW[type_name] * mats
    iters = math.ceil(n_in / (32 * 64 * u))
    # A wave takes R rows at once and P row sets in turn; a block epilogue ends with
    # one more latency (the chunk's q8 through LDS, then its stores).
    lifetime = passes * (iters * trips * lat + lat) + (lat if epi in (1, 2) else 0)
    rounds = max(1.0, rows / (r * passes) / (waves * SIMDS * CUS))
    return max(bytes_ / BW, alu_seconds(rows, n_in, type_name, 1, mats)), rounds * lifetime, bytes_, waves, trips, iters


def matvec_time(rows, n_in, type_name, epi, audit, lat, gap):
    bw_s, lat_s, bytes_, _, _, _ = matvec_bounds(rows, n_in, type_name, epi, audit, lat)
    return max(bw_s, lat_s) + gap, bytes_


def layer_types(quant, layer):
    """(base, v, down) weight types of one llama2-7b layer in a `quant` file: llama.cpp's
    Q4_K_M mix keeps attn_v and every other ffn_down (even layers) in Q6_K."""
    base = "Q4_K" if quant == "Q4_K_M" else quant
    v_type = "Q6_K" if quant == "Q4_K_M" else base
    down = "Q6_K" if quant == "Q4_K_M" and layer % 2 == 0 else base
    return base, v_type, down


def token_time(quant, audit, lat, gap):
    """Seconds and bytes per decode token; quant is Q4_0, Q8_0, Q4_K_M, IQ4_XS or MXFP4
    (the output matrix Q6_K in every file, as llama.cpp's mixes)."""
    t = b = 0.0
    small = 2 * lat + gap

    def mv(rows, n_in, ty, epi):
        nonlocal t, b
        dt, db = matvec_time(rows, n_in, ty, epi, audit, lat, gap)
        t += dt
        b += db

    for layer in range(LAYERS):
        base, v_type, down = layer_types(quant, layer)
        # 7 kernels: 6 matvecs with their epilogues (q, k, v one matrix per launch,
        # each with rope and the cache store; o and down with residual + next norm +
        # q8; gate/up with SwiGLU and q8 of h) and the attention.
        t += SMALL_PER_LAYER * small
        mv(E, E, base, 3), mv(E, E, base, 3)    # q, k
        mv(E, E, v_type, 3)                     # v
        mv(E, E, base, 1)                       # o
        mv(F, E, base, 2)                       # gate/up + SwiGLU
        mv(E, F, down, 1)                       # down
    t += small                            # final norm + q8
    mv(VOCAB, E, "Q6_K", 0)               # output
    t += small                            # argmax
    return t, b


def tp_token_time(quant, audit, lat, gap, ranks, sum_s):
    """Seconds per decode token on each of `ranks` MI50s under tensor parallel (issue 27):
    q, k, v and gate/up by output rows, o and down by input columns as plain matvecs (their
    device's part, no epilogue), then per block one all-reduce (RCCL on gfx906: the peer
    sums are off there, arch/gfx906.h kPeerSums) of sum_s and the next block's input kernel
    (x += sum, norm, q8: a small kernel); the output matrix split by vocabulary rows, each
    device its share (the host merges the argmaxes)."""
    t = 0.0
    small = 2 * lat + gap

    def mv(rows, n_in, ty, epi):
        nonlocal t
        t += matvec_time(rows, n_in, ty, epi, audit, lat, gap)[0]

    for layer in range(LAYERS):
        base, v_type, down = layer_types(quant, layer)
        t += SMALL_PER_LAYER * small
        mv(E // ranks, E, base, 3), mv(E // ranks, E, base, 3)
        mv(E // ranks, E, v_type, 3)
        mv(E, E // ranks, base, 0)               # o: this device's part
        t += sum_s + small                       # all-reduce, then x += sum, norm, q8
        mv(F // ranks, E, base, 2)
        mv(E, F // ranks, down, 0)               # down: this device's part
        t += sum_s + small
    t += small
    mv(VOCAB // ranks, E, "Q6_K", 0)             # output: this device's vocabulary rows
    t += small
    return t


def expert_bounds(rows, n_in, type_name, swiglu, lat, rows_per_wave=1):
    """(bandwidth-bound s, latency-bound s, bytes, iterations) of one grouped expert matvec
    over `rows` output rows (the chosen experts' rows together): one chunk per lane and
    iteration, `rows_per_wave` rows at once."""
    bytes_ = rows * n_in * BPW[type_name] * (2 if swiglu else 1)
    iters = math.ceil(n_in / (32 * 64))
    lifetime = iters * EXPERT_TRIPS * lat + lat
    rounds = max(1.0, rows / rows_per_wave / (EXPERT_WAVES * SIMDS * CUS))
    return bytes_ / BW, rounds * lifetime, bytes_, iters


def moe_token_time(audit, lat, gap, quant="Q4_0"):
    """Seconds and bytes per qwen3moe-30b-a3b decode token (B=1); weights in `quant`, output Q6_K."""
    t = b = 0.0
    small = 2 * lat + gap
    E, L, Q, KV, F, K = MOE_E, MOE_LAYERS, MOE_Q, MOE_KV, MOE_FF, MOE_USED

    def mv(rows, n_in, ty, epi):
        nonlocal t, b
        dt, db = matvec_time(rows, n_in, ty, epi, audit, lat, gap)
        t += dt
        b += db

    for _ in range(L):
        # Attention block: q, k, v plain (rope and the q/k head norms in their own
        # kernels), o with residual + next norm + q8, the rest small.
        mv(Q, E, quant, 0), mv(KV, E, quant, 0), mv(KV, E, quant, 0)   # q, k, v
        mv(E, Q, quant, 1)                                              # o
        t += max(0, MOE_ATTN_LAUNCHES - 4) * small                      # head norms, rope + store, attention
        # MoE FFN: the F32 router (128 x 2048, 1 MiB), then the chosen experts.
        router = MOE_EXPERTS * E * BPW["F32"]
        t += max(router / BW, 2 * lat) + gap
        b += router
        for rows, n_in, sw, r in ((K * F, E, True, 1), (K * E, F, False, EXPERT_DOWN_ROWS)):
            bw_s, lat_s, db, _ = expert_bounds(rows, n_in, quant, sw, lat, r)  # gate/up + SwiGLU; down
            t += max(bw_s, lat_s) + gap
            b += db
        t += max(0, MOE_FFN_LAUNCHES - 3) * small                       # route + sort, combine + norm
    t += small                            # final norm + q8
    mv(MOE_VOCAB, E, "Q6_K", 0)           # output
    t += small                            # argmax
    return t, b


LDS_BYTES_PER_CLK = 128


def prompt_at_depth(rows, depth, overhead, heads=32, hd=128, quant="Q4_0", overlap=False):
    """Seconds of a `rows`-row prompt at `depth` (llama2-7b shape): (attention, matmuls)."""
    # Attention: (row, position) pairs over all layers and heads, causal inside the chunk.
    pairs = LAYERS * heads * rows * (depth + (rows + 1) / 2)
    tile_pairs = 4 * 64  # a wave's 4 rows x a 64-position tile
    waves_tiles = pairs / tile_pairs
    dot2_clk = waves_tiles * 512 * 64 / (CUS * 64)          # v_dot2 lane-ops / (64 lanes a clock per CU)
    lds_clk = waves_tiles * 32 * 1024 / (CUS * LDS_BYTES_PER_CLK)
    attn = max(dot2_clk, lds_clk) * (1 + overhead) / CLOCK
    # Matmuls: the dot4 GEMM (prompt_gemm below; the conservative bound, VALU and LDS
    # not overlapped, unless overlap).
    mm = prompt_gemm(rows, quant, overlap)
    return attn, mm


# The dot4 GEMM (arch/gfx906.h kGemmTile) and its per-type VALU estimates.
GEMM_BM, GEMM_BN, GEMM_KC, GEMM_BLOCKS_PER_CU, GEMM_WAVES = 64, 64, 2, 2, 4
# float instructions per thread and chunk (16 outputs): non-split 3 a pair, +1 for a min
# (Q4_K: -dmin*min*dsum), per-half types (Q6_K) 3 a pair and half.
GEMM_FLOAT = {"Q4_0": 48, "Q8_0": 48, "Q4_K": 64, "Q6_K": 96, "IQ4_XS": 48, "MXFP4": 48}
# staging per thread and step: ~35 address / select / record instructions plus the decode
# of half a chunk (half of VALU_PER_CHUNK's decode estimate).
GEMM_STAGE = {q: 35 + VALU_PER_CHUNK[q][0] / 2 for q in VALU_PER_CHUNK}


def gemm_seconds(n_out, n_in, rows, quant, swiglu=False, overlap=True):
    """Seconds of y[rows][n_out] = x @ W^T (SwiGLU: G and U of n_out rows each) on the GEMM."""
    out_rows = GEMM_BM // 2 if swiglu else GEMM_BM
    blocks = math.ceil(n_out / out_rows) * math.ceil(rows / GEMM_BN)
    steps = math.ceil(n_in / 32 / GEMM_KC)
    valu = GEMM_KC * (128 + GEMM_FLOAT[quant] + 8) + GEMM_STAGE[quant]   # per wave and step
    simd_clk = valu * 4 * GEMM_BLOCKS_PER_CU * GEMM_WAVES / SIMDS         # a CU's blocks' waves, spread on 4 SIMDs
    lds_clk = GEMM_BLOCKS_PER_CU * GEMM_WAVES * (GEMM_KC * 16 * 16 + 2 * 16) * 64 / LDS_BYTES_PER_CLK
    step_clk = max(simd_clk, lds_clk) if overlap else simd_clk + lds_clk
    rounds = math.ceil(blocks / (GEMM_BLOCKS_PER_CU * CUS))
    compute = rounds * steps * step_clk / CLOCK
    dram = n_out * n_in * BPW[quant] * (2 if swiglu else 1) / BW
    return max(compute, dram)


def prompt_gemm(rows, quant, overlap):
    """Seconds of the matmuls of a `rows`-row llama2-7b prompt on the GEMM (Q4_K_M: v and
    half the down projections Q6_K); the output matrix for the last row only (a matvec)."""
    t = 0.0
    for layer in range(LAYERS):
        base, v, down = layer_types(quant, layer)
        t += 3 * gemm_seconds(E, E, rows, base, overlap=overlap) if v == base else \
            2 * gemm_seconds(E, E, rows, base, overlap=overlap) + gemm_seconds(E, E, rows, v, overlap=overlap)
        t += gemm_seconds(E, E, rows, base, overlap=overlap)                 # o
        t += gemm_seconds(F, E, rows, base, swiglu=True, overlap=overlap)    # gate/up + SwiGLU
        t += gemm_seconds(E, F, rows, down, overlap=overlap)                 # down
    t += VOCAB * E * BPW["Q6_K"] / BW                                         # output, last row
    return t


def audit_batch_rows(path):
    """(type id, swiglu) -> (waves/SIMD, round trips per iteration) of the 8-row batch matvecs."""
    out = {}
    for line in open(path):
        m = re.match(r"\| `matvec_q<(\d+), 8, (true|false), 0, 1, (\d)>` \|.*?\| (\d+) \((\w+|blocks/CU)\) \| \d+ \| "
                     r"\d+, \d+, \d+, \d+ \((\d+)\)", line)
        if m:
            out[(int(m.group(1)), m.group(2) == "true")] = (int(m.group(4)), int(m.group(6)), int(m.group(3)))
    return out


def matvec8_seconds(rows, quant, batch_audit, lat, gap=1e-6):
    """The 8-row batch matvec's matmul seconds for `rows` rows of a llama2-7b step (Q4_0, Q8_0
    or Q4_K weights): per 8-row pass and matrix the larger of its bandwidth, VALU and latency
    bounds (the audit's waves and round trips per iteration, one output row per wave, U
    chunks per lane and iteration), plus a launch gap."""
    t = 0.0
    for n_out, n_in, sw in ((E, E, False),) * 4 + ((F, E, True), (E, F, False)):
        waves, trips, u = batch_audit[(TYPE_ID[quant], sw)]
        mats = 2 if sw else 1
        bw = n_out * n_in * BPW[quant] * mats / BW
        alu = alu_seconds(n_out, n_in, quant, 8, mats)
        iters = math.ceil(n_in / (32 * 64 * u))
        latency = max(1.0, n_out / (waves * SIMDS * CUS)) * (iters * trips * lat + lat)
        t += max(bw, alu, latency) + gap
    return math.ceil(rows / 8) * LAYERS * t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--audit", default="docs/GFX906_AUDIT.md")
    ap.add_argument("--lat", default="0.6,0.9,1.2", help="loaded DRAM latency, microseconds")
    ap.add_argument("--gap", default="1,3", help="gap per kernel launch in a replayed graph, microseconds")
    ap.add_argument("--trips", type=int, default=0, help="what-if: round trips per matvec iteration")
    ap.add_argument("--launches-per-layer", type=int, default=7, help="what-if: kernels per layer (6 matvecs + small)")
    ap.add_argument("--moe-attn-launches", type=int, default=7,
                    help="what-if: qwen3moe attention-block kernels per layer (4 matvecs + small)")
    ap.add_argument("--moe-ffn-launches", type=int, default=5,
                    help="what-if: qwen3moe expert-FFN kernels per layer (router, gate/up, down + small)")
    ap.add_argument("--moe-expert-trips", type=int, default=1,
                    help="what-if: round trips per iteration of the grouped expert matvec")
    ap.add_argument("--moe-down-rows", type=int, default=1,
                    help="what-if: output rows per wave of the grouped expert down projection")
    ap.add_argument("--attn-overhead", type=float, default=0.5,
                    help="prompt model: softmax, staging and barriers as a fraction of the v_dot2 time")
    ap.add_argument("--depth", type=int, default=8192, help="prompt model: cache depth before the 512-row prompt")
    ap.add_argument("--tp-sum-us", type=lambda v: [float(x) for x in v.split(",")], default=[5, 10, 20, 40],
                    help="tensor-parallel model: an all-reduce's time per decode sum, microseconds")
    ap.add_argument("--tp-ranks", type=lambda v: [int(x) for x in v.split(",")], default=[2, 4],
                    help="tensor-parallel model: device counts")
    a = ap.parse_args()
    global TRIPS_OVERRIDE, SMALL_PER_LAYER, MOE_ATTN_LAUNCHES, MOE_FFN_LAUNCHES, EXPERT_TRIPS, EXPERT_DOWN_ROWS
    TRIPS_OVERRIDE = a.trips or None
    SMALL_PER_LAYER = max(0, a.launches_per_layer - 6)
    MOE_ATTN_LAUNCHES, MOE_FFN_LAUNCHES = a.moe_attn_launches, a.moe_ffn_launches
    EXPERT_TRIPS, EXPERT_DOWN_ROWS = a.moe_expert_trips, a.moe_down_rows
    audit = audit_rows(a.audit)
    lats = [float(x) * 1e-6 for x in a.lat.split(",")]
    gaps = [float(x) * 1e-6 for x in a.gap.split(",")]
    print("| type | bytes/token | LAT us | GAP us | tg128 t/s | % of 860 GB/s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for q in ("Q4_0", "Q8_0", "Q4_K_M", "IQ4_XS", "MXFP4"):
        for lat in lats:
            for gap in gaps:
                t, b = token_time(q, audit, lat, gap)
                print(f"| {q} | {b / 1e9:.2f} GB | {lat * 1e6:.1f} | {gap * 1e6:.0f} | {1 / t:.1f} | "
                      f"{100 * b / t / BW:.0f}% |")
    print()
    print("Per kernel (Q4_0, LAT 0.9 us, GAP 1 us): rows x n_in, waves/SIMD, trips, bandwidth-bound vs latency-bound us")
    lat, gap = 0.9e-6, 1e-6
    for name, rows, n_in, ty, epi in (("q/k/v (rope)", E, E, "Q4_0", 3), ("o (residual + norm)", E, E, "Q4_0", 1),
                                       ("gate/up (+ q8 of h)", F, E, "Q4_0", 2), ("down (residual + norm)", E, F, "Q4_0", 1),
                                       ("output", VOCAB, E, "Q6_K", 0)):
        bw_s, lat_s, _, waves, trips, iters = matvec_bounds(rows, n_in, ty, epi, audit, lat)
        bw_us, lat_us = bw_s * 1e6, lat_s * 1e6
        print(f"- {name}: {rows} x {n_in} {ty}{' x2' if KERNEL[epi][0] else ''}, {waves} waves/SIMD, {trips} trips x "
              f"{iters} iterations: {bw_us:.1f} us at 860 GB/s, {lat_us:.1f} us latency-bound")

    print()
    print("Tensor parallel (issue 27), llama2-7b decode B=1 on 2 and 4 MI50s, LAT 0.9 us, GAP 1 us: tg128 t/s "
          "and the ratio to one MI50, by the all-reduce's time per sum (RCCL, 16 KB; not measured: it depends "
          "on PCIe or xGMI and the box). 64 sums a token.")
    print("| type | one MI50 | sum us | " + " | ".join(f"TP{r} t/s | TP{r} ratio" for r in a.tp_ranks) + " |")
    print("| --- | ---: | ---: |" + " ---: | ---: |" * len(a.tp_ranks))
    lat, gap = 0.9e-6, 1e-6
    for q in ("Q4_0", "Q4_K_M"):
        one = token_time(q, audit, lat, gap)[0]
        for sum_us in a.tp_sum_us:
            cells = []
            for r in a.tp_ranks:
                tp = tp_token_time(q, audit, lat, gap, r, sum_us * 1e-6)
                cells.append(f"{1 / tp:.1f} | {one / tp:.2f}")
            print(f"| {q} | {1 / one:.1f} | {sum_us:g} | " + " | ".join(cells) + " |")

    launches = MOE_LAYERS * (MOE_ATTN_LAUNCHES + MOE_FFN_LAUNCHES) + 3
    print()
    print(f"qwen3moe-30b-a3b decode (B=1): {MOE_USED} of {MOE_EXPERTS} experts, "
          f"{MOE_ATTN_LAUNCHES} + {MOE_FFN_LAUNCHES} kernels per layer, {launches} per token; grouped expert "
          f"matvec at {EXPERT_TRIPS} round trip(s) per iteration, {EXPERT_DOWN_ROWS} down row(s) per wave")
    print("| type | bytes/token | LAT us | GAP us | tg128 t/s | % of 860 GB/s | best gfx906 fork t/s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for lat in lats:
        for gap in gaps:
            t, b = moe_token_time(audit, lat, gap)
            print(f"| Q4_0 | {b / 1e9:.2f} GB | {lat * 1e6:.1f} | {gap * 1e6:.0f} | {1 / t:.1f} | "
                  f"{100 * b / t / BW:.0f}% | ~{FORK_TG128:.0f} |")
    print()
    print("Per kernel (Q4_0, LAT 0.9 us, GAP 1 us), per layer x 48:")
    lat, gap = 0.9e-6, 1e-6
    for name, rows, n_in, ty, epi in (("q", MOE_Q, MOE_E, "Q4_0", 0), ("k, v (each)", MOE_KV, MOE_E, "Q4_0", 0),
                                       ("o (residual + norm)", MOE_E, MOE_Q, "Q4_0", 1),
                                       ("output (once)", MOE_VOCAB, MOE_E, "Q6_K", 0)):
        bw_s, lat_s, _, waves, trips, iters = matvec_bounds(rows, n_in, ty, epi, audit, lat)
        print(f"- {name}: {rows} x {n_in} {ty}{' x2' if KERNEL[epi][0] else ''}, {waves} waves/SIMD, {trips} trips x "
              f"{iters} iterations: {bw_s * 1e6:.1f} us at 860 GB/s, {lat_s * 1e6:.1f} us latency-bound")
    for name, rows, n_in, sw, r in (("8 experts' gate/up", MOE_USED * MOE_FF, MOE_E, True, 1),
                                    ("8 experts' down", MOE_USED * MOE_E, MOE_FF, False, EXPERT_DOWN_ROWS)):
        bw_s, lat_s, _, iters = expert_bounds(rows, n_in, "Q4_0", sw, lat, r)
        print(f"- {name}: {rows} x {n_in} Q4_0{' x2' if sw else ''}, {EXPERT_WAVES} waves/SIMD, {r} row(s) per wave, "
              f"{EXPERT_TRIPS} trips x {iters} iterations: {bw_s * 1e6:.1f} us at 860 GB/s, "
              f"{lat_s * 1e6:.1f} us latency-bound")
    router = MOE_EXPERTS * MOE_E * BPW["F32"]
    print(f"- router: {MOE_EXPERTS} x {MOE_E} F32 ({router / 2**20:.0f} MiB): {router / BW * 1e6:.1f} us at 860 GB/s, "
          f"{2 * lat * 1e6:.1f} us latency-bound")


    print()
    print(f"llama2-7b Q4_0 pp512 @ d{a.depth} (tiled v_dot2 attention, dot4 GEMM matmuls without overlap; "
          f"attention overhead {a.attn_overhead:.0%}):")
    for depth in (0, a.depth):
        attn, mm = prompt_at_depth(512, depth, a.attn_overhead)
        print(f"- d{depth}: attention {attn * 1e3:.1f} ms + matmuls {mm * 1e3:.1f} ms -> "
              f"{512 / (attn + mm):.0f} t/s (attention alone {512 / attn:.0f} t/s)")
    print("pp512 (d0) by weight type, same model (the codebook types' decode against Q4_0's):")
    for q in ("Q4_0", "IQ4_XS", "MXFP4"):
        attn, mm = prompt_at_depth(512, 0, a.attn_overhead, quant=q)
        print(f"- {q}: matmuls {mm * 1e3:.1f} ms -> {512 / (attn + mm):.0f} t/s")

    print()
    dot4_peak = CUS * 64 * 4 * 2 * CLOCK  # ops/s: 64 lanes x 4 MACs a clock per CU
    print(f"llama2-7b pp512 on the dot4 GEMM (tile {GEMM_BM}x{GEMM_BN}, K steps of {GEMM_KC} chunks, "
          f"{GEMM_BLOCKS_PER_CU} blocks/CU); VALU and LDS overlapped / not overlapped; attention at d0 as above:")
    print("| type | matmuls ms (overlap) | pp512 t/s (overlap) | matmuls ms (no overlap) | pp512 t/s (no overlap) | "
          "matmul TOPS (no overlap .. overlap) | % of the 44 TOPS measured dot4 peak |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    attn0, _ = prompt_at_depth(512, 0, a.attn_overhead)
    macs = 512 * LAYERS * (4 * E * E + 3 * E * F)
    for q in ("Q4_0", "Q8_0", "Q4_K_M"):
        hi, lo = prompt_gemm(512, q, True), prompt_gemm(512, q, False)
        tops, tops_hi = 2 * macs / lo / 1e12, 2 * macs / hi / 1e12
        print(f"| {q} | {hi * 1e3:.1f} | {512 / (hi + attn0):.0f} | {lo * 1e3:.1f} | {512 / (lo + attn0):.0f} | "
              f"{tops:.1f} .. {tops_hi:.1f} | {100 * tops / 44:.0f}% .. {100 * tops_hi / 44:.0f}% |")
    print(f"(theoretical dot4 peak {dot4_peak / 1e12:.1f} TOPS; llama.cpp's published MI50 pp512 for 7B Q4_0: 1229 t/s)")
    batch = audit_batch_rows(a.audit)
    print("The 8-row batch matvec's matmuls for the same prompt (bandwidth, VALU and its audited latency: "
          "round trips x LAT per iteration, 3 waves/SIMD):")
    for q in ("Q4_0", "Q8_0", "Q4_K"):
        for lat in lats:
            mm = matvec8_seconds(512, q, batch, lat)
            print(f"- {q} LAT {lat * 1e6:.1f} us: matmuls {mm * 1e3:.0f} ms -> pp512 {512 / (mm + attn0):.0f} t/s")
    print("GEMM against the 8-row matvec, llama2-7b Q4_0 matmuls of one step (ms), by rows (the crossover sets "
          "arch/gfx906.h's kGemmMinRows):")
    print("| rows | 8-row matvec LAT " + " | 8-row matvec LAT ".join(f"{x * 1e6:.1f} us" for x in lats) +
          " | GEMM (no overlap) | GEMM (overlap) |")
    print("| ---: |" + " ---: |" * (len(lats) + 2))
    for rows in (8, 16, 24, 32, 48, 64, 128):
        mv = " | ".join(f"{matvec8_seconds(rows, 'Q4_0', batch, lat) * 1e3:.2f}" for lat in lats)
        print(f"| {rows} | {mv} | {prompt_gemm(rows, 'Q4_0', False) * 1e3:.2f} | {prompt_gemm(rows, 'Q4_0', True) * 1e3:.2f} |")


if __name__ == "__main__":
    main()
