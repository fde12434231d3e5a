#!/usr/bin/env python3
"""Row-wise normalized MSE between two raw float32 logits files [rows][n_vocab]
(as `vega eval --logits-out` writes them): sum((a-b)^2) / sum(b^2) per row.
Prints the worst row; exits 1 when it is above the bound, a value is not finite,
or the files differ in size.   logits_nmse.py A B N_VOCAB BOUND"""
import array
import math
import sys


def main():
    a_path, b_path, n_vocab, bound = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    a, b = array.array("f"), array.array("f")
    with open(a_path, "rb") as f:
        a.frombytes(f.read())
    with open(b_path, "rb") as f:
        b.frombytes(f.read())
    if len(a) != len(b) or len(a) % n_vocab:
        print(f"size mismatch: {len(a)} vs {len(b)} floats (n_vocab {n_vocab})")
        return 1
    worst, worst_row = 0.0, -1
    for r in range(len(a) // n_vocab):
        num = den = 0.0
        for x, y in zip(a[r * n_vocab:(r + 1) * n_vocab], b[r * n_vocab:(r + 1) * n_vocab]):
            if not math.isfinite(x):
                print(f"row {r}: non-finite value {x}")
                return 1
            num += (x - y) * (x - y)
            den += y * y
        e = num / den if den > 0 else num
        if e > worst:
            worst, worst_row = e, r
    ok = worst <= bound
    print(f"rows {len(a) // n_vocab}, worst NMSE {worst:.3e} (row {worst_row}), bound {bound:g}: {'ok' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
