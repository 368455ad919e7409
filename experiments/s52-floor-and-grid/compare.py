"""Means over the runs common to every file of spate-grid.sh output: Jain (runs below 0.95),
flow-seconds competing, queue p50 and p95 (ms), utilization. Usage: compare.py FILE..."""
import sys,re
def load(f):
    rows={}
    for l in open(f):
        m=re.match(r"\s*(\d+ \d+ \d+ \d+) jain ([\d.]+) competing\s+([\d.]+) s\s+q ([\d.]+)/([\d.]+)\s+util ([\d.]+)",l)
        if m: rows[m.group(1)]=tuple(float(x) for x in m.groups()[1:])
    return rows
files=sys.argv[1:]
data=[load(f) for f in files]
keys=[k for k in data[0] if all(k in d for d in data)]
print(len(keys),"rows")
for f,d in zip(files,data):
    v=[d[k] for k in keys]
    n=len(v)
    print(f"{f.split('/')[-1]:28} jain {sum(x[0] for x in v)/n:.4f} (<0.95: {sum(x[0]<0.95 for x in v)}) comp {sum(x[1] for x in v):7.1f} q50 {sum(x[2] for x in v)/n:5.2f} q95 {sum(x[3] for x in v)/n:5.2f} util {sum(x[4] for x in v)/n:.4f}")
