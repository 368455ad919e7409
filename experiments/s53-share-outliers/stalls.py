"""Summaries of stalls.sh output files: mean, median and worst queue p50 (ms), runs above the
test's 30 ms bound, lowest utilization. Usage: stalls.py FILE..."""
import sys
for f in sys.argv[1:]:
    r=[l.split() for l in open(f)]
    q=[float(x[2]) for x in r]; u=[float(x[1]) for x in r]
    qs=sorted(q)
    print(f"{f.split('/')[-1]:16} n={len(q)} mean p50 {sum(q)/len(q):6.2f} median {qs[len(q)//2]:6.2f} max {max(q):6.2f} >30: {sum(x>30 for x in q)} minutil {min(u):.4f}")
