import json,sys
d=json.load(sys.stdin); c=sum(f["competitive_mode_s"] or 0 for f in d["flows"]); p=d["phases"][0]; q=p["queue_delay_ms"]
print(f"{sys.argv[1]:>16} jain {d['fairness_jain']:.3f} competing {c:6.1f} s  q {q['p50']:.1f}/{q['p95']:.1f}  util {p['utilization']:.3f}", flush=True)
