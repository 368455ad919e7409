#!/usr/bin/env bash
# One `low` flow alone through a step down: 100 Mbit/s or 1 Gbit/s for 20 s, then 1, 2 or
# 3 Mbit/s for 20 s, at 20, 50 and 150 ms RTT (18 runs). Prints, for two builds of spate-lab,
# the goodput of the 20 s after the step over the new capacity (above 1: the queue the step
# left drains too) and the seconds until goodput first reached 90 % of it. Simulator, seconds.
#   A, B   the two spate-lab binaries (B defaults to this tree's release build)
# Usage: A=path [B=path] experiments/s60-scavenger/steps.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
A="${A:?A=path of the spate-lab to compare against}"
B="${B:-$here/../../target/release/spate-lab}"
out="$(mktemp -d)"; trap 'rm -rf "$out"' EXIT
printf '%-22s %-14s %-14s\n' "step (RTT)" "A util/adapt" "B util/adapt"
for hi in 100 1000; do for lo in 1 2 3; do for t in 20 50 150; do
  f="$out/step-$hi-$lo-$t.toml"
  printf 'name = "low, %s to %s Mbit/s, %s ms"\nseed = 1\nduration_s = 40.0\n\n' "$hi" "$lo" "$t" > "$f"
  printf '[[path.phase]]\nat_s = 0.0\nrate_mbps = %s.0\nrtt_ms = %s.0\n\n' "$hi" "$t" >> "$f"
  printf '[[path.phase]]\nat_s = 20.0\nrate_mbps = %s.0\nrtt_ms = %s.0\n\n' "$lo" "$t" >> "$f"
  printf '[[flow]]\nstart_s = 0.0\npolicy = "low"\n' >> "$f"
  row=""
  for lab in "$A" "$B"; do
    row="$row $("$lab" sim "$f" -q --json 2>/dev/null | python3 -c '
import json, sys
p = json.load(sys.stdin)["phases"][1]
print("%.2f/%.1f" % (p["utilization"], p["time_to_adapt_s"]))')"
  done
  printf '%-22s %-14s %-14s\n' "$hi -> $lo ($t ms)" $row
done; done; done
