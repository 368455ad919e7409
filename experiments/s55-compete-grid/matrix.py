#!/usr/bin/env python3
"""Summarise matrix.sh output: runs outside the issue's bounds (fair 40-60 %, high 55-75 %),
and each scenario's mean, lowest and highest share over the perturbations."""
import collections
import sys

for path in sys.argv[1:]:
    shares = collections.defaultdict(list)
    bad = total = 0
    for line in open(path):
        w = line.split()
        name, share = w[0], float(w[5])
        shares[name].append(share)
        lo, hi = (0.40, 0.60) if name.startswith("fair") else (0.55, 0.75)
        bad += not lo <= share <= hi
        total += 1
    print(f"{path}: {bad}/{total} outside the bounds")
    for name, v in shares.items():
        print(f"  {name:28} mean {sum(v) / len(v):.3f}  min {min(v):.3f}  max {max(v):.3f}")
