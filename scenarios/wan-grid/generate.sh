#!/usr/bin/env bash
# Writes the 42-point WAN grid of Kachan & Siemens (SEEDS.md §3) as one scenario per point:
# RTT {0, 50, 100, 150, 200, 300, 400} ms x loss {0, 0.1, 0.5, 1, 1.5, 2} %, at 1 Gbit/s (the
# rate issue #3 judges; the original test bed was 10 Gbit/s, MTU 9000, 180 s per test).
# Usage: scenarios/wan-grid/generate.sh [RATE_MBPS] [DURATION_S] [DIR]   (DIR: this folder)
set -euo pipefail
cd "${3:-$(dirname "$0")}"
rate=${1:-1000}
duration=${2:-30}
for rtt in 0 50 100 150 200 300 400; do
  for loss in 0 0.1 0.5 1 1.5 2; do
    frac=$(awk "BEGIN { printf \"%g\", $loss / 100 }")
    # A zero-RTT path still needs a buffer: 1 ms.
    queue=$(( rtt > 0 ? rtt : 1 ))
    cat > "rtt${rtt}-loss${loss}.toml" <<TOML
# Kachan & Siemens WAN grid (SEEDS.md §3): RTT ${rtt} ms, random loss ${loss} % both ways, ${rate} Mbit/s.
name = "wan-grid rtt${rtt} loss${loss}"
seed = 1
duration_s = ${duration}.0

[[path.phase]]
at_s = 0.0
rate_mbps = ${rate}.0
rtt_ms = ${rtt}.0
loss = ${frac}
queue_ms = ${queue}.0

[[flow]]
start_s = 0.0
bytes = 0
policy = "fair"
TOML
  done
done
echo "wrote 42 scenarios in $(pwd)"
