#!/usr/bin/env python3
"""Compare two `spate-lab grid` results.csv files row by row (scenario, phase): utilization
after adapting, queue p50/p95, Jain; print the rows that differ and a summary.

Usage: compare.py BEFORE.csv AFTER.csv
"""
import csv
import sys


def load(path):
    with open(path) as f:
        return {(r["file"].rsplit("/", 1)[-1], r["phase"]): r for r in csv.DictReader(f)}


a, b = load(sys.argv[1]), load(sys.argv[2])
fields = ["utilization_after_adapt", "time_to_adapt_s", "queue_p50_ms", "queue_p95_ms",
          "retransmission_overhead", "fairness_jain"]
print("| scenario | phase | " + " | ".join(fields) + " |")
print("|---|---|" + "---|" * len(fields))
same = 0
worst = {f: (0.0, None) for f in fields}
for key in sorted(a):
    ra, rb = a[key], b.get(key)
    if rb is None:
        print(f"| {key[0]} | {key[1]} | missing |")
        continue
    if all(ra[f] == rb[f] for f in fields):
        same += 1
        continue
    cells = []
    for f in fields:
        cells.append(ra[f] if ra[f] == rb[f] else f"{ra[f]} → {rb[f]}")
        try:
            d = float(rb[f]) - float(ra[f])
        except ValueError:
            continue
        # Worse: lower utilization or Jain, longer adapt, queue or overhead.
        worse = -d if f in ("utilization_after_adapt", "fairness_jain") else d
        if worse > worst[f][0]:
            worst[f] = (worse, key)
    print(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + " |")
print(f"\n{same} of {len(a)} rows identical")
for f, (w, k) in worst.items():
    if k:
        print(f"largest loss in {f}: {w:.4g} at {k[0]} phase {k[1]}")
