#!/usr/bin/env python3
"""Scan the 192 robustness runs for 'trap' time: Spate in the delay mode with its pace above
1.15x capacity and the bottleneck dropping, and TCP starved (< 5 % of capacity).
usage: trap.py LAB "SWITCHES" """
import subprocess, sys, os, csv, tempfile, concurrent.futures as cf
lab, sw = sys.argv[1], sys.argv[2]
env = dict(os.environ); env.update(kv.split('=',1) for kv in sw.split())
tmp = tempfile.mkdtemp()
jobs = []
for pol in ('fair','high'):
  for ag in ('cubic','bbr'):
    for bdp in (1,4):
      for rtt in (40,45,50,60,70,80):
        for st in (0,3,10,15):
          jobs.append((pol,ag,bdp,rtt,st))
def run(j):
    pol,ag,bdp,rtt,st=j
    name=f"{tmp}/{pol}-{ag}-{bdp}-{rtt}-{st}"
    open(name+'.toml','w').write(f'name="x"\nseed=1\nduration_s=60.0\nfairness_from_s=30.0\n[[path.phase]]\nat_s=0.0\nrate_mbps=100.0\nrtt_ms={rtt}\nqueue_ms={bdp*rtt}\n[[flow]]\nstart_s={st}\npolicy="{pol}"\ncompete=true\n[[flow]]\nprotocol="{ag}"\n')
    subprocess.run([lab,'sim',name+'.toml','-q','--timeseries',name+'.csv'],env=env,capture_output=True)
    trap=starve=0.0
    for r in csv.DictReader(open(name+'.csv')):
        c=float(r['capacity_mbps'])
        if r['flow0_competitive']=='0' and float(r['flow0_rate_mbps'])>1.15*c and int(r['drops'])>0:
            trap+=0.1
        if float(r['t_s'])>max(st,0)+5 and float(r['flow1_goodput_mbps'])<0.05*c and float(r['flow0_goodput_mbps'])>0.8*c:
            starve+=0.1
    return j,trap,starve
with cf.ThreadPoolExecutor(2) as ex:
    res=list(ex.map(run,jobs))
tt=sum(r[1] for r in res); ts=sum(r[2] for r in res)
for j,t,s in res:
    if t>=1.0 or s>=1.0: print(*j, f"trap {t:.1f} s starve {s:.1f} s")
print(f"total trap {tt:.1f} s, TCP starved {ts:.1f} s, runs with >=1 s starved: {sum(r[2]>=1 for r in res)}")
