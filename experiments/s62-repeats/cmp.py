import json,sys,os
a,b=sys.argv[1],sys.argv[2]
n=same=0; rows=[]
for fn in sorted(os.listdir(b)):
    if not fn.endswith('.json'): continue
    try:
        ja=json.load(open(f"{a}/{fn}")); jb=json.load(open(f"{b}/{fn}"))
    except Exception as e:
        continue
    n+=1
    if ja==jb: same+=1; continue
    def m(j):
        ph=j['phases']; fl=j['flows']
        return dict(util=[round(p['utilization'],3) for p in ph],
                    adapt=[p.get('time_to_adapt_s') for p in ph],
                    q50=[round(p['queue_delay_ms']['p50'],1) for p in ph],
                    q95=[round(p['queue_delay_ms']['p95'],1) for p in ph],
                    gp=[round(f.get('goodput_mbps',0),2) for f in fl],
                    share=[round(f['share'],3) if f.get('share') is not None else None for f in fl],
                    retx=[round(f.get('retransmission_overhead',0),4) for f in fl],
                    jain=j.get('fairness_jain'))
    ma,mb=m(ja),m(jb)
    diffs={k:(ma[k],mb[k]) for k in ma if ma[k]!=mb[k]}
    rows.append((fn.replace('scenarios_','').replace('.toml.json',''),diffs))
for fn,d in rows:
    print(fn)
    for k,(x,y) in d.items(): print(f"   {k}: {x} -> {y}")
print(f"{n} compared, {same} identical")
