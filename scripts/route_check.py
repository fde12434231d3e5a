#!/usr/bin/env python3
"""Checks the line `vega eval --routes-in` printed (model/route_trace.h) in LOG.

   route_check.py LOG BOUND
Prints one short summary (nothing for a model without routed layers); exit 1 when the
router logits' NMSE exceeds BOUND, a recorded expert list is not the CPU rule's top k of
the recorded logits, a recorded weight is off by more than 1e-4, or the line is missing.
"""
import re
import sys

WEIGHT_BOUND = 1e-4

log, bound = sys.argv[1], float(sys.argv[2])
text = open(log, errors="replace").read()
m = re.search(r"routes: replayed the experts of (\d+) rows x layers; router logits nmse (\S+) \(worst entry\); "
              r"(\d+) rows not this rule's top k of the recorded logits; weights off by (\S+) at most; "
              r"(\d+) differ from this device's own top k, widest gap (\S+) logits \((\S+) standard deviations", text)
if not m:
    print("no route replay line in " + log)
    sys.exit(1)
rows, nmse, rule, werr, differ, gap, sd = m.groups()
if int(rows) == 0:
    sys.exit(0)
fails = []
if not float(nmse) <= bound:
    fails.append("router logits nmse %s > %g" % (nmse, bound))
if int(rule):
    fails.append("%s rows whose GPU experts are not the top k of the GPU's logits" % rule)
if not float(werr) <= WEIGHT_BOUND:
    fails.append("GPU expert weights off by %s > %g" % (werr, WEIGHT_BOUND))
out = "router nmse %.3e, %s of %s rows x layers on other experts than the CPU's own (widest gap %s sd)" % (
    float(nmse), differ, rows, sd)
print(out + ("; FAIL: " + "; ".join(fails) if fails else ""))
sys.exit(1 if fails else 0)
