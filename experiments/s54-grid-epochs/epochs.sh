#!/usr/bin/env bash
# Run one scenario with the simulated clock started at N placements of the 8 s drain grid
# (utc_start_s = 0, 8/N, 2·8/N, ...; `spate-lab sim --utc-start`), and print per placement:
# utc_start_s, then per phase utilization, queue p50 and p95 (ms), then Jain's index.
# Usage: LAB=path/to/spate-lab N=16 ./epochs.sh SCENARIO.toml [more sim args]
set -euo pipefail
lab="${LAB:-$(dirname "$0")/../../target/release/spate-lab}"
n="${N:-16}"
scenario="$1"; shift
for i in $(seq 0 $((n - 1))); do
  utc=$(python3 -c "print($i * 8 / $n)")
  "$lab" sim "$scenario" -q --json --utc-start "$utc" "$@" | python3 -c "
import json, sys
r = json.load(sys.stdin)
cells = ['%.4f %.2f %.2f' % (p['utilization'], p['queue_delay_ms']['p50'], p['queue_delay_ms']['p95']) for p in r['phases']]
j = r.get('fairness_jain')
print('$utc', ' | '.join(cells), '| jain', 'none' if j is None else '%.4f' % j)"
done
