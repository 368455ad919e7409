#!/usr/bin/env bash
# Spate's share next to one CUBIC flow on the 18 small paths of experiments/s58-rhythm/small-bdp
# (10-50 Mbit/s, 10-40 ms, 1 and 4 BDP; Spate joins 10 s after CUBIC; share of the last 30 s),
# for `fair` and `low`, with a one-line summary. Simulator, about 3 s on two cores. Variables
# in the environment reach the controller (for scratch switches, see scratch.patch).
#   LAB=path   the spate-lab binary (default: this tree's release build)
# Usage: [LAB=path] experiments/s59-small-bdp/run.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
LAB="${LAB:-$here/../../target/release/spate-lab}"
dir="$here/../s58-rhythm/small-bdp"
out="$(mktemp -d)"; trap 'rm -rf "$out"' EXIT
ls "$dir"/*.toml | xargs -P2 -I{} sh -c 'f={}; b=$(basename $f .toml); "$0" sim $f -q --json 2>/dev/null > "$1/$b.json"' "$LAB" "$out"
python3 - $out <<'PY'
import json,sys,glob,os
out=sys.argv[1]
def sh(n):
    try: return json.load(open(f"{out}/{n}.json"))['flows'][0]['share']
    except Exception as e: return float('nan')
fa=[];lo=[]
for r in (10,20,50):
  for t in (10,20,40):
    for b in (1,4):
      f=sh(f"fair-cubic-{r}-{t}-{b}bdp"); l=sh(f"low-cubic-{r}-{t}-{b}bdp"); fa.append(f); lo.append(l)
      print(f"{r:3} {t:3} {b}x  fair {f:.3f}  low {l:.3f}")
print("fair in 0.3-0.7:", sum(0.3<=x<=0.7 for x in fa), "/18 ; fair>0.7:", sum(x>0.7 for x in fa), " low<=0.1:", sum(x<=0.1 for x in lo), " mean fair %.3f low %.3f"%(sum(fa)/18,sum(lo)/18))
PY
