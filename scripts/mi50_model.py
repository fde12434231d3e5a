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

  scripts/mi50_model.py [--audit docs/GFX906_AUDIT.md] [--lat 0.6,0.9,1.2] [--gap 1,3]
                        [--trips N]  (what-if: every decode matvec at N round trips per iteration)
                        [--launches-per-layer N]  (what-if: N kernels per layer instead of 7)
"""
import argparse
import math
import re

BW = 860e9  # bytes/s, what MI50 users measure with plain reads
CUS, SIMDS = 60, 4
E, F, LAYERS, VOCAB = 4096, 11008, 32, 32000
# bytes per weight; the llama.cpp mixes: Q4_K_M keeps attn_v and half of ffn_down in Q6_K,
# the output matrix is Q6_K in all three files.
BPW = {"Q4_0": 18 / 32, "Q8_0": 34 / 32, "Q4_K": 144 / 256, "Q6_K": 210 / 256}
TYPE_ID = {"Q4_0": 2, "Q8_0": 8, "Q4_K": 12, "Q6_K": 14}
# Decode matvec kernels by epilogue (src/backend/gpu/kernels/matvec.cu, arch/gfx906.h):
# EPI -> (gate/up pair, rows per wave R, chunks per lane and iteration U, row sets in turn P).
# 0 plain (the output matrix), 1 residual + norm + q8 (o, down; 8-wave blocks, 4 passes),
# 2 gate/up + SwiGLU + q8 of h (8-wave blocks, 4 passes), 3 rope + cache store (q, k, v).
KERNEL = {0: (False, 1, 2, 1), 1: (False, 1, 2, 4), 2: (True, 1, 1, 4), 3: (False, 2, 1, 1)}


TRIPS_OVERRIDE = None
SMALL_PER_LAYER = 1  # attention (split + merge in one launch)


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
    return bytes_ / BW, rounds * lifetime, bytes_, waves, trips, iters


def matvec_time(rows, n_in, type_name, epi, audit, lat, gap):
    bw_s, lat_s, bytes_, _, _, _ = matvec_bounds(rows, n_in, type_name, epi, audit, lat)
    return max(bw_s, lat_s) + gap, bytes_


def token_time(quant, audit, lat, gap):
    """Seconds and bytes per decode token; quant is Q4_0, Q8_0 or Q4_K_M."""
    t = b = 0.0
    small = 2 * lat + gap

    def mv(rows, n_in, ty, epi):
        nonlocal t, b
        dt, db = matvec_time(rows, n_in, ty, epi, audit, lat, gap)
        t += dt
        b += db

    for layer in range(LAYERS):
        base = "Q4_K" if quant == "Q4_K_M" else quant
        v_type = "Q6_K" if quant == "Q4_K_M" else base
        down = "Q6_K" if quant == "Q4_K_M" and layer % 2 == 0 else base
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--audit", default="docs/GFX906_AUDIT.md")
    ap.add_argument("--lat", default="0.6,0.9,1.2", help="loaded DRAM latency, microseconds")
    ap.add_argument("--gap", default="1,3", help="gap per kernel launch in a replayed graph, microseconds")
    ap.add_argument("--trips", type=int, default=0, help="what-if: round trips per matvec iteration")
    ap.add_argument("--launches-per-layer", type=int, default=7, help="what-if: kernels per layer (6 matvecs + small)")
    a = ap.parse_args()
    global TRIPS_OVERRIDE, SMALL_PER_LAYER
    TRIPS_OVERRIDE = a.trips or None
    SMALL_PER_LAYER = max(0, a.launches_per_layer - 6)
    audit = audit_rows(a.audit)
    lats = [float(x) * 1e-6 for x in a.lat.split(",")]
    gaps = [float(x) * 1e-6 for x in a.gap.split(",")]
    print("| type | bytes/token | LAT us | GAP us | tg128 t/s | % of 860 GB/s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for q in ("Q4_0", "Q8_0", "Q4_K_M"):
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


if __name__ == "__main__":
    main()
