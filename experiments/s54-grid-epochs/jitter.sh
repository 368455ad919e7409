#!/usr/bin/env bash
# Spate-only `fair` flows at RATE (default 100) Mbit/s: N flows joining GAP s apart, RTT ms, with
# every start shifted by SHIFT s (so that a build without the drain grid is sampled as often as
# one whose grid is swept); the simulator's clock at its default placement. Prints per run:
# n gap rtt shift, Jain, worst flow's share of the fair rate, queue p50/p95.
set -euo pipefail
lab="${LAB:-$(dirname "$0")/../../target/release/spate-lab}"
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
rate=${RATE:-100}
for n in ${NS:-2 4}; do for gap in ${GAPS:-1 3 10}; do for rtt in ${RTTS:-20 50 120}; do
for shift in ${SHIFTS:-0 0.37 0.74 1.11 1.48 1.85 2.22 2.59}; do
  f="$dir/r.toml"; last=$(( (n-1)*gap )); dur=$(( last + 40 ))
  { echo "name=\"j\""; echo "seed = 1"; echo "duration_s = $dur.0"; echo "fairness_from_s = $((last+10)).0"
    echo "[[path.phase]]"; echo "at_s = 0.0"; echo "rate_mbps = $rate.0"; echo "rtt_ms = $rtt.0"
    for i in $(seq 0 $((n-1))); do echo "[[flow]]"; echo "start_s = $(python3 -c "print($i*$gap + $shift)")"; echo "policy = \"fair\""; done
  } > "$f"
  "$lab" sim "$f" -q --json | python3 -c "
import json, sys
r = json.load(sys.stdin); g = [f['window_goodput_mbps'] for f in r['flows']]
p = r['phases'][0]['queue_delay_ms']
print('$n $gap $rtt $shift', 'jain %.4f worst %.3f q %.2f/%.2f' % (r['fairness_jain'], min(g) / (sum(g) / len(g)), p['p50'], p['p95']))"
done; done; done; done
