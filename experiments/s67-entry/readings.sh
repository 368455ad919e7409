#!/bin/bash
# The capacity readings of every entry into competitive mode over the matrix's 256 runs
# (the 16 points of scenarios/tcp, Spate's start shifted 0-1.5 s), as main behaves: run with
# LAB=<scratch build of scratch.patch>, no S6x_ switch but S61_DBG. Writes readings.txt: per
# entry, the competitor, scenario, shift and the scratch build's ENTER line (cap = bits
# removed over the queue's fall, bits/s; fall = the share the fall's speed read; peak, rate
# in bits/s).
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
for peer in cubic bbr; do
 for f in "$here"/scenarios/tcp/{fair,high}-$peer-{1,4}bdp-{together,tcp-first}.toml; do
  for s in $(seq 0 0.1 1.5); do
   b=$(basename "$f" .toml)
   awk -v s="$s" '/^\[\[flow\]\]/ { flows++ }
     flows == 1 && !moved && /^start_s = / { printf "start_s = %.3f\n", $3 + s; moved = 1; next }
     { print }' "$f" > "$dir/r.toml"
   S61_DBG=1 "$LAB" sim "$dir/r.toml" -q --json 2>&1 >/dev/null | grep ENTER | sed "s/^/$peer $b $s /"
  done
 done
done > readings.txt
