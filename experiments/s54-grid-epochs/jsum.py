"""Summarise jitter.sh output: means of Jain, worst share, queue p50/p95; runs below thresholds."""
import sys
for f in sys.argv[1:]:
    rows = [l.split() for l in open(f) if 'jain' in l]
    j = [float(r[5]) for r in rows]; w = [float(r[7]) for r in rows]
    q = [tuple(map(float, r[9].split('/'))) for r in rows]
    n = len(rows)
    print(f"{f:22} n={n} jain {sum(j)/n:.4f} (<0.95: {sum(x<0.95 for x in j)}, <0.9: {sum(x<0.9 for x in j)}) "
          f"worst share {sum(w)/n:.3f} (min {min(w):.3f}, <0.6: {sum(x<0.6 for x in w)}) q50 {sum(a for a,_ in q)/n:.2f} q95 {sum(b for _,b in q)/n:.2f}")
