#!/usr/bin/env python3
"""ENTER lines (S70_DBG) over the 192 robustness runs at UTC placements given; prints the
entries whose by-fall share is below 0.1, and counts entries above the link.
usage: entries.py LAB "SW" UTC..."""
import subprocess, sys, os, re, tempfile, concurrent.futures as cf
lab, sw, utcs = sys.argv[1], sys.argv[2], sys.argv[3:] or ['-']
env = dict(os.environ); env.update(kv.split('=',1) for kv in sw.split()); env['S70_DBG']='1'
tmp = tempfile.mkdtemp()
jobs=[(p,a,b,r,s,u) for u in utcs for p in ('fair','high') for a in ('cubic','bbr') for b in (1,4) for r in (40,45,50,60,70,80) for s in (0,3,10,15)]
def run(j):
    p,a,b,r,s,u=j
    n=f"{tmp}/{'-'.join(map(str,j))}.toml"
    open(n,'w').write(f'name="x"\nseed=1\nduration_s=60.0\nfairness_from_s=30.0\n[[path.phase]]\nat_s=0.0\nrate_mbps=100.0\nrtt_ms={r}\nqueue_ms={b*r}\n[[flow]]\nstart_s={s}\npolicy="{p}"\ncompete=true\n[[flow]]\nprotocol="{a}"\n')
    args=[lab,'sim',n,'-q']+([] if u=='-' else ['--utc-start',u])
    e=subprocess.run(args,env=env,capture_output=True,text=True).stderr
    return j,[l for l in e.splitlines() if 'ENTER' in l]
with cf.ThreadPoolExecutor(2) as ex: res=list(ex.map(run,jobs))
tot=above=small=0
for j,ls in res:
    for l in ls:
        tot+=1
        sh=float(re.search(r'share=([\d.]+)',l).group(1))
        m=re.search(r'sbf=Some\(([\d.e-]+)\)',l); sbf=float(m.group(1)) if m else None
        if sh>100: above+=1
        if sh>100 and os.environ.get("ABOVE"): print(*j, l.split("ENTER ")[1])
        if sbf is not None and sbf<0.1 and not os.environ.get("ABOVE"):
            small+=1; print(*j, l.split('ENTER ')[1])
print(f"entries {tot}, entered above the link {above}, by-fall share < 0.1: {small}")
