#!/usr/bin/env bash
# Spate-only flows (compete on unless FLOWEXTRA=" "): N flows joining GAP s apart, RTT, rate. Prints per run:
# jain, sum of competitive seconds, queue p50/p95. UTC=S places the drain grid (`spate-lab sim
# --utc-start`, builds since session 54).
set -euo pipefail
lab="${LAB:-$(dirname "$0")/../../target/release/spate-lab}"
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
for rate in ${RATES:-100 1000}; do
for n in ${NS:-2 4}; do
for gap in ${GAPS:-1 3 10}; do
for rtt in ${RTTS:-20 50 120}; do
  f="$dir/r.toml"
  last=$(( (n-1)*gap ))
  dur=$(( last + 40 ))
  { echo "name=\"g\""; echo "seed = 1"; echo "duration_s = $dur.0"; echo "fairness_from_s = $((last+10)).0"
    echo "[[path.phase]]"; echo "at_s = 0.0"; echo "rate_mbps = $rate.0"; echo "rtt_ms = $rtt.0"
    for i in $(seq 0 $((n-1))); do echo "[[flow]]"; echo "start_s = $((i*gap)).0"; echo "bytes = 0"; echo "policy = \"fair\""; echo "${FLOWEXTRA:-compete = true}"; done
  } > "$f"
  "$lab" sim "$f" -q --json ${UTC:+--utc-start "$UTC"} | python3 "$(dirname "$0")/summ.py" "$rate $n $gap $rtt"
done; done; done; done
