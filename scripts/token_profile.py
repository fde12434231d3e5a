#!/usr/bin/env python3
"""Sum an ncu CSV (metrics gpu__time_duration.sum and, optionally, dram__bytes_read.sum; one row per
kernel launch and metric) by kernel: launches, mean us, mean MB read, GB/s, share of the
summed time. Kernels are keyed by name (namespaces dropped, template arguments kept,
shortened) and grid, so the matvec of each role and type is a line of its own.

  scripts/token_profile.py ncu.csv [--top 30]
"""
import argparse
import csv
import re
import sys
from collections import defaultdict


def short_name(name: str) -> str:
    if name.startswith("void "):
        name = name[5:]
    if name.endswith(")"):  # drop the parameter list: the "(" that matches the last ")"
        depth = 0
        for i in range(len(name) - 1, -1, -1):
            depth += name[i] == ")"
            depth -= name[i] == "("
            if depth == 0:
                name = name[:i]
                break
    name = re.sub(r"\(anonymous namespace\)::|<?unnamed>::|vega::gpu::|vega::|ops::|arch::", "", name)
    name = re.sub(r"\(GgmlType\)(\d+)", r"type \1", name)
    return name if len(name) <= 90 else name[:87] + "..."


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args()
    launches = defaultdict(dict)  # id -> {metric: value, key}
    with open(args.csv, newline="") as f:
        rows = [r for r in csv.reader(f)]
    head = next((i for i, r in enumerate(rows) if "Metric Name" in r), None)
    if head is None:
        print("token_profile: no ncu metric table in", args.csv)
        return 1
    cols = {c: i for i, c in enumerate(rows[head])}
    for r in rows[head + 1:]:
        if len(r) < len(cols):
            continue
        lid = r[cols["ID"]]
        d = launches[lid]
        d["key"] = (short_name(r[cols["Kernel Name"]]), r[cols["Grid Size"]])
        unit = r[cols["Metric Unit"]]
        v = float(r[cols["Metric Value"]].replace(",", ""))
        m = r[cols["Metric Name"]]
        if m.startswith("gpu__time_duration"):
            d["us"] = v * {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}[unit]
        elif m.startswith("dram__bytes_read"):
            scale = {"byte": 1, "B": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "KB": 1e3, "MB": 1e6, "GB": 1e9}[unit]
            d["bytes"] = v * scale
    agg = defaultdict(lambda: [0, 0.0, 0.0])
    for d in launches.values():
        if "us" not in d:
            continue
        a = agg[d["key"]]
        a[0] += 1
        a[1] += d["us"]
        a[2] += d.get("bytes", 0.0)
    total = sum(a[1] for a in agg.values())
    print(f"{len(launches)} launches, {total:.0f} us summed (each kernel alone)")
    print(f"{'launches':>8} {'mean us':>8} {'mean MB':>8} {'GB/s':>7} {'share':>6}  kernel [grid]")
    for key, (n, us, by) in sorted(agg.items(), key=lambda kv: -kv[1][1])[: args.top]:
        gbs = by / (us * 1e-6) / 1e9 if us > 0 else 0.0
        print(f"{n:8d} {us / n:8.2f} {by / n / 1e6:8.2f} {gbs:7.0f} {100 * us / total:5.1f}%  {key[0]} {key[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
