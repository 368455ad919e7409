#!/usr/bin/env bash
# The stall run of `a_stalls_burst_is_not_taken_for_others` (crates/spate-sim/tests/acceptance.rs):
# one `fair` flow alone, 10 Mbit/s, 92 ms, 0.06 % loss, 20 ms stalls about every second, 40 s,
# seeds FIRST..N (default 1..24). Prints per seed: seed, utilization, queue p50, p95 (ms).
# UTC=S places the drain grid (`spate-lab sim --utc-start`, builds since session 54).
set -euo pipefail
lab="${LAB:-$(dirname "$0")/../../target/release/spate-lab}"
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
for seed in $(seq "${FIRST:-1}" "${N:-24}"); do
  cat > "$dir/s.toml" <<TOML
name = "stalls at 10 Mbit/s"
seed = $seed
duration_s = 40.0

[[path.phase]]
at_s = 0.0
rate_mbps = 10.0
rtt_ms = 92.0
loss = 0.0006
stall_ms = 20.0
stall_every_ms = 1000.0

[[flow]]
start_s = 0.0
bytes = 0
policy = "fair"
TOML
  "$lab" sim "$dir/s.toml" -q --json ${UTC:+--utc-start "$UTC"} | python3 -c "
import json, sys
p = json.load(sys.stdin)['phases'][0]
print($seed, round(p['utilization'], 4), round(p['queue_delay_ms']['p50'], 2), round(p['queue_delay_ms']['p95'], 2))"
done
