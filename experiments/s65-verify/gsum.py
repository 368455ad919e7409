import sys,re
# Totals of spate-grid.sh outputs: runs with a flow competing, flow-seconds, mean Jain, queue.
for f in sys.argv[1:]:
    rows=[l for l in open(f) if 'jain' in l]
    c=[float(re.search(r'competing\s+([\d.]+)',l).group(1)) for l in rows]
    j=[float(re.search(r'jain ([\d.]+)',l).group(1)) for l in rows]
    q=[tuple(map(float,re.search(r'q ([\d.]+)/([\d.]+)',l).groups())) for l in rows]
    print(f, len(rows), 'false runs', sum(x>0 for x in c), 'flow-s %.0f'%sum(c), 'jain %.4f'%(sum(j)/len(j)), 'q %.2f/%.2f'%(sum(a for a,b in q)/len(q), sum(b for a,b in q)/len(q)))
