#!/usr/bin/env python3
"""Were greedy ids argmaxes of a reference's logits? For runs whose ids differ from a
reference run's (another device, another split, another batch): each prompt's prompt +
generated ids (a `vega run --ids-out` file) are teacher-forced through `vega eval` with
the reference's options, and every generated id's logit is compared with that row's
maximum. A correct run on another summation order picks the argmax or a near tie
(margin = max - logit[id] about the logits' rounding); a wrong one picks ids far below.

  ids_near_argmax.py VEGA MODEL IDS_FILE TOL [vega eval options, e.g. --device 0]

Prints one line per prompt (steps, steps on the argmax, the worst margin and where, the
row's top-2 gap there, the logits' standard deviation for scale, the smallest top-2 gap
of any step: how near the reference's own ties come); exits 1 when any
margin is above TOL (logit units) or eval fails."""
import array
import math
import os
import subprocess
import sys
import tempfile


def read_runs(path):
    """[(prompt ids, generated ids)]: --prompts-file format (prompt TAB generated, one
    line a prompt) or the single-prompt format (two lines)."""
    with open(path) as f:
        lines = [l.rstrip("\n") for l in f if l.strip()]
    if lines and "\t" in lines[0]:
        return [tuple([int(t) for t in part.split()] for part in l.split("\t", 1)) for l in lines]
    if len(lines) != 2:
        raise SystemExit(f"{path}: expected two lines (prompt ids, generated ids) or prompt<TAB>generated lines")
    return [([int(t) for t in lines[0].split()], [int(t) for t in lines[1].split()])]


def main():
    if len(sys.argv) < 5:
        print(__doc__)
        return 2
    vega, model, ids_path, tol, extra = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5:]
    runs = read_runs(ids_path)
    worst_all = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for i, (prompt, gen) in enumerate(runs):
            if not prompt or not gen:
                print(f"prompt {i}: nothing generated")
                continue
            toks, logits = os.path.join(tmp, "t.txt"), os.path.join(tmp, "l.bin")
            with open(toks, "w") as f:
                # The last generated id is never fed back: its row is the one before it.
                f.write(" ".join(map(str, prompt)) + "\n" + " ".join(map(str, gen[:-1])) + "\n")
            r = subprocess.run([vega, "eval", "-m", model, "--tokens-file", toks, "--logits-out", logits, "-q", *extra],
                               capture_output=True, text=True)
            if r.returncode != 0:
                print(f"prompt {i}: vega eval failed (rc {r.returncode}): {r.stderr.strip()[-300:]}")
                return 1
            a = array.array("f")
            with open(logits, "rb") as f:
                a.frombytes(f.read())
            rows = len(prompt) + len(gen) - 1
            if len(a) % rows:
                print(f"prompt {i}: {len(a)} floats is not {rows} rows")
                return 1
            n_vocab = len(a) // rows
            on_max, worst, worst_j, gap_there, sd_there, min_gap = 0, -1.0, -1, 0.0, 0.0, math.inf
            for j, g in enumerate(gen):
                row = a[(len(prompt) - 1 + j) * n_vocab:(len(prompt) + j) * n_vocab]
                if not all(math.isfinite(x) for x in row):
                    print(f"prompt {i}, step {j}: non-finite logits")
                    return 1
                mx = max(row)
                margin = mx - row[g]
                on_max += margin == 0.0
                top = sorted(row, reverse=True)[:2]
                min_gap = min(min_gap, top[0] - top[1])
                if margin > worst:
                    mean = sum(row) / n_vocab
                    worst, worst_j, gap_there = margin, j, top[0] - top[1]
                    sd_there = math.sqrt(sum((x - mean) ** 2 for x in row) / n_vocab)
            worst_all = max(worst_all, worst)
            print(f"prompt {i}: {len(gen)} steps, {on_max} on the argmax; worst margin {worst:.3g} at step {worst_j} "
                  f"(top-2 gap there {gap_there:.3g}, logits sd {sd_there:.3g}); smallest top-2 gap {min_gap:.3g}")
    ok = worst_all <= tol
    print(f"worst margin {worst_all:.3g} {'<=' if ok else '>'} {tol:g}: {'near-argmax' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
