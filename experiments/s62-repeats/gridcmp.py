import sys,re
def load(f):
    d={}
    for l in open(f):
        m=re.match(r'\s*(\d+ \d+ \d+ \d+) jain ([\d.]+) competing\s+([\d.]+) s\s+q ([\d.]+)/([\d.]+)\s+util ([\d.]+)',l)
        if m: d[m.group(1)]=tuple(float(x) for x in m.groups()[1:])
    return d
a,b=load(sys.argv[1]),load(sys.argv[2])
ks=[k for k in a if k in b]
import statistics as st
for i,n in enumerate(['jain','competing','q50','q95','util']):
    print(f"{n}: mean {st.mean(a[k][i] for k in ks):.4f} -> {st.mean(b[k][i] for k in ks):.4f}")
print("jain<0.95:", sum(a[k][0]<0.95 for k in ks), "->", sum(b[k][0]<0.95 for k in ks), "of", len(ks))
for k in ks:
    if abs(a[k][0]-b[k][0])>0.02 or abs(a[k][2]-b[k][2])>3: print(k, a[k], '->', b[k])
